//! ONNX models on the command line: the loss to give an imported forward graph, and running
//! one on the CPU kernels.

pub mod run;

/// A loss to add to a forward graph that ends at its predictions.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossArg {
    /// Mean cross-entropy of the graph's one output (logits, classes last) against an `i64`
    /// input `labels` shaped like the logits without their last dimension.
    CrossEntropy,
}

impl From<LossArg> for ordo::Loss {
    fn from(arg: LossArg) -> Self {
        match arg {
            LossArg::CrossEntropy => ordo::Loss::CrossEntropy,
        }
    }
}
