//! Mean cross-entropy of logits (classes last) against integer targets, and its gradient.
//! Computed in f64. A target of -100 (PyTorch's default `ignore_index`) is left out of the
//! mean; when every target is ignored the loss is NaN (as PyTorch's) and the gradient zero.

use ordo_ir::Op;

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// PyTorch's default `ignore_index`.
const IGNORE: i64 = -100;

/// Checks `[.., logits, targets]` (logits at `at`) and returns logits, targets and classes.
fn check<'c>(op: &Op, at: usize, c: &'c Call) -> KernelResult<(&'c [f32], &'c [i64], usize)> {
    c.infer(op, &[c.inputs[at].fact(), c.inputs[at + 1].fact()])?;
    let (x, t) = (c.input_f32(at)?, c.input_i64(at + 1)?);
    let classes = *c.inputs[at].shape().last().unwrap_or(&1);
    if let Some(bad) = t.iter().find(|&&t| t != IGNORE && (t < 0 || t as u64 >= classes as u64)) {
        return Err(c.value_err(format!("target {bad} is outside the {classes} classes")));
    }
    Ok((x, t, classes))
}

/// Per row: the max logit and `log(sum(exp(x - max)))`.
fn log_sum_exp(row: &[f32]) -> (f64, f64) {
    let max = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
    (max, row.iter().map(|&v| (f64::from(v) - max).exp()).sum::<f64>().ln())
}

pub(crate) fn cross_entropy(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    c.expect_params(0)?;
    let (x, targets, classes) = check(op, 0, &c)?;
    let (mut sum, mut count) = (0.0f64, 0usize);
    for (row, &t) in x.chunks_exact(classes.max(1)).zip(targets) {
        if t != IGNORE {
            let (max, lse) = log_sum_exp(row);
            sum += max + lse - f64::from(row[t as usize]);
            count += 1;
        }
    }
    Ok(vec![Tensor::scalar((sum / count as f64) as f32)])
}

/// `dx = dy / count * (softmax(x) - onehot(t))`, zero on ignored rows.
pub(crate) fn cross_entropy_grad(of: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    let (x, targets, classes) = check(of, 1, &c)?;
    let dy = c.check_dy(of, &[c.inputs[1].fact(), c.inputs[2].fact()])?;
    let count = targets.iter().filter(|&&t| t != IGNORE).count();
    let scale = if count == 0 { 0.0 } else { f64::from(dy[0]) / count as f64 };
    let mut dx = vec![0.0f32; x.len()];
    let rows = x.chunks_exact(classes.max(1)).zip(dx.chunks_exact_mut(classes.max(1)));
    for ((row, out), &t) in rows.zip(targets) {
        if t == IGNORE {
            continue;
        }
        let (max, lse) = log_sum_exp(row);
        for (j, (o, &v)) in out.iter_mut().zip(row).enumerate() {
            let p = (f64::from(v) - max - lse).exp();
            let onehot = f64::from(u8::from(j as i64 == t));
            *o = (scale * (p - onehot)) as f32;
        }
    }
    Ok(vec![tensor(c.inputs[1].shape(), dx)?])
}
