//! Negative log-likelihood of log-probabilities (classes second, ONNX's
//! `NegativeLogLikelihoodLoss`) against integer targets, with optional class weights and an
//! ignored target value, and its gradient. Sums in f64.

use ordo_ir::Op;
use ordo_ir::op::{Grad, LossReduction, NllLoss};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// The per-target picks: for each target element (`n`, `d`), the index into the input of
/// its class and its weight (0 for an ignored target).
struct Picks {
    at: Vec<Option<usize>>,
    weight: Vec<f64>,
}

/// Reads the targets `c.inputs[t]` (and the weights `c.inputs[t + 1]`, if `weighted`) for an
/// input of `shape` `[N, C, d1, ...]`.
fn picks(n: &NllLoss, c: &Call, shape: &[usize], t: usize, weighted: bool) -> KernelResult<Picks> {
    let targets = c.input_i64(t)?;
    let weights = if weighted { Some(c.input_f32(t + 1)?) } else { None };
    let classes = shape[1];
    let inner: usize = shape[2..].iter().product();
    let mut p = Picks { at: Vec::with_capacity(targets.len()), weight: Vec::new() };
    for (e, &target) in targets.iter().enumerate() {
        if Some(target) == n.ignore_index {
            p.at.push(None);
            p.weight.push(0.0);
            continue;
        }
        if target < 0 || target as u64 >= classes as u64 {
            return Err(c.value_err(format!("target {target} is outside the {classes} classes")));
        }
        let (batch, d) = (e / inner.max(1), e % inner.max(1));
        p.at.push(Some((batch * classes + target as usize) * inner + d));
        p.weight.push(weights.map_or(1.0, |w| f64::from(w[target as usize])));
    }
    Ok(p)
}

/// The loss: `-x[target] * weight[target]` per target, reduced.
pub(crate) fn nll_loss(op: &Op, n: &NllLoss, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let x = c.input_f32(0)?;
    let p = picks(n, &c, c.inputs[0].shape(), 1, c.inputs.len() == 3)?;
    let losses: Vec<f64> =
        p.at.iter().zip(&p.weight).map(|(a, &w)| a.map_or(0.0, |i| -f64::from(x[i]) * w)).collect();
    let y = match n.reduction {
        LossReduction::None => losses.iter().map(|&v| v as f32).collect(),
        LossReduction::Sum => vec![losses.iter().sum::<f64>() as f32],
        // All targets ignored: 0 / 0, NaN (as PyTorch).
        LossReduction::Mean => {
            vec![(losses.iter().sum::<f64>() / p.weight.iter().sum::<f64>()) as f32]
        }
    };
    Ok(vec![tensor(&out, y)?])
}

/// The gradient with respect to the log-probabilities (inputs: `dy`, the targets, the weights
/// if any): `-weight[target] * dy` at each target's class (over the weights' sum for a mean),
/// 0 elsewhere.
pub(crate) fn nll_loss_grad(n: &NllLoss, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let shape = c.produced(g, 0)?.shape.clone();
    let weighted = c.inputs.len() == 3;
    let dy = c.input_f32(0)?;
    let p = picks(n, &c, &shape, 1, weighted)?;
    let total: f64 = p.weight.iter().sum();
    let expected = if n.reduction == LossReduction::None { p.at.len() } else { 1 };
    if dy.len() != expected {
        return Err(c.shape_err(format!("{} upstream gradients for {expected}", dy.len())));
    }
    let mut dx = vec![0.0f32; shape.iter().product()];
    for (e, (a, &w)) in p.at.iter().zip(&p.weight).enumerate() {
        if let Some(i) = a {
            let upstream = match n.reduction {
                LossReduction::None => f64::from(dy[e]),
                LossReduction::Sum => f64::from(dy[0]),
                LossReduction::Mean => f64::from(dy[0]) / total,
            };
            dx[*i] = (-w * upstream) as f32;
        }
    }
    Ok(vec![tensor(&shape, dx)?])
}
