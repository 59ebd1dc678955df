//! Normalisation: `BatchNormalization` (inference and training mode) and
//! `LayerNormalization`.

use ordo_ir::Op;
use ordo_ir::op::{BatchNorm, LayerNorm};

use super::conv::param_name;
use super::{Outputs, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// `BatchNormalization` with scale, bias, running mean and running variance as parameters.
/// In training mode the updated running statistics (outputs 1 and 2) are part of the IR op,
/// not separate tensors.
pub(crate) fn batch_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
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

/// `LayerNormalization` over the dims from `axis` on, with scale and bias parameters.
pub(crate) fn layer_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let axis = resolve_axis(node, node.int("axis", -1)?, fact.rank())?;
    let scale = param_name(ctx, node, 1, "scale")?;
    let bias = match node.input(2) {
        Some(_) => param_name(ctx, node, 2, "bias")?,
        None => {
            return Err(node.unsupported("a scale without a bias (the IR's LayerNorm has both)"));
        }
    };
    let op = LayerNorm {
        normalized_shape: fact.shape[axis..].to_vec(),
        eps: node.float("epsilon", 1e-5)?,
        affine: true,
    };
    let x = ctx.wire(node, 0)?;
    let out = ctx.emit_with_params(node, Op::LayerNorm(op), &[x], &[scale, bias])?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    let mut outputs = vec![Some(Value::wire(out, fact))];
    outputs.resize(node.num_outputs().max(1), None);
    Ok(outputs)
}
