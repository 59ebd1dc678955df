//! Activation recomputation (checkpointing): a training graph whose backward pass recomputes
//! some forward activations of each block instead of keeping them from the forward pass.

use super::{Provenance, Transformed};
use crate::error::{IrError, IrResult};
use crate::graph::{Graph, Node, Role};
use crate::ids::{NodeId, OutletId};
use crate::op::Op;

/// Which forward activations a block recomputes in its backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recompute {
    /// Every activation is kept (no recomputation).
    None,
    /// The attention's scores and probabilities, which grow with the square of the sequence
    /// and cost little to recompute (Megatron-LM's selective recomputation): in each block,
    /// every softmax, the one-input ops before it back to the matrix product that feeds it
    /// (the scores, scaled and masked) with that product, and the dropout after it.
    Selective,
    /// Everything a block computes: only its input is kept (Megatron-LM's full recomputation,
    /// PyTorch's `checkpoint` around each block).
    Full,
}

impl Recompute {
    /// Every choice, least recomputation first.
    pub const ALL: [Recompute; 3] = [Recompute::None, Recompute::Selective, Recompute::Full];

    /// The name (`none`, `selective`, `full`).
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }

    /// The choice named `name` ([`Recompute::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Which forward nodes of `graph` it recomputes, given which are in a block.
    fn recomputed(self, graph: &Graph, in_block: &[bool]) -> Vec<bool> {
        let n = graph.nodes.len();
        let forward = |v: usize| in_block[v] && graph.nodes[v].role == Role::Forward;
        let source =
            |v: usize| matches!(graph.nodes[v].op, Op::Input | Op::Parameter | Op::Fill { .. });
        match self {
            Recompute::None => vec![false; n],
            Recompute::Full => (0..n).map(|v| forward(v) && !source(v)).collect(),
            Recompute::Selective => {
                let mut chosen = vec![false; n];
                let softmaxes = (0..n)
                    .filter(|&v| forward(v))
                    .filter(|&v| matches!(graph.nodes[v].op, Op::Softmax { .. }));
                for softmax in softmaxes {
                    chosen[softmax] = true;
                    // Back through the scaling and masking to the scores' product.
                    let mut at = graph.nodes[softmax].inputs.first().map(|o| o.node.index());
                    while let Some(v) = at.filter(|&v| forward(v) && !source(v)) {
                        let node = &graph.nodes[v];
                        chosen[v] = true;
                        at = match node.op {
                            Op::MatMul => None,
                            _ if node.inputs.len() == 1 => Some(node.inputs[0].node.index()),
                            _ => None,
                        };
                    }
                }
                // The dropouts of the probabilities.
                for v in (0..n).filter(|&v| forward(v)) {
                    let node = &graph.nodes[v];
                    let of_softmax = |o: &crate::ids::OutletId| {
                        matches!(graph.nodes[o.node.index()].op, Op::Softmax { .. })
                            && chosen[o.node.index()]
                    };
                    if matches!(node.op, Op::Dropout { .. }) && node.inputs.iter().any(of_softmax) {
                        chosen[v] = true;
                    }
                }
                chosen
            }
        }
    }
}

/// The training graph `graph` with `recompute`'s activations of each block recomputed: for
/// every block (the forward nodes `block_of` gives one name, with the backward nodes whose
/// layer is one of them), a copy of each recomputed forward node (not sources: inputs,
/// parameters, constants) is made, role [`Role::Dx`] so that it runs with the block's input
/// gradients, its layer the node it copies, named `<name>.recompute`, reading the copies of the
/// block's other recomputed nodes and the originals of everything else; the block's backward
/// nodes read the copies instead of the originals, which are then freed as soon as the forward
/// pass has read them. The copies come right before the block's first backward node, so the
/// graph stays in a topological order. Nodes outside blocks keep their activations.
///
/// The provenance gives each copy the node it copies. A copy draws random numbers of its own:
/// recomputing dropout is for planning, not for a run that must match one without.
///
/// # Errors
/// [`IrError::Transform`] for a graph that is not a training graph (no backward node).
pub fn recompute(
    graph: &Graph,
    recompute: Recompute,
    block_of: &dyn Fn(&str) -> Option<String>,
) -> IrResult<Transformed> {
    if !graph.nodes.iter().any(|n| n.role != Role::Forward) {
        return Err(IrError::Transform {
            model: graph.name.clone(),
            message: "recomputation needs a training graph (it has no backward pass)".into(),
        });
    }
    let n = graph.nodes.len();
    // The block of each node: a forward node's own, a backward node's layer's.
    let block: Vec<Option<String>> = graph
        .nodes
        .iter()
        .map(|node| match node.role {
            Role::Forward => block_of(&node.name),
            _ => node.layer.and_then(|l| block_of(&graph.node(l).name)),
        })
        .collect();
    let in_block: Vec<bool> = block.iter().map(Option::is_some).collect();
    let copied = recompute.recomputed(graph, &in_block);
    if !copied.contains(&true) {
        return Ok(Transformed::identity(graph.clone()));
    }
    // The new order: every node, each block's copies inserted before its first backward node.
    enum Slot {
        Original(usize),
        Copy(usize),
    }
    // Each block's recomputed nodes, in order; taken (emptied) where its copies go.
    let mut copies_of: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for v in (0..n).filter(|&v| copied[v]) {
        if let Some(b) = block[v].as_deref() {
            copies_of.entry(b).or_default().push(v);
        }
    }
    let mut order = Vec::with_capacity(n);
    for (v, node) in graph.nodes.iter().enumerate() {
        if node.role != Role::Forward
            && let Some(members) = block[v].as_deref().and_then(|b| copies_of.get_mut(b))
        {
            order.extend(std::mem::take(members).into_iter().map(Slot::Copy));
        }
        order.push(Slot::Original(v));
    }
    let mut original_id = vec![NodeId(0); n];
    let mut copy_id = vec![None; n];
    for (i, slot) in order.iter().enumerate() {
        match *slot {
            Slot::Original(v) => original_id[v] = NodeId(i as u32),
            Slot::Copy(v) => copy_id[v] = Some(NodeId(i as u32)),
        }
    }
    let original = |o: &OutletId| OutletId::new(original_id[o.node.index()], o.slot);
    // A backward node of block `b` (or a copy in it) reads the copy of a recomputed node of
    // the same block.
    let in_block = |o: &OutletId, b: &Option<String>| match copy_id[o.node.index()] {
        Some(copy) if block[o.node.index()] == *b => OutletId::new(copy, o.slot),
        _ => original(o),
    };
    let mut nodes = Vec::with_capacity(order.len());
    let mut provenance = Provenance::default();
    for (i, slot) in order.iter().enumerate() {
        let id = NodeId(i as u32);
        let (v, node) = match *slot {
            Slot::Original(v) | Slot::Copy(v) => (v, &graph.nodes[v]),
        };
        let new = match *slot {
            Slot::Copy(_) => Node {
                id,
                name: format!("{}.recompute", node.name),
                inputs: node.inputs.iter().map(|o| in_block(o, &block[v])).collect(),
                role: Role::Dx,
                layer: Some(original_id[v]),
                ..node.clone()
            },
            Slot::Original(_) if node.role != Role::Forward => Node {
                id,
                inputs: node.inputs.iter().map(|o| in_block(o, &block[v])).collect(),
                layer: node.layer.map(|l| original_id[l.index()]),
                ..node.clone()
            },
            Slot::Original(_) => Node {
                id,
                inputs: node.inputs.iter().map(original).collect(),
                layer: node.layer.map(|l| original_id[l.index()]),
                ..node.clone()
            },
        };
        nodes.push(new);
        provenance.origin.push(NodeId(v as u32));
        provenance.micro_batch.push(None);
        provenance.step.push(0);
    }
    let outputs = graph.outputs.iter().map(original).collect();
    let len = nodes.len();
    let graph = Graph { name: graph.name.clone(), nodes, params: graph.params.clone(), outputs };
    Ok(Transformed { graph, provenance, accumulated: vec![0; len] })
}
