//! Normalisation layers.

use serde::{Deserialize, Serialize};

use super::{ParamSpec, expect_float, expect_inputs};
use crate::fact::TensorFact;

/// Batch normalisation over dim 1 with affine weight and bias and running statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchNorm {
    /// Added to the variance.
    pub eps: f64,
    /// Running-statistics momentum.
    pub momentum: f64,
}

impl BatchNorm {
    /// PyTorch's defaults: eps 1e-5, momentum 0.1.
    pub fn new() -> Self {
        Self { eps: 1e-5, momentum: 0.1 }
    }

    /// With another epsilon.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// With another momentum.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }
}

impl Default for BatchNorm {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) fn infer_batch_norm(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_float("input", inputs[0])?;
    if inputs[0].rank() < 2 {
        return Err(format!("input must have rank >= 2, got {}", inputs[0]));
    }
    Ok(vec![inputs[0].clone()])
}

pub(crate) fn batch_norm_params(inputs: &[&TensorFact]) -> Vec<ParamSpec> {
    let c = inputs[0].shape[1];
    vec![
        ParamSpec::trainable("weight", vec![c]),
        ParamSpec::trainable("bias", vec![c]),
        ParamSpec::buffer("running_mean", vec![c]),
        ParamSpec::buffer("running_var", vec![c]),
    ]
}

/// Layer normalisation over the trailing `normalized_shape` dimensions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerNorm {
    /// The trailing dimensions normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance.
    pub eps: f64,
    /// Whether there are a weight and a bias of `normalized_shape`.
    pub affine: bool,
}

impl LayerNorm {
    /// Normalises the last dimension of size `dim`, eps 1e-5, with weight and bias.
    pub fn new(dim: usize) -> Self {
        Self { normalized_shape: vec![dim], eps: 1e-5, affine: true }
    }

    /// With another epsilon.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_float("input", x)?;
        let n = self.normalized_shape.len();
        if x.rank() < n || x.shape[x.rank() - n..] != self.normalized_shape[..] {
            return Err(format!(
                "input {x} does not end with the normalized shape {:?}",
                self.normalized_shape
            ));
        }
        Ok(vec![x.clone()])
    }

    pub(crate) fn param_specs(&self) -> Vec<ParamSpec> {
        if !self.affine {
            return Vec::new();
        }
        vec![
            ParamSpec::trainable("weight", self.normalized_shape.clone()),
            ParamSpec::trainable("bias", self.normalized_shape.clone()),
        ]
    }
}
