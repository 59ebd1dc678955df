//! Sampling grids: `AffineGrid`, the points of a regular grid over `[-1, 1]` mapped by one
//! affine transform per sample, as a product of a constant grid with the transforms (its
//! gradient, to the transforms, that of the IR's `MatMul`).

use ordo_ir::Op;

use super::common::{Outputs, check_constant, one, reshape_op};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// `AffineGrid(theta, size)`: `theta` `[N, r, r + 1]` (r = 2 or 3 spatial dims), `size` a
/// constant `[N, C, (D,) H, W]`; the output `[N, (D,) H, W, r]` holds, at each point, `theta`
/// applied to its normalised coordinates `(x, y, (z,) 1)`, `x` along W. The coordinates of a
/// dim of `n` points are `-1 + 2i / (n - 1)` with `align_corners`, else the cells' centres
/// `-1 + (2i + 1) / n` (a dim of one point: -1 and 0, as PyTorch's `affine_grid`).
pub(crate) fn affine_grid(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let size = ctx.const_ints(node, 1, "size")?;
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let spatial: Vec<usize> = match &size[..] {
        [_, _, rest @ ..] if matches!(rest.len(), 2 | 3) && rest.iter().all(|&d| d > 0) => {
            rest.iter().map(|&d| d as usize).collect()
        }
        _ => {
            return Err(node.malformed(format!(
                "size {size:?}: expected [N, C, H, W] or [N, C, D, H, W] of positive sizes"
            )));
        }
    };
    let r = spatial.len();
    let n = size[0].max(0) as usize;
    if !fact.dtype.is_float() || fact.shape != [n, r, r + 1] {
        return Err(node.shape_error(format!(
            "theta {fact}: expected [{n}, {r}, {}] floats for size {size:?}",
            r + 1
        )));
    }
    check_constant(node, "base grid", &[spatial.clone(), vec![r + 1]].concat())?;
    let align_corners = node.int("align_corners", 0)? != 0;
    let coordinates: Vec<Vec<f64>> =
        spatial.iter().map(|&d| axis_points(d, align_corners)).collect();
    let points: usize = spatial.iter().product();
    let mut base = Vec::with_capacity(points * (r + 1));
    for p in 0..points {
        // Row-major position of point p, then its coordinates from the last dim (x) to the
        // first, then the affine 1.
        let mut rest = p;
        let mut position = vec![0; r];
        for (k, &d) in spatial.iter().enumerate().rev() {
            position[k] = rest % d;
            rest /= d;
        }
        base.extend((0..r).rev().map(|k| coordinates[k][position[k]]));
        base.push(1.0);
    }
    let base =
        ConstTensor { elem: code::FLOAT, shape: vec![points, r + 1], data: ConstData::Float(base) };
    let base = crate::fold::cast(&base, fact.dtype);
    let base = ctx.buffer(node, &format!("{}.base_grid", node.name), &base)?;
    let theta = ctx.wire(node, 0)?;
    let transposed = Op::Transpose { perm: vec![0, 2, 1] };
    let theta_t = ctx.emit_part(node, "theta_transposed", transposed, &[theta])?;
    let mapped = ctx.emit_part(node, "mapped", Op::MatMul, &[base, theta_t])?;
    let shape = [vec![n], spatial, vec![r]].concat();
    one(ctx.emit_value(&node.name, reshape_op(&shape), &[mapped])?)
}

/// The normalised coordinates of a dim of `n` points.
fn axis_points(n: usize, align_corners: bool) -> Vec<f64> {
    (0..n)
        .map(|i| match (align_corners, n) {
            (true, 1) => -1.0,
            (true, _) => -1.0 + 2.0 * i as f64 / (n - 1) as f64,
            (false, _) => -1.0 + (2 * i + 1) as f64 / n as f64,
        })
        .collect()
}
