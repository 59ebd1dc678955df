//! Reductions over axes: sums and means (`torch.sum`, `torch.mean`; ONNX `ReduceSum`,
//! `ReduceMean`).

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;
use crate::op::{expect_float, expect_inputs};

/// What a reduction computes over its axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReduceKind {
    /// The sum.
    Sum,
    /// The mean.
    Mean,
}

/// A sum or mean over `axes` of a float tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduce {
    /// Sum or mean.
    pub kind: ReduceKind,
    /// The reduced axes, increasing, each below the input's rank.
    pub axes: Vec<usize>,
    /// Whether the reduced axes stay as dimensions of size 1.
    pub keepdims: bool,
}

impl Reduce {
    /// The input's shape with the reduced axes set to 1 (the output's data, in the same
    /// order, whether or not they are kept).
    pub fn kept_shape(&self, input: &[usize]) -> Vec<usize> {
        input.iter().enumerate().map(|(i, &d)| if self.axes.contains(&i) { 1 } else { d }).collect()
    }

    /// How many input elements each output element reduces.
    pub fn count(&self, input: &[usize]) -> usize {
        self.axes.iter().map(|&a| input[a]).product()
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_float("input", x)?;
        if self.axes.iter().any(|&a| a >= x.rank()) || !self.axes.is_sorted() {
            return Err(format!("axes {:?} for an input of rank {}", self.axes, x.rank()));
        }
        let shape = if self.keepdims {
            self.kept_shape(&x.shape)
        } else {
            (0..x.rank()).filter(|i| !self.axes.contains(i)).map(|i| x.shape[i]).collect()
        };
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }
}
