//! Reductions over axes (sums, means, extremes, products, norms, log-sums) and their
//! gradients.
//!
//! Every kernel walks the input once per pass with [`for_each_broadcast`], which pairs each
//! input element with the element of the kept shape (the reduced axes as ones, also the
//! order of the output's data) that it reduces into.

use ordo_ir::Op;
use ordo_ir::op::{Grad, Reduce, ReduceKind, Saved};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, broadcast_strides, for_each_broadcast, reduce_to, tensor};

/// `x` reduced into the kept shape by `kind` (f32 values, accumulated as f32 in the input's
/// order, as the sums always were).
fn reduced(kind: ReduceKind, x: &[f32], shape: &[usize], kept: &[usize]) -> Vec<f32> {
    use ReduceKind::*;
    if matches!(kind, Sum | Mean) {
        return reduce_to(x, shape, kept, None);
    }
    let (sx, sk) = (broadcast_strides(shape, shape), broadcast_strides(kept, shape));
    let n: usize = kept.iter().product();
    let fold = |init: f32, step: &dyn Fn(f32, f32) -> f32| {
        let mut acc = vec![init; n];
        for_each_broadcast(shape, &sx, &sk, |o, _, j| acc[j] = step(acc[j], x[o]));
        acc
    };
    // NaN wins an extreme, as in NumPy: the accumulator keeps it, and a NaN element takes it.
    let max = |a: f32, b: f32| if b.is_nan() || b > a { b } else { a };
    let min = |a: f32, b: f32| if b.is_nan() || b < a { b } else { a };
    match kind {
        Sum | Mean => unreachable!("handled above"),
        Max => fold(f32::NEG_INFINITY, &max),
        Min => fold(f32::INFINITY, &min),
        Prod => fold(1.0, &|a, b| a * b),
        SumSquare => fold(0.0, &|a, b| a + b * b),
        L1 => fold(0.0, &|a, b| a + b.abs()),
        L2 => fold(0.0, &|a, b| a + b * b).into_iter().map(f32::sqrt).collect(),
        LogSum => fold(0.0, &|a, b| a + b).into_iter().map(f32::ln).collect(),
        LogSumExp => {
            // m + ln Σ exp(x - m), with m the group's maximum (an infinite or NaN maximum is
            // the result itself: exp(x - m) would be NaN).
            let m = fold(f32::NEG_INFINITY, &max);
            let mut sums = vec![0.0f32; n];
            for_each_broadcast(shape, &sx, &sk, |o, _, j| {
                if m[j].is_finite() {
                    sums[j] += (x[o] - m[j]).exp();
                }
            });
            m.iter().zip(&sums).map(|(&m, &s)| if m.is_finite() { m + s.ln() } else { m }).collect()
        }
    }
}

/// `y` = `x` reduced over the axes.
pub(crate) fn reduce(op: &Op, r: &Reduce, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (x, shape) = (c.input_f32(0)?, c.inputs[0].shape());
    let mut y = reduced(r.kind, x, shape, &r.kept_shape(shape));
    if r.kind == ReduceKind::Mean {
        let n = r.count(shape) as f32;
        y.iter_mut().for_each(|v| *v /= n);
    }
    Ok(vec![tensor(&out, y)?])
}

/// `dx`: `dy` spread back over the reduced axes, times the reduction's derivative at each
/// element (inputs: `dy`, then what [`ReduceKind::grad_saves`] names, in that order).
pub(crate) fn reduce_grad(of: &Op, r: &Reduce, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    use ReduceKind::*;
    c.expect_inputs(1 + r.kind.grad_saves().len())?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let kept = r.kept_shape(&xf.shape);
    let (sx, sk) = (broadcast_strides(&xf.shape, &xf.shape), broadcast_strides(&kept, &xf.shape));
    let each = |f: &mut dyn FnMut(usize, usize)| {
        for_each_broadcast(&xf.shape, &sx, &sk, |o, _, j| f(o, j))
    };
    let mut dx = vec![0.0f32; xf.numel() as usize];
    // The saved tensors, each checked against the forward's input or output shape.
    let out = c.infer(of, std::slice::from_ref(xf))?.shape;
    let kinds = r.kind.grad_saves();
    let saved = |i: usize| -> KernelResult<&[f32]> {
        let shape = if kinds[i] == Saved::Output { &out } else { &xf.shape };
        c.expect_input_shape(1 + i, shape)?;
        c.input_f32(1 + i)
    };
    match r.kind {
        Sum | Mean => {
            let scale = if r.kind == Mean { 1.0 / r.count(&xf.shape) as f32 } else { 1.0 };
            each(&mut |o, j| dx[o] = dy[j] * scale);
        }
        SumSquare => {
            let x = saved(0)?;
            each(&mut |o, j| dx[o] = 2.0 * x[o] * dy[j]);
        }
        L1 => {
            let x = saved(0)?;
            // The subgradient 0 at 0, as PyTorch's `abs`.
            each(&mut |o, j| dx[o] = if x[o] == 0.0 { 0.0 } else { x[o].signum() * dy[j] });
        }
        LogSum => {
            let y = saved(0)?;
            each(&mut |o, j| dx[o] = dy[j] * (-y[j]).exp());
        }
        L2 => {
            let (x, y) = (saved(0)?, saved(1)?);
            each(&mut |o, j| dx[o] = if y[j] == 0.0 { 0.0 } else { x[o] / y[j] * dy[j] });
        }
        LogSumExp => {
            let (x, y) = (saved(0)?, saved(1)?);
            each(&mut |o, j| dx[o] = dy[j] * (x[o] - y[j]).exp());
        }
        Max | Min => {
            // Split evenly between the elements equal to the extreme (`torch.amax`'s rule).
            let (x, y) = (saved(0)?, saved(1)?);
            let mut ties = vec![0u32; kept.iter().product()];
            each(&mut |o, j| ties[j] += u32::from(x[o] == y[j]));
            each(&mut |o, j| {
                if x[o] == y[j] {
                    dx[o] = dy[j] / ties[j] as f32;
                }
            });
        }
        Prod => {
            // d(Π x)/dx_i = the product of the others: of the nonzero ones when x_i is the
            // group's only zero, 0 when another element is zero too.
            let x = saved(0)?;
            let n = kept.iter().product();
            let (mut zeros, mut nonzero) = (vec![0u32; n], vec![1.0f32; n]);
            each(&mut |o, j| {
                if x[o] == 0.0 {
                    zeros[j] += 1;
                } else {
                    nonzero[j] *= x[o];
                }
            });
            each(&mut |o, j| {
                dx[o] = match (zeros[j], x[o] == 0.0) {
                    (0, _) => nonzero[j] / x[o] * dy[j],
                    (1, true) => nonzero[j] * dy[j],
                    _ => 0.0,
                }
            });
        }
    }
    Ok(vec![tensor(&xf.shape, dx)?])
}
