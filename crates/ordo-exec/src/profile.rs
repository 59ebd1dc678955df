//! The profiler: every node's kernel timed on its real inputs, one thread, node after node.
//!
//! [`profile`] runs the graph in topological order, as the sequential reference does, calling
//! each node's kernel through [`Program::run_node`] `warmup` times untimed, then `reps` times
//! timed, and keeps each node's median. By default ([`ProfileMode::InStep`]) the calls are
//! made in whole passes over the graph, so that every call meets the caches and the heap as
//! a step leaves them; [`ProfileMode::BackToBack`] calls each node all its times in a row
//! instead (warm caches: the kernel alone). The kernels are deterministic, so every call
//! computes the same outputs, which the node's consumers read. An optimizer update runs each
//! call on a fresh copy of its state, so repeating it changes nothing. Temporary memory is the
//! peak heap the first call allocates beyond its outputs, measured with a [`HeapMeter`] when
//! the caller has one (a counting global allocator), else 0.

use std::time::Instant;

use ordo_ir::NodeId;

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
    /// Timed calls per node (at least 1); the median is kept.
    pub reps: usize,
    /// Untimed calls before them.
    pub warmup: usize,
    /// Settings of the kernels (seed, optimizer, training mode).
    pub settings: RunSettings,
    /// In which order the calls are made.
    pub mode: ProfileMode,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self { reps: 5, warmup: 2, settings: RunSettings::default(), mode: ProfileMode::InStep }
    }
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
    /// Median time of one kernel call, in µs.
    pub time_us: f64,
    /// Bytes of each output, in slot order.
    pub output_bytes: Vec<u64>,
    /// Peak heap bytes a call allocated beyond its outputs (0 without a [`HeapMeter`]).
    pub temporary_bytes: u64,
}

/// Profiles every node of `program` (by node index) on `feeds`, with parameters and optimizer
/// state from `state` (left unchanged), as step `state.step + 1`.
///
/// # Errors
/// [`ExecError::Config`] for `reps` 0; [`ExecError::Feed`] for a missing or misshapen feed;
/// [`ExecError::Kernel`] naming the first node whose kernel fails.
pub fn profile(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
    meter: Option<&dyn HeapMeter>,
) -> Result<Vec<NodeProfile>, ExecError> {
    if options.reps == 0 {
        return Err(ExecError::Config("profiling needs at least one timed call per node".into()));
    }
    let graph = program.graph();
    let order = graph.topo_order().map_err(|e| ExecError::Mismatch(e.to_string()))?;
    let mut runner =
        Interpreter::new(program, &state.params, feeds, &options.settings, state.step + 1);
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(options.reps); graph.nodes.len()];
    let mut measured: Vec<Option<(Vec<u64>, u64)>> = vec![None; graph.nodes.len()];
    let mut measure = |id: NodeId, runner: &mut Interpreter| -> Result<(), ExecError> {
        let (_, extra, outs) = call(runner, state, id, meter)?;
        let output_bytes: Vec<u64> = outs.iter().map(|t| t.fact().bytes()).collect();
        let temporary = extra.saturating_sub(output_bytes.iter().sum());
        measured[id.index()] = Some((output_bytes, temporary));
        runner.keep(id, outs);
        Ok(())
    };
    match options.mode {
        ProfileMode::InStep | ProfileMode::Runtime => {
            for pass in 0..options.warmup + options.reps {
                for &id in &order {
                    if pass == 0 {
                        measure(id, &mut runner)?;
                        if options.warmup > 0 {
                            continue;
                        }
                    }
                    let (micros, _, outs) = call(&runner, state, id, None)?;
                    if pass >= options.warmup {
                        times[id.index()].push(micros);
                    }
                    runner.keep(id, outs);
                }
            }
        }
        ProfileMode::BackToBack => {
            for &id in &order {
                measure(id, &mut runner)?;
                for rep in 0..options.warmup + options.reps {
                    let (micros, _, outs) = call(&runner, state, id, None)?;
                    if rep >= options.warmup {
                        times[id.index()].push(micros);
                    }
                    runner.keep(id, outs);
                }
            }
        }
    }
    if options.mode == ProfileMode::Runtime {
        times = crate::runtime_profile::task_times(program, state, feeds, options)?;
    }
    graph
        .nodes
        .iter()
        .map(|node| {
            let i = node.id.index();
            let (output_bytes, temporary_bytes) = measured[i].clone().ok_or_else(|| {
                ExecError::Mismatch(format!("node `{}` is not in topological order", node.name))
            })?;
            times[i].sort_by(f64::total_cmp);
            Ok(NodeProfile {
                name: node.name.clone(),
                time_us: median(&times[i]),
                output_bytes,
                temporary_bytes,
            })
        })
        .collect()
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
