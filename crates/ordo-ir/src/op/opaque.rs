//! An op the IR knows only by its shapes and cost: imported from a framework's op set (an ONNX
//! operator without an IR counterpart) so that the model can be placed, planned and simulated,
//! though not run (no kernel).

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;

/// A framework op the importer has inferred the output of and estimated the cost of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Opaque {
    /// The framework's op type, e.g. `Erf`, `Einsum` (and which output, `TopK:1`, for an op
    /// of several outputs, which imports as one opaque op per output).
    pub op_type: String,
    /// The output's shape and type (the importer's shape inference).
    pub output: TensorFact,
    /// How many inputs it takes.
    pub inputs: usize,
    /// Forward FLOPs: a generic estimate from the shapes (e.g. a few per output element, a
    /// product's multiply-adds), which the roofline cost model turns into time with the bytes
    /// moved.
    pub flops: u64,
}

impl Opaque {
    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        crate::op::expect_inputs(inputs, self.inputs)?;
        Ok(vec![self.output.clone()])
    }
}
