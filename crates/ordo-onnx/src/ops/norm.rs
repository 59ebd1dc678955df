//! Normalisation: `BatchNormalization` (inference and training mode), `LayerNormalization`,
//! `RMSNormalization`, `InstanceNormalization`, `GroupNormalization`,
//! `MeanVarianceNormalization` and `LRN`.

use ordo_ir::op::{BatchNorm, LayerNorm, PadMode, Reduce, ReduceKind, UnaryOp};
use ordo_ir::{Op, OutletId};

use super::common::{Outputs, one, reshape_op, resolve_axis};
use super::composite::scalar;
use super::conv::param_name;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};
use crate::value::Value;

/// `BatchNormalization` with scale, bias, running mean and running variance as parameters.
/// In training mode the updated running statistics (outputs 1 and 2) are part of the IR op,
/// not separate tensors; where the graph reads them, the node is [`batch_norm_training`].
pub(crate) fn batch_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let statistics_read = (1..node.num_outputs()).any(|k| super::common::output_read(ctx, node, k));
    if node.int("training_mode", 0)? != 0 && statistics_read {
        return batch_norm_training(ctx, node);
    }
    let params = ["scale", "bias", "running mean", "running variance"]
        .iter()
        .enumerate()
        .map(|(k, what)| param_name(ctx, node, k + 1, what))
        .collect::<OnnxResult<Vec<_>>>()?;
    // ONNX's momentum weighs the old running value; PyTorch's (the IR's) weighs the new one.
    let momentum = 1.0 - node.float("momentum", 0.9)?;
    let op = BatchNorm { eps: node.float("epsilon", 1e-5)?, momentum };
    let x = ctx.wire(node, 0)?;
    let out = ctx.emit_with_params(node, Op::BatchNorm(op), &[x], &params)?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    let mut outputs = vec![Some(Value::wire(out, fact))];
    outputs.resize(node.num_outputs().max(1), None);
    Ok(outputs)
}

/// `BatchNormalization` in training mode with its updated running statistics read, as IR ops:
/// `x` normalised by the batch's mean and (biased) variance over every dim but the channels,
/// then scaled and shifted per channel; the running statistics `running * momentum + batch *
/// (1 - momentum)` (ONNX's definition, its momentum weighing the old value).
fn batch_norm_training(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    let c = match fact.shape[..] {
        [_, c, ..] => c,
        _ => return Err(node.shape_error(format!("input {fact}: expected [N, C, ...]"))),
    };
    let momentum = node.float("momentum", 0.9)?;
    if !(0.0..=1.0).contains(&momentum) {
        return Err(node.malformed(format!("momentum {momentum} is not in [0, 1]")));
    }
    let axes = std::iter::once(0).chain(2..fact.rank()).collect();
    let stats = standardize(ctx, node, x, axes, node.float("epsilon", 1e-5)?, true)?;
    let per_channel = channel_shape(c, fact.rank() - 1);
    let scale = reshaped(ctx, node, 1, "scale", &per_channel)?;
    let bias = reshaped(ctx, node, 2, "bias", &per_channel)?;
    let y = affine(ctx, node, stats.normed, scale, Some(bias))?;
    let mut outputs = vec![Some(ctx.wire_value(y))];
    let batch = [stats.mean.expect("centered"), stats.variance];
    for (k, (what, batch)) in ["running_mean", "running_variance"].iter().zip(batch).enumerate() {
        let old = reshaped(ctx, node, k + 3, what, &[c])?;
        let batch = emit_reshape(ctx, node, &format!("batch_{what}"), batch, &[c])?;
        let kept =
            ctx.emit_part(node, &format!("{what}_kept"), Op::Scale { factor: momentum }, &[old])?;
        let new = Op::Scale { factor: 1.0 - momentum };
        let new = ctx.emit_part(node, &format!("{what}_new"), new, &[batch])?;
        let updated = ctx.emit_part(node, what, Op::Add, &[kept, new])?;
        outputs.push(Some(ctx.wire_value(updated)));
    }
    outputs.truncate(node.num_outputs().max(1));
    Ok(outputs)
}

/// `MeanVarianceNormalization`: `(x - mean) / std` over `axes` (default `[0, 2, 3]`), as IR
/// ops. ONNX divides by `std + 1e-9`; here `1e-18` is added to the variance under the root,
/// the same within float rounding and as safe for a constant input (0, not NaN).
pub(crate) fn mean_variance_normalization(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let rank = ctx.graph.fact(x).expect("emitted").rank();
    let axes = node.ints("axes").unwrap_or(&[0, 2, 3]);
    let mut resolved =
        axes.iter().map(|&a| resolve_axis(node, a, rank)).collect::<OnnxResult<Vec<_>>>()?;
    resolved.sort_unstable();
    resolved.dedup();
    let stats = standardize(ctx, node, x, resolved, 1e-18, true)?;
    one(ctx.emit_value(&node.name, Op::Scale { factor: 1.0 }, &[stats.normed])?)
}

/// `LRN` (local response normalisation across channels): `x / (bias + alpha / size *
/// square_sum) ^ beta`, where `square_sum` sums `x^2` over the `size` channels around each
/// (`floor((size - 1) / 2)` before, `ceil((size - 1) / 2)` after, clipped at the edges), as IR
/// ops: the squares padded with zeros along the channels, then `size` shifted slices added.
pub(crate) fn lrn(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    let c = match fact.shape[..] {
        [_, c, _, ..] => c,
        _ => return Err(node.shape_error(format!("input {fact}: expected [N, C, D1, ...]"))),
    };
    if !node.has_attr("size") {
        return Err(node.malformed("no `size`: LRN needs the number of channels it sums"));
    }
    let size = match node.int("size", 0)? {
        size if size >= 1 => size as usize,
        size => return Err(node.malformed(format!("size {size}: expected at least 1 channel"))),
    };
    let (before, after) = ((size - 1) / 2, size / 2);
    let square = ctx.emit_part(node, "square", Op::Mul, &[x, x])?;
    let mut pads = vec![0; 2 * fact.rank()];
    pads[1] = before as i64;
    pads[fact.rank() + 1] = after as i64;
    let pad = Op::Pad { pads, mode: PadMode::Constant, value: 0.0 };
    let padded = ctx.emit_part(node, "padded", pad, &[square])?;
    let mut sum = None;
    for k in 0..size {
        let slice = Op::Slice { axis: 1, start: k as i64, end: (k + c) as i64, step: 1 };
        let shifted = ctx.emit_part(node, &format!("window_{k}"), slice, &[padded])?;
        sum = Some(match sum {
            None => shifted,
            Some(s) => ctx.emit_part(node, &format!("sum_{k}"), Op::Add, &[s, shifted])?,
        });
    }
    let sum = sum.expect("size >= 1");
    let alpha = node.float("alpha", 1e-4)? / size as f64;
    let scaled = ctx.emit_part(node, "scaled", Op::Scale { factor: alpha }, &[sum])?;
    let bias = scalar(ctx, node, "bias", node.float("bias", 1.0)?)?;
    let base = ctx.emit_part(node, "base", Op::Add, &[scaled, bias])?;
    let beta = scalar(ctx, node, "beta", node.float("beta", 0.75)?)?;
    let denominator = ctx.emit_part(node, "denominator", Op::Pow, &[base, beta])?;
    one(ctx.emit_value(&node.name, Op::Div, &[x, denominator])?)
}

/// `LayerNormalization` over the dims from `axis` on: the IR's `LayerNorm` when the scale
/// and bias are parameters and only the output is read; otherwise (a run-time scale or bias,
/// no bias, or the `Mean` and `InvStdDev` outputs read) the same arithmetic as IR ops.
pub(crate) fn layer_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let axis = resolve_axis(node, node.int("axis", -1)?, fact.rank())?;
    let eps = node.float("epsilon", 1e-5)?;
    let params = (
        param_name(ctx, node, 1, "scale"),
        node.input(2).map(|_| param_name(ctx, node, 2, "bias")),
    );
    let stats_read = (1..node.num_outputs()).any(|i| node.output_named(i));
    let (scale, bias) = match params {
        (Ok(scale), Some(Ok(bias))) if !stats_read => (scale, bias),
        _ => return normalized(ctx, node, axis, eps, true),
    };
    let op = LayerNorm { normalized_shape: fact.shape[axis..].to_vec(), eps, affine: true };
    let x = ctx.wire(node, 0)?;
    let out = ctx.emit_with_params(node, Op::LayerNorm(op), &[x], &[scale, bias])?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    let mut outputs = vec![Some(Value::wire(out, fact))];
    outputs.resize(node.num_outputs().max(1), None);
    Ok(outputs)
}

/// `RMSNormalization` (opset 23): `x / sqrt(mean(x^2) + epsilon) * scale` over the dims from
/// `axis` on, as IR ops.
pub(crate) fn rms_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let axis = resolve_axis(node, node.int("axis", -1)?, fact.rank())?;
    normalized(ctx, node, axis, node.float("epsilon", 1e-5)?, false)
}

/// Normalisation over the dims from `axis` on as IR ops: `d = x - mean(x)` (`centered`, layer
/// norm) or `d = x` (RMS norm), `inv = 1 / sqrt(mean(d^2) + eps)`, `y = d * inv * scale
/// (+ bias)`. Outputs: `y`, and for layer norm the mean and `inv` (their reduced dims kept as
/// 1, as ONNX's `Mean` and `InvStdDev`).
fn normalized(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    axis: usize,
    eps: f64,
    centered: bool,
) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let rank = ctx.graph.fact(x).expect("emitted").rank();
    let stats = standardize(ctx, node, x, (axis..rank).collect(), eps, centered)?;
    let scale = ctx.wire(node, 1)?;
    let bias = match centered && node.input(2).is_some() {
        true => Some(ctx.wire(node, 2)?),
        false => None,
    };
    let y = affine(ctx, node, stats.normed, scale, bias)?;
    let mut outputs = vec![Some(ctx.wire_value(y))];
    if let Some(mu) = stats.mean {
        outputs.push(Some(ctx.wire_value(mu)));
        outputs.push(Some(ctx.wire_value(stats.inv_std)));
    }
    outputs.resize(node.num_outputs().max(1), None);
    outputs.truncate(node.num_outputs().max(1));
    Ok(outputs)
}

/// `InstanceNormalization`: each (sample, channel) normalised over its spatial dims, then
/// scaled and shifted per channel, as IR ops.
pub(crate) fn instance_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    if fact.rank() < 3 {
        return Err(node.shape_error(format!("input {fact}: expected [N, C, spatial...]")));
    }
    let eps = node.float("epsilon", 1e-5)?;
    let stats = standardize(ctx, node, x, (2..fact.rank()).collect(), eps, true)?;
    let per_channel = channel_shape(fact.shape[1], fact.rank() - 1);
    let scale = reshaped(ctx, node, 1, "scale", &per_channel)?;
    let bias = reshaped(ctx, node, 2, "bias", &per_channel)?;
    let y = affine(ctx, node, stats.normed, scale, Some(bias))?;
    one(ctx.wire_value(y))
}

/// `GroupNormalization`: the channels split into `num_groups` groups, each (sample, group)
/// normalised over its channels and spatial dims, then scaled and shifted per channel (opset
/// 21; per group at opset 18), as IR ops.
pub(crate) fn group_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = float_wire(ctx, node)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    let groups = usize::try_from(node.int("num_groups", 0)?).unwrap_or(0);
    let (n, c) = match fact.shape[..] {
        [n, c, ..] if groups > 0 && c % groups == 0 => (n, c),
        _ => {
            return Err(node.shape_error(format!(
                "input {fact} in {groups} groups: expected [N, C, ...] with C a multiple"
            )));
        }
    };
    let rest = fact.numel() as usize / (n * groups).max(1);
    let grouped = emit_reshape(ctx, node, "grouped", x, &[n, groups, rest])?;
    let eps = node.float("epsilon", 1e-5)?;
    let stats = standardize(ctx, node, grouped, vec![2], eps, true)?;
    // Opset 18 scales per group (in the grouped layout), opset 21 per channel.
    let per_group = node.opset < 21;
    let y = if per_group {
        let scale = reshaped(ctx, node, 1, "scale", &[groups, 1])?;
        let bias = reshaped(ctx, node, 2, "bias", &[groups, 1])?;
        let scaled = ctx.emit_part(node, "scaled", Op::Mul, &[stats.normed, scale])?;
        let shifted = ctx.emit_part(node, "shifted", Op::Add, &[scaled, bias])?;
        ctx.emit(&node.name, reshape_op(&fact.shape), &[shifted], Vec::new())?[0]
    } else {
        let back = emit_reshape(ctx, node, "ungrouped", stats.normed, &fact.shape)?;
        let per_channel = channel_shape(c, fact.rank() - 1);
        let scale = reshaped(ctx, node, 1, "scale", &per_channel)?;
        let bias = reshaped(ctx, node, 2, "bias", &per_channel)?;
        affine(ctx, node, back, scale, Some(bias))?
    };
    one(ctx.wire_value(y))
}

/// `[c, 1, ..., 1]` of `rank` dims: a per-channel tensor that broadcasts over `[N, C, ...]`.
fn channel_shape(c: usize, rank: usize) -> Vec<usize> {
    let mut shape = vec![1; rank];
    shape[0] = c;
    shape
}

/// The wire of input 0, which must be float.
fn float_wire(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<OutletId> {
    let x = ctx.wire(node, 0)?;
    if !ctx.graph.fact(x).expect("emitted").dtype.is_float() {
        return Err(node.unsupported("the IR normalises float tensors"));
    }
    Ok(x)
}

/// What [`standardize`] computes: `(x - mean) * inv_std` (or `x * inv_std`), the mean, the
/// variance and `inv_std`, with the reduced dims kept as 1.
struct Standardized {
    normed: OutletId,
    mean: Option<OutletId>,
    variance: OutletId,
    inv_std: OutletId,
}

/// `d = x - mean(x)` (`centered`) or `d = x`, `inv_std = 1 / sqrt(mean(d^2) + eps)` over
/// `axes`, and `d * inv_std`.
fn standardize(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: OutletId,
    axes: Vec<usize>,
    eps: f64,
    centered: bool,
) -> OnnxResult<Standardized> {
    let mean = || Op::Reduce(Reduce { kind: ReduceKind::Mean, axes: axes.clone(), keepdims: true });
    let (d, mu) = if centered {
        let mu = ctx.emit_part(node, "mean", mean(), &[x])?;
        let neg = ctx.emit_part(node, "neg_mean", Op::Scale { factor: -1.0 }, &[mu])?;
        (ctx.emit_part(node, "centered", Op::Add, &[x, neg])?, Some(mu))
    } else {
        (x, None)
    };
    let sq = ctx.emit_part(node, "square", Op::Mul, &[d, d])?;
    let var = ctx.emit_part(node, "variance", mean(), &[sq])?;
    let eps_value =
        ConstTensor { elem: code::FLOAT, shape: vec![], data: ConstData::Float(vec![eps]) };
    let eps_wire = ctx.buffer(node, &format!("{}.epsilon", node.name), &eps_value)?;
    let shifted = ctx.emit_part(node, "variance_eps", Op::Add, &[var, eps_wire])?;
    let inv_std = ctx.emit_part(node, "inv_std", Op::Unary { func: UnaryOp::Rsqrt }, &[shifted])?;
    let normed = ctx.emit_part(node, "normalized", Op::Mul, &[d, inv_std])?;
    Ok(Standardized { normed, mean: mu, variance: var, inv_std })
}

/// `normed * scale (+ bias)`, the last node named after `node`.
fn affine(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    normed: OutletId,
    scale: OutletId,
    bias: Option<OutletId>,
) -> OnnxResult<OutletId> {
    Ok(match bias {
        Some(bias) => {
            let scaled = ctx.emit_part(node, "scaled", Op::Mul, &[normed, scale])?;
            ctx.emit(&node.name, Op::Add, &[scaled, bias], Vec::new())?[0]
        }
        None => ctx.emit(&node.name, Op::Mul, &[normed, scale], Vec::new())?[0],
    })
}

/// Input `i` (`what`, e.g. the scale) reshaped to `shape`.
fn reshaped(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
    shape: &[usize],
) -> OnnxResult<OutletId> {
    let w = ctx.wire(node, i)?;
    let fact = ctx.graph.fact(w).expect("emitted");
    if fact.numel() != shape.iter().product::<usize>() as u64 {
        return Err(node.shape_error(format!("{what} {fact}: expected {} values", shape[0])));
    }
    emit_reshape(ctx, node, what, w, shape)
}

fn emit_reshape(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    part: &str,
    x: OutletId,
    shape: &[usize],
) -> OnnxResult<OutletId> {
    ctx.emit_part(node, part, reshape_op(shape), &[x])
}
