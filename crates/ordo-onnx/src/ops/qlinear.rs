//! Integer matrix products: `MatMulInteger` (`(a - a_zero_point) x (b - b_zero_point)`, i32)
//! and `QLinearMatMul` (that product rescaled by `a_scale * b_scale / y_scale`, shifted by
//! `y_zero_point`, rounded half to even and saturated to the output's 8-bit type), as IR ops.
//!
//! The IR's `MatMul` multiplies f32, whose integers are exact up to 2^24: the shared dim is
//! cut into chunks of [`CHUNK`], each chunk's product (at most 256 * 255^2 < 2^24 in size) is
//! exact, and the chunks are summed as i64. The rescaling follows ONNX's reference: the
//! multiplier in the scales' type, the product with it, the shift and the rounding in f64. No
//! gradient (integers).

use ordo_ir::op::UnaryOp;
use ordo_ir::{DType, Op, OutletId, TensorFact};

use super::common::{Outputs, one, reshape_op};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// The most elements of the shared dim in one f32 product: 256 products of 8-bit operands
/// less their zero points (each at most 255^2 in size) sum below 2^24.
const CHUNK: usize = 256;

/// The fact of input `i`, which must be an 8-bit integer tensor.
pub(super) fn int8_fact(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
) -> OnnxResult<TensorFact> {
    let fact = ctx.fact_of(node, &ctx.input(node, i)?)?;
    if !matches!(fact.dtype, DType::U8 | DType::I8) {
        return Err(node.unsupported(format!("{what} {fact}: products of 8-bit integers only")));
    }
    Ok(fact)
}

/// Operand `i` as f32 less its zero point (input `zero`, if given): one value, or several
/// seen as `zero_shape` where given (the left operand's per-row `[M]` as `[M, 1]`), else as
/// they are (the right operand's per-column `[N]`).
pub(super) fn centered(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    zero: usize,
    zero_shape: Option<&[usize]>,
) -> OnnxResult<OutletId> {
    let x = ctx.wire(node, i)?;
    let x = ctx.emit_part(node, &format!("operand{i}"), Op::cast(DType::F32), &[x])?;
    if node.input(zero).is_none() {
        return Ok(x);
    }
    let z = ctx.wire(node, zero)?;
    let mut z = ctx.emit_part(node, &format!("zero_point{zero}"), Op::cast(DType::F32), &[z])?;
    let count = ctx.graph.fact(z).expect("emitted").numel() as usize;
    if let Some(shape) = zero_shape.filter(|_| count > 1) {
        z = ctx.emit_part(node, &format!("zero_point{zero}.shaped"), reshape_op(shape), &[z])?;
    }
    let negated =
        ctx.emit_part(node, &format!("zero_point{zero}.neg"), Op::Scale { factor: -1.0 }, &[z])?;
    ctx.emit_part(node, &format!("centered{i}"), Op::Add, &[x, negated])
}

/// The exact integer product of `a` `[.., M, K]` and `b` `[.., K, N]` (f32 holding integers)
/// as i64, summed over chunks of the shared dim.
pub(super) fn exact_product(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    a: OutletId,
    b: OutletId,
    k: usize,
) -> OnnxResult<OutletId> {
    let mut sum: Option<OutletId> = None;
    for (c, start) in (0..k).step_by(CHUNK).enumerate() {
        let end = (start + CHUNK).min(k) as i64;
        let (mut ac, mut bc) = (a, b);
        if k > CHUNK {
            let cut = |axis| Op::Slice { axis, start: start as i64, end, step: 1 };
            ac = ctx.emit_part(node, &format!("a.chunk{c}"), cut(-1), &[a])?;
            bc = ctx.emit_part(node, &format!("b.chunk{c}"), cut(-2), &[b])?;
        }
        let product = ctx.emit_part(node, &format!("product{c}"), Op::MatMul, &[ac, bc])?;
        let product =
            ctx.emit_part(node, &format!("product{c}.i64"), Op::cast(DType::I64), &[product])?;
        sum = Some(match sum {
            None => product,
            Some(s) => ctx.emit_part(node, &format!("sum{c}"), Op::Add, &[s, product])?,
        });
    }
    Ok(sum.expect("k >= 1"))
}

/// The operands' shapes checked: `a` `[.., M, K]`, `b` `[.., K, N]`; `(M, K)`.
fn dims(node: &Node<'_>, a: &TensorFact, b: &TensorFact) -> OnnxResult<(usize, usize)> {
    match (&a.shape[..], &b.shape[..]) {
        ([.., m, k], [.., k2, _]) if k == k2 && *k > 0 => Ok((*m, *k)),
        _ => {
            Err(node
                .shape_error(format!("operands {a} and {b}: expected [.., M, K] and [.., K, N]")))
        }
    }
}

/// `MatMulInteger(a, b, a_zero_point, b_zero_point)`: the i32 product of the operands less
/// their zero points.
pub(crate) fn matmul_integer(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (a, b) = (int8_fact(ctx, node, 0, "a")?, int8_fact(ctx, node, 1, "b")?);
    let (m, k) = dims(node, &a, &b)?;
    let a = centered(ctx, node, 0, 2, Some(&[m, 1]))?;
    let b = centered(ctx, node, 1, 3, None)?;
    let product = exact_product(ctx, node, a, b, k)?;
    one(ctx.emit_value(&node.name, Op::cast(DType::I32), &[product])?)
}

/// `QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
/// y_zero_point)`: `round(product * (a_scale * b_scale / y_scale) + y_zero_point)` saturated
/// to the type of `y_zero_point`.
pub(crate) fn qlinear_matmul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (af, bf) = (int8_fact(ctx, node, 0, "a")?, int8_fact(ctx, node, 3, "b")?);
    let out = int8_fact(ctx, node, 7, "y_zero_point")?.dtype;
    let (m, k) = dims(node, &af, &bf)?;
    float_scales(ctx, node, [(1, "a_scale"), (4, "b_scale"), (6, "y_scale")])?;
    let a = centered(ctx, node, 0, 2, Some(&[m, 1]))?;
    let b = centered(ctx, node, 3, 5, None)?;
    let product = exact_product(ctx, node, a, b, k)?;
    // The multiplier in the scales' type (a per-row a_scale as [M, 1]), as the reference.
    let mut a_scale = ctx.wire(node, 1)?;
    if ctx.graph.fact(a_scale).expect("emitted").numel() > 1 {
        a_scale = ctx.emit_part(node, "a_scale.rows", reshape_op(&[m, 1]), &[a_scale])?;
    }
    let (b_scale, y_scale) = (ctx.wire(node, 4)?, ctx.wire(node, 6)?);
    one(requantize(ctx, node, product, [a_scale, b_scale, y_scale], 7, out)?)
}

/// Checks that inputs `scales` (index and name) are floats.
pub(super) fn float_scales(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    scales: [(usize, &str); 3],
) -> OnnxResult<()> {
    for (i, what) in scales {
        let fact = ctx.fact_of(node, &ctx.input(node, i)?)?;
        if !fact.dtype.is_float() {
            return Err(node.malformed(format!("{what} {fact}: expected a float")));
        }
    }
    Ok(())
}

/// `round(product * (a_scale * b_scale / y_scale) + y_zero_point)` saturated to `out` (an
/// 8-bit type), `y_zero_point` being input `zero`: the multiplier in the scales' type, the
/// product with it, the shift and the rounding (half to even) in f64, as ONNX's reference.
pub(super) fn requantize(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    product: OutletId,
    [a_scale, b_scale, y_scale]: [OutletId; 3],
    zero: usize,
    out: DType,
) -> OnnxResult<Value> {
    let product = ctx.emit_part(node, "product.f64", Op::cast(DType::F64), &[product])?;
    let scales = ctx.emit_part(node, "scales", Op::Mul, &[a_scale, b_scale])?;
    let multiplier = ctx.emit_part(node, "multiplier", Op::Div, &[scales, y_scale])?;
    let multiplier = ctx.emit_part(node, "multiplier.f64", Op::cast(DType::F64), &[multiplier])?;
    let scaled = ctx.emit_part(node, "scaled", Op::Mul, &[product, multiplier])?;
    let zero = ctx.wire(node, zero)?;
    let zero = ctx.emit_part(node, "y_zero_point.f64", Op::cast(DType::F64), &[zero])?;
    let shifted = ctx.emit_part(node, "shifted", Op::Add, &[scaled, zero])?;
    let rounded = ctx.emit_part(node, "rounded", Op::Unary { func: UnaryOp::Round }, &[shifted])?;
    let (min, max) = if out == DType::U8 { (0.0, 255.0) } else { (-128.0, 127.0) };
    let clipped = ctx.emit_part(node, "clipped", Op::Clip { min, max }, &[rounded])?;
    ctx.emit_value(&node.name, Op::cast(out), &[clipped])
}
