//! `GridSample` as IR ops: each output point reads the input at a position the grid gives,
//! interpolated from the neighbouring elements (1 for `nearest`, 2 per dim for `linear`, 4 per
//! dim for `cubic`). Positions, tap indices and weights are computed from the grid with
//! elementwise ops; each combination of taps is one `GatherElements` of the input (flattened
//! per channel) weighted and summed. The gradient to the input is the gathers'; to the grid,
//! the weights' (the taps' `Floor` has none), as in PyTorch's `grid_sample`.
//!
//! The arithmetic follows ONNX's reference: the position `(g + 1) / 2 * (L - 1)` with
//! `align_corners`, else `((g + 1) * L - 1) / 2`; for `nearest` rounded half to even; outside
//! the borders (`[0, L - 1]` with `align_corners`, else `[-0.5, L - 0.5]`) moved inside by the
//! padding mode (clamped for `border`, reflected for `reflection`); a tap outside the input
//! reads 0 (`zeros`), the edge (`border`) or its reflection (`reflection`).

use ordo_ir::op::{CompareKind, LogicKind, UnaryOp};
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, one, reshape_op};
use super::parts::Parts;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// Keys' cubic convolution constant, as ONNX's and PyTorch's bicubic sampling.
const CUBIC_ALPHA: f64 = -0.75;

/// `v` reflected by the nearer border until it lies in `[lo, hi]` (ONNX's `_gs_reflect`).
fn reflect(
    ctx: &mut Ctx<'_>,
    e: &mut Parts<'_, '_>,
    v: OutletId,
    lo: f64,
    hi: f64,
) -> OnnxResult<OutletId> {
    let range = hi - lo;
    if range <= 0.0 {
        return e.affine(ctx, v, 0.0, lo);
    }
    // Below: dx = lo - v, k = floor(dx / range), r = dx - k * range; lo + r for an even k,
    // else hi - r. Above: dx = v - hi, the same with the borders swapped.
    let mut side = |ctx: &mut Ctx<'_>, sign: f64, near: f64, far: f64| -> OnnxResult<OutletId> {
        let dx = e.affine(ctx, v, -sign, sign * near)?;
        let turns = e.op(ctx, "turns", Op::Scale { factor: 1.0 / range }, &[dx])?;
        let turns = e.unary(ctx, turns, UnaryOp::Floor)?;
        let whole = e.op(ctx, "whole", Op::Scale { factor: -range }, &[turns])?;
        let rest = e.op(ctx, "rest", Op::Add, &[dx, whole])?;
        let two = e.constant(ctx, 2.0)?;
        let parity = e.op(ctx, "parity", Op::Mod { fmod: true }, &[turns, two])?;
        let even = e.compare(ctx, parity, CompareKind::Equal, 0.0)?;
        let from_near = e.affine(ctx, rest, sign, near)?;
        let from_far = e.affine(ctx, rest, -sign, far)?;
        e.select(ctx, even, from_near, from_far)
    };
    let below = side(ctx, 1.0, lo, hi)?;
    let above = side(ctx, -1.0, hi, lo)?;
    let is_below = e.compare(ctx, v, CompareKind::Less, lo)?;
    let is_above = e.compare(ctx, v, CompareKind::Greater, hi)?;
    let inner = e.select(ctx, is_above, above, v)?;
    e.select(ctx, is_below, below, inner)
}

/// `GridSample(x, grid)`: `x` `[N, C, D1.., Dr]`, `grid` `[N, O1.., Or, r]` (its last dim the
/// coordinates, the last spatial dim's first); the output `[N, C, O1.., Or]`.
pub(crate) fn grid_sample(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let xf = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let gf = ctx.fact_of(node, &ctx.input(node, 1)?)?;
    let r = xf.rank().saturating_sub(2);
    if r == 0 || gf.rank() != r + 2 || gf.shape[r + 1] != r || gf.shape[0] != xf.shape[0] {
        return Err(node.shape_error(format!(
            "input {xf} and grid {gf}: expected [N, C, D1.., Dr] and [N, O1.., Or, r]"
        )));
    }
    if xf.dtype != DType::F32 || gf.dtype != DType::F32 {
        return Err(node.unsupported(format!("input {xf} and grid {gf}: sampled in f32")));
    }
    let default_mode = if node.opset >= 20 { "linear" } else { "bilinear" };
    let mode = match node.string("mode", default_mode)?.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" if r == 2 => Mode::Cubic,
        other => return Err(node.malformed(format!("mode `{other}` for {r} spatial dims"))),
    };
    let padding = match node.string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => return Err(node.malformed(format!("padding_mode `{other}`"))),
    };
    let align = node.int("align_corners", 0)? != 0;
    let (n, c) = (xf.shape[0], xf.shape[1]);
    let sizes = &xf.shape[2..];
    let outs = &gf.shape[1..=r];
    let (points, cells) = (sizes.iter().product::<usize>(), outs.iter().product::<usize>());
    let mut e = Parts::of(node);
    let x = ctx.wire(node, 0)?;
    let x = e.op(ctx, "flat", reshape_op(&[n, c, points]), &[x])?;
    let grid = ctx.wire(node, 1)?;
    // Per spatial dim: the grid's coordinate (its last dim lists x, y, ... : the last spatial
    // dim first) as a position in elements.
    let mut positions = Vec::with_capacity(r);
    for (d, &size) in sizes.iter().enumerate() {
        let component = (r - 1 - d) as i64;
        let cut = Op::Slice { axis: r as i64 + 1, start: component, end: component + 1, step: 1 };
        let g = e.op(ctx, "coordinate", cut, &[grid])?;
        let g = e.op(ctx, "coordinate", reshape_op(&[n, cells]), &[g])?;
        let l = size as f64;
        let (a, b) =
            if align { ((l - 1.0) / 2.0, (l - 1.0) / 2.0) } else { (l / 2.0, (l - 1.0) / 2.0) };
        positions.push(e.affine(ctx, g, a, b)?);
    }
    let sampling = Sampling { mode, padding, align };
    let sum = sample(ctx, &mut e, x, sizes, &positions, sampling)?;
    let shape: Vec<usize> = [n, c].into_iter().chain(outs.iter().copied()).collect();
    one(ctx.emit_value(&node.name, reshape_op(&shape), &[sum])?)
}

/// How [`sample`] interpolates, and what it reads outside the input.
#[derive(Clone, Copy)]
pub(super) struct Sampling {
    mode: Mode,
    padding: Padding,
    align: bool,
}

impl Sampling {
    /// Linear interpolation, zeros outside, the borders at the outer elements' centres (as
    /// `DeformConv` samples).
    pub(super) const LINEAR_ZEROS_ALIGNED: Sampling =
        Sampling { mode: Mode::Linear, padding: Padding::Zeros, align: true };
}

/// `x` (`[n, c, points]`: spatial dims of `sizes` flattened) sampled at `positions` (one per
/// spatial dim, each `[n, cells]`, in elements: `0` the first element's centre): `[n, c,
/// cells]`.
pub(super) fn sample(
    ctx: &mut Ctx<'_>,
    e: &mut Parts<'_, '_>,
    x: OutletId,
    sizes: &[usize],
    positions: &[OutletId],
    Sampling { mode, padding, align }: Sampling,
) -> OnnxResult<OutletId> {
    let xf = ctx.graph.fact(x).cloned().expect("emitted");
    let (n, c, points) = (xf.shape[0], xf.shape[1], xf.shape[2]);
    let cells = ctx.graph.fact(positions[0]).expect("emitted").shape[1];
    // Per spatial dim: its taps as (index times the dim's stride, as i64; weight, f32), each
    // [N, cells].
    let mut taps_per_dim = Vec::with_capacity(sizes.len());
    let mut stride = points;
    for (&size, &pos) in sizes.iter().zip(positions) {
        stride /= size;
        let l = size as f64;
        let mut pos = pos;
        if mode == Mode::Nearest {
            pos = e.unary(ctx, pos, UnaryOp::Round)?;
        }
        let (lo, hi) = if align { (0.0, l - 1.0) } else { (-0.5, l - 0.5) };
        pos = match padding {
            Padding::Zeros => pos,
            Padding::Border => {
                let clipped = e.op(ctx, "clamped", Op::Clip { min: 0.0, max: l - 1.0 }, &[pos])?;
                let below = e.compare(ctx, pos, CompareKind::Less, lo)?;
                let above = e.compare(ctx, pos, CompareKind::Greater, hi)?;
                let outside = e.op(ctx, "outside", Op::Logic(LogicKind::Or), &[below, above])?;
                e.select(ctx, outside, clipped, pos)?
            }
            Padding::Reflection => reflect(ctx, e, pos, lo, hi)?,
        };
        // The taps: (offset from the base, weight); the base is the position itself for
        // nearest, else its floor, and the weights follow the fraction.
        let (base, weights) = match mode {
            Mode::Nearest => (pos, vec![(0, None)]),
            Mode::Linear | Mode::Cubic => {
                let base = e.unary(ctx, pos, UnaryOp::Floor)?;
                let negated = e.op(ctx, "neg_base", Op::Scale { factor: -1.0 }, &[base])?;
                let f = e.op(ctx, "fraction", Op::Add, &[pos, negated])?;
                let weights = if mode == Mode::Linear {
                    vec![(0, Some(e.affine(ctx, f, -1.0, 1.0)?)), (1, Some(f))]
                } else {
                    cubic_weights(ctx, e, f)?
                };
                (base, weights)
            }
        };
        let mut taps = Vec::with_capacity(weights.len());
        for (offset, weight) in weights {
            let t = if offset == 0 { base } else { e.affine(ctx, base, 1.0, offset as f64)? };
            let (index, mask) = tap_index(ctx, e, t, size, lo, hi, padding)?;
            let weight = match (weight, mask) {
                (Some(w), Some(m)) => Some(e.op(ctx, "masked", Op::Mul, &[w, m])?),
                (w, m) => w.or(m),
            };
            let index = e.op(ctx, "index", Op::cast(DType::I64), &[index])?;
            let index = if stride == 1 {
                index
            } else {
                e.op(ctx, "strided", Op::Scale { factor: stride as f64 }, &[index])?
            };
            taps.push((index, weight));
        }
        taps_per_dim.push(taps);
    }
    // Every combination of one tap per dim: gather, weigh, sum.
    let combinations: usize = taps_per_dim.iter().map(Vec::len).product();
    let mut sum = None;
    for k in 0..combinations {
        let (mut index, mut weight): (Option<OutletId>, Option<OutletId>) = (None, None);
        let mut rest = k;
        for taps in taps_per_dim.iter().rev() {
            let (i, w) = taps[rest % taps.len()];
            rest /= taps.len();
            index = Some(match index {
                None => i,
                Some(acc) => e.op(ctx, "flat_index", Op::Add, &[acc, i])?,
            });
            weight = match (weight, w) {
                (Some(acc), Some(w)) => Some(e.op(ctx, "weight", Op::Mul, &[acc, w])?),
                (acc, w) => acc.or(w),
            };
        }
        let index =
            e.op(ctx, "index", reshape_op(&[n, 1, cells]), &[index.expect("a dim at least")])?;
        let index = e.op(ctx, "index", Op::Expand { shape: vec![n, c, cells] }, &[index])?;
        let mut value = e.op(ctx, "tap", Op::GatherElements { axis: 2 }, &[x, index])?;
        if let Some(w) = weight {
            let w = e.op(ctx, "weight", reshape_op(&[n, 1, cells]), &[w])?;
            value = e.op(ctx, "weighted", Op::Mul, &[value, w])?;
        }
        sum = Some(match sum {
            None => value,
            Some(s) => e.op(ctx, "sum", Op::Add, &[s, value])?,
        });
    }
    Ok(sum.expect("one tap at least"))
}

/// The index a tap at `t` reads (f32, inside `[0, size - 1]`) and, for `zeros` padding, the
/// mask that zeroes a tap outside the input.
fn tap_index(
    ctx: &mut Ctx<'_>,
    e: &mut Parts<'_, '_>,
    t: OutletId,
    size: usize,
    lo: f64,
    hi: f64,
    padding: Padding,
) -> OnnxResult<(OutletId, Option<OutletId>)> {
    let last = size as f64 - 1.0;
    let clamp = Op::Clip { min: 0.0, max: last };
    Ok(match padding {
        Padding::Zeros => {
            let inside_low = e.compare(ctx, t, CompareKind::GreaterOrEqual, 0.0)?;
            let inside_high = e.compare(ctx, t, CompareKind::LessOrEqual, last)?;
            let inside =
                e.op(ctx, "inside", Op::Logic(LogicKind::And), &[inside_low, inside_high])?;
            let mask = e.op(ctx, "mask", Op::cast(DType::F32), &[inside])?;
            (e.op(ctx, "clamped", clamp, &[t])?, Some(mask))
        }
        Padding::Border => (e.op(ctx, "clamped", clamp, &[t])?, None),
        Padding::Reflection => {
            // Reflected into [lo, hi], then truncated towards zero as the reference's int().
            let reflected = reflect(ctx, e, t, lo, hi)?;
            let truncated = e.op(ctx, "truncated", Op::cast(DType::I64), &[reflected])?;
            let back = e.op(ctx, "truncated", Op::cast(DType::F32), &[truncated])?;
            (e.op(ctx, "clamped", clamp, &[back])?, None)
        }
    })
}

/// The four cubic taps (offsets -1 to 2) of fraction `f` and their weights, Keys' kernel:
/// `((A u - 5A) u + 8A) u - 4A` at `u = f + 1` and `2 - f`, `((A + 2) u - (A + 3)) u^2 + 1`
/// at `u = f` and `1 - f`.
fn cubic_weights(
    ctx: &mut Ctx<'_>,
    e: &mut Parts<'_, '_>,
    f: OutletId,
) -> OnnxResult<Vec<(i64, Option<OutletId>)>> {
    let a = CUBIC_ALPHA;
    let outer = [a, -5.0 * a, 8.0 * a, -4.0 * a];
    let inner = [a + 2.0, -(a + 3.0), 0.0, 1.0];
    let horner = |ctx: &mut Ctx<'_>, e: &mut Parts<'_, '_>, u: OutletId, c: [f64; 4]| {
        let mut acc = e.affine(ctx, u, c[0], c[1])?;
        for &k in &c[2..] {
            let product = e.op(ctx, "horner", Op::Mul, &[acc, u])?;
            acc = e.affine(ctx, product, 1.0, k)?;
        }
        OnnxResult::Ok(acc)
    };
    let u0 = e.affine(ctx, f, 1.0, 1.0)?;
    let u2 = e.affine(ctx, f, -1.0, 1.0)?;
    let u3 = e.affine(ctx, f, -1.0, 2.0)?;
    Ok(vec![
        (-1, Some(horner(ctx, e, u0, outer)?)),
        (0, Some(horner(ctx, e, f, inner)?)),
        (1, Some(horner(ctx, e, u2, inner)?)),
        (2, Some(horner(ctx, e, u3, outer)?)),
    ])
}
