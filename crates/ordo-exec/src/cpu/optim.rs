//! Optimizer steps (`Update` nodes) with PyTorch's semantics and the hyper-parameters of
//! [`Hyper`](super::Hyper) (no weight decay, no dampening, no Nesterov, no AMSGrad):
//!
//! * SGD: `p -= lr g`;
//! * SGD with momentum: `v = momentum v + g; p -= lr v` (PyTorch's first step sets `v = g`,
//!   which is the same from a zero state);
//! * Adam: `m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//!   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)` at step `t` from 1.

use ordo_ir::TensorFact;
use ordo_ir::op::Optimizer;

use super::error::{KernelError, KernelResult};
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// The optimizer state of one parameter of fact `param` before the first step: zeros, one
/// tensor per slot ([`Optimizer::state_slots`]: none for SGD, the velocity for momentum, the
/// first and second moments for Adam).
///
/// # Errors
/// [`KernelError::UnsupportedDType`] for a parameter that is not `f32`.
pub fn init_state(optimizer: Optimizer, param: &TensorFact) -> KernelResult<Vec<Tensor>> {
    if param.dtype != ordo_ir::DType::F32 {
        return Err(KernelError::UnsupportedDType { op: "Update".into(), dtype: param.dtype });
    }
    (0..optimizer.state_slots()).map(|_| Tensor::zeros(param)).collect()
}

pub(crate) fn update(optimizer: Optimizer, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(1)?;
    c.expect_state(optimizer.state_slots() as usize)?;
    let shape = c.params[0].shape().to_vec();
    c.expect_input_shape(0, &shape)?;
    let (g, p) = (c.input_f32(0)?.to_vec(), c.param_f32(0)?.to_vec());
    for (i, s) in c.state.iter().enumerate() {
        if s.shape() != shape.as_slice() || s.as_f32().is_none() {
            return Err(
                c.shape_err(format!("state slot {i} is {}, the parameter f32{shape:?}", s.fact()))
            );
        }
    }
    let hp = c.ctx.hyper;
    let lr = hp.lr;
    let mut p = p;
    let Call { state, ctx, label, .. } = c;
    match optimizer {
        Optimizer::Sgd => p.iter_mut().zip(&g).for_each(|(p, g)| *p -= lr * g),
        Optimizer::SgdMomentum => {
            let v = state[0].as_f32_mut().unwrap_or_default();
            for ((p, v), g) in p.iter_mut().zip(v).zip(&g) {
                *v = hp.momentum * *v + g;
                *p -= lr * *v;
            }
        }
        Optimizer::Adam => {
            if ctx.step == 0 {
                return Err(KernelError::Context {
                    op: label,
                    message: "Adam's step count starts at 1, got 0".into(),
                });
            }
            let t = ctx.step.min(i32::MAX as u64) as i32;
            let bc1 = 1.0 - f64::from(hp.beta1).powi(t);
            let bc2 = 1.0 - f64::from(hp.beta2).powi(t);
            let step_size = (f64::from(lr) / bc1) as f32;
            let bc2_sqrt = bc2.sqrt() as f32;
            let (ms, vs) = state.split_at_mut(1);
            let m = ms[0].as_f32_mut().unwrap_or_default();
            let v = vs[0].as_f32_mut().unwrap_or_default();
            for (((p, m), v), &g) in p.iter_mut().zip(m).zip(v).zip(&g) {
                *m = hp.beta1 * *m + (1.0 - hp.beta1) * g;
                *v = hp.beta2 * *v + (1.0 - hp.beta2) * g * g;
                *p -= step_size * *m / (v.sqrt() / bc2_sqrt + hp.eps);
            }
        }
    }
    Ok(vec![tensor(&shape, p)?])
}
