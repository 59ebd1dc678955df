//! Ops along one axis: running sums (`CumSum`) and products (`CumProd`), and `Hardmax`, with
//! the gradient of the sums.

use ordo_ir::Op;
use ordo_ir::op::Grad;

use std::cmp::Ordering;

use super::element::{reads_unsigned, u64_order};
use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::{Call, for_each_lane, resolve_axis, split_at_axis, tensor};

/// Running `combine`s from `identity` along the middle dim of `(outer, len, inner)`.
fn running<T: Copy>(
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
    (exclusive, reverse): (bool, bool),
    identity: T,
    combine: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut y = vec![identity; x.len()];
    for_each_lane((outer, len, inner), |at| {
        let mut acc = identity;
        for step in 0..len {
            let j = at(if reverse { len - 1 - step } else { step });
            if exclusive {
                y[j] = acc;
                acc = combine(acc, x[j]);
            } else {
                acc = combine(acc, x[j]);
                y[j] = acc;
            }
        }
    });
    y
}

/// `CumSum` (`product` false) or `CumProd`: of floats in f64, of integers wrapping (as
/// ONNX's reference).
pub(crate) fn cumulative(
    op: &Op,
    (axis, exclusive, reverse): (i64, bool, bool),
    product: bool,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let layout = split_at_axis(&out, resolve_axis(&c, axis, out.len())?);
    let flags = (exclusive, reverse);
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => {
            let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
            let y = match product {
                true => running(&wide, layout, flags, 1.0, |a, b| a * b),
                false => running(&wide, layout, flags, 0.0, |a, b| a + b),
            };
            tensor(&out, y.iter().map(|&v| v as f32).collect())?
        }
        Data::I64(x) => Tensor::from_i64(
            &out,
            match product {
                true => running(x, layout, flags, 1, i64::wrapping_mul),
                false => running(x, layout, flags, 0, i64::wrapping_add),
            },
        )?,
        Data::Bool(_) => return Err(c.value_err(format!("{} of bools", op.name()))),
    }])
}

/// The gradient of `CumSum`: the running sums of the upstream gradient in the other
/// direction, with the same exclusivity.
pub(crate) fn cum_sum_grad(
    of: &Op,
    (axis, exclusive, reverse): (i64, bool, bool),
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let shape = c.produced(g, 0)?.shape.clone();
    c.infer(of, &[c.produced(g, 0)?.clone()])?;
    c.expect_input_shape(0, &shape)?;
    let dy: Vec<f64> = c.input_f32(0)?.iter().map(|&v| f64::from(v)).collect();
    let layout = split_at_axis(&shape, resolve_axis(&c, axis, shape.len())?);
    let dx = running(&dy, layout, (exclusive, !reverse), 0.0, |a, b| a + b);
    Ok(vec![tensor(&shape, dx.iter().map(|&v| v as f32).collect())?])
}

/// `Hardmax`: 1 at the first largest element along the axis, 0 elsewhere (NaN counts as
/// largest, as ArgMax).
pub(crate) fn hardmax(op: &Op, axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let x = c.input_f32(0)?;
    let layout = split_at_axis(&out, resolve_axis(&c, axis, out.len())?);
    let len = layout.1;
    let mut y = vec![0.0f32; x.len()];
    for_each_lane(layout, |at| {
        let mut best = 0;
        for j in 1..len {
            if !x[at(best)].is_nan() && (x[at(j)].is_nan() || x[at(j)] > x[at(best)]) {
                best = j;
            }
        }
        if len > 0 {
            y[at(best)] = 1.0;
        }
    });
    Ok(vec![tensor(&out, y)?])
}

/// The positions (along the lane) of the `k` extremes of each lane, in output order: sorted
/// from the extreme by `ascending` (an order of the storage's values), ties by the lower index
/// (ONNX's reference).
fn top_positions<T: Copy>(
    x: &[T],
    layout: (usize, usize, usize),
    k: usize,
    largest: bool,
    ascending: impl Fn(T, T) -> Ordering,
) -> Vec<Vec<usize>> {
    let len = layout.1;
    let mut lanes = Vec::new();
    for_each_lane(layout, |at| {
        let mut order: Vec<usize> = (0..len).collect();
        // A stable sort keeps ties in index order.
        order.sort_by(|&i, &j| {
            let ord = ascending(x[at(i)], x[at(j)]);
            if largest { ord.reverse() } else { ord }
        });
        order.truncate(k);
        lanes.push(order.into_iter().map(at).collect());
    });
    lanes
}

/// Floats in ascending order, NaN as the largest.
fn float_order(a: f32, b: f32) -> Ordering {
    let key = |v: f32| if v.is_nan() { f32::INFINITY } else { v };
    key(a)
        .partial_cmp(&key(b))
        .unwrap_or(Ordering::Equal)
        .then((b.is_nan() as u8).cmp(&(a.is_nan() as u8)).reverse())
}

/// `TopK`: the values (or indices) of the `k` extremes along the axis, of a float or integer
/// tensor (a u64 one ordered as unsigned).
pub(crate) fn top_k(
    op: &Op,
    (k, axis, largest, indices): (usize, i64, bool, bool),
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let shape = c.inputs[0].shape();
    let a = resolve_axis(&c, axis, shape.len())?;
    let layout = split_at_axis(shape, a);
    let lanes = match c.inputs[0].data() {
        Data::F32(x) => top_positions(x, layout, k, largest, float_order),
        Data::I64(x) if reads_unsigned(&c) => {
            top_positions(x, layout, k, largest, |a, b| u64_order(a).cmp(&u64_order(b)))
        }
        Data::I64(x) => top_positions(x, layout, k, largest, |a: i64, b| a.cmp(&b)),
        _ => return Err(c.value_err("TopK of a tensor neither float nor integer")),
    };
    // The output's lanes run in the same (outer, inner) order, `k` long.
    let inner = layout.2;
    let mut picks = vec![0usize; out.iter().product()];
    let mut lane = lanes.iter();
    for_each_lane((layout.0, k, inner), |at| {
        let picked = lane.next().expect("one lane per output lane");
        for (j, &p) in picked.iter().enumerate() {
            picks[at(j)] = p;
        }
    });
    if indices {
        let index = picks.iter().map(|&p| ((p / inner) % layout.1) as i64).collect();
        return Ok(vec![Tensor::from_i64(&out, index)?]);
    }
    if let Data::I64(x) = c.inputs[0].data() {
        return Ok(vec![Tensor::from_i64(&out, picks.iter().map(|&p| x[p]).collect())?]);
    }
    let x = c.input_f32(0)?;
    Ok(vec![tensor(&out, picks.iter().map(|&p| x[p]).collect())?])
}

/// The gradient of `TopK`'s values: each upstream gradient to the input position its value
/// came from (found again from the saved input).
pub(crate) fn top_k_grad(
    of: &Op,
    (k, axis, largest): (usize, i64, bool),
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let out = c.infer(of, &[c.produced(g, 0)?.clone()])?.shape;
    c.expect_input_shape(0, &out)?;
    c.expect_input_shape(1, &shape)?;
    let (dy, x) = (c.input_f32(0)?, c.input_f32(1)?);
    let layout = split_at_axis(&shape, resolve_axis(&c, axis, shape.len())?);
    let lanes = top_positions(x, layout, k, largest, float_order);
    let mut dx = vec![0.0f32; x.len()];
    let mut lane = lanes.iter();
    for_each_lane((layout.0, k, layout.2), |at| {
        let picked = lane.next().expect("one lane per output lane");
        for (j, &p) in picked.iter().enumerate() {
            dx[p] += dy[at(j)];
        }
    });
    Ok(vec![tensor(&shape, dx)?])
}
