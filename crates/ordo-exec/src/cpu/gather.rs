//! Broadcasting copies and gathers: `Expand`, `Gather`, `GatherElements`, and their
//! gradients (a sum over the broadcast dims; scatter-adds to the gathered positions).

use ordo_ir::Op;
use ordo_ir::op::Grad;

use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::{
    Call, broadcast_strides, for_each_broadcast, numel, reduce_to, resolve_axis, split_at_axis,
    tensor,
};

/// `Expand`: the input broadcast to the op's shape (any element type).
pub(crate) fn expand(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let s = broadcast_strides(c.inputs[0].shape(), &out);
    let n = numel(&out);
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => {
            let mut y = vec![0.0f32; n];
            for_each_broadcast(&out, &s, &s, |o, i, _| y[o] = x[i]);
            tensor(&out, y)?
        }
        Data::I64(x) => {
            let mut y = vec![0i64; n];
            for_each_broadcast(&out, &s, &s, |o, i, _| y[o] = x[i]);
            Tensor::from_i64(&out, y)?
        }
        Data::Bool(x) => {
            let mut y = vec![false; n];
            for_each_broadcast(&out, &s, &s, |o, i, _| y[o] = x[i]);
            Tensor::from_bool(&out, y)?
        }
    }])
}

/// The gradient of `Expand`: the upstream gradient summed down to the input's shape.
pub(crate) fn expand_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let shape = &c.produced(g, 0)?.shape;
    let dy_shape = c.inputs[0].shape();
    if ordo_ir::op::broadcast_shapes(shape, dy_shape).as_deref() != Some(dy_shape) {
        return Err(c.shape_err(format!("{shape:?} does not broadcast to {dy_shape:?}")));
    }
    Ok(vec![tensor(shape, reduce_to(c.input_f32(0)?, dy_shape, shape, None))?])
}

/// The indices as offsets into an axis of `len` (negative ones from the end), or an error
/// naming the first out of range.
fn offsets(c: &Call, at: usize, len: usize) -> KernelResult<Vec<usize>> {
    let raw = c.input_i64(at)?;
    raw.iter()
        .map(|&k| {
            let j = if k < 0 { k + len as i64 } else { k };
            if j < 0 || j >= len as i64 {
                Err(c.value_err(format!("index {k} is out of range for an axis of {len}")))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

/// For `Gather` along an axis of `data_shape`: each output element's offset into the data.
fn gather_sources(c: &Call, axis: i64, data_shape: &[usize]) -> KernelResult<Vec<usize>> {
    let a = resolve_axis(c, axis, data_shape.len())?;
    let (outer, len, inner) = split_at_axis(data_shape, a);
    let idx = offsets(c, 1, len)?;
    let mut src = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &k in &idx {
            for i in 0..inner {
                src.push((o * len + k) * inner + i);
            }
        }
    }
    Ok(src)
}

/// For `GatherElements` along an axis: each output (index tensor) element's offset into the
/// data, its coordinate on the axis replaced by the index there.
fn gather_elements_sources(c: &Call, axis: i64, data_shape: &[usize]) -> KernelResult<Vec<usize>> {
    let a = resolve_axis(c, axis, data_shape.len())?;
    let idx = offsets(c, 1, data_shape[a])?;
    let ishape = c.inputs[1].shape();
    let data_strides = broadcast_strides(data_shape, data_shape);
    let mut coords = vec![0usize; ishape.len()];
    let mut src = Vec::with_capacity(idx.len());
    for &k in &idx {
        let offset: usize = coords
            .iter()
            .enumerate()
            .map(|(d, &x)| if d == a { k } else { x } * data_strides[d])
            .sum();
        src.push(offset);
        for d in (0..ishape.len()).rev() {
            coords[d] += 1;
            if coords[d] < ishape[d] {
                break;
            }
            coords[d] = 0;
        }
    }
    Ok(src)
}

/// `Gather` / `GatherElements` (any data element type).
pub(crate) fn gather(op: &Op, elements: bool, axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let shape = c.inputs[0].shape();
    let src = if elements {
        gather_elements_sources(&c, axis, shape)?
    } else {
        gather_sources(&c, axis, shape)?
    };
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => tensor(&out, src.iter().map(|&i| x[i]).collect())?,
        Data::I64(x) => Tensor::from_i64(&out, src.iter().map(|&i| x[i]).collect())?,
        Data::Bool(x) => Tensor::from_bool(&out, src.iter().map(|&i| x[i]).collect())?,
    }])
}

/// The gradient of `Gather` / `GatherElements` with respect to the data (inputs: `dy`, the
/// indices): the upstream gradient added at each gathered position.
pub(crate) fn gather_grad(
    elements: bool,
    axis: i64,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let src = if elements {
        gather_elements_sources(&c, axis, &shape)?
    } else {
        gather_sources(&c, axis, &shape)?
    };
    let dy = c.input_f32(0)?;
    if dy.len() != src.len() {
        return Err(c.shape_err(format!(
            "{} upstream gradients for {} gathered",
            dy.len(),
            src.len()
        )));
    }
    let mut dx = vec![0.0f32; numel(&shape)];
    src.iter().zip(dy).for_each(|(&i, &d)| dx[i] += d);
    Ok(vec![tensor(&shape, dx)?])
}

/// For `Pad` and `Tile`: each output element's offset into the input (`None`: a constant
/// border), the output's coordinate in each dim mapped by `source(dim, coordinate)`.
fn mapped_sources(
    input: &[usize],
    out: &[usize],
    source: impl Fn(usize, usize) -> Option<usize>,
) -> Vec<Option<usize>> {
    let strides = broadcast_strides(input, input);
    // Per dim, the input coordinate of each output coordinate (a table: dims are short).
    let tables: Vec<Vec<Option<usize>>> =
        out.iter().enumerate().map(|(d, &n)| (0..n).map(|i| source(d, i)).collect()).collect();
    let mut coords = vec![0usize; out.len()];
    let mut src = Vec::with_capacity(numel(out));
    for _ in 0..numel(out) {
        let mut offset = Some(0usize);
        for (d, &i) in coords.iter().enumerate() {
            offset = match (offset, tables[d][i]) {
                (Some(o), Some(j)) => Some(o + j * strides[d]),
                _ => None,
            };
        }
        src.push(offset);
        for d in (0..out.len()).rev() {
            coords[d] += 1;
            if coords[d] < out[d] {
                break;
            }
            coords[d] = 0;
        }
    }
    src
}

/// The sources of `Pad` or `Tile` (`op`) for an input of `shape` and the output `out`.
fn layout_sources(op: &Op, shape: &[usize], out: &[usize]) -> Vec<Option<usize>> {
    match op {
        Op::Pad { pads, mode, .. } => {
            mapped_sources(shape, out, |d, i| mode.source(i, pads[d], shape[d]))
        }
        Op::Tile { .. } => mapped_sources(shape, out, |d, i| Some(i % shape[d].max(1))),
        _ => unreachable!("only Pad and Tile lay out their input"),
    }
}

/// `Pad` and `Tile` (any element type; a constant border for floats is the op's value,
/// for integers its value truncated, for bools whether it is nonzero).
pub(crate) fn lay_out(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let src = layout_sources(op, c.inputs[0].shape(), &out);
    let value = if let Op::Pad { value, .. } = op { *value } else { 0.0 };
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => {
            tensor(&out, src.iter().map(|s| s.map_or(value as f32, |i| x[i])).collect())?
        }
        Data::I64(x) => {
            Tensor::from_i64(&out, src.iter().map(|s| s.map_or(value as i64, |i| x[i])).collect())?
        }
        Data::Bool(x) => {
            Tensor::from_bool(&out, src.iter().map(|s| s.map_or(value != 0.0, |i| x[i])).collect())?
        }
    }])
}

/// The gradient of `Pad` or `Tile`: each output element's upstream gradient added to the
/// input element it came from (a constant border's to none).
pub(crate) fn lay_out_grad(of: &Op, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let out = c.infer(of, &[c.produced(g, 0)?.clone()])?.shape;
    c.expect_input_shape(0, &out)?;
    let dy = c.input_f32(0)?;
    let mut dx = vec![0.0f32; numel(&shape)];
    for (s, &d) in layout_sources(of, &shape, &out).iter().zip(dy) {
        if let Some(i) = s {
            dx[*i] += d;
        }
    }
    Ok(vec![tensor(&shape, dx)?])
}
