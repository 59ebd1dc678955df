//! Max and average pooling over any number of spatial dims with any window (ONNX's
//! `MaxPool`/`AveragePool` in full), and their gradients: each window listed once as the
//! input positions inside it.

use ordo_ir::Op;
use ordo_ir::op::{Grad, PoolNd};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// Calls `f(output offset, input offsets inside the input, positions inside the padded
/// input)` for every window of one `[d1, ...]` plane.
fn each_window(
    p: &PoolNd,
    input: &[usize],
    out: &[usize],
    mut f: impl FnMut(usize, &[usize], usize),
) {
    let n = input.len();
    let total: usize = out.iter().product();
    let mut o_idx = vec![0usize; n];
    let mut inside = Vec::new();
    for o in 0..total {
        inside.clear();
        let mut padded = 0;
        let mut k_idx = vec![0usize; n];
        let window: usize = p.kernel.iter().product();
        for _ in 0..window {
            let mut offset = 0;
            let (mut valid, mut in_pad) = (true, true);
            for d in 0..n {
                let pos =
                    (o_idx[d] * p.stride[d] + k_idx[d] * p.dilation[d]) as i64 - p.pads[d] as i64;
                valid &= (0..input[d] as i64).contains(&pos);
                in_pad &= pos < (input[d] + p.pads[d + n]) as i64;
                offset = offset * input[d] + pos.max(0) as usize;
            }
            if valid {
                inside.push(offset);
            }
            padded += usize::from(in_pad);
            for d in (0..n).rev() {
                k_idx[d] += 1;
                if k_idx[d] < p.kernel[d] {
                    break;
                }
                k_idx[d] = 0;
            }
        }
        f(o, &inside, padded);
        for d in (0..n).rev() {
            o_idx[d] += 1;
            if o_idx[d] < out[d] {
                break;
            }
            o_idx[d] = 0;
        }
    }
}

/// The first position of the largest value (NaN wins) among `at` in `x`.
fn arg_max(x: &[f32], at: &[usize]) -> Option<usize> {
    at.iter().copied().reduce(|best, i| {
        if !x[best].is_nan() && (x[i].is_nan() || x[i] > x[best]) { i } else { best }
    })
}

pub(crate) fn pool(op: &Op, p: &PoolNd, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (x, shape) = (c.input_f32(0)?, c.inputs[0].shape());
    let (plane_in, plane_out): (usize, usize) =
        (shape[2..].iter().product(), out[2..].iter().product());
    let mut y = vec![0.0f32; out.iter().product()];
    for plane in 0..shape[0] * shape[1] {
        let xs = &x[plane * plane_in..(plane + 1) * plane_in];
        each_window(p, &shape[2..], &out[2..], |o, inside, padded| {
            y[plane * plane_out + o] = if p.max {
                arg_max(xs, inside).map_or(f32::NEG_INFINITY, |i| xs[i])
            } else {
                let sum: f64 = inside.iter().map(|&i| f64::from(xs[i])).sum();
                let count = if p.count_include_pad { padded } else { inside.len() };
                (sum / count.max(1) as f64) as f32
            };
        });
    }
    Ok(vec![tensor(&out, y)?])
}

/// The gradient: the upstream gradient to each window's largest input (max; reads the
/// input), or spread over the window's inputs by the divisor (average).
pub(crate) fn pool_grad(of: &Op, p: &PoolNd, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let shape = c.produced(g, 0)?.shape.clone();
    let out = c.infer(of, &[c.produced(g, 0)?.clone()])?.shape;
    c.expect_inputs(if p.max { 2 } else { 1 })?;
    c.expect_input_shape(0, &out)?;
    let x = if p.max {
        c.expect_input_shape(1, &shape)?;
        Some(c.input_f32(1)?)
    } else {
        None
    };
    let dy = c.input_f32(0)?;
    let (plane_in, plane_out): (usize, usize) =
        (shape[2..].iter().product(), out[2..].iter().product());
    let mut dx = vec![0.0f32; shape.iter().product()];
    for plane in 0..shape[0] * shape[1] {
        let base = plane * plane_in;
        each_window(p, &shape[2..], &out[2..], |o, inside, padded| {
            let d = dy[plane * plane_out + o];
            match x {
                Some(x) => {
                    if let Some(i) = arg_max(&x[base..base + plane_in], inside) {
                        dx[base + i] += d;
                    }
                }
                None => {
                    let count = if p.count_include_pad { padded } else { inside.len() };
                    inside.iter().for_each(|&i| dx[base + i] += d / count.max(1) as f32);
                }
            }
        });
    }
    Ok(vec![tensor(&shape, dx)?])
}
