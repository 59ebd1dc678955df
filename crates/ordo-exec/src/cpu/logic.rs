//! Comparisons, logic and selection with NumPy broadcasting, and the gradient of `Where`.

use ordo_ir::Op;
use ordo_ir::op::{CompareKind, Grad, LogicKind};

use super::element::{reads_unsigned, u64_order};
use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::{
    Call, binary_layout, broadcast_strides, for_each_broadcast, numel, reduce_to, tensor,
};

/// `Equal`, `Less`, ...: a bool tensor.
pub(crate) fn compare(op: &Op, kind: CompareKind, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let (out, sa, sb) = binary_layout(op, &c)?;
    let mut y = vec![false; numel(&out)];
    match (c.inputs[0].data(), c.inputs[1].data()) {
        (Data::F32(a), Data::F32(b)) => {
            for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = kind.holds(a[i], b[j]))
        }
        // u64s compare as unsigned: their bit patterns with the sign bit flipped.
        (Data::I64(a), Data::I64(b)) if reads_unsigned(&c) => {
            for_each_broadcast(&out, &sa, &sb, |o, i, j| {
                y[o] = kind.holds(u64_order(a[i]), u64_order(b[j]))
            })
        }
        (Data::I64(a), Data::I64(b)) => {
            for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = kind.holds(a[i], b[j]))
        }
        (Data::Bool(a), Data::Bool(b)) => {
            for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = kind.holds(a[i], b[j]))
        }
        _ => return Err(c.value_err("inputs of different element types")),
    }
    Ok(vec![Tensor::from_bool(&out, y)?])
}

fn bools<'a>(c: &'a Call, i: usize) -> KernelResult<&'a [bool]> {
    c.inputs[i].as_bool().ok_or_else(|| c.value_err(format!("input {i} must be bool")))
}

/// `And`, `Or`, `Xor`.
pub(crate) fn logic(op: &Op, kind: LogicKind, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let (out, sa, sb) = binary_layout(op, &c)?;
    let (a, b) = (bools(&c, 0)?, bools(&c, 1)?);
    let mut y = vec![false; numel(&out)];
    for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = kind.apply(a[i], b[j]));
    Ok(vec![Tensor::from_bool(&out, y)?])
}

/// `Not`.
pub(crate) fn not(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    Ok(vec![Tensor::from_bool(&out, bools(&c, 0)?.iter().map(|&v| !v).collect())?])
}

/// The condition broadcast to `out`, one truth value per output element.
fn condition_over(cond: &[bool], shape: &[usize], out: &[usize]) -> Vec<bool> {
    let s = broadcast_strides(shape, out);
    let mut full = vec![false; numel(out)];
    for_each_broadcast(out, &s, &s, |o, i, _| full[o] = cond[i]);
    full
}

/// `Where(condition, x, y)`.
pub(crate) fn select(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let pick = condition_over(bools(&c, 0)?, c.inputs[0].shape(), &out);
    let sx = broadcast_strides(c.inputs[1].shape(), &out);
    let sy = broadcast_strides(c.inputs[2].shape(), &out);
    let chosen = |o: usize| pick[o];
    Ok(vec![match (c.inputs[1].data(), c.inputs[2].data()) {
        (Data::F32(x), Data::F32(y)) => {
            let mut v = vec![0.0f32; numel(&out)];
            for_each_broadcast(&out, &sx, &sy, |o, i, j| {
                v[o] = if chosen(o) { x[i] } else { y[j] }
            });
            tensor(&out, v)?
        }
        (Data::I64(x), Data::I64(y)) => {
            let mut v = vec![0i64; numel(&out)];
            for_each_broadcast(&out, &sx, &sy, |o, i, j| {
                v[o] = if chosen(o) { x[i] } else { y[j] }
            });
            Tensor::from_i64(&out, v)?
        }
        (Data::Bool(x), Data::Bool(y)) => {
            let mut v = vec![false; numel(&out)];
            for_each_broadcast(&out, &sx, &sy, |o, i, j| {
                v[o] = if chosen(o) { x[i] } else { y[j] }
            });
            Tensor::from_bool(&out, v)?
        }
        _ => return Err(c.value_err("the values have different element types")),
    }])
}

/// The gradient of `Where` with respect to value `k` (1: `x`, 2: `y`): the upstream gradient
/// where the condition chose that value, 0 elsewhere, summed down to its shape (reads the
/// condition).
pub(crate) fn select_grad(k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let dy_shape = c.inputs[0].shape().to_vec();
    let dy = c.input_f32(0)?;
    let cond = bools(&c, 1)?;
    if ordo_ir::op::broadcast_shapes(c.inputs[1].shape(), &dy_shape).as_deref() != Some(&dy_shape) {
        return Err(c.shape_err(format!(
            "the condition {:?} does not broadcast to the gradient's shape {dy_shape:?}",
            c.inputs[1].shape()
        )));
    }
    let pick = condition_over(cond, c.inputs[1].shape(), &dy_shape);
    let masked: Vec<f32> =
        dy.iter().zip(&pick).map(|(&d, &p)| if p == (k == 1) { d } else { 0.0 }).collect();
    Ok(vec![tensor(&shape, reduce_to(&masked, &dy_shape, &shape, None))?])
}
