//! Integer convolutions: `ConvInteger` (the i32 convolution of `x - x_zero_point` by
//! `w - w_zero_point`) and `QLinearConv` (that plus its i32 bias, requantized as
//! `QLinearMatMul` is), of any number of spatial dims and any padding, as IR ops.
//!
//! The IR's convolutions take f32 weights as parameters; here the weight is computed (less its
//! zero point) and the sums must be exact. So the convolution is an im2col and a product: each
//! output position's window is gathered from the input by a table computed at import (the
//! padding reads one appended zero), and the patches times the weight is qlinear's exact
//! product, chunked so that every f32 partial sum is an exact integer. No gradient (integers).

use ordo_ir::{DType, Op, OutletId, TensorFact};

use super::common::{Outputs, check_constant, one, reshape_op};
use super::indexed::index_buffer;
use super::patches::{Grouped, per_channel};
use super::qlinear::{centered, exact_product, float_scales, int8_fact, requantize};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// An integer convolution's sizes and the table that gathers its patches.
struct Shape {
    grouped: Grouped,
    /// Elements of one input plane.
    plane: usize,
    /// `[out positions, window]`: each window cell's position in the plane, or `plane` (the
    /// appended zero) where it falls in the padding.
    table: Vec<i64>,
}

impl Shape {
    /// The sizes and the gather table; errors name what does not fit.
    fn of(node: &Node<'_>, x: &TensorFact, w: &TensorFact) -> OnnxResult<Self> {
        let grouped = Grouped::of(node, x, w)?;
        let spatial = &x.shape[2..];
        let (positions, window) = (grouped.positions(), grouped.window);
        check_constant(node, "gather table", &[positions, window])?;
        check_constant(node, "patches", &[x.shape[0], x.shape[1], positions, window])?;
        let plane: usize = spatial.iter().product();
        let mut table = Vec::with_capacity(positions * window);
        for o in 0..positions {
            for k in 0..window {
                let reads = grouped.reads(o, k);
                let inside =
                    reads.iter().zip(spatial).all(|(&i, &size)| (0..size as i64).contains(&i));
                let flat =
                    reads.iter().zip(spatial).fold(0, |flat, (&i, &size)| flat * size as i64 + i);
                table.push(if inside { flat } else { plane as i64 });
            }
        }
        Ok(Self { grouped, plane, table })
    }

    /// The exact convolution of `x` (f32 `[N, C, d...]`) by `w` (f32 `[M, C / G, k...]`), both
    /// holding integers, as i64 `[N, M, out...]`.
    fn product(
        self,
        ctx: &mut Ctx<'_>,
        node: &Node<'_>,
        x: OutletId,
        w: OutletId,
    ) -> OnnxResult<OutletId> {
        let Self { grouped, plane, table } = self;
        let (n, c) = (grouped.batch, grouped.channels);
        let flat = ctx.emit_part(node, "x.flat", reshape_op(&[n, c, plane]), &[x])?;
        let zero =
            ConstTensor { elem: code::FLOAT, shape: vec![n, c, 1], data: ConstData::Splat(0.0) };
        let zero = ctx.buffer(node, &format!("{}.padding", node.name), &zero)?;
        let padded = ctx.emit_part(node, "x.padded", Op::Concat { axis: 2 }, &[flat, zero])?;
        let shape = vec![grouped.positions(), grouped.window];
        let table = index_buffer(ctx, node, "windows", shape, table)?;
        let patches = ctx.emit_part(node, "patches", Op::Gather { axis: 2 }, &[padded, table])?;
        let y = grouped.times_weight(ctx, node, patches, w, |ctx, a, b, k| {
            exact_product(ctx, node, a, b, k)
        })?;
        ctx.emit_part(node, "product.shaped", reshape_op(&grouped.output_shape()), &[y])
    }
}

/// Input `i`, which must hold one value (a per-tensor zero point or scale).
fn scalar_input(ctx: &Ctx<'_>, node: &Node<'_>, i: usize, what: &str) -> OnnxResult<()> {
    match node.input(i) {
        None => Ok(()),
        Some(_) => {
            let fact = ctx.fact_of(node, &ctx.input(node, i)?)?;
            if fact.numel() == 1 {
                Ok(())
            } else {
                Err(node.unsupported(format!("{what} {fact}: one value (per tensor) only")))
            }
        }
    }
}

/// Input `i` (a zero point or scale), which holds one value or one per output channel.
fn per_channel_input(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
    m: usize,
) -> OnnxResult<()> {
    if node.input(i).is_none() {
        return Ok(());
    }
    let fact = ctx.fact_of(node, &ctx.input(node, i)?)?;
    if fact.numel() == 1 || fact.shape == [m] {
        Ok(())
    } else {
        Err(node.shape_error(format!(
            "{what} {fact}: expected one value or [{m}], one per output channel"
        )))
    }
}

/// `ConvInteger(x, w, x_zero_point, w_zero_point)`: the i32 convolution of the operands less
/// their zero points (`x`'s one value, `w`'s one or one per output channel).
pub(crate) fn conv_integer(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (xf, wf) = (int8_fact(ctx, node, 0, "x")?, int8_fact(ctx, node, 1, "w")?);
    let shape = Shape::of(node, &xf, &wf)?;
    scalar_input(ctx, node, 2, "x_zero_point")?;
    per_channel_input(ctx, node, 3, "w_zero_point", wf.shape[0])?;
    let x = centered(ctx, node, 0, 2, None)?;
    let w = centered(ctx, node, 1, 3, Some(&per_channel(wf.shape[0], wf.rank() + 1)))?;
    let product = shape.product(ctx, node, x, w)?;
    one(ctx.emit_value(&node.name, Op::cast(DType::I32), &[product])?)
}

/// `QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
/// B)`: `round((conv + B) * (x_scale * w_scale / y_scale) + y_zero_point)` saturated to the
/// type of `y_zero_point`, `conv` as `ConvInteger`'s; `w_scale` and `w_zero_point` one value
/// or one per output channel.
pub(crate) fn qlinear_conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (xf, wf) = (int8_fact(ctx, node, 0, "x")?, int8_fact(ctx, node, 3, "w")?);
    let out = int8_fact(ctx, node, 7, "y_zero_point")?.dtype;
    float_scales(ctx, node, [(1, "x_scale"), (4, "w_scale"), (6, "y_scale")])?;
    let shape = Shape::of(node, &xf, &wf)?;
    let m = wf.shape[0];
    for (i, what) in [(1, "x_scale"), (2, "x_zero_point"), (6, "y_scale"), (7, "y_zero_point")] {
        scalar_input(ctx, node, i, what)?;
    }
    per_channel_input(ctx, node, 4, "w_scale", m)?;
    per_channel_input(ctx, node, 5, "w_zero_point", m)?;
    let x = centered(ctx, node, 0, 2, None)?;
    let w = centered(ctx, node, 3, 5, Some(&per_channel(m, wf.rank() + 1)))?;
    let mut product = shape.product(ctx, node, x, w)?;
    let by_channel = per_channel(m, wf.rank());
    if node.input(8).is_some() {
        let bias = ctx.fact_of(node, &ctx.input(node, 8)?)?;
        if bias.dtype != DType::I32 || bias.shape != [m] {
            return Err(node.shape_error(format!("bias {bias}: expected i32[{m}]")));
        }
        let b = ctx.wire(node, 8)?;
        let b = ctx.emit_part(node, "bias.shaped", reshape_op(&by_channel), &[b])?;
        let b = ctx.emit_part(node, "bias.i64", Op::cast(DType::I64), &[b])?;
        product = ctx.emit_part(node, "biased", Op::Add, &[product, b])?;
    }
    let mut w_scale = ctx.wire(node, 4)?;
    if ctx.graph.fact(w_scale).expect("emitted").numel() > 1 {
        w_scale = ctx.emit_part(node, "w_scale.shaped", reshape_op(&by_channel), &[w_scale])?;
    }
    let (x_scale, y_scale) = (ctx.wire(node, 1)?, ctx.wire(node, 6)?);
    one(requantize(ctx, node, product, [x_scale, w_scale, y_scale], 7, out)?)
}
