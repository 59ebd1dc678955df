//! Sequence layers: embeddings and recurrent layers.

use serde::{Deserialize, Serialize};

use super::{ParamSpec, expect_float, expect_inputs, expect_rank};
use crate::fact::{DType, TensorFact};

/// Lookup of integer ids in a `[num_embeddings, dim]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    /// Rows of the table (vocabulary size).
    pub num_embeddings: usize,
    /// Columns of the table.
    pub dim: usize,
}

impl Embedding {
    /// A table of `num_embeddings` rows of width `dim`.
    pub fn new(num_embeddings: usize, dim: usize) -> Self {
        Self { num_embeddings, dim }
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let ids = inputs[0];
        if !ids.dtype.is_integer() {
            return Err(format!("ids must be integers, got {ids}"));
        }
        let mut shape = ids.shape.clone();
        shape.push(self.dim);
        Ok(vec![TensorFact::new(DType::F32, shape)])
    }

    pub(crate) fn param_specs(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::trainable("weight", vec![self.num_embeddings, self.dim])]
    }
}

/// One LSTM layer over a `[T, B, I]` sequence, producing `[T, B, dirs * hidden]`.
///
/// Parameters follow `torch.nn.LSTM` for a single layer: `weight_ih_l0 [4H, I]`,
/// `weight_hh_l0 [4H, H]`, `bias_ih_l0 [4H]`, `bias_hh_l0 [4H]`, and the same with a
/// `_reverse` suffix for the backward direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lstm {
    /// Hidden units per direction.
    pub hidden: usize,
    /// Whether a second direction runs backwards in time.
    pub bidirectional: bool,
}

impl Lstm {
    /// A unidirectional layer.
    pub fn new(hidden: usize) -> Self {
        Self { hidden, bidirectional: false }
    }

    /// A bidirectional layer.
    pub fn bidirectional(hidden: usize) -> Self {
        Self { hidden, bidirectional: true }
    }

    /// Number of directions, 1 or 2.
    pub fn directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_rank("input [T, B, I]", x, 3)?;
        expect_float("input", x)?;
        let shape = vec![x.shape[0], x.shape[1], self.directions() * self.hidden];
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }

    pub(crate) fn param_specs(&self, inputs: &[&TensorFact]) -> Vec<ParamSpec> {
        let (input, h) = (inputs[0].shape[2], self.hidden);
        let mut specs = Vec::new();
        for suffix in ["", "_reverse"].into_iter().take(self.directions()) {
            specs.push(ParamSpec::trainable(&format!("weight_ih_l0{suffix}"), vec![4 * h, input]));
            specs.push(ParamSpec::trainable(&format!("weight_hh_l0{suffix}"), vec![4 * h, h]));
            specs.push(ParamSpec::trainable(&format!("bias_ih_l0{suffix}"), vec![4 * h]));
            specs.push(ParamSpec::trainable(&format!("bias_hh_l0{suffix}"), vec![4 * h]));
        }
        specs
    }

    pub(crate) fn flops(&self, inputs: &[&TensorFact]) -> u64 {
        let [t, b, i] = [0, 1, 2].map(|d| inputs[0].shape[d] as u64);
        let (g, h) = (4, self.hidden as u64);
        self.directions() as u64 * t * (2 * b * g * h * (i + h) + 8 * b * g * h)
    }
}
