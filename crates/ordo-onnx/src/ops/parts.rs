//! [`Parts`]: the IR nodes of an operator written as many IR ops, numbered after their node
//! (`node.what3`), with the elementwise helpers such mappings share.

use ordo_ir::op::{CompareKind, UnaryOp};
use ordo_ir::{Op, OutletId};

use super::common::reshape_op;
use super::composite::scalar;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;

/// Emits the parts of one node under numbered names.
pub(crate) struct Parts<'n, 'a> {
    node: &'n Node<'a>,
    count: usize,
}

impl<'n, 'a> Parts<'n, 'a> {
    /// The parts of `node`.
    pub(crate) fn of(node: &'n Node<'a>) -> Self {
        Self { node, count: 0 }
    }

    /// One IR node, `what` and a number naming it.
    pub(crate) fn op(
        &mut self,
        ctx: &mut Ctx<'_>,
        what: &str,
        op: Op,
        ins: &[OutletId],
    ) -> OnnxResult<OutletId> {
        self.count += 1;
        ctx.emit_part(self.node, &format!("{what}{}", self.count), op, ins)
    }

    /// A scalar of input 0's float type.
    pub(crate) fn constant(&mut self, ctx: &mut Ctx<'_>, v: f64) -> OnnxResult<OutletId> {
        self.count += 1;
        scalar(ctx, self.node, &format!("c{}", self.count), v)
    }

    /// `a * x + b` of a tensor and two numbers.
    pub(crate) fn affine(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        a: f64,
        b: f64,
    ) -> OnnxResult<OutletId> {
        let scaled = self.op(ctx, "scaled", Op::Scale { factor: a }, &[x])?;
        let b = self.constant(ctx, b)?;
        self.op(ctx, "shifted", Op::Add, &[scaled, b])
    }

    /// `x <kind> v` of a tensor and a number.
    pub(crate) fn compare(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        kind: CompareKind,
        v: f64,
    ) -> OnnxResult<OutletId> {
        let v = self.constant(ctx, v)?;
        self.op(ctx, "compare", Op::Compare(kind), &[x, v])
    }

    /// `where(condition, a, b)`.
    pub(crate) fn select(
        &mut self,
        ctx: &mut Ctx<'_>,
        condition: OutletId,
        a: OutletId,
        b: OutletId,
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "where", Op::Where, &[condition, a, b])
    }

    /// An elementwise function.
    pub(crate) fn unary(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        func: UnaryOp,
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "unary", Op::Unary { func }, &[x])
    }

    /// `a + b`.
    pub(crate) fn add(
        &mut self,
        ctx: &mut Ctx<'_>,
        a: OutletId,
        b: OutletId,
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "add", Op::Add, &[a, b])
    }

    /// `a * b`, elementwise.
    pub(crate) fn mul(
        &mut self,
        ctx: &mut Ctx<'_>,
        a: OutletId,
        b: OutletId,
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "mul", Op::Mul, &[a, b])
    }

    /// `a - b`.
    pub(crate) fn sub(
        &mut self,
        ctx: &mut Ctx<'_>,
        a: OutletId,
        b: OutletId,
    ) -> OnnxResult<OutletId> {
        let negated = self.op(ctx, "neg", Op::Scale { factor: -1.0 }, &[b])?;
        self.add(ctx, a, negated)
    }

    /// `x[start..end]` along `axis`.
    pub(crate) fn slice(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        axis: usize,
        start: usize,
        end: usize,
    ) -> OnnxResult<OutletId> {
        let op = Op::Slice { axis: axis as i64, start: start as i64, end: end as i64, step: 1 };
        self.op(ctx, "slice", op, &[x])
    }

    /// `x` reshaped.
    pub(crate) fn reshape(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        shape: &[usize],
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "reshape", reshape_op(shape), &[x])
    }

    /// `x` with its dims permuted.
    pub(crate) fn transpose(
        &mut self,
        ctx: &mut Ctx<'_>,
        x: OutletId,
        perm: &[usize],
    ) -> OnnxResult<OutletId> {
        self.op(ctx, "transpose", Op::Transpose { perm: perm.to_vec() }, &[x])
    }
}
