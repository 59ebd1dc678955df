//! Loss functions.

use super::{expect_float, expect_inputs};
use crate::fact::{DType, TensorFact};

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
