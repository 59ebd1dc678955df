//! The profiler: every node's kernel timed on its real inputs, one thread, node after node.
//!
//! [`profile`] runs the graph in topological order, as the sequential reference does, calling
//! each node's kernel through [`Program::run_node`] untimed until the machine is warm (at
//! least `warmup` times and `warmup_seconds`: a virtual machine's idle cores and a cold
//! process run a step several times slower for tens of milliseconds), then timed (at least
//! `reps` times and `timed_seconds`, so that a short disturbance touches few of the calls),
//! and keeps each node's median, scaled so that the medians add up to the median step. The
//! spread of the timed steps' totals is reported with it. By default ([`ProfileMode::InStep`]) the calls are
//! made in whole passes over the graph, so that every call meets the caches and the heap as
//! a step leaves them; [`ProfileMode::BackToBack`] calls each node all its times in a row
//! instead (warm caches: the kernel alone). The kernels are deterministic, so every call
//! computes the same outputs, which the node's consumers read. An optimizer update runs each
//! call on a fresh copy of its state, so repeating it changes nothing. Temporary memory is the
//! peak heap the first call allocates beyond its outputs, measured with a [`HeapMeter`] when
//! the caller has one (a counting global allocator), else 0.

use std::time::Instant;

use ordo_ir::{NodeId, TensorFact};

use crate::cpu::Tensor;
use crate::error::ExecError;
use crate::program::{Program, RunSettings};
use crate::sequential::Interpreter;
use crate::state::{Feeds, TrainState};

/// The growth of the process's heap use, as a counting global allocator sees it.
pub trait HeapMeter {
    /// Starts a measurement from the heap use now.
    fn start(&self);
    /// The most the heap use has grown above its use at the last [`HeapMeter::start`].
    fn peak_growth(&self) -> u64;
}

/// How to profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileOptions {
    /// Timed calls per node, at least (at least 1); the median is kept.
    pub reps: usize,
    /// Untimed calls before them, at least.
    pub warmup: usize,
    /// Untimed calls go on until this many seconds have passed.
    pub warmup_seconds: f64,
    /// Timed calls go on until this many seconds have passed (up to [`MAX_REPS`] calls),
    /// except with [`ProfileMode::BackToBack`], which makes `reps` calls.
    pub timed_seconds: f64,
    /// Settings of the kernels (seed, optimizer, training mode).
    pub settings: RunSettings,
    /// In which order the calls are made.
    pub mode: ProfileMode,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self {
            reps: 5,
            warmup: 2,
            warmup_seconds: 0.3,
            timed_seconds: 0.5,
            settings: RunSettings::default(),
            mode: ProfileMode::InStep,
        }
    }
}

/// The most timed calls per node that `timed_seconds` adds.
pub const MAX_REPS: usize = 2_000;

/// A spread of the timed steps above this (the interquartile range over the median) makes
/// the profile say that its times are not to be trusted.
pub const WIDE_SPREAD: f64 = 0.10;

impl ProfileOptions {
    /// Whether another timed call is due after `made` of them, `elapsed` seconds in.
    pub(crate) fn more_timed(&self, made: usize, elapsed: f64) -> bool {
        made < self.reps || (elapsed < self.timed_seconds && made < MAX_REPS)
    }

    /// Whether another untimed call is due after `made` of them, `elapsed` seconds in.
    pub(crate) fn more_warmup(&self, made: usize, elapsed: f64) -> bool {
        made < self.warmup || elapsed < self.warmup_seconds
    }
}

/// What [`profile`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Profiled {
    /// Every node, in the graph's order.
    pub nodes: Vec<NodeProfile>,
    /// Timed calls made per node.
    pub reps: usize,
    /// Untimed calls made per node before them.
    pub warmup: usize,
    /// Total time of each timed pass over the graph (of each timed step of the runtime), µs.
    pub step_us: Vec<f64>,
    /// The spread of `step_us`: its interquartile range over its median (0 for a steady
    /// machine; above [`WIDE_SPREAD`] the times vary too much to predict from).
    pub spread: f64,
    /// With [`ProfileMode::Runtime`]: what a step costs outside its tasks, µs (the median
    /// over the timed steps of the wall time less the span of the tasks).
    pub step_overhead_us: Option<f64>,
}

/// The interquartile range of `values` over their median (0 when there are fewer than 4 or
/// the median is 0).
pub fn spread(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n < 4 {
        return 0.0;
    }
    let middle = median(&sorted);
    if middle <= 0.0 {
        return 0.0;
    }
    (sorted[(3 * n) / 4] - sorted[n / 4]) / middle
}

/// In which order a profile calls the kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProfileMode {
    /// `warmup + reps` whole passes over the graph in topological order, each node called
    /// once per pass: every call sees the caches and the allocator as a step leaves them.
    #[default]
    InStep,
    /// Node after node, each called `warmup + reps` times in a row: warm caches, the kernel's
    /// own speed.
    BackToBack,
    /// `warmup + reps` whole steps of the runtime on one device with one worker, in
    /// topological order: a node's time runs from the start of its task to the start of the
    /// next, so it counts what the runtime spends on the task (dispatch, allocation, release)
    /// besides the kernel. Memory is measured as with [`ProfileMode::InStep`].
    Runtime,
}

/// What one node measured.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeProfile {
    /// The node's name.
    pub name: String,
    /// Median time of one kernel call, in µs, scaled with every other node so that the
    /// medians add up to the median of the timed steps (see the module documentation).
    pub time_us: f64,
    /// Bytes of each output, in slot order.
    pub output_bytes: Vec<u64>,
    /// Peak heap bytes a call allocated beyond its outputs (0 without a [`HeapMeter`]).
    pub temporary_bytes: u64,
}

/// What the profiler's caller watches it with: a heap meter (a counting global allocator) for
/// temporary memory, and a progress report (timed calls made, at least planned).
#[derive(Clone, Copy, Default)]
pub struct Observers<'a> {
    /// Measures the temporary memory of each node's first call.
    pub heap: Option<&'a dyn HeapMeter>,
    /// Told the timed calls made and planned per node as the profile goes.
    pub progress: Option<&'a dyn Fn(usize, usize)>,
}

/// Profiles every node of `program` (by node index) on `feeds`, with parameters and optimizer
/// state from `state` (left unchanged), as step `state.step + 1`.
///
/// # Errors
/// [`ExecError::Config`] for `reps` 0 or a warm-up or timed time that is not a finite
/// non-negative number; [`ExecError::Feed`] for a missing or misshapen feed;
/// [`ExecError::Kernel`] naming the first node whose kernel fails.
pub fn profile(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
    observers: Observers,
) -> Result<Profiled, ExecError> {
    if options.reps == 0 {
        return Err(ExecError::Config("profiling needs at least one timed call per node".into()));
    }
    for (name, seconds) in [("warm-up", options.warmup_seconds), ("timed", options.timed_seconds)] {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(ExecError::Config(format!(
                "the {name} time of a profile must be a finite number of seconds >= 0, not {seconds}"
            )));
        }
    }
    let meter = observers.heap;
    let progress = |made: usize| {
        if let Some(report) = observers.progress {
            report(made, options.reps);
        }
    };
    let graph = program.graph();
    let order = graph.topo_order().map_err(|e| ExecError::Mismatch(e.to_string()))?;
    let mut runner =
        Interpreter::new(program, &state.params, feeds, &options.settings, state.step + 1);
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(options.reps); graph.nodes.len()];
    let (mut warmup, mut reps, mut step_us, mut step_overhead_us) = (0, 0, Vec::new(), None);
    let mut measured: Vec<Option<(Vec<u64>, u64)>> = vec![None; graph.nodes.len()];
    let mut measure = |id: NodeId, runner: &mut Interpreter| -> Result<(), ExecError> {
        let (_, extra, outs) = call(runner, state, id, meter)?;
        // The outputs' bytes as the graph declares them (an f16 held in f32 counts 2 bytes an
        // element); what the storage allocated for them is not a temporary.
        let declared = &graph.node(id).outputs;
        let output_bytes: Vec<u64> = declared.iter().map(TensorFact::bytes).collect();
        let held: u64 = outs.iter().map(|t| t.fact().bytes()).sum();
        let temporary = extra.saturating_sub(held);
        measured[id.index()] = Some((output_bytes, temporary));
        runner.keep(id, outs);
        Ok(())
    };
    // The first pass measures outputs and temporary memory (each call's heap growth), untimed.
    for &id in &order {
        measure(id, &mut runner)?;
    }
    let clock = Instant::now();
    match options.mode {
        ProfileMode::InStep => {
            // Whole passes: untimed until warm, then timed.
            let pass = |times: Option<&mut Vec<Vec<f64>>>, runner: &mut Interpreter| {
                let mut total = 0.0;
                let mut times = times;
                for &id in &order {
                    let (micros, _, outs) = call(runner, state, id, None)?;
                    total += micros;
                    if let Some(times) = times.as_deref_mut() {
                        times[id.index()].push(micros);
                    }
                    runner.keep(id, outs);
                }
                Ok::<f64, ExecError>(total)
            };
            while options.more_warmup(warmup, clock.elapsed().as_secs_f64()) {
                pass(None, &mut runner)?;
                warmup += 1;
            }
            let timing = Instant::now();
            while options.more_timed(reps, timing.elapsed().as_secs_f64()) {
                step_us.push(pass(Some(&mut times), &mut runner)?);
                reps += 1;
                progress(reps);
            }
        }
        ProfileMode::BackToBack => {
            for &id in &order {
                for rep in 0..options.warmup + options.reps {
                    let (micros, _, outs) = call(&runner, state, id, None)?;
                    if rep >= options.warmup {
                        times[id.index()].push(micros);
                    }
                    runner.keep(id, outs);
                }
            }
            (warmup, reps) = (options.warmup, options.reps);
            step_us = (0..reps).map(|r| times.iter().map(|t| t[r]).sum()).collect();
        }
        ProfileMode::Runtime => {
            let measured =
                crate::runtime_profile::task_times(program, state, feeds, options, &progress)?;
            (warmup, reps, step_us) = (measured.warmup, measured.reps, measured.step_us);
            step_overhead_us = Some(measured.overhead_us);
            times = measured.times;
        }
    }
    let spread = spread(&step_us);
    // Each node's median, scaled so that they add up to the median of the timed steps' totals
    // (the kernels' times summed per step). Times are skewed to the right (a step is never
    // faster than the machine allows, sometimes much slower), so the medians' sum falls short
    // of the median step by a few percent, and a run's measured step is a median of steps.
    let totals: Vec<f64> = (0..reps).map(|r| times.iter().map(|t| t[r]).sum()).collect();
    for node_times in &mut times {
        node_times.sort_by(f64::total_cmp);
    }
    let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let sum: f64 = medians.iter().sum();
    let mut sorted_totals = totals;
    sorted_totals.sort_by(f64::total_cmp);
    let scale = if sum > 0.0 && reps > 0 { median(&sorted_totals) / sum } else { 1.0 };
    let nodes = graph
        .nodes
        .iter()
        .map(|node| {
            let i = node.id.index();
            let (output_bytes, temporary_bytes) = measured[i].clone().ok_or_else(|| {
                ExecError::Mismatch(format!("node `{}` is not in topological order", node.name))
            })?;
            Ok(NodeProfile {
                name: node.name.clone(),
                time_us: medians[i] * scale,
                output_bytes,
                temporary_bytes,
            })
        })
        .collect::<Result<_, ExecError>>()?;
    Ok(Profiled { nodes, reps, warmup, step_us, spread, step_overhead_us })
}
/// Calls node `id` once through the interpreter with a fresh copy of its optimizer state:
/// the time in µs, the peak heap growth `meter` saw, the outputs.
fn call(
    interpreter: &Interpreter,
    state: &TrainState,
    id: NodeId,
    meter: Option<&dyn HeapMeter>,
) -> Result<(f64, u64, Vec<Tensor>), ExecError> {
    if let Some(m) = meter {
        m.start();
    }
    let start = Instant::now();
    // Timed with the kernel: the engine's update copies its optimizer state too.
    let mut slots = state.slots[id.index()].clone();
    let outs = interpreter.call(id, &mut slots)?;
    let micros = start.elapsed().as_secs_f64() * 1e6;
    let extra = meter.map_or(0, HeapMeter::peak_growth);
    Ok((micros, extra, outs))
}

/// The median of sorted, non-empty `times`.
fn median(times: &[f64]) -> f64 {
    let n = times.len();
    if n % 2 == 1 { times[n / 2] } else { (times[n / 2 - 1] + times[n / 2]) / 2.0 }
}
