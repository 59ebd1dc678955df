//! Losses: `NegativeLogLikelihoodLoss` (the IR's `NllLoss`) and `SoftmaxCrossEntropyLoss`
//! (a `LogSoftmax` over the classes, then `NllLoss`; its optional second output is the
//! log-probabilities).

use ordo_ir::Op;
use ordo_ir::op::{LossReduction, NllLoss};

use super::common::Outputs;
use super::elementwise::operand;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

fn loss_op(node: &Node<'_>) -> OnnxResult<NllLoss> {
    let reduction = node.choice(
        "reduction",
        "mean",
        &[
            ("none", LossReduction::None),
            ("sum", LossReduction::Sum),
            ("mean", LossReduction::Mean),
        ],
    )?;
    let ignore_index =
        if node.has_attr("ignore_index") { Some(node.int("ignore_index", 0)?) } else { None };
    Ok(NllLoss { reduction, ignore_index })
}

/// The wires of `[log-probabilities, targets, weights?]` with the log-probabilities given.
fn operands(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    first: OutletOrInput,
) -> OnnxResult<Vec<ordo_ir::OutletId>> {
    let x = match first {
        OutletOrInput::Outlet(w) => w,
        OutletOrInput::Input => ctx.wire(node, 0)?,
    };
    let mut wires = vec![x, ctx.wire(node, 1)?];
    if node.input(2).is_some_and(|w| !w.is_empty()) {
        let like = Value::wire(x, ctx.graph.fact(x).cloned().expect("emitted"));
        wires.push(operand(ctx, node, 2, Some(&like))?);
    }
    Ok(wires)
}

enum OutletOrInput {
    Outlet(ordo_ir::OutletId),
    Input,
}

/// `NegativeLogLikelihoodLoss`.
pub(crate) fn nll(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let op = loss_op(node)?;
    let wires = operands(ctx, node, OutletOrInput::Input)?;
    Ok(vec![Some(ctx.emit_value(&node.name, Op::NllLoss(op), &wires)?)])
}

/// `SoftmaxCrossEntropyLoss`.
pub(crate) fn softmax_cross_entropy(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let op = loss_op(node)?;
    let scores = ctx.wire(node, 0)?;
    let lp = ctx.emit(
        &format!("{}.log_prob", node.name),
        Op::LogSoftmax { axis: 1 },
        &[scores],
        Vec::new(),
    )?[0];
    let wires = operands(ctx, node, OutletOrInput::Outlet(lp))?;
    let loss = ctx.emit_value(&node.name, Op::NllLoss(op), &wires)?;
    let mut outputs = vec![Some(loss)];
    if node.num_outputs() > 1 {
        outputs.push(Some(Value::wire(lp, ctx.graph.fact(lp).cloned().expect("emitted"))));
    }
    Ok(outputs)
}
