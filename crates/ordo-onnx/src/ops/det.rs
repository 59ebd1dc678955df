//! `Det` as IR ops: Gaussian elimination with partial pivoting (LAPACK's `getrf`, which
//! NumPy's `det` calls), one step per column, unrolled at import. A step takes the row of
//! the column's largest magnitude (the first of equals) as pivot, swaps it to the top (a
//! `GatherElements` by a permutation computed from the `ArgMax`; the sign flips when it
//! moves), and subtracts its multiples from the rows below; the determinant is the product of
//! the pivots and the signs. A zero pivot (the column is zero below the diagonal) makes the
//! determinant 0 without dividing by it. Gradients flow through the arithmetic and the
//! gathers.

use ordo_ir::op::{CompareKind, UnaryOp};
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, one, reshape_op};
use super::indexed::index_buffer;
use super::parts::Parts;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;

/// The largest matrix unrolled: each column is about twenty IR ops.
const MAX_SIZE: usize = 64;

/// `Det(X)` of `[..., n, n]`: `[...]`.
pub(crate) fn det(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let rank = fact.rank();
    if rank < 2 || fact.shape[rank - 1] != fact.shape[rank - 2] {
        return Err(node.shape_error(format!("input {fact}: expected [..., n, n]")));
    }
    let n = fact.shape[rank - 1];
    if fact.dtype != DType::F32 {
        return Err(node.unsupported(format!("input {fact}: computed in f32 only")));
    }
    if !(1..=MAX_SIZE).contains(&n) {
        return Err(node.unsupported(format!(
            "input {fact}: matrices of 1 to {MAX_SIZE} rows are unrolled at import"
        )));
    }
    let batch: usize = fact.shape[..rank - 2].iter().product();
    let mut e = Parts::of(node);
    let x = ctx.wire(node, 0)?;
    let mut m = e.reshape(ctx, x, &[batch, n, n])?;
    let zero = index_buffer(ctx, node, "zero", vec![1], vec![0])?;
    let mut det: Option<OutletId> = None;
    for size in (1..=n).rev() {
        let column = e.slice(ctx, m, 2, 0, 1)?;
        let column = e.reshape(ctx, column, &[batch, size])?;
        let pivot = if size == 1 {
            e.reshape(ctx, column, &[batch])?
        } else {
            // The pivot row p (per matrix) swapped with row 0: rows 0 and p exchange indices.
            let magnitude = e.unary(ctx, column, UnaryOp::Abs)?;
            let arg = Op::ArgExtreme { max: true, axis: 1, keepdims: true, select_last: false };
            let p = e.op(ctx, "pivot_row", arg, &[magnitude])?;
            let rows: Vec<i64> = (0..size as i64).collect();
            let rows = index_buffer(ctx, node, &format!("rows{size}"), vec![1, size], rows)?;
            let is_p = e.op(ctx, "is_pivot", Op::Compare(CompareKind::Equal), &[rows, p])?;
            let is_top = e.op(ctx, "is_top", Op::Compare(CompareKind::Equal), &[rows, zero])?;
            let moved = e.select(ctx, is_p, zero, rows)?;
            let order = e.select(ctx, is_top, p, moved)?;
            let order = e.reshape(ctx, order, &[batch, size, 1])?;
            let order =
                e.op(ctx, "order", Op::Expand { shape: vec![batch, size, size] }, &[order])?;
            m = e.op(ctx, "swapped", Op::GatherElements { axis: 1 }, &[m, order])?;
            // The sign: -1 where the pivot moved (p != 0), else 1.
            let stayed = e.op(ctx, "stayed", Op::Compare(CompareKind::Equal), &[p, zero])?;
            let stayed = e.op(ctx, "stayed", Op::cast(DType::F32), &[stayed])?;
            let sign = e.affine(ctx, stayed, 2.0, -1.0)?;
            let sign = e.reshape(ctx, sign, &[batch])?;
            det = Some(match det {
                None => sign,
                Some(d) => e.mul(ctx, d, sign)?,
            });
            let top = e.slice(ctx, m, 1, 0, 1)?;
            let pivot = e.slice(ctx, top, 2, 0, 1)?;
            // The rows below less their multiple of the pivot row; a zero pivot (its column
            // is zero) divides by 1 instead.
            let is_zero = e.compare(ctx, pivot, CompareKind::Equal, 0.0)?;
            let unit = e.constant(ctx, 1.0)?;
            let divisor = e.select(ctx, is_zero, unit, pivot)?;
            let below = e.slice(ctx, m, 1, 1, size)?;
            let lead = e.slice(ctx, below, 2, 0, 1)?;
            let factor = e.op(ctx, "factor", Op::Div, &[lead, divisor])?;
            let scaled = e.mul(ctx, factor, top)?;
            let rest = e.sub(ctx, below, scaled)?;
            m = e.slice(ctx, rest, 2, 1, size)?;
            e.reshape(ctx, pivot, &[batch])?
        };
        det = Some(match det {
            None => pivot,
            Some(d) => e.mul(ctx, d, pivot)?,
        });
    }
    let shape: Vec<usize> = fact.shape[..rank - 2].to_vec();
    let det = det.expect("a column at least");
    // `[batch]` to the batch dims (a scalar for one matrix), named after the node.
    one(ctx.emit_value(&node.name, reshape_op(&shape), &[det])?)
}
