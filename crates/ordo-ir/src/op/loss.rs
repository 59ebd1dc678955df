//! Loss functions.

use serde::{Deserialize, Serialize};

use super::{expect_float, expect_inputs};
use crate::fact::{DType, TensorFact};

/// How a loss reduces its per-element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossReduction {
    /// Each element's loss (the targets' shape).
    None,
    /// Their sum.
    Sum,
    /// Their weighted mean: the sum over the sum of the counted targets' class weights.
    Mean,
}

/// Negative log-likelihood of log-probabilities `[N, C, d1, ...]` (classes second, ONNX's
/// `NegativeLogLikelihoodLoss`, `torch.nn.NLLLoss`) against integer targets `[N, d1, ...]`,
/// with optional class weights `[C]` (a third input, which gets no gradient) and targets equal
/// to `ignore_index` counted as nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NllLoss {
    /// The reduction.
    pub reduction: LossReduction,
    /// The target value that contributes nothing.
    pub ignore_index: Option<i64>,
}

impl NllLoss {
    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        if !(2..=3).contains(&inputs.len()) {
            return Err(format!("expects 2 or 3 inputs, got {}", inputs.len()));
        }
        let (x, target) = (inputs[0], inputs[1]);
        expect_float("input", x)?;
        if x.rank() < 2 {
            return Err(format!("input must have rank >= 2 (classes second), got {x}"));
        }
        if !target.dtype.is_integer() {
            return Err(format!("targets must be integer class ids, got {target}"));
        }
        let mut want = x.shape.clone();
        want.remove(1);
        if target.shape != want {
            return Err(format!("targets {target} must have the input's shape {x} without dim 1"));
        }
        if let Some(w) = inputs.get(2)
            && (w.dtype != x.dtype || w.shape != [x.shape[1]])
        {
            return Err(format!("weights {w} must be {} of the {} classes", x.dtype, x.shape[1]));
        }
        let shape = if self.reduction == LossReduction::None { want } else { Vec::new() };
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }
}

pub(crate) fn infer_cross_entropy(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (logits, target) = (inputs[0], inputs[1]);
    expect_float("logits", logits)?;
    if logits.rank() < 2 {
        return Err(format!("logits must have rank >= 2 (classes last), got {logits}"));
    }
    if !target.dtype.is_integer() {
        return Err(format!("targets must be integer class ids, got {target}"));
    }
    if target.shape[..] != logits.shape[..logits.rank() - 1] {
        return Err(format!(
            "targets {target} must have the logits' shape {logits} without the class dimension"
        ));
    }
    Ok(vec![TensorFact::new(DType::F32, Vec::new())])
}
