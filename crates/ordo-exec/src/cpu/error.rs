//! The error of every kernel.

use ordo_ir::DType;

/// Why a kernel rejected its arguments. Every variant names the op (as
/// [`op_label`](super::op_label) spells it, e.g. `Conv2d` or `GradInput(0) of MatMul`) and says
/// what is wrong; kernels never panic on bad input.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// Wrong number of inputs, parameters, state slots or outputs.
    #[error("{op}: expects {expected} {what}, got {got}")]
    Count {
        /// The op.
        op: String,
        /// `"input(s)"`, `"parameter(s)"`, `"state slot(s)"`, ...
        what: &'static str,
        /// How many it expects.
        expected: usize,
        /// How many it got.
        got: usize,
    },
    /// A tensor's shape does not fit the op.
    #[error("{op}: {message}")]
    Shape {
        /// The op.
        op: String,
        /// What is wrong, with the shapes involved.
        message: String,
    },
    /// A tensor has the wrong element type for the op (e.g. integer logits).
    #[error("{op}: {what} must be {expected}, got {got}")]
    DType {
        /// The op.
        op: String,
        /// Which tensor.
        what: String,
        /// The type expected.
        expected: DType,
        /// The type given.
        got: DType,
    },
    /// The CPU kernels hold only `f32` and integer (`i64`) tensors.
    #[error("{op}: dtype {dtype} is not supported by the CPU kernels")]
    UnsupportedDType {
        /// The op (or `"Tensor"` for a constructor).
        op: String,
        /// The type.
        dtype: DType,
    },
    /// The op, or this gradient of it, has no CPU kernel.
    #[error("{op}: {message}")]
    Unsupported {
        /// The op.
        op: String,
        /// What is missing.
        message: String,
    },
    /// A value is out of range: an embedding id or class label outside the table, a drop
    /// probability outside `[0, 1]`, data whose length does not match its shape.
    #[error("{op}: {message}")]
    Value {
        /// The op.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// The [`KernelContext`](super::KernelContext) lacks something the op needs (a `Fill`
    /// without its output fact, Adam at step 0).
    #[error("{op}: {message}")]
    Context {
        /// The op.
        op: String,
        /// What is missing.
        message: String,
    },
}

/// Shorthand for kernel results.
pub type KernelResult<T> = Result<T, KernelError>;
