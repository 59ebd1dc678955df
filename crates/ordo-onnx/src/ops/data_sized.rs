//! Operators whose output size depends on the values: `Range` of run-time bounds, `NonZero`,
//! `NonMaxSuppression` and `Unique`. Each is planned at the size the file declares for its
//! output (as the import plans the other data-dependent sizes) and runs as the IR's data-sized
//! op, whose kernel checks at run time that the values give that size. Without a declared size (or,
//! for `NonMaxSuppression`, with run-time thresholds) they fall to the generic rule, which
//! plans them at their largest or refuses them; a `Range` of constants folds there.

use ordo_ir::op::{NonMaxSuppression, Unique, UniquePart};
use ordo_ir::{Op, TensorFact};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// The fact the file declares for output 0, if it has `rank`.
fn declared(ctx: &Ctx<'_>, node: &Node<'_>, rank: usize) -> Option<TensorFact> {
    let output = node.proto.output.first()?;
    ctx.declared.get(output.as_str()).filter(|d| d.rank() == rank).cloned()
}

/// Emits `op` over the node's first `inputs` once its inferred output is the declared one.
fn emit_sized(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    op: Op,
    inputs: usize,
    declared: &TensorFact,
) -> OnnxResult<Outputs> {
    let values = (0..inputs).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    let facts = values.iter().map(|v| ctx.fact_of(node, v)).collect::<OnnxResult<Vec<_>>>()?;
    let refs: Vec<_> = facts.iter().collect();
    check_declared(node, &op, &refs, 0, declared)?;
    let wires = (0..inputs).map(|i| ctx.wire(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    ctx.sized_by_file.push(node.name.clone());
    one(ctx.emit_value(&node.name, op, &wires)?)
}

/// Checks that `op` over inputs `facts` gives the fact the file declares for output `k`.
fn check_declared(
    node: &Node<'_>,
    op: &Op,
    facts: &[&TensorFact],
    k: usize,
    declared: &TensorFact,
) -> OnnxResult<()> {
    let inferred = op.infer(facts).map_err(|m| node.shape_error(m))?.remove(0);
    if &inferred != declared {
        return Err(node.shape_error(format!(
            "the file declares output {k} {declared}, its inputs give {inferred}"
        )));
    }
    Ok(())
}

/// Whether every input is a constant (the generic rule folds the node).
fn all_constant(ctx: &Ctx<'_>, node: &Node<'_>) -> OnnxResult<bool> {
    for i in 0..node.proto.input.len() {
        if node.input(i).is_some() && !matches!(ctx.input(node, i)?, Value::Const(_)) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `Range(start, limit, delta)`.
pub(crate) fn range(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if all_constant(ctx, node)? {
        return Err(node.unsupported("constants: folded by the generic rule"));
    }
    // Without a declared size the generic rule's message says why it is refused.
    let declared = declared(ctx, node, 1).ok_or_else(|| node.unsupported("no declared size"))?;
    emit_sized(ctx, node, Op::Range { len: declared.shape[0] }, 3, &declared)
}

/// `NonZero(x)`.
pub(crate) fn non_zero(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let declared = declared(ctx, node, 2).ok_or_else(|| node.unsupported("no declared size"))?;
    emit_sized(ctx, node, Op::NonZero { count: declared.shape[1] }, 1, &declared)
}

/// `NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold,
/// score_threshold)` with the last three constants (as exports write them).
pub(crate) fn non_max_suppression(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let scalar = |i: usize| -> OnnxResult<Option<f64>> {
        if node.input(i).is_none() {
            return Ok(None);
        }
        match ctx.input(node, i)? {
            // An empty tensor is the input left out.
            Value::Const(c) if c.numel() == 0 => Ok(None),
            Value::Const(c) => c.scalar().map(Some).ok_or_else(|| {
                node.malformed(format!("input {i}: expected one value, got shape {:?}", c.shape))
            }),
            _ => Err(node.unsupported(format!("input {i} is computed at run time"))),
        }
    };
    let max_per_class = scalar(2)?.unwrap_or(0.0).max(0.0);
    let (iou_threshold, score_threshold) = (scalar(3)?.unwrap_or(0.0), scalar(4)?);
    let declared = declared(ctx, node, 2).ok_or_else(|| node.unsupported("no declared size"))?;
    let nms = NonMaxSuppression {
        count: declared.shape[0],
        center_point_box: node.int("center_point_box", 0)? != 0,
        max_per_class: max_per_class.min(usize::MAX as f64) as usize,
        iou_threshold,
        score_threshold,
    };
    emit_sized(ctx, node, Op::NonMaxSuppression(nms), 2, &declared)
}

/// `Unique(x)`: an IR node per output read, each at the sizes the file declares for it.
pub(crate) fn unique(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if fact.dtype == ordo_ir::DType::String {
        return Err(node.unsupported("distinct strings: planned by the generic rule"));
    }
    let axis = match node.has_attr("axis") {
        true => Some(resolve_axis(node, node.int("axis", 0)?, fact.rank())?),
        false => None,
    };
    let parts = [UniquePart::Values, UniquePart::Indices, UniquePart::Inverse, UniquePart::Counts];
    let read: Vec<usize> = (0..4).filter(|&k| node.output_named(k)).collect();
    let declared: Vec<TensorFact> = read
        .iter()
        .map(|&k| ctx.declared.get(node.proto.output[k].as_str()).cloned())
        .collect::<Option<_>>()
        .ok_or_else(|| node.unsupported("no declared size"))?;
    // The count: the values' axis dim, or the length of the indices or counts.
    let count = match (read.first(), declared.first()) {
        (Some(0), Some(d)) => d.shape.get(axis.unwrap_or(0)).copied(),
        (Some(1 | 3), Some(d)) => d.shape.first().copied(),
        _ => None,
    }
    .ok_or_else(|| node.unsupported("no declared size"))?;
    let sorted = node.int("sorted", 1)? != 0;
    let ops: Vec<Op> = read
        .iter()
        .zip(&declared)
        .map(|(&k, want)| {
            let op = Op::Unique(Unique { axis, sorted, count, part: parts[k] });
            check_declared(node, &op, &[&fact], k, want).map(|()| op)
        })
        .collect::<OnnxResult<_>>()?;
    let x = ctx.wire(node, 0)?;
    let mut outputs = vec![None; node.num_outputs().min(4)];
    for (&k, op) in read.iter().zip(ops) {
        outputs[k] = Some(ctx.emit_value(&format!("{}:{k}", node.name), op, &[x])?);
    }
    ctx.sized_by_file.push(node.name.clone());
    Ok(outputs)
}
