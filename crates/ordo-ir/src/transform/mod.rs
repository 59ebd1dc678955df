//! Step-structure passes: a training graph copied once per micro-batch of a step
//! ([`micro_batch`]) or once per step of a run ([`unroll`]), with the provenance of every node
//! of the copy; the mixed-precision pass ([`in_precision`]), which keeps the numbering; and
//! activation recomputation ([`recompute`]), which adds the recomputing copies.
//!
//! A pass is a function from a [`Graph`] to a [`Transformed`] graph: the new graph, and for
//! each of its nodes which node of the source graph it copies, for which micro-batch and which
//! step ([`Provenance`]). Whoever binds the copy to something of the source (its costs, its
//! inputs, its random numbers, a placement problem made by the same rule) joins them by these
//! indices, never by the copies' names: a copy's name (`<name>/mb<m>`, `<name>#<s>`) is for
//! people to read.

mod micro_batch;
mod precision;
mod recompute;
mod unroll;

pub use micro_batch::{MicroBatchLayout, micro_batch, micro_batch_suffix};
pub use precision::in_precision;
pub use recompute::{Recompute, recompute};
pub use unroll::{step_suffix, unroll};

use crate::graph::Graph;
use crate::ids::NodeId;

/// Where each node of a transformed graph comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Provenance {
    /// Per node: the node of the source graph it copies.
    pub origin: Vec<NodeId>,
    /// Per node: its micro-batch, `None` for work done once per step (every node of a graph
    /// that is not micro-batched).
    pub micro_batch: Vec<Option<u32>>,
    /// Per node: the training step it belongs to (0 for a graph that is not unrolled).
    pub step: Vec<u32>,
}

impl Provenance {
    /// The provenance of an untransformed graph of `n` nodes: node `v` is itself.
    pub fn identity(n: usize) -> Self {
        Self {
            origin: (0..n).map(|v| NodeId(v as u32)).collect(),
            micro_batch: vec![None; n],
            step: vec![0; n],
        }
    }

    /// The number of nodes it describes.
    pub fn len(&self) -> usize {
        self.origin.len()
    }

    /// Whether it describes no node.
    pub fn is_empty(&self) -> bool {
        self.origin.is_empty()
    }

    /// The number of micro-batches (1 for a graph that is not micro-batched).
    pub fn micro_batches(&self) -> usize {
        self.micro_batch.iter().flatten().max().map_or(1, |&m| m as usize + 1)
    }

    /// The number of steps (1 for a graph that is not unrolled).
    pub fn steps(&self) -> usize {
        self.step.iter().max().map_or(1, |&s| s as usize + 1)
    }
}

/// A graph made by a pass, with the provenance of its nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformed {
    /// The new graph. Its parameters are the source's (held once).
    pub graph: Graph,
    /// Per node of `graph`: the node, micro-batch and step it copies.
    pub provenance: Provenance,
    /// Per node of `graph`, how many of its inputs, at the end of its input list, are partial
    /// sums to add to its outputs (one per output, in output order): a micro-batch's weight
    /// gradients accumulate into the previous micro-batch's (`param.grad += ...`). 0 for every
    /// other node. These inputs are not the op's arguments, so [`crate::validate`] refuses a
    /// graph with any.
    pub accumulated: Vec<usize>,
}

impl Transformed {
    /// `graph` itself, untransformed.
    pub fn identity(graph: Graph) -> Self {
        let n = graph.nodes.len();
        Self { graph, provenance: Provenance::identity(n), accumulated: vec![0; n] }
    }
}
