//! Tensor parallelism's collectives (Megatron-LM's `f` and `g` with sequence parallelism): a
//! graph built for one rank of a tensor-parallel group holds its shard of each split layer,
//! and these ops join the shards. They are for planning and simulation: a CPU process runs one
//! rank and has no group to gather or reduce with.

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;

/// Which of Megatron-LM's collectives (with sequence parallelism) it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TensorParallelKind {
    /// `f`, before column-parallel products: the forward pass all-gathers the ranks' slices
    /// of the sequence (dimension 1) into the whole, the backward pass reduce-scatters the
    /// gradient back into slices.
    GatherSequence,
    /// `g`, after a row-parallel product: the forward pass reduce-scatters the ranks' partial
    /// sums into slices of the sequence (dimension 1), the backward pass all-gathers the
    /// gradient.
    ScatterSequence,
}

/// What a pass of a tensor-parallel collective does with its tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorParallelPass {
    /// Gathers the ranks' slices into the whole.
    AllGather,
    /// Sums it across the ranks, each keeping its slice of the sum.
    ReduceScatter,
}

/// A collective across the `ranks` ranks of a tensor-parallel group: an all-gather in one
/// pass and a reduce-scatter in the other ([`TensorParallelKind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorParallel {
    /// Which collective.
    pub kind: TensorParallelKind,
    /// The group's size (at least 2).
    pub ranks: usize,
}

impl TensorParallel {
    /// What the forward pass does.
    pub fn forward(&self) -> TensorParallelPass {
        match self.kind {
            TensorParallelKind::GatherSequence => TensorParallelPass::AllGather,
            TensorParallelKind::ScatterSequence => TensorParallelPass::ReduceScatter,
        }
    }

    /// What the backward pass (the gradient) does: the other collective.
    pub fn backward(&self) -> TensorParallelPass {
        match self.kind {
            TensorParallelKind::GatherSequence => TensorParallelPass::ReduceScatter,
            TensorParallelKind::ScatterSequence => TensorParallelPass::AllGather,
        }
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        crate::op::expect_inputs(inputs, 1)?;
        if self.ranks < 2 {
            return Err(format!("a tensor-parallel group of {} rank(s)", self.ranks));
        }
        let x = inputs[0];
        crate::op::expect_float("input", x)?;
        if x.rank() < 2 {
            return Err(format!("a sequence (dimension 1) to split, got {x}"));
        }
        let mut out = x.clone();
        match self.kind {
            TensorParallelKind::GatherSequence => out.shape[1] *= self.ranks,
            TensorParallelKind::ScatterSequence => {
                if !x.shape[1].is_multiple_of(self.ranks) {
                    return Err(format!(
                        "a sequence of {} does not split over {} ranks",
                        x.shape[1], self.ranks
                    ));
                }
                out.shape[1] /= self.ranks;
            }
        }
        Ok(vec![out])
    }
}
