//! Training-mode randomness: `RandomUniformLike`, `RandomNormalLike`, `RandomUniform`,
//! `RandomNormal` and `Bernoulli` as the IR's random ops, drawn from a counter-based generator
//! keyed by node, step and element (the `seed` attribute is not used: the run's seed is), so
//! that a model trains the same on any placement and schedule. Stochastic depth exports as
//! `RandomUniformLike`, `Less` and `Cast`.

use ordo_ir::op::Distribution;
use ordo_ir::{DType, Op};

use super::common::{Outputs, one};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, check_shape, code};
use crate::value::Value;

/// The distribution of a `RandomUniform*` or `RandomNormal*` node from its attributes.
fn distribution(node: &Node<'_>) -> OnnxResult<Distribution> {
    let d = if node.op_type().starts_with("RandomUniform") {
        Distribution::Uniform { low: node.float("low", 0.0)?, high: node.float("high", 1.0)? }
    } else {
        Distribution::Normal { mean: node.float("mean", 0.0)?, scale: node.float("scale", 1.0)? }
    };
    d.validate().map_err(|_| match d {
        Distribution::Uniform { low, high } => {
            node.malformed(format!("low {low} and high {high}: expected finite low <= high"))
        }
        Distribution::Normal { mean, scale } => {
            node.malformed(format!("mean {mean} and scale {scale}: expected finite, scale >= 0"))
        }
    })?;
    Ok(d)
}

/// The `dtype` attribute must be float (the runtime's one float type) when given; without it
/// the output takes `default`'s type.
fn expect_float_output(node: &Node<'_>, default: DType) -> OnnxResult<()> {
    let dtype = super::generic::dtype_attr(node, "dtype", default)?;
    if dtype != DType::F32 {
        return Err(node.unsupported(format!("{dtype} output: random values are float32")));
    }
    Ok(())
}

/// `RandomUniformLike`, `RandomNormalLike`: shaped like input 0, whose values are not read.
pub(crate) fn random_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let input = ctx.input(node, 0)?;
    expect_float_output(node, ctx.fact_of(node, &input)?.dtype)?;
    let d = distribution(node)?;
    let like = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::RandomLike(d), &[like])?)
}

/// `RandomUniform`, `RandomNormal`: shaped by the `shape` attribute (a zero splat of that
/// shape stands for the input whose shape the IR op copies).
pub(crate) fn random(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    expect_float_output(node, DType::F32)?;
    let d = distribution(node)?;
    let dims = node.ints("shape").ok_or_else(|| node.malformed("no shape attribute"))?;
    let shape = dims
        .iter()
        .map(|&x| usize::try_from(x).map_err(|_| node.shape_error(format!("shape {dims:?}"))))
        .collect::<OnnxResult<Vec<_>>>()?;
    check_shape(&shape).map_err(|m| node.shape_error(m))?;
    let zeros = ConstTensor { elem: code::FLOAT, shape, data: ConstData::Splat(0.0) };
    let like = ctx.realize(node, &format!("{}/shape", node.name), Value::constant(zeros))?;
    one(ctx.emit_value(&node.name, Op::RandomLike(d), &[like])?)
}

/// `Bernoulli` of float32 probabilities.
pub(crate) fn bernoulli(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let input = ctx.input(node, 0)?;
    let dtype = ctx.fact_of(node, &input)?.dtype;
    if dtype != DType::F32 {
        return Err(node.unsupported(format!("{dtype} probabilities")));
    }
    expect_float_output(node, dtype)?;
    let p = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Bernoulli, &[p])?)
}
