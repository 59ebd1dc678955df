//! `DeformConv` (deformable convolution, v1 and with a mask v2) as IR ops: each window cell
//! of each output position is sampled from the input at its place in the window plus a
//! learned offset, interpolated linearly with zeros outside (GridSample's sampler,
//! [`super::grid_sample::sample`]), weighted by the mask, and the patches times the weight
//! per group ([`super::patches`]), plus the bias. Channels in `offset_group` groups, each
//! group with its own offsets. Gradients are those of the IR ops: to the input, the weight,
//! the offsets (through the interpolation weights) and the mask.
//!
//! ONNX's reference maps each position to GridSample's `[-1, 1]` and back (dividing by the
//! size less one); here the position is in elements throughout, the same point for any size
//! above one (and, for a size of one, what the reference's division by zero leaves undefined:
//! the element itself).

use ordo_ir::{DType, Op, TensorFact};

use super::common::{Outputs, one, reshape_op};
use super::grid_sample::{Sampling, sample};
use super::parts::Parts;
use super::patches::{Grouped, per_channel};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// `DeformConv(X, W, offset, B, mask)`.
pub(crate) fn deform_conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let xf = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let wf = ctx.fact_of(node, &ctx.input(node, 1)?)?;
    let of = ctx.fact_of(node, &ctx.input(node, 2)?)?;
    let grouped = Grouped::of(node, &xf, &wf)?;
    if [&xf, &wf, &of].iter().any(|f| f.dtype != DType::F32) {
        return Err(node
            .unsupported(format!("input {xf}, weight {wf} and offset {of}: sampled in f32 only")));
    }
    let spatial = &xf.shape[2..];
    let r = spatial.len();
    let (n, c, m) = (grouped.batch, grouped.channels, grouped.out_channels);
    let (positions, window) = (grouped.positions(), grouped.window);
    let offset_group = node.int("offset_group", 1)?;
    let offset_groups =
        usize::try_from(offset_group).ok().filter(|&g| g > 0 && c % g == 0).ok_or_else(|| {
            node.malformed(format!(
                "offset_group {offset_group}: expected a positive divisor of the {c} channels"
            ))
        })?;
    let expect = |what: &str, per_position: usize, fact: &TensorFact| {
        let shape: Vec<usize> =
            [n, per_position].into_iter().chain(grouped.out.iter().copied()).collect();
        let want = TensorFact::new(DType::F32, shape);
        if *fact == want {
            Ok(())
        } else {
            Err(node.shape_error(format!("{what} {fact}: expected {want}")))
        }
    };
    expect("offset", offset_groups * window * r, &of)?;
    let mask = match node.input(4) {
        Some(_) => {
            let mf = ctx.fact_of(node, &ctx.input(node, 4)?)?;
            expect("mask", offset_groups * window, &mf)?;
            Some(ctx.wire(node, 4)?)
        }
        None => None,
    };
    if node.input(3).is_some() {
        let bf = ctx.fact_of(node, &ctx.input(node, 3)?)?;
        if bf.shape != [m] || bf.dtype != DType::F32 {
            return Err(node.shape_error(format!("bias {bf}: expected f32[{m}]")));
        }
    }
    super::common::check_constant(node, "patches", &[n, c, positions, window])?;
    let mut e = Parts::of(node);
    let (batches, cells) = (n * offset_groups, positions * window);
    // The offsets [N, Go * K * r, out...] as [N, Go, r, L, K]; per dim, the window cell's
    // place (a table) plus its offset.
    let offset = ctx.wire(node, 2)?;
    let offset = e.reshape(ctx, offset, &[n, offset_groups, window, r, positions])?;
    let offset = e.transpose(ctx, offset, &[0, 1, 3, 4, 2])?;
    // Where each window cell reads without its offset, per cell (position-major).
    let reads: Vec<Vec<i64>> = (0..positions)
        .flat_map(|o| (0..window).map(move |k| (o, k)))
        .map(|(o, k)| grouped.reads(o, k))
        .collect();
    let mut places = Vec::with_capacity(r);
    for d in 0..r {
        let moved = e.slice(ctx, offset, 2, d, d + 1)?;
        let moved = e.reshape(ctx, moved, &[batches, cells])?;
        let base: Vec<f64> = reads.iter().map(|at| at[d] as f64).collect();
        let base =
            ConstTensor { elem: code::FLOAT, shape: vec![cells], data: ConstData::Float(base) };
        let base = ctx.buffer(node, &format!("{}.window{d}", node.name), &base)?;
        places.push(e.op(ctx, "place", Op::Add, &[moved, base])?);
    }
    let x = ctx.wire(node, 0)?;
    let plane: usize = spatial.iter().product();
    let x = e.reshape(ctx, x, &[batches, c / offset_groups, plane])?;
    let mut patches = sample(ctx, &mut e, x, spatial, &places, Sampling::LINEAR_ZEROS_ALIGNED)?;
    if let Some(mask) = mask {
        let mask = e.reshape(ctx, mask, &[n, offset_groups, window, positions])?;
        let mask = e.transpose(ctx, mask, &[0, 1, 3, 2])?;
        let mask = e.reshape(ctx, mask, &[batches, 1, cells])?;
        patches = e.op(ctx, "masked", Op::Mul, &[patches, mask])?;
    }
    let patches = e.reshape(ctx, patches, &[n, c, positions, window])?;
    let w = ctx.wire(node, 1)?;
    let y = grouped.times_weight(ctx, node, patches, w, |ctx, a, b, _| {
        ctx.emit_part(node, "product", Op::MatMul, &[a, b])
    })?;
    let shape = reshape_op(&grouped.output_shape());
    if node.input(3).is_none() {
        return one(ctx.emit_value(&node.name, shape, &[y])?);
    }
    let y = e.op(ctx, "product.shaped", shape, &[y])?;
    let b = ctx.wire(node, 3)?;
    let b = e.reshape(ctx, b, &per_channel(m, xf.rank()))?;
    one(ctx.emit_value(&node.name, Op::Add, &[y, b])?)
}
