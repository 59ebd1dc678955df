//! Conversions and random tensors: ONNX's `Cast` between the element types that the runtime
//! holds, and the training-mode randomness that exporters write (stochastic depth is
//! `RandomUniformLike`, `Less`, `Cast`; `torch.bernoulli` is `Bernoulli`). Random values come
//! from a counter-based generator keyed by node, step and element, so they are the same on
//! every placement and schedule.

use serde::{Deserialize, Serialize};

use crate::fact::{DType, TensorFact};
use crate::op::{expect_float, expect_inputs};

/// The distribution of a random tensor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// Lower bound (included).
        low: f64,
        /// Upper bound (excluded).
        high: f64,
    },
    /// Normal with mean `mean` and standard deviation `scale`.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        scale: f64,
    },
}

impl Distribution {
    /// Checks the parameters: finite, `low <= high`, `scale >= 0`.
    pub fn validate(&self) -> Result<(), String> {
        let ok = match *self {
            Distribution::Uniform { low, high } => {
                low.is_finite() && high.is_finite() && low <= high
            }
            Distribution::Normal { mean, scale } => {
                mean.is_finite() && scale.is_finite() && scale >= 0.0
            }
        };
        if ok { Ok(()) } else { Err(format!("invalid distribution {self:?}")) }
    }
}

/// `Cast` to `to`: same shape.
pub(crate) fn infer_cast(to: DType, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    Ok(vec![TensorFact::new(to, inputs[0].shape.clone())])
}

/// `BitCast` to `to`: same shape, a type of the same width.
pub(crate) fn infer_bit_cast(to: DType, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let from = inputs[0].dtype;
    if from.bits() != to.bits() {
        return Err(format!("no bit cast from {from} to {to}: their widths differ"));
    }
    Ok(vec![TensorFact::new(to, inputs[0].shape.clone())])
}

/// Random values shaped like the input (of any element type; its values are not read), f32.
pub(crate) fn infer_random_like(
    distribution: &Distribution,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    distribution.validate()?;
    Ok(vec![TensorFact::new(DType::F32, inputs[0].shape.clone())])
}

/// `Bernoulli`: f32 probabilities in, f32 zeros and ones out.
pub(crate) fn infer_bernoulli(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_float("the probabilities", inputs[0])?;
    Ok(vec![inputs[0].clone()])
}
