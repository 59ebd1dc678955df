//! ONNX's `Reduce*` operators of float tensors over constant axes: the IR's `Reduce`; the
//! maximum and minimum of a bool tensor (any, all) as that of its 0s and 1s. Run-time axes and
//! integer inputs import for planning (the generic fallback).

use ordo_ir::op::{Reduce, ReduceKind};
use ordo_ir::{DType, Op};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;

pub(crate) fn reduce(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let Some(kind) = ReduceKind::from_onnx_name(node.op_type()) else {
        return Err(node.unsupported(format!("no IR reduction {}", node.op_type())));
    };
    let x = ctx.input(node, 0)?;
    let fact = ctx.fact_of(node, &x)?;
    let bools = fact.dtype == DType::Bool && matches!(kind, ReduceKind::Max | ReduceKind::Min);
    if !(fact.dtype.is_float() || bools) || x.as_const().is_some() {
        return Err(node.unsupported("the IR reduces run-time float tensors"));
    }
    let axes: Option<Vec<i64>> = match node.ints("axes") {
        Some(a) => Some(a.to_vec()),
        None if node.input(1).is_some() => Some(
            ctx.const_input(node, 1, "axes")?
                .to_i64s()
                .ok_or_else(|| node.unsupported("axes must be integers"))?,
        ),
        None => None,
    };
    let mut axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            a.iter().map(|&a| resolve_axis(node, a, fact.rank())).collect::<OnnxResult<_>>()?
        }
        // No axes: everything, unless the node asks for nothing.
        _ if node.int("noop_with_empty_axes", 0)? != 0 => {
            let w = ctx.wire(node, 0)?;
            let fact = ctx.graph.fact(w).cloned().expect("emitted");
            return one(crate::value::Value::wire(w, fact));
        }
        _ => (0..fact.rank()).collect(),
    };
    axes.sort_unstable();
    axes.dedup();
    let keepdims = node.int("keepdims", 1)? != 0;
    let reduce = Op::Reduce(Reduce { kind, axes, keepdims });
    let w = ctx.wire(node, 0)?;
    if bools {
        let cast = Op::cast(DType::F32);
        let numbers = ctx.emit(&format!("{}.numbers", node.name), cast, &[w], Vec::new())?[0];
        let r = ctx.emit(&format!("{}.reduce", node.name), reduce, &[numbers], Vec::new())?[0];
        return one(ctx.emit_value(&node.name, Op::cast(DType::Bool), &[r])?);
    }
    one(ctx.emit_value(&node.name, reduce, &[w])?)
}
