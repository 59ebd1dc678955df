//! The reference: one step run node by node in the graph's topological order on one thread.
//! Every other way of running a graph must give bitwise the same results.

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
    if t.fact() != *fact {
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
    let graph = program.graph();
    let step = state.step + 1;
    let order = graph.topo_order().map_err(|e| ExecError::Mismatch(e.to_string()))?;
    let mut values: Vec<Vec<Option<Arc<Tensor>>>> =
        graph.nodes.iter().map(|n| vec![None; n.outputs.len()]).collect();
    let mut slots = state.slots.clone();
    let mut updated = Vec::new();
    for id in order {
        let node = graph.node(id);
        let call = program.call(id);
        let inputs = node_inputs(program, id, feeds, &values)?;
        let inputs: Vec<&Tensor> = inputs.iter().map(|t| &**t).collect();
        let params: Vec<&Tensor> = call.params.iter().map(|p| &*state.params[p.index()]).collect();
        let outs = program
            .run_node(id, &inputs, &params, &mut slots[id.index()], step, settings)
            .map_err(|source| ExecError::Kernel {
            task: node.name.clone(),
            node: node.name.clone(),
            source,
        })?;
        if let Some(p) = call.updates {
            updated.push((p, outs[0].clone()));
        }
        values[id.index()] = outs.into_iter().map(|t| Some(Arc::new(t))).collect();
    }
    let outputs = graph
        .outputs
        .iter()
        .map(|o| {
            values[o.node.index()][o.slot as usize]
                .as_deref()
                .cloned()
                .ok_or_else(|| ExecError::Mismatch(format!("output {o:?} was not computed")))
        })
        .collect::<Result<_, _>>()?;
    for (p, t) in updated {
        state.params[p.index()] = Arc::new(t);
    }
    state.slots = slots;
    state.step = step;
    Ok(StepOutputs { outputs })
}
