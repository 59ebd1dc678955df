//! 2-D transposed convolution through the convolution it transposes (`ConvTranspose2d::
//! transposed`): its forward pass is that convolution's input gradient, its input gradient
//! that convolution's forward pass, and its weight gradient that convolution's weight
//! gradient with the roles of input and upstream gradient swapped.

use ordo_ir::Op;
use ordo_ir::op::{ConvTranspose2d, Grad};

use super::conv::{Geom, channel_sums};
use super::error::KernelResult;
use super::linear::param_grad_inputs;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// The convolution geometry for a transposed convolution from `x` (its input) to `y`.
fn geometry(ct: &ConvTranspose2d, x: &[usize], y: &[usize]) -> Geom {
    // The transposed convolution reads `y`-shaped tensors and writes `x`-shaped ones.
    Geom::new(&ct.transposed(x[1]), y, x)
}

pub(crate) fn forward(op: &Op, ct: &ConvTranspose2d, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    let out = c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let geo = geometry(ct, &facts[0].shape, &out.shape);
    let mut y = geo.input_grad(c.input_f32(0)?, c.param_f32(0)?);
    if ct.bias {
        let b = c.param_f32(1)?;
        let plane = out.shape[2] * out.shape[3];
        for (i, values) in y.chunks_exact_mut(plane.max(1)).enumerate() {
            values.iter_mut().for_each(|v| *v += b[i % ct.out_channels]);
        }
    }
    Ok(vec![tensor(&out.shape, y)?])
}

/// `dx`: the transposed convolution's forward convolution of `dy`.
pub(crate) fn grad_input(
    of: &Op,
    ct: &ConvTranspose2d,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?.clone();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    c.check_params(of, std::slice::from_ref(&xf))?;
    let geo = geometry(ct, &xf.shape, c.inputs[0].shape());
    Ok(vec![tensor(&xf.shape, geo.forward(dy, c.param_f32(0)?, None))?])
}

/// `dW`: the convolution's weight gradient for input `dy` and upstream gradient `x`; `db`:
/// `dy` summed per output channel.
pub(crate) fn grad_params(
    of: &Op,
    ct: &ConvTranspose2d,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (xf, dy) = param_grad_inputs(&c, of, g)?;
    let geo = geometry(ct, &xf.shape, c.inputs[0].shape());
    let mut out = vec![tensor(&g.produces[0].shape, geo.weight_grad(dy, c.input_f32(1)?))?];
    if ct.bias {
        let plane: usize = c.inputs[0].shape()[2..].iter().product();
        out.push(tensor(&[ct.out_channels], channel_sums(dy, ct.out_channels, plane))?);
    }
    Ok(out)
}
