//! Dense layers and matrix products.

use serde::{Deserialize, Serialize};

use super::{ParamSpec, expect_float, expect_inputs};
use crate::fact::TensorFact;
use crate::op::elementwise::broadcast_shapes;

/// `y = x W^T + b` over the last dimension, with weight `[out, in]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    /// Output features.
    pub out_features: usize,
    /// Whether there is a bias of shape `[out]`.
    pub bias: bool,
}

impl Linear {
    /// A dense layer with bias.
    pub fn new(out_features: usize) -> Self {
        Self { out_features, bias: true }
    }

    /// Without bias.
    pub fn no_bias(mut self) -> Self {
        self.bias = false;
        self
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_float("input", x)?;
        if x.rank() == 0 {
            return Err("input must have rank >= 1".into());
        }
        let mut shape = x.shape.clone();
        *shape.last_mut().expect("rank checked") = self.out_features;
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }

    pub(crate) fn param_specs(&self, inputs: &[&TensorFact]) -> Vec<ParamSpec> {
        let in_features = *inputs[0].shape.last().expect("rank checked by infer");
        let mut specs = vec![ParamSpec::trainable("weight", vec![self.out_features, in_features])];
        if self.bias {
            specs.push(ParamSpec::trainable("bias", vec![self.out_features]));
        }
        specs
    }

    pub(crate) fn flops(&self, inputs: &[&TensorFact], outputs: &[TensorFact]) -> u64 {
        let k = *inputs[0].shape.last().unwrap_or(&0) as u64;
        let out = outputs[0].numel();
        2 * out * k + if self.bias { out } else { 0 }
    }
}

pub(crate) fn infer_matmul(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    expect_float("left input", a)?;
    if a.dtype != b.dtype {
        return Err(format!("input dtypes differ: {a} and {b}"));
    }
    if a.rank() < 2 || b.rank() < 2 {
        return Err(format!("inputs must have rank >= 2, got {a} and {b}"));
    }
    let (m, k) = (a.shape[a.rank() - 2], a.shape[a.rank() - 1]);
    let (k2, n) = (b.shape[b.rank() - 2], b.shape[b.rank() - 1]);
    if k != k2 {
        return Err(format!("inner dimensions differ: {a} x {b}"));
    }
    let mut shape = broadcast_shapes(&a.shape[..a.rank() - 2], &b.shape[..b.rank() - 2])
        .ok_or_else(|| format!("batch dimensions of {a} and {b} do not broadcast"))?;
    shape.extend([m, n]);
    Ok(vec![TensorFact::new(a.dtype, shape)])
}

pub(crate) fn matmul_flops(inputs: &[&TensorFact], outputs: &[TensorFact]) -> u64 {
    let k = inputs[0].shape.last().copied().unwrap_or(0) as u64;
    2 * outputs[0].numel() * k
}
