//! What the op mappings share: the outputs a mapping returns and small helpers for axes,
//! reshapes and the size of the constants a mapping builds. The registry (`ops/mod.rs`) says
//! which mapping serves which op type; the mappings import from here, never from the registry.

use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// Values of a node's outputs, in order.
pub(crate) type Outputs = Vec<Option<Value>>;

/// Whether output `k` of `node` is read: by a node or as a graph output (an export may name
/// outputs that nothing reads, as PyTorch's names an LSTM's last states).
pub(crate) fn output_read(ctx: &Ctx<'_>, node: &Node<'_>, k: usize) -> bool {
    node.proto.output.get(k).is_some_and(|t| !t.is_empty() && ctx.uses(t) > 0)
}

/// Checks, before a mapping computes a constant of `shape` (index tables, transform
/// matrices: their size follows from the model's sizes), that ordo keeps a constant that large;
/// otherwise the mapping is unsupported and, having emitted nothing yet, the node falls back to
/// the plannable import. The sizes are multiplied saturating: they may come from attributes.
pub(crate) fn check_constant(node: &Node<'_>, what: &str, shape: &[usize]) -> OnnxResult<()> {
    let elements = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
    if elements > crate::tensor::MAX_CONSTANT {
        return Err(node.unsupported(format!(
            "its {what} would be a constant of {elements} elements; ordo keeps constants of at \
             most {}",
            crate::tensor::MAX_CONSTANT
        )));
    }
    Ok(())
}

/// A node with a single output.
pub(crate) fn one(value: Value) -> OnnxResult<Outputs> {
    Ok(vec![Some(value)])
}

/// A `Reshape` to a resolved shape.
pub(crate) fn reshape_op(shape: &[usize]) -> ordo_ir::Op {
    ordo_ir::Op::Reshape { shape: shape.iter().map(|&d| d as i64).collect() }
}

/// Resolves a possibly negative axis against a rank.
pub(crate) fn resolve_axis(node: &Node<'_>, axis: i64, rank: usize) -> OnnxResult<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(node.malformed(format!("axis {axis} is out of range for rank {rank}")))
    }
}
