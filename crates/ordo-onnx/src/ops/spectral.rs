//! `DFT` as IR ops: the discrete Fourier transform along one axis is a product with a
//! constant matrix of cosines and sines, so the signal is brought to rows (the transformed
//! axis, then real and imaginary parts), multiplied by that matrix, and brought back. Its
//! gradient is the `MatMul`'s.

use std::f64::consts::PI;

use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, check_constant, one, reshape_op, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// `DFT(signal, dft_length, axis)`: `signal` `[.., L, .., c]` with `c` 1 (real) or 2 (real,
/// imaginary); `n = dft_length` points (the signal cut or padded with zeros), `m` bins out (`n`,
/// or `n / 2 + 1` one-sided); `inverse` conjugates the exponent and divides by `n`. The
/// inverse of a one-sided spectrum (`inverse` and `onesided`, NumPy's `irfft`) is the real
/// signal of `n` points (default `2 (L - 1)`) whose spectrum has those bins (the first `n / 2
/// + 1` of them) and their conjugates above.
pub(crate) fn dft(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let out = super::generic::inferred(ctx, node)?.remove(0);
    let (onesided, inverse) = (node.int("onesided", 0)? != 0, node.int("inverse", 0)? != 0);
    let real_inverse = onesided && inverse;
    if fact.dtype != DType::F32 {
        return Err(node.unsupported(format!("signal {fact}: the transform runs on f32")));
    }
    let r = fact.rank();
    let c = fact.shape[r - 1];
    if !matches!(c, 1 | 2) {
        return Err(node.shape_error(format!("signal {fact}: its last dim must be 1 or 2")));
    }
    let axis = match node.input(2) {
        Some(_) => {
            let axis = ctx.const_ints(node, 2, "axis")?;
            axis.first().copied().unwrap_or(-2)
        }
        None => node.int("axis", if node.opset >= 20 { -2 } else { 1 })?,
    };
    let axis = resolve_axis(node, axis, r)?;
    let length = fact.shape[axis];
    let n = match node.input(1) {
        Some(_) => {
            let given = ctx.const_ints(node, 1, "dft_length")?;
            given.first().copied().unwrap_or(0).max(0) as usize
        }
        None if real_inverse => 2 * length.saturating_sub(1),
        None => length,
    };
    let m = out.shape[axis];
    if n == 0 || m == 0 {
        return Err(node.malformed(format!("dft_length {n}: expected at least 1 point")));
    }
    let spec = Transform { axis, n, m, inverse, real_inverse };
    check_constant(node, "transform matrix", &spec.matrix_dims(c, length))?;
    let x = ctx.wire(node, 0)?;
    let y = transform(ctx, node, x, &fact.shape, spec)?;
    one(ctx.wire_value(y))
}

/// `STFT(signal, frame_step, window, frame_length)`: `signal` `[B, L, c]` cut into frames of
/// `frame_length` points every `frame_step` (one `Gather` of constant positions), each weighed
/// by the window (if given, of `frame_length` values), then transformed as [`dft`] does along
/// the frame (one-sided by default): `[B, frames, bins, 2]`.
pub(crate) fn stft(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let scalar = |ctx: &Ctx<'_>, i: usize, what: &str| -> OnnxResult<i64> {
        let v = ctx.const_ints(node, i, what)?;
        match v[..] {
            [v] => Ok(v),
            _ => Err(node.malformed(format!("{what} (input {i}) must be one integer"))),
        }
    };
    let step = scalar(ctx, 1, "frame_step")?;
    let window = match node.input(2) {
        Some(_) => Some(ctx.fact_of(node, &ctx.input(node, 2)?)?),
        None => None,
    };
    let frame = match node.input(3) {
        Some(_) => scalar(ctx, 3, "frame_length")?,
        None => match &window {
            Some(w) => w.shape.first().copied().unwrap_or(0) as i64,
            None => fact.shape.get(1).copied().unwrap_or(0) as i64,
        },
    };
    if fact.dtype != DType::F32 {
        return Err(node.unsupported(format!("signal {fact}: the transform runs on f32")));
    }
    let [batch, length, c] = fact.shape[..] else {
        return Err(node.shape_error(format!("signal {fact}: expected [B, L, 1 or 2]")));
    };
    if !matches!(c, 1 | 2) || step < 1 || frame < 1 || frame as usize > length {
        return Err(node.malformed(format!(
            "frame_step {step} and frame_length {frame} over a signal {fact}: expected frames \
             of 1 to {length} points, a step of at least 1 and a last dim of 1 or 2"
        )));
    }
    if let Some(w) = &window
        && w.shape != [frame as usize]
    {
        return Err(node.shape_error(format!("window {w}: expected [{frame}] (the frame length)")));
    }
    let (step, frame) = (step as usize, frame as usize);
    let frames = (length - frame) / step + 1;
    let onesided = node.int("onesided", 1)? != 0;
    let m = if onesided { frame / 2 + 1 } else { frame };
    let spec = Transform { axis: 2, n: frame, m, inverse: false, real_inverse: false };
    check_constant(node, "frame positions", &[frames, frame])?;
    check_constant(node, "transform matrix", &spec.matrix_dims(c, frame))?;
    let positions = (0..frames).flat_map(|f| (0..frame).map(move |j| (f * step + j) as i64));
    let positions = ConstTensor {
        elem: code::INT64,
        shape: vec![frames, frame],
        data: ConstData::Int(positions.collect()),
    };
    let positions = ctx.buffer(node, &format!("{}.frames", node.name), &positions)?;
    let x = ctx.wire(node, 0)?;
    let mut framed = ctx.emit_part(node, "framed", Op::Gather { axis: 1 }, &[x, positions])?;
    if window.is_some() {
        let w = ctx.wire(node, 2)?;
        let w = ctx.emit_part(node, "window", reshape_op(&[1, 1, frame, 1]), &[w])?;
        framed = ctx.emit_part(node, "windowed", Op::Mul, &[framed, w])?;
    }
    let shape = [batch, frames, frame, c];
    let y = transform(ctx, node, framed, &shape, spec)?;
    one(ctx.wire_value(y))
}

/// What [`transform`] computes: along `axis`, `n` points to `m` bins (or, for a real inverse,
/// bins to `n` real points).
#[derive(Clone, Copy)]
struct Transform {
    axis: usize,
    n: usize,
    m: usize,
    inverse: bool,
    real_inverse: bool,
}

impl Transform {
    /// The dims of the constant matrix of a signal of `c` parts and `length` points along the
    /// axis: `[c, rows per part, columns]` (their product its size).
    fn matrix_dims(&self, c: usize, length: usize) -> [usize; 3] {
        match self.real_inverse {
            // Bins in (as many as the signal has), n real points out.
            true => [c, length, self.n],
            // n points in (the signal cut or padded), real and imaginary bins out.
            false => [c, self.n, 2 * self.m],
        }
    }
}

/// The transform of `x` (f32 of `shape`, its last dim 1 or 2), the last node named after
/// `node`.
fn transform(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    mut x: OutletId,
    shape: &[usize],
    spec: Transform,
) -> OnnxResult<OutletId> {
    let Transform { axis, n, m, inverse, real_inverse } = spec;
    let (r, c, length) = (shape.len(), shape[shape.len() - 1], shape[axis]);
    // [.., L, .., c] -> [B.., L, c] (the axis next to last).
    let mut perm: Vec<usize> = (0..r - 1).filter(|&d| d != axis).collect();
    perm.extend([axis, r - 1]);
    if axis != r - 2 {
        x = ctx.emit_part(node, "to_rows", Op::Transpose { perm: perm.clone() }, &[x])?;
    }
    // The signal cut or padded to n points (a spectrum's bins are the matrix's business).
    let [_, points, columns] = spec.matrix_dims(c, length);
    if !real_inverse && n < length {
        let cut = Op::Slice { axis: r as i64 - 2, start: 0, end: n as i64, step: 1 };
        x = ctx.emit_part(node, "cut", cut, &[x])?;
    } else if !real_inverse && n > length {
        let mut pads = vec![0; 2 * r];
        pads[r + r - 2] = (n - length) as i64;
        let pad = Op::Pad { pads, mode: ordo_ir::op::PadMode::Constant, value: 0.0 };
        x = ctx.emit_part(node, "padded", pad, &[x])?;
    }
    let batch: Vec<usize> = perm[..r - 2].iter().map(|&d| shape[d]).collect();
    let rows: usize = batch.iter().product();
    // [B.., p, c] -> [B.., c, p] -> [rows, c * p], times the matrix -> [rows, 2 * m] (or
    // [rows, n] for a real inverse).
    let swap: Vec<usize> = (0..r - 2).chain([r - 1, r - 2]).collect();
    x = ctx.emit_part(node, "parts_first", Op::Transpose { perm: swap }, &[x])?;
    x = ctx.emit_part(node, "rows", reshape_op(&[rows, c * points]), &[x])?;
    let matrix = match real_inverse {
        true => real_inverse_matrix(c, length, n),
        false => transform_matrix(c, n, m, inverse),
    };
    let matrix = ConstTensor {
        elem: code::FLOAT,
        shape: vec![c * points, columns],
        data: ConstData::Float(matrix),
    };
    let name = format!("{}.matrix", node.name);
    let matrix = ctx.buffer(node, &name, &crate::fold::cast(&matrix, DType::F32))?;
    x = ctx.emit_part(node, "transformed", Op::MatMul, &[x, matrix])?;
    let out_shape: Vec<usize> = if real_inverse {
        batch.into_iter().chain([n, 1]).collect()
    } else {
        // [rows, 2 * m] -> [rows, 2, m] -> [rows, m, 2].
        x = ctx.emit_part(node, "parts", reshape_op(&[rows, 2, m]), &[x])?;
        x = ctx.emit_part(node, "parts_last", Op::Transpose { perm: vec![0, 2, 1] }, &[x])?;
        batch.into_iter().chain([m, 2]).collect()
    };
    // -> [B.., m, 2] -> the axis back in place.
    if axis == r - 2 {
        return Ok(ctx.emit(&node.name, reshape_op(&out_shape), &[x], Vec::new())?[0]);
    }
    x = ctx.emit_part(node, "unrows", reshape_op(&out_shape), &[x])?;
    let mut back = vec![0; r];
    for (i, &d) in perm.iter().enumerate() {
        back[d] = i;
    }
    Ok(ctx.emit(&node.name, Op::Transpose { perm: back }, &[x], Vec::new())?[0])
}

/// The `[c * n, 2 * m]` matrix that maps a signal's real parts (rows `0..n`) and imaginary
/// parts (rows `n..2n`, when `c` is 2) to its spectrum's real parts (columns `0..m`) and
/// imaginary parts (`m..2m`): `X_k = sum_j x_j e^(-+ 2 pi i j k / n)` (`/ n` for the inverse).
fn transform_matrix(c: usize, n: usize, m: usize, inverse: bool) -> Vec<f64> {
    let (sign, factor) = if inverse { (-1.0, 1.0 / n as f64) } else { (1.0, 1.0) };
    let mut w = vec![0.0; c * n * 2 * m];
    for j in 0..n {
        for k in 0..m {
            // (j * k) mod n keeps the angle small, so the sines of whole turns are exact.
            let angle = 2.0 * PI * ((j * k) % n) as f64 / n as f64;
            let (sin, cos) = angle.sin_cos();
            w[j * 2 * m + k] = cos * factor;
            w[j * 2 * m + m + k] = -sign * sin * factor;
            if c == 2 {
                w[(n + j) * 2 * m + k] = sign * sin * factor;
                w[(n + j) * 2 * m + m + k] = cos * factor;
            }
        }
    }
    w
}

/// The `[c * bins, n]` matrix of NumPy's `irfft`: the real signal `x_j = (Re X_0 + sum_k w_k
/// (Re X_k cos - Im X_k sin)(2 pi j k / n)) / n` over the bins `k < min(bins, n / 2 + 1)`,
/// each counted twice (for its conjugate) but the one at `n / 2`; rows as
/// [`transform_matrix`]'s.
fn real_inverse_matrix(c: usize, bins: usize, n: usize) -> Vec<f64> {
    let mut w = vec![0.0; c * bins * n];
    for k in 0..bins.min(n / 2 + 1) {
        let twice = if k == 0 || 2 * k == n { 1.0 } else { 2.0 };
        for j in 0..n {
            let angle = 2.0 * PI * ((j * k) % n) as f64 / n as f64;
            let (sin, cos) = angle.sin_cos();
            w[k * n + j] = twice * cos / n as f64;
            if c == 2 {
                w[(bins + k) * n + j] = -twice * sin / n as f64;
            }
        }
    }
    w
}
