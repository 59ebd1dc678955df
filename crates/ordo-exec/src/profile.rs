//! The profiler: every node's kernel timed on its real inputs, one thread, node after node.
//!
//! [`profile`] runs the graph once in topological order, as the sequential reference does, and
//! at each node calls its kernel (through [`Program::run_node`]) `warmup` times untimed, then
//! `reps` times timed, and keeps the median. The kernels are deterministic, so every call
//! computes the same outputs; the last call's are what the node's consumers read. An
//! optimizer update runs each call on a fresh copy of its state, so repeating it changes
//! nothing. Temporary memory is the peak heap a call allocates beyond its outputs, measured
//! with a [`HeapMeter`] when the caller has one (a counting global allocator), else 0.

use std::sync::Arc;
use std::time::Instant;

use ordo_ir::{NodeId, Op};

use crate::cpu::Tensor;
use crate::error::ExecError;
use crate::program::{Program, RunSettings};
use crate::sequential::fed;
use crate::state::{Feeds, TrainState};

/// The process's heap use, as a counting global allocator sees it.
pub trait HeapMeter {
    /// Bytes allocated now.
    fn current(&self) -> u64;
    /// Restarts the peak from the current use.
    fn reset_peak(&self);
    /// The highest use since the last [`HeapMeter::reset_peak`].
    fn peak(&self) -> u64;
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
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self { reps: 5, warmup: 2, settings: RunSettings::default() }
    }
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
    let step = state.step + 1;
    let order = graph.topo_order().map_err(|e| ExecError::Mismatch(e.to_string()))?;
    let mut values: Vec<Vec<Option<Arc<Tensor>>>> =
        graph.nodes.iter().map(|n| vec![None; n.outputs.len()]).collect();
    let mut profiles: Vec<Option<NodeProfile>> = vec![None; graph.nodes.len()];
    for id in order {
        let node = graph.node(id);
        let call = program.call(id);
        let mut inputs: Vec<Arc<Tensor>> = Vec::with_capacity(call.inputs.len());
        if node.op == Op::Input {
            inputs.push(Arc::new(fed(feeds, &node.name, &node.outputs[0])?.clone()));
        } else {
            for o in &call.inputs {
                let value = values[o.node.index()][o.slot as usize].clone();
                inputs.push(value.ok_or_else(|| {
                    ExecError::Mismatch(format!("`{}` reads a value never computed", node.name))
                })?);
            }
        }
        let inputs: Vec<&Tensor> = inputs.iter().map(|t| &**t).collect();
        let params: Vec<&Tensor> = call.params.iter().map(|p| &*state.params[p.index()]).collect();
        let once = |meter: Option<&dyn HeapMeter>| -> Result<(f64, u64, Vec<Tensor>), ExecError> {
            let mut slots = state.slots[id.index()].clone();
            let before = meter.map(|m| {
                m.reset_peak();
                m.current()
            });
            let start = Instant::now();
            let outs = program
                .run_node(id, &inputs, &params, &mut slots, step, &options.settings)
                .map_err(|source| ExecError::Kernel {
                    task: node.name.clone(),
                    node: node.name.clone(),
                    source,
                })?;
            let micros = start.elapsed().as_secs_f64() * 1e6;
            let extra = match (meter, before) {
                (Some(m), Some(before)) => m.peak().saturating_sub(before),
                _ => 0,
            };
            Ok((micros, extra, outs))
        };
        let (_, extra, mut outs) = once(meter)?;
        let output_bytes: Vec<u64> = outs.iter().map(|t| t.fact().bytes()).collect();
        let temporary_bytes = extra.saturating_sub(output_bytes.iter().sum());
        for _ in 0..options.warmup {
            once(None)?;
        }
        let mut times = Vec::with_capacity(options.reps);
        for _ in 0..options.reps {
            let (micros, _, last) = once(None)?;
            times.push(micros);
            outs = last;
        }
        times.sort_by(f64::total_cmp);
        profiles[id.index()] = Some(NodeProfile {
            name: node.name.clone(),
            time_us: median(&times),
            output_bytes,
            temporary_bytes,
        });
        values[id.index()] = outs.into_iter().map(|t| Some(Arc::new(t))).collect();
    }
    profiles
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            p.ok_or_else(|| {
                let name = &graph.node(NodeId(i as u32)).name;
                ExecError::Mismatch(format!("node `{name}` is not reached in topological order"))
            })
        })
        .collect()
}

/// The median of sorted, non-empty `times`.
fn median(times: &[f64]) -> f64 {
    let n = times.len();
    if n % 2 == 1 { times[n / 2] } else { (times[n / 2 - 1] + times[n / 2]) / 2.0 }
}
