//! The reference: one step run node by node in the graph's topological order on one thread.
//! Every other way of running a graph must give bitwise the same results.
//!
//! `Interpreter` is the one loop that walks a program node by node: the reference step
//! ([`run_step`]), inference on given parameters ([`infer`], which `ordo conformance` checks
//! against ONNX's own test outputs) and the profiler ([`mod@crate::profile`]) all call nodes
//! through it. The engine runs the same nodes through the same [`Program::run_node`].

use std::sync::Arc;

use ordo_ir::{Op, OutletId};

use crate::cpu::Tensor;
use crate::error::ExecError;
use crate::program::{Program, RunSettings};
use crate::state::{Feeds, TrainState};

/// What a step produced.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOutputs {
    /// The values of the graph's outputs ([`ordo_ir::Graph::outputs`]), in order: for a
    /// training graph the loss, then each updated parameter.
    pub outputs: Vec<Tensor>,
}

impl StepOutputs {
    /// The first output's first element: a training graph's loss.
    pub fn loss(&self) -> Option<f32> {
        self.outputs.first().and_then(|t| t.as_f32()).and_then(|v| v.first().copied())
    }
}

/// The fed tensor of input node `name`, checked against its fact.
pub(crate) fn fed<'a>(
    feeds: &'a Feeds,
    name: &str,
    fact: &ordo_ir::TensorFact,
) -> Result<&'a Tensor, ExecError> {
    let t = feeds.get(name).ok_or_else(|| ExecError::Feed {
        name: name.to_string(),
        message: "no tensor is fed to it".into(),
    })?;
    // An f16 is held in `f32` storage, an i32 or u8 in `i64` (see [`crate::cpu::held_as`]).
    if t.shape() != fact.shape.as_slice() || crate::cpu::held_as(fact.dtype) != t.dtype() {
        return Err(ExecError::Feed {
            name: name.to_string(),
            message: format!("fed {}, expects {fact}", t.fact()),
        });
    }
    Ok(t)
}

/// The values node `id` reads, kept per node and output slot in `values`: for an `Input`, its
/// fed tensor.
///
/// # Errors
/// [`ExecError::Feed`] for a missing or misshapen feed; [`ExecError::Mismatch`] for an input
/// not computed yet (a node run out of topological order).
pub(crate) fn node_inputs(
    program: &Program,
    id: ordo_ir::NodeId,
    feeds: &Feeds,
    values: &[Vec<Option<Arc<Tensor>>>],
) -> Result<Vec<Arc<Tensor>>, ExecError> {
    let node = program.graph().node(id);
    if node.op == Op::Input {
        return Ok(vec![Arc::new(fed(feeds, &node.name, &node.outputs[0])?.clone())]);
    }
    program
        .call(id)
        .inputs
        .iter()
        .map(|o: &OutletId| {
            values[o.node.index()][o.slot as usize].clone().ok_or_else(|| {
                ExecError::Mismatch(format!("`{}` reads a value never computed", node.name))
            })
        })
        .collect()
}

/// Runs a program node by node, keeping the values their consumers read.
pub(crate) struct Interpreter<'a> {
    program: &'a Program,
    params: &'a [Arc<Tensor>],
    feeds: &'a Feeds,
    settings: &'a RunSettings,
    /// The run's step number (from 1).
    step: u64,
    /// Per node and output slot: the value it last computed.
    values: Vec<Vec<Option<Arc<Tensor>>>>,
}

impl<'a> Interpreter<'a> {
    /// An interpreter of `program` at `step`, with nothing computed yet.
    pub(crate) fn new(
        program: &'a Program,
        params: &'a [Arc<Tensor>],
        feeds: &'a Feeds,
        settings: &'a RunSettings,
        step: u64,
    ) -> Self {
        let values = program.graph().nodes.iter().map(|n| vec![None; n.outputs.len()]).collect();
        Self { program, params, feeds, settings, step, values }
    }

    /// Calls node `id`'s kernel on its inputs' current values, advancing `state` (its
    /// optimizer state); returns its outputs without keeping them.
    ///
    /// # Errors
    /// As [`node_inputs`]; [`ExecError::Kernel`] when the kernel fails.
    pub(crate) fn call(
        &self,
        id: ordo_ir::NodeId,
        state: &mut [Tensor],
    ) -> Result<Vec<Tensor>, ExecError> {
        let node = self.program.graph().node(id);
        let inputs = node_inputs(self.program, id, self.feeds, &self.values)?;
        let inputs: Vec<&Tensor> = inputs.iter().map(|t| &**t).collect();
        let params: Vec<&Tensor> =
            self.program.call(id).params.iter().map(|p| &*self.params[p.index()]).collect();
        self.program.run_node(id, &inputs, &params, state, self.step, self.settings).map_err(
            |source| ExecError::Kernel { task: node.name.clone(), node: node.name.clone(), source },
        )
    }

    /// Keeps node `id`'s outputs for its consumers.
    pub(crate) fn keep(&mut self, id: ordo_ir::NodeId, outs: Vec<Tensor>) {
        self.values[id.index()] = outs.into_iter().map(|t| Some(Arc::new(t))).collect();
    }

    /// Runs every node once in `order`, each with its own optimizer state in `slots` (by
    /// node); returns what each update computed, by parameter.
    pub(crate) fn run_all(
        &mut self,
        order: &[ordo_ir::NodeId],
        slots: &mut [Vec<Tensor>],
    ) -> Result<Vec<(ordo_ir::ParamId, Tensor)>, ExecError> {
        let mut updated = Vec::new();
        for &id in order {
            let outs = self.call(id, &mut slots[id.index()])?;
            if let Some(p) = self.program.call(id).updates {
                updated.push((p, outs[0].clone()));
            }
            self.keep(id, outs);
        }
        Ok(updated)
    }

    /// The values of the graph's outputs, in order.
    ///
    /// # Errors
    /// [`ExecError::Mismatch`] for an output not computed.
    pub(crate) fn outputs(&self) -> Result<Vec<Tensor>, ExecError> {
        let graph = self.program.graph();
        graph
            .outputs
            .iter()
            .map(|o| {
                self.values[o.node.index()][o.slot as usize].as_deref().cloned().ok_or_else(|| {
                    ExecError::Mismatch(format!(
                        "output {} of `{}` was not computed",
                        o.slot,
                        graph.node(o.node).name
                    ))
                })
            })
            .collect()
    }
}

fn topo_order(program: &Program) -> Result<Vec<ordo_ir::NodeId>, ExecError> {
    program.graph().topo_order().map_err(|e| ExecError::Mismatch(e.to_string()))
}

/// Runs step `state.step + 1` of `program` on `feeds`, node by node in topological order, then
/// stores each update's output as its parameter's next value and counts the step.
///
/// # Errors
/// [`ExecError::Feed`] for a missing or misshapen feed; [`ExecError::Kernel`] for the first
/// node whose kernel fails (the state is then unchanged).
pub fn run_step(
    program: &Program,
    state: &mut TrainState,
    feeds: &Feeds,
    settings: &RunSettings,
) -> Result<StepOutputs, ExecError> {
    if program.steps() > 1 {
        return Err(ExecError::Config(format!(
            "the sequential reference runs one step of a graph; this program unrolls {} \
             (run the step's own graph that many times)",
            program.steps()
        )));
    }
    let step = state.step + 1;
    let order = topo_order(program)?;
    let mut slots = state.slots.clone();
    let mut interpreter = Interpreter::new(program, &state.params, feeds, settings, step);
    let updated = interpreter.run_all(&order, &mut slots)?;
    let outputs = interpreter.outputs()?;
    for (p, t) in updated {
        state.params[p.index()] = Arc::new(t);
    }
    state.slots = slots;
    state.step = step;
    Ok(StepOutputs { outputs })
}

/// Runs a forward graph once in inference mode (batch norm with its running statistics,
/// dropout as the identity, as ONNX's reference does) with `params` (one per
/// [`ordo_ir::Graph::params`]) on `feeds`; returns the values of the graph's outputs.
///
/// # Errors
/// [`ExecError::Config`] for the wrong number of parameters; as [`Program::new`] and
/// [`run_step`] otherwise.
pub fn infer(
    graph: ordo_ir::Graph,
    params: Vec<Tensor>,
    feeds: &Feeds,
) -> Result<Vec<Tensor>, ExecError> {
    if params.len() != graph.params.len() {
        return Err(ExecError::Config(format!(
            "{} parameter values for {} parameters",
            params.len(),
            graph.params.len()
        )));
    }
    let program = Program::new(graph)?;
    let slots = program.initial_state().map_err(|e| ExecError::Config(e.to_string()))?;
    let mut state =
        TrainState { params: params.into_iter().map(Arc::new).collect(), slots, step: 0 };
    let settings = RunSettings { training: false, ..RunSettings::default() };
    Ok(run_step(&program, &mut state, feeds, &settings)?.outputs)
}
