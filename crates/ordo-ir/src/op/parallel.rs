//! Tensor parallelism's collectives (Megatron-LM's `f` and `g`): a graph built for one rank of
//! a tensor-parallel group holds its shard of each split layer, and these ops join the
//! shards. They are for planning and simulation: a CPU process runs one rank and has no group
//! to reduce with.

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;

/// Which pass of a tensor-parallel collective sums the ranks' tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TensorParallelKind {
    /// Megatron's `g` ("reduce from the tensor-parallel region"), after a row-parallel
    /// product: the forward pass all-reduces the partial sums, the backward pass passes the
    /// gradient through.
    ReduceForward,
    /// Megatron's `f` ("copy to the tensor-parallel region"), before column-parallel products:
    /// the forward pass passes the input through, the backward pass all-reduces the
    /// gradients of the ranks' shards.
    ReduceBackward,
}

/// An all-reduce across the `ranks` ranks of a tensor-parallel group, in the forward or the
/// backward pass ([`TensorParallelKind`]); the other pass is the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorParallel {
    /// In which pass the sum happens.
    pub kind: TensorParallelKind,
    /// The group's size (at least 2).
    pub ranks: usize,
}

impl TensorParallel {
    /// Whether the forward op (`true`) or its gradient (`false`) is the all-reduce.
    pub fn reduces_in_forward(&self) -> bool {
        self.kind == TensorParallelKind::ReduceForward
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        crate::op::expect_inputs(inputs, 1)?;
        if self.ranks < 2 {
            return Err(format!("a tensor-parallel group of {} rank(s)", self.ranks));
        }
        crate::op::expect_float("input", inputs[0])?;
        Ok(vec![inputs[0].clone()])
    }
}
