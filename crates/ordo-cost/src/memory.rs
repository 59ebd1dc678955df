//! The memory a node needs on its device, for one forward pass (Baechi's model), for a whole
//! training step charged to a forward graph (ordo's default), or for a training graph.
//!
//! The training model follows DESIGN.md's memory model, for a placement of the forward graph
//! whose backward and update ops run on their forward op's device (colocated gradients, as
//! Baechi's TensorFlow and PyTorch runtimes do):
//!
//! * **persistent**: parameters, plus their gradients (live until the update), plus the
//!   optimizer state (`slots` copies: 0 for plain SGD, 1 for momentum, 2 for Adam). Buffers and
//!   parameters are not told apart in a cost graph, so buffers are charged as parameters: an
//!   overestimate of a few bytes per channel.
//! * **retained**: the node's outputs stay allocated until its backward op has run, which in a
//!   training step is after the whole forward pass, so for placement they are never freed.
//! * **temporary**: the op's own scratch, plus the gradient of its outputs that its backward op
//!   reads (the "upstream gradient", as large as the outputs).
//!
//! In forward-only mode the numbers are Baechi's: outputs are freed after the last consumer runs
//! and nothing is retained.

use crate::costgraph::CostNode;

/// The IR's optimizer, re-exported because [`StepMode::Training`] names it: a user of the
/// cost crate (the placers, the scheduler) states a training step without depending on the
/// IR for it. It is the same type as `ordo_ir::op::Optimizer`.
pub use ordo_ir::op::Optimizer;

/// What a placement must fit in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepMode {
    /// One forward pass, as Baechi places it.
    ForwardOnly,
    /// A whole training step with the given optimizer, placed as its forward graph: what
    /// backward adds is charged to each forward node (the rules above).
    Training {
        /// The optimizer whose state is kept.
        optimizer: Optimizer,
    },
    /// A whole training step given as its training graph (forward, dX, dW and update nodes,
    /// as `ordo_ir::training` builds it), so memory is what the graph says: parameters and
    /// optimizer state (on the update nodes) are persistent, and every output, activations
    /// and gradients alike, is freed after its last consumer (an activation's is its last
    /// backward reader).
    TrainingGraph,
}

impl Default for StepMode {
    /// Training with SGD with momentum (PyTorch's usual default for the zoo's CNNs).
    fn default() -> Self {
        StepMode::Training { optimizer: Optimizer::SgdMomentum }
    }
}

/// Memory of one node under a [`StepMode`], in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeMemory {
    /// Allocated while the op runs and freed when it ends.
    pub temporary: u64,
    /// Resident on the device for the whole step.
    pub persistent: u64,
    /// The op's outputs: allocated when it runs.
    pub outputs: u64,
    /// Whether the outputs stay allocated until the end of the step (training) rather than being
    /// freed after their last consumer (forward only).
    pub retain_outputs: bool,
}

impl NodeMemory {
    /// Bytes needed at the moment the op runs, on top of what is already allocated:
    /// Baechi's `temporary + sum(output_memory)`.
    pub fn run_bytes(&self) -> u64 {
        self.temporary.saturating_add(self.outputs)
    }

    /// Bytes that stay allocated after the step: persistent plus retained outputs. The
    /// placement's per-device budget must cover the sum of these plus the largest `run_bytes`.
    pub fn resident_bytes(&self) -> u64 {
        let retained = if self.retain_outputs { self.outputs } else { 0 };
        self.persistent.saturating_add(retained)
    }
}

/// The memory of `node` under `mode`.
pub fn node_memory(node: &CostNode, mode: StepMode) -> NodeMemory {
    let outputs = node.total_output_memory();
    match mode {
        StepMode::ForwardOnly | StepMode::TrainingGraph => NodeMemory {
            temporary: node.temporary_memory,
            persistent: node.persistent_memory,
            outputs,
            retain_outputs: false,
        },
        StepMode::Training { optimizer } => NodeMemory {
            temporary: node.temporary_memory.saturating_add(outputs),
            persistent: node.persistent_memory.saturating_mul(2 + optimizer.state_slots()),
            outputs,
            retain_outputs: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> CostNode {
        let mut n = CostNode::new(0, "fc", 10);
        n.persistent_memory = 1000;
        n.temporary_memory = 7;
        n.output_memory = vec![300, 200];
        n
    }

    #[test]
    fn forward_only_is_baechis_model() {
        let m = node_memory(&node(), StepMode::ForwardOnly);
        assert_eq!(
            m,
            NodeMemory { temporary: 7, persistent: 1000, outputs: 500, retain_outputs: false }
        );
        assert_eq!(m.run_bytes(), 507);
        assert_eq!(m.resident_bytes(), 1000);
    }

    #[test]
    fn training_adds_gradients_optimizer_state_and_kept_activations() {
        let adam = node_memory(&node(), StepMode::Training { optimizer: Optimizer::Adam });
        // weights + gradients + two moments; outputs kept; upstream gradient as scratch.
        assert_eq!(adam.persistent, 4000);
        assert_eq!(adam.temporary, 507);
        assert_eq!(adam.resident_bytes(), 4500);
        let sgd = node_memory(&node(), StepMode::Training { optimizer: Optimizer::Sgd });
        assert_eq!(sgd.persistent, 2000);
    }
}
