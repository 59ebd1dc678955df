//! Pooling: `MaxPool`, `AveragePool`, `GlobalAveragePool`.

use ordo_ir::Op;
use ordo_ir::op::Pool2d;

use super::conv::window;
use super::{Outputs, one};
use crate::ctx::Ctx;
use crate::error::OnnxResult;

use crate::node::Node;

/// `MaxPool` and `AveragePool` over NCHW input (the indices output of `MaxPool` is not imported).
pub(crate) fn pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if fact.rank() != 4 {
        return Err(node.unsupported(format!("input {fact}: only 2-D pooling (NCHW)")));
    }
    let w = window(node, [fact.shape[2], fact.shape[3]], None)?;
    if w.dilation != [1, 1] {
        return Err(node.unsupported("dilated pooling"));
    }
    if node.int("storage_order", 0)? != 0 {
        return Err(node.unsupported("column-major storage order"));
    }
    let max = node.op_type() == "MaxPool";
    let pool = Pool2d {
        kernel: w.kernel,
        stride: w.stride,
        padding: w.padding,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: node.int("count_include_pad", 0)? != 0,
    };
    let op = if max { Op::MaxPool2d(pool) } else { Op::AvgPool2d(pool) };
    let x = ctx.wire(node, 0)?;
    Ok(vec![Some(ctx.emit_value(&node.name, op, &[x])?), None])
}

/// `GlobalAveragePool` of NCHW input.
pub(crate) fn global_avg(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::GlobalAvgPool, &[x])?)
}
