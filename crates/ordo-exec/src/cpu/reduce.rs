//! Sums and means over axes, and their gradient.

use ordo_ir::Op;
use ordo_ir::op::{Grad, Reduce, ReduceKind};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, broadcast_strides, for_each_broadcast, reduce_to, tensor};

/// `y` = the sum (or mean) of `x` over the axes: `x` summed into the kept shape (the reduced
/// axes as ones, which is also the order of the output's data), then scaled for a mean.
pub(crate) fn reduce(op: &Op, r: &Reduce, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (x, shape) = (c.input_f32(0)?, c.inputs[0].shape());
    let mut y = reduce_to(x, shape, &r.kept_shape(shape), None);
    if r.kind == ReduceKind::Mean {
        let n = r.count(shape) as f32;
        y.iter_mut().for_each(|v| *v /= n);
    }
    Ok(vec![tensor(&out, y)?])
}

/// `dx` = `dy` spread back over the reduced axes (divided by their size for a mean).
pub(crate) fn reduce_grad(of: &Op, r: &Reduce, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let scale = match r.kind {
        ReduceKind::Sum => 1.0,
        ReduceKind::Mean => 1.0 / r.count(&xf.shape) as f32,
    };
    let kept = r.kept_shape(&xf.shape);
    let (sx, sd) = (broadcast_strides(&xf.shape, &xf.shape), broadcast_strides(&kept, &xf.shape));
    let mut dx = vec![0.0f32; xf.numel() as usize];
    for_each_broadcast(&xf.shape, &sx, &sd, |o, _, j| dx[o] = dy[j] * scale);
    Ok(vec![tensor(&xf.shape, dx)?])
}
