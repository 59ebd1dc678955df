//! Comparisons (`Equal`, `Less`, `LessOrEqual`, `Greater`, `GreaterOrEqual`), logic (`And`,
//! `Or`, `Xor`, `Not`), `Where` and bit operations (`BitwiseAnd`, `BitwiseOr`, `BitwiseXor`,
//! `BitwiseNot`, `BitShift`) of run-time tensors: the IR's `Compare`, `Logic`, `Not`, `Where`
//! and `Bitwise`. All-constant inputs fold (the generic fallback); a constant operand beside a
//! run-time one becomes a buffer of the run-time one's element type.

use ordo_ir::Op;
use ordo_ir::op::{BitwiseKind, CompareKind, LogicKind};

use super::common::{Outputs, one};
use super::elementwise::operand;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

pub(crate) fn logic(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let inputs =
        (0..node.num_inputs()).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    if inputs.iter().all(|v| matches!(v, Value::Const(_))) {
        return Err(node.unsupported("constants only (folded)"));
    }
    let op_type = node.op_type();
    let op = if let Some(kind) = CompareKind::from_onnx_name(op_type) {
        Op::Compare(kind)
    } else if let Some(kind) = LogicKind::from_onnx_name(op_type) {
        Op::Logic(kind)
    } else if op_type == "Not" {
        Op::Not
    } else if op_type == "Where" {
        Op::Where
    } else {
        return Err(node.unsupported(format!("no IR op for {op_type}")));
    };
    // Where's values take each other's type; its condition is bool (its own, or a buffer).
    let wires = match op {
        Op::Where => {
            let [cond, x, y] = &inputs[..] else {
                return Err(node.malformed("Where takes 3 inputs"));
            };
            let like = if matches!(x, Value::Const(_)) { y } else { x };
            let c = match cond {
                Value::Const(_) => super::elementwise::bool_operand(ctx, node, 0)?,
                _ => ctx.wire(node, 0)?,
            };
            vec![c, operand(ctx, node, 1, Some(like))?, operand(ctx, node, 2, Some(like))?]
        }
        Op::Not => vec![ctx.wire(node, 0)?],
        _ => {
            let [a, b] = &inputs[..] else { return Err(node.malformed("takes 2 inputs")) };
            vec![operand(ctx, node, 0, Some(b))?, operand(ctx, node, 1, Some(a))?]
        }
    };
    one(ctx.emit_value(&node.name, op, &wires)?)
}

/// `BitwiseAnd`, `BitwiseOr`, `BitwiseXor`, `BitwiseNot` and `BitShift` (its `direction`
/// `LEFT` or `RIGHT`) of run-time integer tensors.
pub(crate) fn bitwise(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let kind = match node.op_type() {
        "BitwiseAnd" => BitwiseKind::And,
        "BitwiseOr" => BitwiseKind::Or,
        "BitwiseXor" => BitwiseKind::Xor,
        "BitwiseNot" => BitwiseKind::Not,
        _ => node.choice(
            "direction",
            "",
            &[("LEFT", BitwiseKind::ShiftLeft), ("RIGHT", BitwiseKind::ShiftRight)],
        )?,
    };
    if node.num_inputs() != kind.arity() {
        return Err(node.malformed(format!(
            "{} takes {} input(s), it has {}",
            kind.onnx_name(),
            kind.arity(),
            node.num_inputs()
        )));
    }
    let inputs =
        (0..node.num_inputs()).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    if inputs.iter().all(|v| matches!(v, Value::Const(_))) {
        return Err(node.unsupported("constants only (folded)"));
    }
    let wires = match &inputs[..] {
        [a, b] => vec![operand(ctx, node, 0, Some(b))?, operand(ctx, node, 1, Some(a))?],
        _ => vec![ctx.wire(node, 0)?],
    };
    one(ctx.emit_value(&node.name, Op::Bitwise(kind), &wires)?)
}
