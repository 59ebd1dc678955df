//! The executable graph of a micro-batched problem: the same nodes as [`MicroBatched`]'s
//! problem, with the same names and indices, as a dataflow graph a runtime can run.

use ordo_ir::{Graph, Node, NodeId, OutletId, Role};

use super::MicroBatched;
use crate::error::SchedError;

/// A micro-batched training graph ready to run, and how its gradients accumulate.
#[derive(Clone, Debug)]
pub struct MicroBatchGraph {
    /// Node `i` is node `i` of the micro-batched problem (same name): the original graph's
    /// node `split.original[i]` for micro-batch `split.micro_batch[i]`. Parameters are the
    /// original's (held once). Its outputs are the original's, each once per micro-batch
    /// (micro-batch 0 first) unless it runs once per step: a training graph's first `M`
    /// outputs are the micro-batches' losses.
    pub graph: Graph,
    /// Per node, how many of its inputs, at the end of its input list, are partial sums to
    /// add to its outputs (one per output, in output order): the weight gradients of the same
    /// dW node of the previous micro-batch, which this one accumulates into (`param.grad +=
    /// ...`). 0 for every other node.
    pub accumulated: Vec<usize>,
    /// The number of micro-batches.
    pub micro_batches: usize,
}

/// The graph that runs `split`, the micro-batching of the problem costed from `graph` (one
/// micro-batch's training graph, problem node `v` = graph node `v`).
///
/// Gradient accumulation is as [`super::micro_batch`] models it: the dW node of micro-batch
/// `m > 0` reads the gradients of micro-batch `m - 1`'s copy and adds its own to them, so
/// micro-batch `m`'s gradients are `((g_0 + g_1) + ...) + g_m`; the once-per-step nodes
/// (updates, sums of tied gradients) read the last micro-batch's.
///
/// # Errors
/// [`SchedError::Mismatch`] when `split` was not made from `graph`'s problem (a node index
/// or name that does not match), or when a once-per-step node reads a per-micro-batch value
/// other than an accumulated gradient (it would need every micro-batch's, which one input
/// cannot carry).
pub fn micro_batch_graph(
    graph: &Graph,
    split: &MicroBatched,
) -> Result<MicroBatchGraph, SchedError> {
    let n = graph.nodes.len();
    let fail = |message: String| Err(SchedError::Mismatch(message));
    let micro_batches = split.micro_batch.iter().flatten().max().map_or(1, |&m| m + 1);
    // copy[v][m]: the node running original node `v` for micro-batch `m` (index 0 for a node
    // that runs once per step).
    let mut copy: Vec<Vec<Option<usize>>> = vec![vec![None; micro_batches]; n];
    let mut runs_once = vec![false; n];
    for (i, (&v, &m)) in split.original.iter().zip(&split.micro_batch).enumerate() {
        let Some(node) = graph.nodes.get(v) else {
            return fail(format!("micro-batched node {i} copies node {v}, which the graph lacks"));
        };
        let expected = match m {
            Some(m) => format!("{}{}", node.name, super::micro_batch_suffix(m)),
            None => node.name.clone(),
        };
        if split.problem.names[i] != expected {
            return fail(format!(
                "micro-batched node {i} is `{}`, but copies `{expected}`",
                split.problem.names[i]
            ));
        }
        copy[v][m.unwrap_or(0)] = Some(i);
        runs_once[v] = m.is_none();
    }
    let once = |v: usize| runs_once[v];
    let accumulates = |v: usize| !once(v) && graph.nodes[v].role == Role::Dw;
    let last = micro_batches - 1;

    let mut nodes = Vec::with_capacity(split.original.len());
    let mut accumulated = vec![0; split.original.len()];
    for (i, (&v, &m)) in split.original.iter().zip(&split.micro_batch).enumerate() {
        let node = &graph.nodes[v];
        // The copy of `u` that node `i` reads.
        let source = |u: usize| -> Result<usize, SchedError> {
            let from = match (once(u), m) {
                (true, _) => 0,
                (false, Some(m)) => m,
                (false, None) if accumulates(u) => last,
                (false, None) => {
                    return Err(SchedError::Mismatch(format!(
                        "`{}` runs once per step but reads `{}`, which runs once per \
                         micro-batch and is not an accumulated gradient",
                        node.name, graph.nodes[u].name
                    )));
                }
            };
            copy[u][from].ok_or_else(|| {
                SchedError::Mismatch(format!(
                    "no copy of `{}` for micro-batch {from}",
                    graph.nodes[u].name
                ))
            })
        };
        let mut inputs = node
            .inputs
            .iter()
            .map(|o| Ok(OutletId::new(NodeId(source(o.node.index())? as u32), o.slot)))
            .collect::<Result<Vec<_>, SchedError>>()?;
        if let Some(m) = m.filter(|&m| m > 0 && accumulates(v)) {
            let previous = copy[v][m - 1].expect("every micro-batch has a copy of a dW node");
            let slots = node.outputs.len() as u32;
            inputs.extend((0..slots).map(|s| OutletId::new(NodeId(previous as u32), s)));
            accumulated[i] = node.outputs.len();
        }
        // A copy's layer is its forward node in the same micro-batch; a once-per-step node's
        // is micro-batch 0's (as in the micro-batched problem).
        let layer =
            node.layer.and_then(|l| copy[l.index()][m.unwrap_or(0)]).map(|l| NodeId(l as u32));
        nodes.push(Node {
            id: NodeId(i as u32),
            name: split.problem.names[i].clone(),
            op: node.op.clone(),
            inputs,
            params: node.params.clone(),
            outputs: node.outputs.clone(),
            role: node.role,
            layer,
        });
    }
    // Each output of the original, once per micro-batch (once for what runs once per step).
    let mut outputs = Vec::new();
    for o in &graph.outputs {
        let copies = &copy[o.node.index()][..if once(o.node.index()) { 1 } else { micro_batches }];
        for &i in copies {
            let i = i.expect("a copy per micro-batch");
            outputs.push(OutletId::new(NodeId(i as u32), o.slot));
        }
    }
    let graph = Graph { name: graph.name.clone(), nodes, params: graph.params.clone(), outputs };
    Ok(MicroBatchGraph { graph, accumulated, micro_batches })
}
