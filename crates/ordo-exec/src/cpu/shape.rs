//! Ops that move data: concatenation, reshape, transpose, slice, and their gradients. Forward
//! ops take float or integer tensors; gradients are float.

use ordo_ir::Op;
use ordo_ir::op::Grad;

use super::error::{KernelError, KernelResult};
use super::tensor::Tensor;
use super::util::{Call, for_each_broadcast, numel, resolve_axis, split_at_axis, tensor};

/// A tensor of `shape` whose element `o` is element `idx[o].1` of `parts[idx[o].0]` (all
/// parts of one dtype, checked by the shape rule).
fn gather(parts: &[&Tensor], idx: &[(usize, usize)], shape: &[usize]) -> KernelResult<Tensor> {
    let f32s: Option<Vec<&[f32]>> = parts.iter().map(|t| t.as_f32()).collect();
    if let Some(f) = f32s {
        return Tensor::from_f32(shape, idx.iter().map(|&(p, i)| f[p][i]).collect());
    }
    let ints: Vec<&[i64]> = parts.iter().filter_map(|t| t.as_i64()).collect();
    if ints.len() != parts.len() {
        return Err(KernelError::Value { op: "gather".into(), message: "mixed dtypes".into() });
    }
    Tensor::from_i64(shape, idx.iter().map(|&(p, i)| ints[p][i]).collect())
}

/// Scatters the upstream gradient `dy` into zeros of `shape`: `dx[idx[o]] += dy[o]`.
fn scatter(dy: &[f32], idx: &[usize], shape: &[usize]) -> KernelResult<Tensor> {
    let mut dx = vec![0.0f32; numel(shape)];
    idx.iter().zip(dy).for_each(|(&i, &d)| dx[i] += d);
    tensor(shape, dx)
}

/// Checks the inputs against the forward op's shape rule and returns the output shape.
fn check_forward(op: &Op, c: &Call) -> KernelResult<Vec<usize>> {
    c.expect_params(0)?;
    Ok(c.infer(op, &c.input_facts())?.shape)
}

pub(crate) fn concat(op: &Op, axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    let out = check_forward(op, &c)?;
    let axis = resolve_axis(&c, axis, out.len())?;
    let (outer, _, inner) = split_at_axis(&out, axis);
    let mut idx = Vec::with_capacity(numel(&out));
    for o in 0..outer {
        for (p, t) in c.inputs.iter().enumerate() {
            let chunk = t.shape()[axis] * inner;
            idx.extend((o * chunk..(o + 1) * chunk).map(|i| (p, i)));
        }
    }
    Ok(vec![gather(c.inputs, &idx, &out)?])
}

/// The gradient of `Concat` for input `k`: its part of the upstream gradient. The offset
/// comes from the forward inputs' facts in the context.
pub(crate) fn concat_grad(
    of: &Op,
    axis: i64,
    k: usize,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let fwd = c.ctx.forward_inputs;
    let mine = c.produced(g, 0)?;
    if fwd.get(k) != Some(mine) {
        return Err(KernelError::Context {
            op: c.label.clone(),
            message: format!(
                "needs the forward inputs' facts in the context (input {k} is {mine}), got {fwd:?}"
            ),
        });
    }
    let dy = c.check_dy(of, fwd)?;
    let out = c.inputs[0].shape();
    let axis = resolve_axis(&c, axis, out.len())?;
    let (outer, len, inner) = split_at_axis(out, axis);
    let before: usize = fwd[..k].iter().map(|f| f.shape[axis]).sum();
    let mine_len = mine.shape[axis];
    let mut dx = Vec::with_capacity(numel(&mine.shape));
    for o in 0..outer {
        let start = (o * len + before) * inner;
        dx.extend_from_slice(&dy[start..start + mine_len * inner]);
    }
    Ok(vec![tensor(&mine.shape, dx)?])
}

pub(crate) fn reshape(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let out = check_forward(op, &c)?;
    c.inputs[0].clone().reshaped(&out).map(|t| vec![t]).map_err(|e| c.shape_err(e.to_string()))
}

/// The upstream gradient with the input's shape.
pub(crate) fn reshape_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let shape = &c.produced(g, 0)?.shape;
    c.input_f32(0)?;
    let t = c.inputs[0].clone().reshaped(shape).map_err(|e| c.shape_err(e.to_string()))?;
    Ok(vec![t])
}

/// For each output element of `x.transpose(perm)`, its index in `x`.
fn transpose_index(x: &[usize], perm: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0usize; x.len()];
    let mut s = 1;
    for d in (0..x.len()).rev() {
        strides[d] = s;
        s *= x[d];
    }
    let permuted: Vec<usize> = perm.iter().map(|&p| strides[p]).collect();
    let mut idx = Vec::with_capacity(numel(out));
    for_each_broadcast(out, &permuted, &permuted, |_, i, _| idx.push(i));
    idx
}

pub(crate) fn transpose(op: &Op, perm: &[usize], c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let out = check_forward(op, &c)?;
    let idx = transpose_index(c.inputs[0].shape(), perm, &out);
    let pairs: Vec<(usize, usize)> = idx.into_iter().map(|i| (0, i)).collect();
    Ok(vec![gather(c.inputs, &pairs, &out)?])
}

/// The upstream gradient permuted back.
pub(crate) fn transpose_grad(
    of: &Op,
    perm: &[usize],
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let idx = transpose_index(&xf.shape, perm, c.inputs[0].shape());
    Ok(vec![scatter(dy, &idx, &xf.shape)?])
}

/// For each output element of the slice, its index in the input of shape `x`.
fn slice_index(c: &Call, op: &Op, x: &[usize]) -> KernelResult<Vec<usize>> {
    let &Op::Slice { axis, start, end, step } = op else {
        return Err(c.shape_err("not a slice"));
    };
    let axis = resolve_axis(c, axis, x.len())?;
    let (outer, len, inner) = split_at_axis(x, axis);
    let clamp = |i: i64| {
        let i = if i < 0 { i + len as i64 } else { i };
        i.clamp(0, len as i64) as usize
    };
    let (from, to, step) = (clamp(start), clamp(end), step.max(1) as usize);
    let mut idx = Vec::new();
    for o in 0..outer {
        for j in (from..to).step_by(step) {
            idx.extend((0..inner).map(|i| (o * len + j) * inner + i));
        }
    }
    Ok(idx)
}

pub(crate) fn slice(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let out = check_forward(op, &c)?;
    let idx = slice_index(&c, op, c.inputs[0].shape())?;
    let pairs: Vec<(usize, usize)> = idx.into_iter().map(|i| (0, i)).collect();
    Ok(vec![gather(c.inputs, &pairs, &out)?])
}

/// The upstream gradient scattered into zeros at the sliced positions.
pub(crate) fn slice_grad(of: &Op, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?;
    let dy = c.check_dy(of, std::slice::from_ref(xf))?;
    let idx = slice_index(&c, of, &xf.shape)?;
    Ok(vec![scatter(dy, &idx, &xf.shape)?])
}
