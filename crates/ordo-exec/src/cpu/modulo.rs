//! `Mod`: remainders with NumPy broadcasting, and their gradient (floats).

use ordo_ir::Op;
use ordo_ir::op::Grad;

use super::element::reads_unsigned;
use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::{
    Call, binary_layout, broadcast_strides, for_each_broadcast, numel, reduce_to, tensor,
};

/// Python's integer remainder (the divisor's sign) or C's (`fmod`: the dividend's); of u64
/// bit patterns when `unsigned`.
fn int_rem(a: i64, b: i64, fmod: bool, unsigned: bool) -> Option<i64> {
    if unsigned {
        return (a as u64).checked_rem(b as u64).map(|r| r as i64);
    }
    // i64::MIN % -1 is 0 (checked_rem would call it an overflow).
    let r = if b == -1 { 0 } else { a.checked_rem(b)? };
    Some(if !fmod && r != 0 && (r < 0) != (b < 0) { r + b } else { r })
}

pub(crate) fn modulo(op: &Op, fmod: bool, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let (out, sa, sb) = binary_layout(op, &c)?;
    Ok(vec![match (c.inputs[0].data(), c.inputs[1].data()) {
        (Data::F32(a), Data::F32(b)) => {
            if !fmod {
                return Err(c.value_err("Mod of floats needs fmod = 1 (ONNX's rule)"));
            }
            let mut y = vec![0.0f32; numel(&out)];
            for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = a[i] % b[j]);
            tensor(&out, y)?
        }
        (Data::I64(a), Data::I64(b)) => {
            let mut y = vec![0i64; numel(&out)];
            let mut zero = false;
            let unsigned = reads_unsigned(&c);
            for_each_broadcast(&out, &sa, &sb, |o, i, j| {
                match int_rem(a[i], b[j], fmod, unsigned) {
                    Some(r) => y[o] = r,
                    None => zero = true,
                }
            });
            if zero {
                return Err(c.value_err("integer remainder by zero"));
            }
            Tensor::from_i64(&out, y)?
        }
        _ => return Err(c.value_err("Mod of these element types")),
    }])
}

/// The gradient of C's float remainder `a - b * trunc(a / b)`: `dy` for the dividend,
/// `-dy * trunc(a / b)` for the divisor, each summed down to its shape (reads both).
pub(crate) fn modulo_grad(k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let dy_shape = c.inputs[0].shape().to_vec();
    let (dy, a, b) = (c.input_f32(0)?, c.input_f32(1)?, c.input_f32(2)?);
    let sa = broadcast_strides(c.inputs[1].shape(), &dy_shape);
    let sb = broadcast_strides(c.inputs[2].shape(), &dy_shape);
    let mut t = vec![0.0f32; dy.len()];
    for_each_broadcast(&dy_shape, &sa, &sb, |o, i, j| {
        t[o] = if k == 0 { dy[o] } else { -dy[o] * (a[i] / b[j]).trunc() };
    });
    Ok(vec![tensor(&shape, reduce_to(&t, &dy_shape, &shape, None))?])
}
