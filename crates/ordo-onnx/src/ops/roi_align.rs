//! `RoiAlign` as IR ops: each region of interest (run-time boxes) is cut into
//! `output_height x output_width` bins, each bin sampled at `sampling_ratio^2` evenly spaced
//! points, each point interpolated from its four neighbours, and a bin's points averaged (or,
//! for `max`, the largest weighted neighbour of any point: ONNX's definition). The sample
//! positions and weights are elementwise ops of the boxes; the neighbours are `GatherElements`
//! of the input rows that the batch indices pick. Gradients to the input are the gathers'
//! (and to the boxes, the weights'), as the IR gives them.
//!
//! The arithmetic follows ONNX's reference: a point more than one element outside the input
//! reads 0; else its position is clamped to `[0, size - 1]`, its lower neighbour is the
//! floor, its upper one the next element or the last. A `sampling_ratio` of 0 asks for a
//! grid sized by each box (from the data) and is refused: ordo plans fixed sizes.

use ordo_ir::op::{CompareKind, LogicKind, Reduce, ReduceKind, UnaryOp};
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, one};
use super::parts::Parts;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// One axis's sample points of every box: neighbour indices and weights, `[R, points]`.
struct Axis {
    low: OutletId,
    high: OutletId,
    /// The weight of `low` (`1 - l`) and of `high` (`l`), times 0 or 1 for whether the
    /// point is inside.
    low_weight: OutletId,
    high_weight: OutletId,
}

/// `RoiAlign(X, rois, batch_indices)`.
pub(crate) fn roi_align(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let xf = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let rf = ctx.fact_of(node, &ctx.input(node, 1)?)?;
    let bf = ctx.fact_of(node, &ctx.input(node, 2)?)?;
    let (&[n, c, h, w], &[r, 4], &[r2]) = (&xf.shape[..], &rf.shape[..], &bf.shape[..]) else {
        return Err(node.shape_error(format!(
            "input {xf}, rois {rf} and batch_indices {bf}: expected [N, C, H, W], [R, 4] and [R]"
        )));
    };
    if r != r2 || !bf.dtype.is_integer() {
        return Err(node.shape_error(format!(
            "rois {rf} and batch_indices {bf}: expected one integer batch index per box"
        )));
    }
    if xf.dtype != DType::F32 || rf.dtype != DType::F32 {
        return Err(node.unsupported(format!("input {xf} and rois {rf}: sampled in f32 only")));
    }
    let positive = |name: &str| -> OnnxResult<usize> {
        let v = node.int(name, 1)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| node.malformed(format!("{name} {v}: expected a positive size")))
    };
    let (out_h, out_w) = (positive("output_height")?, positive("output_width")?);
    let grid = match node.int("sampling_ratio", 0)? {
        0 => {
            return Err(node.unsupported(
                "sampling_ratio 0: a grid sized by each box from the data; ordo plans fixed \
                 sizes (give a positive sampling_ratio, as torchvision's detection models do)",
            ));
        }
        g => usize::try_from(g)
            .map_err(|_| node.malformed(format!("sampling_ratio {g}: expected 0 or more")))?,
    };
    let max = match node.string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => return Err(node.malformed(format!("mode `{other}`: expected avg or max"))),
    };
    // Before opset 16 the attribute did not exist, and boxes were read as output_half_pixel.
    let default_mode = if node.opset >= 16 { "half_pixel" } else { "output_half_pixel" };
    let half_pixel = match node.string("coordinate_transformation_mode", default_mode)?.as_str() {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => {
            return Err(node.malformed(format!(
                "coordinate_transformation_mode `{other}`: expected half_pixel or \
                 output_half_pixel"
            )));
        }
    };
    let scale = node.float("spatial_scale", 1.0)?;
    super::common::check_constant(node, "samples", &[r, c, out_h * grid, out_w * grid])?;
    let mut e = Parts::of(node);
    let rois = ctx.wire(node, 1)?;
    let offset = if half_pixel { 0.5 } else { 0.0 };
    // ONNX's boxes are (x1, y1, x2, y2): column 1 and 3 for rows, 0 and 2 for columns.
    let rows = axis(ctx, node, &mut e, rois, [1, 3], (scale, offset, half_pixel), out_h, grid, h)?;
    let cols = axis(ctx, node, &mut e, rois, [0, 2], (scale, offset, half_pixel), out_w, grid, w)?;
    let (ly, lx) = (out_h * grid, out_w * grid);
    let points = ly * lx;
    let x = ctx.wire(node, 0)?;
    let x = e.reshape(ctx, x, &[n, c, h * w])?;
    let batch = ctx.wire(node, 2)?;
    let x = e.op(ctx, "boxes", Op::Gather { axis: 0 }, &[x, batch])?;
    // Each axis's two neighbours laid out to broadcast: rows `[R, ly, 1]` (their index times
    // the row length), columns `[R, 1, lx]`.
    let mut row_taps = Vec::with_capacity(2);
    for (row, weight) in [(rows.low, rows.low_weight), (rows.high, rows.high_weight)] {
        let row = e.reshape(ctx, row, &[r, ly, 1])?;
        let row = e.op(ctx, "row", Op::Scale { factor: w as f64 }, &[row])?;
        row_taps.push((row, e.reshape(ctx, weight, &[r, ly, 1])?));
    }
    let mut col_taps = Vec::with_capacity(2);
    for (col, weight) in [(cols.low, cols.low_weight), (cols.high, cols.high_weight)] {
        col_taps.push((e.reshape(ctx, col, &[r, 1, lx])?, e.reshape(ctx, weight, &[r, 1, lx])?));
    }
    let mut result: Option<OutletId> = None;
    for &(row, row_weight) in &row_taps {
        for &(col, col_weight) in &col_taps {
            let index = e.add(ctx, row, col)?;
            let index = e.op(ctx, "index", Op::cast(DType::I64), &[index])?;
            let index = e.reshape(ctx, index, &[r, 1, points])?;
            let index = e.op(ctx, "index", Op::Expand { shape: vec![r, c, points] }, &[index])?;
            let value = e.op(ctx, "neighbour", Op::GatherElements { axis: 2 }, &[x, index])?;
            let weight = e.mul(ctx, row_weight, col_weight)?;
            let weight = e.reshape(ctx, weight, &[r, 1, points])?;
            let weighted = e.mul(ctx, value, weight)?;
            result = Some(match result {
                None => weighted,
                Some(acc) if max => e.op(ctx, "max", Op::Max, &[acc, weighted])?,
                Some(acc) => e.add(ctx, acc, weighted)?,
            });
        }
    }
    let samples =
        e.reshape(ctx, result.expect("four neighbours"), &[r, c, out_h, grid, out_w, grid])?;
    let kind = if max { ReduceKind::Max } else { ReduceKind::Mean };
    let op = Op::Reduce(Reduce { kind, axes: vec![3, 5], keepdims: false });
    one(ctx.emit_value(&node.name, op, &[samples])?)
}

/// The sample points along one axis of every box: columns `ends` of the boxes (start, end),
/// `(spatial_scale, offset, half_pixel)`, `bins` bins of `grid` points each, an input of
/// `size` elements along the axis.
#[allow(clippy::too_many_arguments)]
fn axis(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    e: &mut Parts<'_, '_>,
    rois: OutletId,
    ends: [usize; 2],
    (scale, offset, half_pixel): (f64, f64, bool),
    bins: usize,
    grid: usize,
    size: usize,
) -> OnnxResult<Axis> {
    let start = e.slice(ctx, rois, 1, ends[0], ends[0] + 1)?;
    let start = e.affine(ctx, start, scale, -offset)?;
    let end = e.slice(ctx, rois, 1, ends[1], ends[1] + 1)?;
    let end = e.affine(ctx, end, scale, -offset)?;
    let mut extent = e.sub(ctx, end, start)?;
    if !half_pixel {
        extent = e.op(ctx, "extent", Op::Clip { min: 1.0, max: f64::INFINITY }, &[extent])?;
    }
    let bin = e.op(ctx, "bin", Op::Scale { factor: 1.0 / bins as f64 }, &[extent])?;
    // Point j = bin b, grid step i: start + bin * (b + (i + 0.5) / grid).
    let steps: Vec<f64> = (0..bins * grid)
        .map(|j| (j / grid) as f64 + ((j % grid) as f64 + 0.5) / grid as f64)
        .collect();
    let steps =
        ConstTensor { elem: code::FLOAT, shape: vec![bins * grid], data: ConstData::Float(steps) };
    let steps = ctx.buffer(node, &format!("{}.steps{}", node.name, ends[0]), &steps)?;
    let along = e.mul(ctx, bin, steps)?;
    let position = e.add(ctx, start, along)?;
    let last = size as f64 - 1.0;
    let above = e.compare(ctx, position, CompareKind::GreaterOrEqual, -1.0)?;
    let below = e.compare(ctx, position, CompareKind::LessOrEqual, size as f64)?;
    let inside = e.op(ctx, "inside", Op::Logic(LogicKind::And), &[above, below])?;
    let inside = e.op(ctx, "inside", Op::cast(DType::F32), &[inside])?;
    let clamped = e.op(ctx, "clamped", Op::Clip { min: 0.0, max: last }, &[position])?;
    let low = e.unary(ctx, clamped, UnaryOp::Floor)?;
    let next = e.affine(ctx, low, 1.0, 1.0)?;
    let high = e.op(ctx, "high", Op::Clip { min: 0.0, max: last }, &[next])?;
    let l = e.sub(ctx, clamped, low)?;
    let h = e.affine(ctx, l, -1.0, 1.0)?;
    Ok(Axis { low, high, low_weight: e.mul(ctx, h, inside)?, high_weight: e.mul(ctx, l, inside)? })
}
