//! Max, average and global average pooling over NCHW input, and their gradients. Windows and
//! divisors follow PyTorch: implicit padding, `ceil_mode`, `count_include_pad`.

use ordo_ir::Op;
use ordo_ir::op::{Grad, Pool2d};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// One pooling window, clipped to the input: rows `h0..h1`, columns `w0..w1`, and the
/// divisor of an average (`count_include_pad` counts padding, never the part of a ceil-mode
/// window past it).
struct Window {
    h0: usize,
    h1: usize,
    w0: usize,
    w1: usize,
    divisor: usize,
}

/// Calls `f(plane, output index in the plane, window)` for every output element, in order.
fn for_each_window(p: &Pool2d, x: &[usize], y: &[usize], mut f: impl FnMut(usize, usize, Window)) {
    let (h, w) = (x[2] as i64, x[3] as i64);
    let span = |o: usize, dim: usize, len: i64| {
        let start = (o * p.stride[dim]) as i64 - p.padding[dim] as i64;
        let end = (start + p.kernel[dim] as i64).min(len + p.padding[dim] as i64);
        let padded = (end - start).max(0) as usize;
        (start.clamp(0, len) as usize, end.clamp(0, len) as usize, padded)
    };
    for plane in 0..x[0] * x[1] {
        for oy in 0..y[2] {
            let (h0, h1, ph) = span(oy, 0, h);
            for ox in 0..y[3] {
                let (w0, w1, pw) = span(ox, 1, w);
                let clipped = h1.saturating_sub(h0) * w1.saturating_sub(w0);
                let divisor = if p.count_include_pad { ph * pw } else { clipped };
                f(plane, oy * y[3] + ox, Window { h0, h1, w0, w1, divisor });
            }
        }
    }
}

/// The first index of the maximum of a window of one plane (NaN wins, as in PyTorch).
fn argmax(x: &[f32], width: usize, win: &Window) -> Option<usize> {
    let mut best: Option<usize> = None;
    for iy in win.h0..win.h1 {
        for ix in win.w0..win.w1 {
            let i = iy * width + ix;
            if best.is_none_or(|b| x[i] > x[b] || x[i].is_nan() && !x[b].is_nan()) {
                best = Some(i);
            }
        }
    }
    best
}

/// Checks one input and returns the output shape from the IR's rule.
fn check_forward(op: &Op, c: &Call) -> KernelResult<Vec<usize>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    c.input_f32(0)?;
    Ok(out)
}

pub(crate) fn max_pool(op: &Op, p: &Pool2d, c: Call) -> KernelResult<Vec<Tensor>> {
    let out = check_forward(op, &c)?;
    let (x, xs) = (c.input_f32(0)?, c.inputs[0].shape());
    let (hw, ohw) = (xs[2] * xs[3], out[2] * out[3]);
    let mut y = vec![f32::NEG_INFINITY; out.iter().product()];
    for_each_window(p, xs, &out, |plane, o, win| {
        let xp = &x[plane * hw..(plane + 1) * hw];
        if let Some(i) = argmax(xp, xs[3], &win) {
            y[plane * ohw + o] = xp[i];
        }
    });
    Ok(vec![tensor(&out, y)?])
}

/// Routes each upstream gradient to its window's (recomputed) argmax in the saved input.
pub(crate) fn max_pool_grad(of: &Op, p: &Pool2d, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    let xf = c.inputs[1].fact();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    c.expect_input_shape(2, c.inputs[0].shape())?;
    let (x, xs, out) = (c.input_f32(1)?, &xf.shape, c.inputs[0].shape());
    let (hw, ohw) = (xs[2] * xs[3], out[2] * out[3]);
    let mut dx = vec![0.0f32; x.len()];
    for_each_window(p, xs, out, |plane, o, win| {
        if let Some(i) = argmax(&x[plane * hw..(plane + 1) * hw], xs[3], &win) {
            dx[plane * hw + i] += dy[plane * ohw + o];
        }
    });
    Ok(vec![tensor(xs, dx)?])
}

pub(crate) fn avg_pool(op: &Op, p: &Pool2d, c: Call) -> KernelResult<Vec<Tensor>> {
    let out = check_forward(op, &c)?;
    let (x, xs) = (c.input_f32(0)?, c.inputs[0].shape());
    let (hw, ohw) = (xs[2] * xs[3], out[2] * out[3]);
    let mut y = vec![0.0f32; out.iter().product()];
    for_each_window(p, xs, &out, |plane, o, win| {
        let mut sum = 0.0f32;
        for iy in win.h0..win.h1 {
            for ix in win.w0..win.w1 {
                sum += x[plane * hw + iy * xs[3] + ix];
            }
        }
        y[plane * ohw + o] = if win.divisor == 0 { 0.0 } else { sum / win.divisor as f32 };
    });
    Ok(vec![tensor(&out, y)?])
}

/// Spreads each upstream gradient over its window, divided by the window's divisor.
pub(crate) fn avg_pool_grad(of: &Op, p: &Pool2d, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let (xs, out) = (&xf.shape, c.inputs[0].shape());
    let (hw, ohw) = (xs[2] * xs[3], out[2] * out[3]);
    let mut dx = vec![0.0f32; xs.iter().product()];
    for_each_window(p, xs, out, |plane, o, win| {
        if win.divisor == 0 {
            return;
        }
        let d = dy[plane * ohw + o] / win.divisor as f32;
        for iy in win.h0..win.h1 {
            for ix in win.w0..win.w1 {
                dx[plane * hw + iy * xs[3] + ix] += d;
            }
        }
    });
    Ok(vec![tensor(xs, dx)?])
}

pub(crate) fn global_avg_pool(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    let out = check_forward(op, &c)?;
    let (x, xs) = (c.input_f32(0)?, c.inputs[0].shape());
    let hw = xs[2] * xs[3];
    let y = x
        .chunks_exact(hw.max(1))
        .map(|plane| plane.iter().sum::<f32>() / hw as f32)
        .chain(std::iter::repeat_n(f32::NAN, if hw == 0 { xs[0] * xs[1] } else { 0 }))
        .collect();
    Ok(vec![tensor(&out, y)?])
}

/// `dx = dy / (H W)` over each plane.
pub(crate) fn global_avg_pool_grad(of: &Op, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let hw = xf.shape[2] * xf.shape[3];
    let dx = dy.iter().flat_map(|&d| std::iter::repeat_n(d / hw as f32, hw)).collect::<Vec<f32>>();
    Ok(vec![tensor(&xf.shape, dx)?])
}
