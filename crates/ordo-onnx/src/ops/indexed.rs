//! Operators that move elements to places their constant inputs fix, as one IR gather or
//! scatter with indices computed at import: `Compress` (a `Gather` of the kept positions),
//! `ReverseSequence` (a `GatherElements`), `MaxUnpool` (a `ScatterElements` into zeros) and
//! `Col2Im` (a `ScatterElements` that adds). Their gradients are those of the IR ops.

use ordo_ir::op::ScatterReduction;
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, check_constant, one, reshape_op, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// An `i64` buffer of `shape` holding `values`, named after a part of `node`.
pub(super) fn index_buffer(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    part: &str,
    shape: Vec<usize>,
    values: Vec<i64>,
) -> OnnxResult<OutletId> {
    let c = ConstTensor { elem: code::INT64, shape, data: ConstData::Int(values) };
    ctx.buffer(node, &format!("{}.{part}", node.name), &c)
}

/// A buffer of zeros of `dtype` and `shape` (a splat: never spelled out at import).
fn zeros(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    dtype: DType,
    shape: Vec<usize>,
) -> OnnxResult<OutletId> {
    let c = ConstTensor { elem: code::FLOAT, shape, data: ConstData::Splat(0.0) };
    ctx.buffer(node, &format!("{}.zeros", node.name), &crate::fold::cast(&c, dtype))
}

/// The row-major coordinates of element `flat` of `shape`.
pub(super) fn coordinates(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut at = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        at[k] = flat % d;
        flat /= d;
    }
    at
}

/// `Compress(input, condition)` of a constant condition: the positions along `axis` (of the
/// flattened input without one) whose condition is true, gathered. A run-time condition
/// falls back to the plannable import (sized at its largest).
pub(crate) fn compress(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let condition = ctx.const_input(node, 1, "condition")?;
    let kept: Vec<i64> = (condition.to_f64s().unwrap_or_default().iter().enumerate())
        .filter(|&(_, &c)| c != 0.0)
        .map(|(i, _)| i as i64)
        .collect();
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let (axis, length) = match node.has_attr("axis") {
        true => {
            let axis = resolve_axis(node, node.int("axis", 0)?, fact.rank())?;
            (axis, fact.shape[axis])
        }
        false => (0, fact.numel() as usize),
    };
    if condition.numel() as usize > length {
        return Err(node.shape_error(format!(
            "a condition of {} values for an axis of {length}",
            condition.numel()
        )));
    }
    if kept.is_empty() {
        return Err(node.unsupported("its condition keeps nothing: ordo's tensors are not empty"));
    }
    let mut x = ctx.wire(node, 0)?;
    if !node.has_attr("axis") {
        x = ctx.emit_part(node, "flat", reshape_op(&[length]), &[x])?;
    }
    let indices = index_buffer(ctx, node, "kept", vec![kept.len()], kept)?;
    one(ctx.emit_value(&node.name, Op::Gather { axis: axis as i64 }, &[x, indices])?)
}

/// `ReverseSequence(input, sequence_lens)` of constant lengths: along `time_axis`, the first
/// `sequence_lens[b]` elements of each batch entry `b` (along `batch_axis`) reversed, the rest
/// kept, as one `GatherElements` of indices computed here.
pub(crate) fn reverse_sequence(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let lengths = ctx.const_ints(node, 1, "sequence_lens")?;
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if fact.rank() < 2 {
        return Err(node.shape_error(format!("input {fact}: expected at least 2 dims")));
    }
    let batch_axis = resolve_axis(node, node.int("batch_axis", 1)?, fact.rank())?;
    let time_axis = resolve_axis(node, node.int("time_axis", 0)?, fact.rank())?;
    if batch_axis > 1 || time_axis > 1 || batch_axis == time_axis {
        return Err(node.malformed(format!(
            "batch_axis {batch_axis} and time_axis {time_axis}: expected 0 and 1, either way"
        )));
    }
    let (batch, time) = (fact.shape[batch_axis], fact.shape[time_axis]);
    if lengths.len() != batch {
        return Err(
            node.shape_error(format!("{} sequence lengths for a batch of {batch}", lengths.len()))
        );
    }
    if let Some(bad) = lengths.iter().find(|&&l| !(0..=time as i64).contains(&l)) {
        return Err(node.malformed(format!("sequence length {bad} outside 0..={time}")));
    }
    check_constant(node, "index table", &fact.shape)?;
    let indices = (0..fact.numel() as usize)
        .map(|flat| {
            let at = coordinates(flat, &fact.shape);
            let (b, t) = (at[batch_axis], at[time_axis] as i64);
            let length = lengths[b];
            if t < length { length - 1 - t } else { t }
        })
        .collect();
    let indices = index_buffer(ctx, node, "reversed", fact.shape.clone(), indices)?;
    let x = ctx.wire(node, 0)?;
    let op = Op::GatherElements { axis: time_axis as i64 };
    one(ctx.emit_value(&node.name, op, &[x, indices])?)
}

/// `MaxUnpool(x, indices[, output_shape])` of constant indices: zeros of the shape the pooling
/// came from (`(in - 1) * stride - pads + kernel` per spatial dim) with each element of `x`
/// written at its flat index (the last of duplicates wins, as ONNX's reference), then, where
/// `output_shape` is larger, padded with zeros at the end of each dim.
pub(crate) fn max_unpool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let indices = ctx.const_ints(node, 1, "indices")?;
    let out = super::generic::inferred(ctx, node)?.remove(0);
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let kernel = node.ints("kernel_shape").unwrap_or_default();
    let r = kernel.len();
    let strides = node.ints("strides").map_or_else(|| vec![1; r], <[i64]>::to_vec);
    let pads = node.ints("pads").map_or_else(|| vec![0; 2 * r], <[i64]>::to_vec);
    if r == 0 || fact.rank() != r + 2 || strides.len() != r || pads.len() != 2 * r {
        return Err(node.malformed(format!(
            "kernel_shape {kernel:?}, strides {strides:?}, pads {pads:?} for an input {fact}"
        )));
    }
    let mut pooled = fact.shape[..2].to_vec();
    for d in 0..r {
        // Saturating: strides, pads and kernel are attributes.
        let size = (fact.shape[d + 2] as i64 - 1)
            .saturating_mul(strides[d])
            .saturating_sub(pads[d])
            .saturating_sub(pads[d + r])
            .saturating_add(kernel[d]);
        pooled.push(usize::try_from(size).map_err(|_| {
            node.shape_error(format!("an unpooled size {size} along spatial dim {d}"))
        })?);
    }
    if out.rank() != pooled.len() || out.shape.iter().zip(&pooled).any(|(o, p)| o < p) {
        return Err(node.shape_error(format!(
            "output_shape {:?} is smaller than the unpooled {pooled:?}",
            out.shape
        )));
    }
    if indices.len() as u64 != fact.numel() {
        return Err(node.shape_error(format!(
            "{} indices for an input {fact} of {} elements",
            indices.len(),
            fact.numel()
        )));
    }
    check_constant(node, "output", &pooled)?;
    let total: usize = pooled.iter().product();
    if let Some(bad) = indices.iter().find(|&&i| !(0..total as i64).contains(&i)) {
        return Err(node.malformed(format!("index {bad} outside the unpooled {pooled:?}")));
    }
    let count = indices.len();
    let indices = index_buffer(ctx, node, "indices", vec![count], indices)?;
    let base = zeros(ctx, node, fact.dtype, vec![total])?;
    let x = ctx.wire(node, 0)?;
    let flat = ctx.emit_part(node, "flat", reshape_op(&[count]), &[x])?;
    let op = Op::ScatterElements { axis: 0, reduction: ScatterReduction::None };
    let scattered = ctx.emit_part(node, "scattered", op, &[base, indices, flat])?;
    if out.shape == pooled {
        return one(ctx.emit_value(&node.name, reshape_op(&pooled), &[scattered])?);
    }
    let unpooled = ctx.emit_part(node, "unpooled", reshape_op(&pooled), &[scattered])?;
    let mut pads = vec![0; 2 * pooled.len()];
    for (d, (o, p)) in out.shape.iter().zip(&pooled).enumerate() {
        pads[pooled.len() + d] = (o - p) as i64;
    }
    let pad = Op::Pad { pads, mode: ordo_ir::op::PadMode::Constant, value: 0.0 };
    one(ctx.emit_value(&node.name, pad, &[unpooled])?)
}

/// `Col2Im(x, image_shape, block_shape)` of constant shapes: `x` `[N, C * B, L]` holds, for
/// each of the `L` block positions, the `B` elements of a block (the inverse of an im2col);
/// each is added at its place in the image, those that fall in the padding dropped. One
/// `ScatterElements` that adds into zeros of one more place per channel (where the dropped
/// ones go), then a slice and a reshape.
pub(crate) fn col2im(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let image = ctx.const_ints(node, 1, "image_shape")?;
    let block = ctx.const_ints(node, 2, "block_shape")?;
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let r = image.len();
    let ints = |name: &str, n: usize, default: i64| {
        node.ints(name).map_or_else(|| vec![default; n], <[i64]>::to_vec)
    };
    let (dilations, pads, strides) =
        (ints("dilations", r, 1), ints("pads", 2 * r, 0), ints("strides", r, 1));
    let positive = |v: &[i64]| v.iter().all(|&d| d > 0);
    if r == 0
        || block.len() != r
        || dilations.len() != r
        || strides.len() != r
        || pads.len() != 2 * r
        || !positive(&image)
        || !positive(&block)
        || !positive(&dilations)
        || !positive(&strides)
        || pads.iter().any(|&p| p < 0)
    {
        return Err(node.malformed(format!(
            "image_shape {image:?}, block_shape {block:?}, dilations {dilations:?}, pads \
             {pads:?}, strides {strides:?}: expected positive sizes of one rank (pads twice)"
        )));
    }
    // Blocks along each dim, as a convolution's output size; products saturate (the sizes are
    // attributes), and a saturated one fails the checks below.
    let product = |v: &[i64]| v.iter().fold(1i64, |a, &b| a.saturating_mul(b));
    let counts: Vec<i64> = (0..r)
        .map(|d| {
            let span = dilations[d].saturating_mul(block[d] - 1).saturating_add(1);
            let padded = image[d].saturating_add(pads[d]).saturating_add(pads[d + r]);
            (padded - span) / strides[d] + 1
        })
        .collect();
    let cells = product(&block) as usize;
    let [n, channels_cells, l] = fact.shape[..] else {
        return Err(node.shape_error(format!("input {fact}: expected [N, C * block cells, L]")));
    };
    let positions = if counts.iter().any(|&c| c < 1) { 0 } else { product(&counts) };
    if positions != l as i64 || channels_cells % cells != 0 {
        return Err(node.shape_error(format!(
            "input {fact}: expected [N, C * {cells}, {}] for blocks {block:?} over an image \
             {image:?}",
            positions.max(0)
        )));
    }
    let c = channels_cells / cells;
    let pixels = product(&image) as usize;
    check_constant(node, "scatter target", &[n, c, pixels.saturating_add(1)])?;
    check_constant(node, "index table", &fact.shape)?;
    let block_shape: Vec<usize> = block.iter().map(|&b| b as usize).collect();
    let count_shape: Vec<usize> = counts.iter().map(|&b| b as usize).collect();
    // Where the element of block cell `b` at block position `p` lands (`pixels`: dropped).
    let place = |b: usize, p: usize| -> i64 {
        let (cell, at) = (coordinates(b, &block_shape), coordinates(p, &count_shape));
        let mut flat = 0;
        for d in 0..r {
            let y = at[d] as i64 * strides[d] - pads[d] + cell[d] as i64 * dilations[d];
            if !(0..image[d]).contains(&y) {
                return pixels as i64;
            }
            flat = flat * image[d] + y;
        }
        flat
    };
    let one_channel: Vec<i64> =
        (0..cells).flat_map(|b| (0..l).map(move |p| (b, p))).map(|(b, p)| place(b, p)).collect();
    let indices: Vec<i64> = one_channel.iter().copied().cycle().take(n * c * cells * l).collect();
    let indices = index_buffer(ctx, node, "places", vec![n, c, cells * l], indices)?;
    let base = zeros(ctx, node, fact.dtype, vec![n, c, pixels + 1])?;
    let x = ctx.wire(node, 0)?;
    let blocks = ctx.emit_part(node, "blocks", reshape_op(&[n, c, cells * l]), &[x])?;
    let op = Op::ScatterElements { axis: 2, reduction: ScatterReduction::Add };
    let summed = ctx.emit_part(node, "summed", op, &[base, indices, blocks])?;
    let slice = Op::Slice { axis: 2, start: 0, end: pixels as i64, step: 1 };
    let kept = ctx.emit_part(node, "kept", slice, &[summed])?;
    let shape: Vec<usize> = [n, c].into_iter().chain(image.iter().map(|&d| d as usize)).collect();
    one(ctx.emit_value(&node.name, reshape_op(&shape), &[kept])?)
}
