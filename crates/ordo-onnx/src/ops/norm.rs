//! Normalisation: `BatchNormalization` (inference and training mode), `LayerNormalization`
//! and `RMSNormalization`.

use ordo_ir::op::{BatchNorm, LayerNorm, Reduce, ReduceKind, UnaryOp};
use ordo_ir::{Op, OutletId};

use super::conv::param_name;
use super::{Outputs, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};
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
    let x = ctx.wire(node, 0)?;
    let rank = ctx.graph.fact(x).expect("emitted").rank();
    if !ctx.graph.fact(x).expect("emitted").dtype.is_float() {
        return Err(node.unsupported("the IR normalises float tensors"));
    }
    let mean = |kind| Op::Reduce(Reduce { kind, axes: (axis..rank).collect(), keepdims: true });
    let name = |part: &str| format!("{}.{part}", node.name);
    let emit =
        |ctx: &mut Ctx<'_>, part: &str, op: Op, inputs: &[OutletId]| -> OnnxResult<OutletId> {
            Ok(ctx.emit(&name(part), op, inputs, Vec::new())?[0])
        };
    let (d, mu) = if centered {
        let mu = emit(ctx, "mean", mean(ReduceKind::Mean), &[x])?;
        let neg = emit(ctx, "neg_mean", Op::Scale { factor: -1.0 }, &[mu])?;
        (emit(ctx, "centered", Op::Add, &[x, neg])?, Some(mu))
    } else {
        (x, None)
    };
    let sq = emit(ctx, "square", Op::Mul, &[d, d])?;
    let var = emit(ctx, "variance", mean(ReduceKind::Mean), &[sq])?;
    let eps_value =
        ConstTensor { elem: code::FLOAT, shape: vec![], data: ConstData::Float(vec![eps]) };
    let eps_wire = ctx.buffer(node, &name("epsilon"), &eps_value)?;
    let shifted = emit(ctx, "variance_eps", Op::Add, &[var, eps_wire])?;
    let inv = emit(ctx, "inv_std", Op::Unary { func: UnaryOp::Rsqrt }, &[shifted])?;
    let normed = emit(ctx, "normalized", Op::Mul, &[d, inv])?;
    let scale = ctx.wire(node, 1)?;
    let has_bias = centered && node.input(2).is_some_and(|b| !b.is_empty());
    let scaled = if has_bias {
        emit(ctx, "scaled", Op::Mul, &[normed, scale])?
    } else {
        ctx.emit(&node.name, Op::Mul, &[normed, scale], Vec::new())?[0]
    };
    let y = if has_bias {
        let bias = ctx.wire(node, 2)?;
        ctx.emit(&node.name, Op::Add, &[scaled, bias], Vec::new())?[0]
    } else {
        scaled
    };
    let value =
        |ctx: &Ctx<'_>, w: OutletId| Value::wire(w, ctx.graph.fact(w).cloned().expect("emitted"));
    let mut outputs = vec![Some(value(ctx, y))];
    if let Some(mu) = mu {
        outputs.push(Some(value(ctx, mu)));
        outputs.push(Some(value(ctx, inv)));
    }
    outputs.resize(node.num_outputs().max(1), None);
    outputs.truncate(node.num_outputs().max(1));
    Ok(outputs)
}
