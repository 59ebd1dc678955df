//! Micro-batching a training graph: `M` copies of its forward and backward work, the weight
//! gradients accumulated across the copies, one update per parameter.

use super::{Provenance, Transformed};
use crate::error::{IrError, IrResult};
use crate::graph::{Graph, Node, Role};
use crate::ids::{NodeId, OutletId};

/// What the copy of a node (or tensor) for micro-batch `m` adds to its name: `/mb<m>`.
pub fn micro_batch_suffix(m: usize) -> String {
    format!("/mb{m}")
}

/// How a training step of `n` nodes is laid out as `M` micro-batches: which nodes run once per
/// step, and the index of each copy. One rule for every representation that is micro-batched
/// (the graph here, the placement problem in the scheduler), so that their copies have the same
/// indices by construction.
///
/// Node `v` runs once per step when it is an [`Role::Update`], or a [`Role::Dw`] node that
/// reads only weight-gradient and update nodes (the sum of a tied parameter's gradients, which
/// sums the accumulated ones); every other node (forward, dX and dW nodes, inputs included)
/// runs once per micro-batch. Copies are numbered micro-batch by micro-batch, each in the
/// source's node order, then the once-per-step nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicroBatchLayout {
    micro_batches: usize,
    once: Vec<bool>,
    accumulates: Vec<bool>,
    /// Per source node: its position among the nodes copied per micro-batch, or among the
    /// once-per-step nodes.
    rank: Vec<usize>,
    /// How many nodes are copied per micro-batch.
    copies: usize,
}

impl MicroBatchLayout {
    /// The layout of `micro_batches` copies of a step whose node `v` has role `roles[v]` and
    /// reads the nodes `reads(v)`.
    ///
    /// # Panics
    /// On zero micro-batches (the callers refuse them, each in its own words).
    pub fn new<I>(roles: &[Role], reads: impl Fn(usize) -> I, micro_batches: usize) -> Self
    where
        I: IntoIterator<Item = usize>,
    {
        assert!(micro_batches > 0, "a step of zero micro-batches");
        let n = roles.len();
        let once: Vec<bool> = (0..n)
            .map(|v| match roles[v] {
                Role::Update => true,
                Role::Dw => {
                    let mut sources = reads(v).into_iter().peekable();
                    sources.peek().is_some()
                        && sources.all(|u| matches!(roles[u], Role::Dw | Role::Update))
                }
                _ => false,
            })
            .collect();
        let accumulates = (0..n).map(|v| !once[v] && roles[v] == Role::Dw).collect();
        let mut rank = vec![0; n];
        let (mut copies, mut once_count) = (0, 0);
        for v in 0..n {
            let next = if once[v] { &mut once_count } else { &mut copies };
            rank[v] = *next;
            *next += 1;
        }
        Self { micro_batches, once, accumulates, rank, copies }
    }

    /// The number of micro-batches.
    pub fn micro_batches(&self) -> usize {
        self.micro_batches
    }

    /// The number of nodes of the micro-batched step.
    pub fn len(&self) -> usize {
        self.micro_batches * self.copies + (self.once.len() - self.copies)
    }

    /// Whether the micro-batched step has no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether source node `v` runs once per step (not copied).
    pub fn runs_once(&self, v: usize) -> bool {
        self.once[v]
    }

    /// Whether source node `v` is a weight gradient computed per micro-batch, whose copy `m > 0`
    /// adds into copy `m - 1`'s outputs.
    pub fn accumulates(&self, v: usize) -> bool {
        self.accumulates[v]
    }

    /// The index of source node `v`'s copy for micro-batch `m` (its only node, whatever `m`,
    /// when it runs once per step).
    pub fn node(&self, v: usize, m: usize) -> usize {
        if self.once[v] {
            self.micro_batches * self.copies + self.rank[v]
        } else {
            m * self.copies + self.rank[v]
        }
    }

    /// Per node of the micro-batched step, in index order: the source node it copies and its
    /// micro-batch (`None` for a node that runs once per step).
    pub fn provenance(&self) -> Provenance {
        let total = self.len();
        let mut provenance = Provenance {
            origin: vec![NodeId(0); total],
            micro_batch: vec![None; total],
            step: vec![0; total],
        };
        for v in 0..self.once.len() {
            let batches: Vec<Option<usize>> =
                if self.once[v] { vec![None] } else { (0..self.micro_batches).map(Some).collect() };
            for m in batches {
                let i = self.node(v, m.unwrap_or(0));
                provenance.origin[i] = NodeId(v as u32);
                provenance.micro_batch[i] = m.map(|m| m as u32);
            }
        }
        provenance
    }
}

/// `micro_batches` copies of the training graph `graph` (one micro-batch's training graph) as
/// one step that sums their gradients, laid out by [`MicroBatchLayout`]:
///
/// * each copy is named `<name>/mb<m>` and reads the copies of its own micro-batch, or the
///   only node of a node that runs once per step; its layer is its forward node in the same
///   micro-batch (micro-batch 0's for a once-per-step node);
/// * **gradient accumulation**: the dW node of micro-batch `m > 0` also reads the gradients of
///   micro-batch `m - 1`'s copy (its last inputs, [`Transformed::accumulated`]) and adds its
///   own to them, so micro-batch `m`'s gradients are `((g_0 + g_1) + ...) + g_m`; the
///   once-per-step nodes (updates, sums of tied gradients) read the last micro-batch's;
/// * parameters are the source's (held once); each of the source's outputs is an output once
///   per micro-batch (micro-batch 0 first) unless it runs once per step, so a training graph's
///   first `M` outputs are the micro-batches' losses.
///
/// # Errors
/// [`IrError::Transform`] for zero micro-batches, or a once-per-step node that reads a
/// per-micro-batch value other than an accumulated gradient (it would need every
/// micro-batch's, which one input cannot carry).
pub fn micro_batch(graph: &Graph, micro_batches: usize) -> IrResult<Transformed> {
    let fail = |message: String| IrError::Transform { model: graph.name.clone(), message };
    if micro_batches == 0 {
        return Err(fail("zero micro-batches".into()));
    }
    let roles: Vec<Role> = graph.nodes.iter().map(|node| node.role).collect();
    let reads = |v: usize| graph.nodes[v].inputs.iter().map(|o| o.node.index());
    let layout = MicroBatchLayout::new(&roles, reads, micro_batches);
    let provenance = layout.provenance();
    let last = micro_batches - 1;

    let mut nodes = Vec::with_capacity(layout.len());
    let mut accumulated = vec![0; layout.len()];
    for (i, (origin, m)) in provenance.origin.iter().zip(&provenance.micro_batch).enumerate() {
        let (v, m) = (origin.index(), m.map(|m| m as usize));
        let node = &graph.nodes[v];
        // The copy of `u` that node `i` reads.
        let source = |u: usize| -> IrResult<usize> {
            let from = match (layout.runs_once(u), m) {
                (true, _) => 0,
                (false, Some(m)) => m,
                (false, None) if layout.accumulates(u) => last,
                (false, None) => {
                    return Err(fail(format!(
                        "`{}` runs once per step but reads `{}`, which runs once per \
                         micro-batch and is not an accumulated gradient",
                        node.name, graph.nodes[u].name
                    )));
                }
            };
            Ok(layout.node(u, from))
        };
        let mut inputs = node
            .inputs
            .iter()
            .map(|o| Ok(OutletId::new(NodeId(source(o.node.index())? as u32), o.slot)))
            .collect::<IrResult<Vec<_>>>()?;
        if let Some(m) = m.filter(|&m| m > 0 && layout.accumulates(v)) {
            let previous = NodeId(layout.node(v, m - 1) as u32);
            inputs.extend((0..node.outputs.len() as u32).map(|s| OutletId::new(previous, s)));
            accumulated[i] = node.outputs.len();
        }
        let layer = node.layer.map(|l| NodeId(layout.node(l.index(), m.unwrap_or(0)) as u32));
        let name = match m {
            Some(m) => format!("{}{}", node.name, micro_batch_suffix(m)),
            None => node.name.clone(),
        };
        nodes.push(Node { id: NodeId(i as u32), name, inputs, layer, ..node.clone() });
    }
    let mut outputs = Vec::new();
    for o in &graph.outputs {
        let v = o.node.index();
        let batches = if layout.runs_once(v) { 1 } else { micro_batches };
        for m in 0..batches {
            outputs.push(OutletId::new(NodeId(layout.node(v, m) as u32), o.slot));
        }
    }
    let graph = Graph { name: graph.name.clone(), nodes, params: graph.params.clone(), outputs };
    Ok(Transformed { graph, provenance, accumulated })
}
