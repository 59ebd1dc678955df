//! Convolutions as patches times the weight (an im2col), for those the IR's convolutions
//! cannot run: the integer ones (exact sums of a computed weight, [`super::qconv`]) and
//! `DeformConv` (patches sampled at learned offsets, [`super::deform_conv`]).

use ordo_ir::op::PoolNd;
use ordo_ir::{Op, OutletId, TensorFact};

use super::common::reshape_op;
use super::indexed::coordinates;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;

/// The sizes of a convolution of `x` `[N, C, d...]` by a weight `[M, C / G, k...]`.
pub(super) struct Grouped {
    /// `N`.
    pub batch: usize,
    /// `C`.
    pub channels: usize,
    /// `M`.
    pub out_channels: usize,
    /// `G`.
    pub groups: usize,
    /// The window: kernel, strides, dilations and padding (before each spatial dim, then
    /// after), as a pooling's.
    pub attrs: PoolNd,
    /// The output's spatial dims.
    pub out: Vec<usize>,
    /// Elements of one kernel window (`k...` multiplied).
    pub window: usize,
}

impl Grouped {
    /// The sizes, the groups checked against the channels, and the window read from the
    /// node's attributes (`kernel_shape` may be left out: the weight's).
    pub fn of(node: &Node<'_>, x: &TensorFact, w: &TensorFact) -> OnnxResult<Self> {
        if x.rank() < 3 || w.rank() != x.rank() {
            return Err(node.shape_error(format!(
                "input {x} and weight {w}: expected [N, C, d...] and [M, C / group, k...] of \
                 one rank, at least 3"
            )));
        }
        let groups = usize::try_from(node.int("group", 1)?)
            .ok()
            .filter(|&g| g > 0)
            .ok_or_else(|| node.malformed("group must be positive"))?;
        let (channels, out_channels) = (x.shape[1], w.shape[0]);
        if w.shape[1] * groups != channels || out_channels % groups != 0 {
            return Err(node.shape_error(format!(
                "input {x} and weight {w} in {groups} group(s): expected C = {groups} x the \
                 weight's dim 1 and M divisible by the groups"
            )));
        }
        let spatial = &x.shape[2..];
        let attrs = super::pool::window_nd(node, spatial, false, Some(&w.shape[2..]))?;
        let out = (0..spatial.len())
            .map(|d| attrs.out_len(d, spatial[d]))
            .collect::<Option<_>>()
            .ok_or_else(|| {
            node.shape_error(format!("the kernel does not fit the input {x}"))
        })?;
        let window = w.shape[2..].iter().product();
        Ok(Self { batch: x.shape[0], channels, out_channels, groups, attrs, out, window })
    }

    /// Where window cell `cell` of output position `position` (both row-major) reads the
    /// input, per spatial dim, in elements: outside `0..size` in the padding.
    pub fn reads(&self, position: usize, cell: usize) -> Vec<i64> {
        let p = &self.attrs;
        let (at, cell) = (coordinates(position, &self.out), coordinates(cell, &p.kernel));
        (0..self.out.len())
            .map(|d| (at[d] * p.stride[d] + cell[d] * p.dilation[d]) as i64 - p.pads[d] as i64)
            .collect()
    }

    /// Output positions (the output's spatial dims multiplied).
    pub fn positions(&self) -> usize {
        self.out.iter().product()
    }

    /// The output's shape, `[N, M, out...]`.
    pub fn output_shape(&self) -> Vec<usize> {
        [self.batch, self.out_channels].into_iter().chain(self.out.iter().copied()).collect()
    }

    /// `patches` (`[N, C, positions, window]`) times `w` (`[M, C / G, k...]`) per group, by
    /// `product` (of `[.., L, S]` and `[.., S, M / G]`, `S` the shared dim's size):
    /// `[N, G, M / G, positions]`, which is the output once reshaped to
    /// [`Self::output_shape`].
    pub fn times_weight(
        &self,
        ctx: &mut Ctx<'_>,
        node: &Node<'_>,
        patches: OutletId,
        w: OutletId,
        product: impl FnOnce(&mut Ctx<'_>, OutletId, OutletId, usize) -> OnnxResult<OutletId>,
    ) -> OnnxResult<OutletId> {
        let (n, g, positions) = (self.batch, self.groups, self.positions());
        let (cg, mg) = (self.channels / g, self.out_channels / g);
        let shared = cg * self.window;
        let part = |ctx: &mut Ctx<'_>, name: &str, op: Op, input: OutletId| {
            ctx.emit_part(node, name, op, &[input])
        };
        // [N, C, L, K] -> [N, L, C, K] -> [N, L, G, C/G * K] -> [N, G, L, C/G * K].
        let p = part(ctx, "patches.by_position", transpose(&[0, 2, 1, 3]), patches)?;
        let p = part(ctx, "patches.grouped", reshape_op(&[n, positions, g, shared]), p)?;
        let p = part(ctx, "patches.rows", transpose(&[0, 2, 1, 3]), p)?;
        // [M, C/G, k...] -> [G, M/G, C/G * K] -> [G, C/G * K, M/G].
        let w = part(ctx, "w.grouped", reshape_op(&[g, mg, shared]), w)?;
        let w = part(ctx, "w.columns", transpose(&[0, 2, 1]), w)?;
        // [N, G, L, M/G] -> [N, G, M/G, L].
        let y = product(ctx, p, w, shared)?;
        part(ctx, "product.by_channel", transpose(&[0, 1, 3, 2]), y)
    }
}

/// A `Transpose` by `perm`.
fn transpose(perm: &[usize]) -> Op {
    Op::Transpose { perm: perm.to_vec() }
}

/// The shape a per-output-channel vector (`[M]`) takes to broadcast over `[N, M, out...]` of
/// rank `rank`: `[M, 1, ...]`, of rank `rank - 1`.
pub(super) fn per_channel(m: usize, rank: usize) -> Vec<usize> {
    std::iter::once(m).chain(std::iter::repeat_n(1, rank - 2)).collect()
}
