//! `Range` of values computed at run time. A `Range` of constants folds at import (the generic
//! rule); one whose bounds come from the data has a length that depends on them, so it is
//! planned at the length the file declares for its output (as a data-dependent size is) and
//! runs as the IR's `Range`, which checks at run time that the values give that length.

use ordo_ir::Op;

use super::{Outputs, one};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// `Range(start, limit, delta)`.
pub(crate) fn range(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let inputs = (0..3).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    if inputs.iter().all(|v| matches!(v, Value::Const(_))) {
        return Err(node.unsupported("constants: folded by the generic rule"));
    }
    let facts = inputs.iter().map(|v| ctx.fact_of(node, v)).collect::<OnnxResult<Vec<_>>>()?;
    let output = node.proto.output.first().map(String::as_str).unwrap_or_default();
    let Some(declared) = ctx.declared.get(output).filter(|d| d.rank() == 1).cloned() else {
        // The generic rule's message says so.
        return Err(node.unsupported("no declared size"));
    };
    let op = Op::Range { len: declared.shape[0] };
    let refs: Vec<_> = facts.iter().collect();
    let inferred = op.infer(&refs).map_err(|m| node.shape_error(m))?;
    if inferred[0] != declared {
        return Err(node.shape_error(format!(
            "the file declares its output {declared}, its inputs give {}",
            inferred[0]
        )));
    }
    let wires = (0..3).map(|i| ctx.wire(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    ctx.sized_by_file.push(node.name.clone());
    one(ctx.emit_value(&node.name, op, &wires)?)
}
