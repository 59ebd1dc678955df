//! `QuantizeLinear`, `DequantizeLinear` and `DynamicQuantizeLinear` written as IR ops, in f32:
//! dequantize `(x - zero_point) * scale`, quantize `round(x / scale) + zero_point` (half to
//! even) clipped to the output type's range and cast, or for a float8 or float4 output
//! `x / scale` cast with `saturate`. The scale and the zero point are per tensor (one value),
//! per axis (1-D along `axis`) or per block (`block_size` elements along `axis` share one),
//! brought to the input's shape by a reshape (and for blocks an expand, a reshape and a
//! slice). Nothing of them has a gradient but the dequantized value's, through the scale.

use ordo_ir::element::E8m0Rounding;
use ordo_ir::op::UnaryOp;
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// How a scale (and its zero point) spreads over the input.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// One value for the whole tensor.
    PerTensor,
    /// One value per index along `axis`.
    PerAxis { axis: usize },
    /// One value per `block` consecutive indices along `axis`.
    Blocked { axis: usize, block: usize },
}

/// The layout of a scale of shape `scale` for an input of shape `x`, as the node's `axis` and
/// `block_size` say; an error naming the mismatch.
fn layout(node: &Node<'_>, x: &[usize], scale: &[usize]) -> OnnxResult<Layout> {
    let block = node.int("block_size", 0)?;
    if block < 0 {
        return Err(node.malformed(format!("block_size {block}: expected 0 or more")));
    }
    if scale.iter().product::<usize>() == 1 && block == 0 {
        return Ok(Layout::PerTensor);
    }
    let axis = resolve_axis(node, node.int("axis", 1)?, x.len())?;
    if block == 0 {
        if scale != [x[axis]] {
            return Err(node.shape_error(format!(
                "a scale of shape {scale:?} for an input of shape {x:?}: per axis {axis} it \
                 needs [{}]",
                x[axis]
            )));
        }
        return Ok(Layout::PerAxis { axis });
    }
    let block = block as usize;
    let mut want = x.to_vec();
    want[axis] = x[axis].div_ceil(block);
    if scale != want {
        return Err(node.shape_error(format!(
            "a scale of shape {scale:?} for an input of shape {x:?}: blocks of {block} along \
             axis {axis} need {want:?}"
        )));
    }
    Ok(Layout::Blocked { axis, block })
}

/// Input `i` (a scale or a zero point) as f32, brought to the input's shape `x` (or to a
/// shape that broadcasts to it).
fn spread(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
    layout: Layout,
    x: &[usize],
) -> OnnxResult<OutletId> {
    let wire = ctx.wire(node, i)?;
    let mut w = ctx.emit_part(node, what, Op::cast(DType::F32), &[wire])?;
    let reshape = |shape: &[usize]| super::common::reshape_op(shape);
    match layout {
        Layout::PerTensor => {}
        Layout::PerAxis { axis } => {
            let mut shape = vec![1; x.len()];
            shape[axis] = x[axis];
            w = ctx.emit_part(node, &format!("{what}.axis"), reshape(&shape), &[w])?;
        }
        Layout::Blocked { axis, block } => {
            // [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, block, ..] ->
            // [.., blocks * block, ..], cut to the input's length.
            let mut shape = x.to_vec();
            shape[axis] = x[axis].div_ceil(block);
            shape.insert(axis + 1, 1);
            w = ctx.emit_part(node, &format!("{what}.unsqueeze"), reshape(&shape), &[w])?;
            shape[axis + 1] = block;
            let expand = Op::Expand { shape: shape.clone() };
            w = ctx.emit_part(node, &format!("{what}.expand"), expand, &[w])?;
            let whole = shape[axis] * block;
            shape[axis] = whole;
            shape.remove(axis + 1);
            w = ctx.emit_part(node, &format!("{what}.blocks"), reshape(&shape), &[w])?;
            if whole > x[axis] {
                let end = x[axis] as i64;
                let cut = Op::Slice { axis: axis as i64, start: 0, end, step: 1 };
                w = ctx.emit_part(node, &format!("{what}.cut"), cut, &[w])?;
            }
        }
    }
    Ok(w)
}

/// The facts of the input and the scale, after the checks that need no emitting: a
/// run-time input (constants fold by the generic rule), a float scale, no `precision`.
fn operands(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
) -> OnnxResult<(ordo_ir::TensorFact, ordo_ir::TensorFact)> {
    if !(2..=3).contains(&node.num_inputs()) {
        return Err(node.malformed(format!("takes 2 or 3 inputs, it has {}", node.num_inputs())));
    }
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    if node.int("precision", 0)? != 0 {
        return Err(node.unsupported("a `precision` for the computation"));
    }
    let scale = ctx.fact_of(node, &ctx.input(node, 1)?)?;
    if !scale.dtype.is_float() {
        return Err(node.malformed(format!("its scale is {scale}, not a float")));
    }
    Ok((ctx.fact_of(node, &x)?, scale))
}

/// `DequantizeLinear(x, scale, zero_point)`: `(x - zero_point) * scale`, of the scale's type
/// (or `output_dtype`).
pub(crate) fn dequantize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x_fact, scale_fact) = operands(ctx, node)?;
    let to = match node.int("output_dtype", 0)? {
        0 => scale_fact.dtype,
        code => output_type(node, code)?,
    };
    let layout = layout(node, &x_fact.shape, &scale_fact.shape)?;
    let x = ctx.wire(node, 0)?;
    let mut y = ctx.emit_part(node, "x", Op::cast(DType::F32), &[x])?;
    if node.input(2).is_some() {
        // x - zero_point as x + (-1 * zero_point): the IR has no subtraction.
        let zero = spread(ctx, node, 2, "zero_point", layout, &x_fact.shape)?;
        let negated = ctx.emit_part(node, "zero_point.neg", Op::Scale { factor: -1.0 }, &[zero])?;
        y = ctx.emit_part(node, "centered", Op::Add, &[y, negated])?;
    }
    let scale = spread(ctx, node, 1, "scale", layout, &x_fact.shape)?;
    if to == DType::F32 {
        return one(ctx.emit_value(&node.name, Op::Mul, &[y, scale])?);
    }
    let scaled = ctx.emit_part(node, "scaled", Op::Mul, &[y, scale])?;
    one(ctx.emit_value(&node.name, Op::cast(to), &[scaled])?)
}

/// `QuantizeLinear(x, scale, zero_point)`: of the zero point's type (else `output_dtype`,
/// else u8).
pub(crate) fn quantize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x_fact, scale_fact) = operands(ctx, node)?;
    if !x_fact.dtype.is_float() {
        return Err(node.malformed(format!("its input is {x_fact}, not a float")));
    }
    let to = if node.input(2).is_some() {
        ctx.fact_of(node, &ctx.input(node, 2)?)?.dtype
    } else {
        match node.int("output_dtype", 0)? {
            0 => DType::U8,
            code => output_type(node, code)?,
        }
    };
    let range = integer_range(to);
    if range.is_none() && !to.is_float() {
        return Err(node.unsupported(format!("quantization to {to}")));
    }
    let saturate = node.int("saturate", 1)? != 0;
    let layout = layout(node, &x_fact.shape, &scale_fact.shape)?;
    let x = ctx.wire(node, 0)?;
    let xf = ctx.emit_part(node, "x", Op::cast(DType::F32), &[x])?;
    let scale = spread(ctx, node, 1, "scale", layout, &x_fact.shape)?;
    let mut q = ctx.emit_part(node, "scaled", Op::Div, &[xf, scale])?;
    if range.is_some() {
        q = ctx.emit_part(node, "rounded", Op::Unary { func: UnaryOp::Round }, &[q])?;
    }
    if node.input(2).is_some() {
        let zero = spread(ctx, node, 2, "zero_point", layout, &x_fact.shape)?;
        q = ctx.emit_part(node, "shifted", Op::Add, &[q, zero])?;
    }
    let cast = match range {
        Some((min, max)) => {
            q = ctx.emit_part(node, "clipped", Op::Clip { min, max }, &[q])?;
            Op::cast(to)
        }
        None => Op::Cast { to, saturate, round: E8m0Rounding::Up },
    };
    one(ctx.emit_value(&node.name, cast, &[q])?)
}

/// The IR type of an `output_dtype` attribute.
fn output_type(node: &Node<'_>, code: i64) -> OnnxResult<DType> {
    i32::try_from(code).ok().and_then(crate::tensor::ir_dtype).ok_or_else(|| {
        node.unsupported(format!("output_dtype {code}: a type the IR does not hold"))
    })
}

/// The smallest and largest value of an integer type of at most 32 bits (what quantization
/// produces), `None` for any other type.
fn integer_range(dtype: DType) -> Option<(f64, f64)> {
    let bits = match dtype {
        DType::I2 | DType::U2 => 2,
        DType::I4 | DType::U4 => 4,
        DType::I8 | DType::U8 => 8,
        DType::I16 | DType::U16 => 16,
        DType::I32 | DType::U32 => 32,
        _ => return None,
    };
    let unsigned = matches!(dtype, DType::U2 | DType::U4 | DType::U8 | DType::U16 | DType::U32);
    Some(if unsigned {
        (0.0, f64::from(u32::MAX >> (32 - bits)))
    } else {
        (-f64::from(1u32 << (bits - 1)), f64::from((1u32 << (bits - 1)) - 1))
    })
}

/// `DynamicQuantizeLinear(x)`: u8 quantization by the range of `x` (widened to hold 0), as
/// ONNX defines it: `scale = (max - min) / 255`, `zero_point = round(clip(-min / scale))`,
/// `y = clip(round(x / scale) + zero_point)`, clipped to [0, 255]; three outputs, `y`, the
/// scale and the zero point.
pub(crate) fn dynamic_quantize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x_value = ctx.input(node, 0)?;
    if matches!(x_value, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let fact = ctx.fact_of(node, &x_value)?;
    if fact.dtype != DType::F32 {
        return Err(node.malformed(format!("its input is {fact}, not f32")));
    }
    let x = ctx.wire(node, 0)?;
    let all: Vec<usize> = (0..fact.rank()).collect();
    let reduce =
        |kind| Op::Reduce(ordo_ir::op::Reduce { kind, axes: all.clone(), keepdims: false });
    use ordo_ir::op::ReduceKind;
    let zero = super::composite::scalar(ctx, node, "zero", 0.0)?;
    let lowest = ctx.emit_part(node, "min", reduce(ReduceKind::Min), &[x])?;
    let lowest = ctx.emit_part(node, "min0", Op::Min, &[lowest, zero])?;
    let highest = ctx.emit_part(node, "max", reduce(ReduceKind::Max), &[x])?;
    let highest = ctx.emit_part(node, "max0", Op::Max, &[highest, zero])?;
    let negated = ctx.emit_part(node, "min.neg", Op::Scale { factor: -1.0 }, &[lowest])?;
    let range = ctx.emit_part(node, "range", Op::Add, &[highest, negated])?;
    let levels = super::composite::scalar(ctx, node, "levels", 255.0)?;
    let scale = ctx.emit_part(node, "scale", Op::Div, &[range, levels])?;
    let clip = Op::Clip { min: 0.0, max: 255.0 };
    let round = Op::Unary { func: UnaryOp::Round };
    let zero_point = ctx.emit_part(node, "zero_point.f", Op::Div, &[negated, scale])?;
    let zero_point = ctx.emit_part(node, "zero_point.clipped", clip.clone(), &[zero_point])?;
    let zero_point = ctx.emit_part(node, "zero_point.rounded", round.clone(), &[zero_point])?;
    let q = ctx.emit_part(node, "scaled", Op::Div, &[x, scale])?;
    let q = ctx.emit_part(node, "rounded", round, &[q])?;
    let q = ctx.emit_part(node, "shifted", Op::Add, &[q, zero_point])?;
    let q = ctx.emit_part(node, "clipped", clip, &[q])?;
    let y = ctx.emit_value(&node.name, Op::cast(DType::U8), &[q])?;
    let zero_point =
        ctx.emit_value(&format!("{}.zero_point", node.name), Op::cast(DType::U8), &[zero_point])?;
    Ok(vec![Some(y), Some(ctx.wire_value(scale)), Some(zero_point)])
}
