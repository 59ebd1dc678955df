//! Unrolling: several training steps as one graph, so that work can cross from a step into the
//! next (weight gradients deferred into the next forward pass) and run in its steady state.

use super::{Provenance, Transformed};
use crate::error::{IrError, IrResult};
use crate::graph::{Graph, Node};
use crate::ids::{NodeId, OutletId};

/// What the copy of a node (or tensor) for step `s` of an unrolled graph adds to its name:
/// `#<s>`.
pub fn step_suffix(s: usize) -> String {
    format!("#{s}")
}

/// `steps` copies of the training step `graph`, one after another: node `s * n + v` is node `v`
/// in step `s`, named `<name>#<s>`, its inputs wired within its step and its layer in its step.
/// Parameters are the graph's (a runtime gives the nodes of step `s` the parameters as step
/// `s - 1`'s updates left them). Outputs: each of the graph's outputs once per step (step 0
/// first), so a training graph's first `steps` outputs are the steps' losses. One step is the
/// graph itself, names unchanged.
///
/// # Errors
/// [`IrError::Transform`] for zero steps.
pub fn unroll(graph: &Graph, steps: usize) -> IrResult<Transformed> {
    if steps == 0 {
        return Err(IrError::Transform {
            model: graph.name.clone(),
            message: "a steady state needs at least one step".into(),
        });
    }
    if steps == 1 {
        return Ok(Transformed::identity(graph.clone()));
    }
    let n = graph.nodes.len();
    let shift = |id: NodeId, s: usize| NodeId((s * n + id.index()) as u32);
    let mut nodes = Vec::with_capacity(steps * n);
    let mut provenance = Provenance::default();
    for s in 0..steps {
        nodes.extend(graph.nodes.iter().map(|node| Node {
            id: shift(node.id, s),
            name: format!("{}{}", node.name, step_suffix(s)),
            inputs: node.inputs.iter().map(|o| OutletId::new(shift(o.node, s), o.slot)).collect(),
            layer: node.layer.map(|l| shift(l, s)),
            ..node.clone()
        }));
        provenance.origin.extend(graph.nodes.iter().map(|node| node.id));
        provenance.micro_batch.extend(std::iter::repeat_n(None, n));
        provenance.step.extend(std::iter::repeat_n(s as u32, n));
    }
    let outputs = graph
        .outputs
        .iter()
        .flat_map(|o| (0..steps).map(move |s| OutletId::new(shift(o.node, s), o.slot)))
        .collect();
    let graph = Graph { name: graph.name.clone(), nodes, params: graph.params.clone(), outputs };
    Ok(Transformed { graph, provenance, accumulated: vec![0; steps * n] })
}
