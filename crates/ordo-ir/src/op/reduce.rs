//! Reductions over axes: sums, means, extremes, products, norms and log-sums (`torch.sum`,
//! `torch.amax`, ...; ONNX's `Reduce*` operators).

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;
use crate::op::{Saved, expect_float, expect_inputs};

/// What a reduction computes over its axes (ONNX's `Reduce*` operators). Over no elements
/// (a reduced axis of size 0) each gives its identity: 0 for sums and norms, 1 for the
/// product, minus infinity for the maximum and the log-sums, infinity for the minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReduceKind {
    /// The sum.
    Sum,
    /// The mean.
    Mean,
    /// The largest element (NaN if any is NaN).
    Max,
    /// The smallest element (NaN if any is NaN).
    Min,
    /// The product.
    Prod,
    /// The sum of squares.
    SumSquare,
    /// The sum of absolute values.
    L1,
    /// The square root of the sum of squares.
    L2,
    /// The natural logarithm of the sum.
    LogSum,
    /// The natural logarithm of the sum of exponentials (computed stably).
    LogSumExp,
}

impl ReduceKind {
    /// ONNX's name of the reduction, e.g. `ReduceMax`.
    pub fn onnx_name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "ReduceSum",
            ReduceKind::Mean => "ReduceMean",
            ReduceKind::Max => "ReduceMax",
            ReduceKind::Min => "ReduceMin",
            ReduceKind::Prod => "ReduceProd",
            ReduceKind::SumSquare => "ReduceSumSquare",
            ReduceKind::L1 => "ReduceL1",
            ReduceKind::L2 => "ReduceL2",
            ReduceKind::LogSum => "ReduceLogSum",
            ReduceKind::LogSumExp => "ReduceLogSumExp",
        }
    }

    /// The reduction ONNX names `name`, if any.
    pub fn from_onnx_name(name: &str) -> Option<Self> {
        use ReduceKind::*;
        [Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp]
            .into_iter()
            .find(|k| k.onnx_name() == name)
    }

    /// The forward tensors its gradient reads besides the upstream gradient: nothing for a
    /// sum or mean (the gradient is spread back), the input for squares and absolute values
    /// and products, the input and the output for the rest (which elements were the extreme,
    /// `x / y`, `exp(x - y)`); the log of a sum needs only its output (`1 / sum = exp(-y)`).
    /// The training rules and the kernels both read it from here.
    pub fn grad_saves(self) -> Vec<Saved> {
        use ReduceKind::*;
        match self {
            Sum | Mean => vec![],
            SumSquare | L1 | Prod => vec![Saved::Input(0)],
            LogSum => vec![Saved::Output],
            Max | Min | L2 | LogSumExp => vec![Saved::Input(0), Saved::Output],
        }
    }
}

/// A reduction over `axes` of a float tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduce {
    /// What it computes.
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
