//! `ScatterND`, `ScatterElements` and their gradients, one code over a list of targets: each
//! update "row" lands on a contiguous run of `inner` data elements at an offset. For
//! `ScatterND` a row of the indices (`[..., k]`) addresses a slice of the data (its first `k`
//! coordinates, negative from the end); for `ScatterElements` every index is a row of one
//! element, at its own position with the axis coordinate replaced by the index. `GatherND`
//! reads the rows that `ScatterND` writes; its gradient adds them back.

use ordo_ir::op::{Grad, Op, ScatterReduction};

use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::{Call, numel, tensor};

/// Where the updates of a scatter land.
#[derive(Clone, Copy)]
pub(crate) enum Layout {
    /// `ScatterND`: index rows address slices.
    Nd,
    /// `ScatterElements` along an axis.
    Elements(i64),
}

/// The offset into data of `shape` of each update row, and the row length.
fn targets(layout: Layout, c: &Call, shape: &[usize]) -> KernelResult<(Vec<usize>, usize)> {
    match layout {
        Layout::Nd => nd_targets(c, shape),
        Layout::Elements(axis) => element_targets(axis, c, shape),
    }
}

/// `ScatterElements`: index `p` lands at `p` with its axis coordinate replaced by the index.
fn element_targets(axis: i64, c: &Call, shape: &[usize]) -> KernelResult<(Vec<usize>, usize)> {
    let indices = c.input_i64(1)?;
    let index_shape = c.inputs[1].shape().to_vec();
    let axis = super::util::resolve_axis(c, axis, shape.len())?;
    if index_shape.len() != shape.len() {
        return Err(c.shape_err(format!("indices {index_shape:?} for data {shape:?}")));
    }
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let n = shape[axis] as i64;
    let mut offsets = Vec::with_capacity(indices.len());
    for (flat, &i) in indices.iter().enumerate() {
        let j = if i < 0 { i + n } else { i };
        if !(0..n).contains(&j) {
            return Err(c.value_err(format!("index {i} out of range for axis {axis} of size {n}")));
        }
        let (mut rest, mut offset) = (flat, 0);
        for d in (0..shape.len()).rev() {
            let coordinate = if d == axis { j as usize } else { rest % index_shape[d] };
            rest /= index_shape[d].max(1);
            offset += coordinate * strides[d];
        }
        offsets.push(offset);
    }
    Ok((offsets, 1))
}

/// `ScatterND`: the offset of each index row of input 1, and the slice length.
fn nd_targets(c: &Call, shape: &[usize]) -> KernelResult<(Vec<usize>, usize)> {
    let indices = c.input_i64(1)?;
    let Some(&k) = c.inputs[1].shape().last().filter(|&&k| k <= shape.len()) else {
        return Err(c.shape_err(format!("indices {:?} for data {shape:?}", c.inputs[1].shape())));
    };
    let inner = numel(&shape[k..]);
    let mut strides = vec![inner; k];
    for d in (0..k.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let index_shape = c.inputs[1].shape();
    let rows = numel(&index_shape[..index_shape.len() - 1]);
    let mut offsets = Vec::with_capacity(rows);
    for r in 0..rows {
        let mut offset = 0;
        for (d, &i) in indices[r * k..(r + 1) * k].iter().enumerate() {
            let n = shape[d] as i64;
            let j = if i < 0 { i + n } else { i };
            if !(0..n).contains(&j) {
                return Err(
                    c.value_err(format!("index {i} out of range for dimension {d} of size {n}"))
                );
            }
            offset += j as usize * strides[d];
        }
        offsets.push(offset);
    }
    Ok((offsets, inner))
}

/// `ScatterND` or `ScatterElements` of f32 or i64 data.
pub(crate) fn scatter(
    op: &Op,
    layout: Layout,
    reduction: ScatterReduction,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (offsets, inner) = targets(layout, &c, &out)?;
    fn apply<T: Copy>(
        y: &mut [T],
        updates: &[T],
        offsets: &[usize],
        inner: usize,
        combine: impl Fn(T, T) -> T,
    ) {
        for (r, &base) in offsets.iter().enumerate() {
            let (to, from) = (&mut y[base..base + inner], &updates[r * inner..(r + 1) * inner]);
            to.iter_mut().zip(from).for_each(|(a, &u)| *a = combine(*a, u));
        }
    }
    use ScatterReduction as R;
    Ok(vec![match (c.inputs[0].data(), c.inputs[2].data()) {
        (Data::F32(x), Data::F32(u)) => {
            let mut y = x.clone();
            // Max and min propagate NaN, as NumPy's `maximum` and `minimum`.
            let nan_or = |a: f32, b: f32, pick: fn(f32, f32) -> f32| {
                if a.is_nan() || b.is_nan() { f32::NAN } else { pick(a, b) }
            };
            match reduction {
                R::None => apply(&mut y, u, &offsets, inner, |_, u| u),
                R::Add => apply(&mut y, u, &offsets, inner, |a, u| a + u),
                R::Mul => apply(&mut y, u, &offsets, inner, |a, u| a * u),
                R::Max => apply(&mut y, u, &offsets, inner, |a, u| nan_or(a, u, f32::max)),
                R::Min => apply(&mut y, u, &offsets, inner, |a, u| nan_or(a, u, f32::min)),
            }
            tensor(&out, y)?
        }
        (Data::I64(x), Data::I64(u)) => {
            let mut y = x.clone();
            match reduction {
                R::None => apply(&mut y, u, &offsets, inner, |_, u| u),
                R::Add => apply(&mut y, u, &offsets, inner, i64::wrapping_add),
                R::Mul => apply(&mut y, u, &offsets, inner, i64::wrapping_mul),
                R::Max => apply(&mut y, u, &offsets, inner, i64::max),
                R::Min => apply(&mut y, u, &offsets, inner, i64::min),
            }
            Tensor::from_i64(&out, y)?
        }
        _ => return Err(c.value_err("data and updates must both be f32 or both i64")),
    }])
}

/// The gradient of a scatter with respect to the data (`wrt_updates` false) or the updates:
/// inputs are the upstream gradient and the indices. The data's is the upstream gradient,
/// zero where an update replaced the element; an update's is the upstream gradient where it
/// landed, unless (replacing) a later row overwrote it.
pub(crate) fn scatter_grad(
    layout: Layout,
    reduction: ScatterReduction,
    wrt_updates: bool,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let dy = c.input_f32(0)?;
    let data_shape = c.inputs[0].shape().to_vec();
    let (offsets, inner) = targets(layout, &c, &data_shape)?;
    let replaced = reduction == ScatterReduction::None;
    if !wrt_updates {
        let mut dx = dy.to_vec();
        if replaced {
            for &base in &offsets {
                dx[base..base + inner].fill(0.0);
            }
        }
        return Ok(vec![tensor(&data_shape, dx)?]);
    }
    let shape = c.produced(g, 0)?.shape.clone();
    let mut du = vec![0.0f32; offsets.len() * inner];
    // From the last row back: a slice already taken by a later row gave this one nothing.
    let mut taken = vec![false; if replaced { dy.len() } else { 0 }];
    for (r, &base) in offsets.iter().enumerate().rev() {
        if replaced {
            if taken[base] {
                continue;
            }
            taken[base..base + inner].fill(true);
        }
        du[r * inner..(r + 1) * inner].copy_from_slice(&dy[base..base + inner]);
    }
    Ok(vec![tensor(&shape, du)?])
}

/// `GatherND` of f32 or i64 data: the slices that the index rows address, one after another.
pub(crate) fn gather_nd(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (offsets, inner) = nd_targets(&c, c.inputs[0].shape())?;
    fn rows<T: Copy>(x: &[T], offsets: &[usize], inner: usize) -> Vec<T> {
        offsets.iter().flat_map(|&base| x[base..base + inner].iter().copied()).collect()
    }
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => tensor(&out, rows(x, &offsets, inner))?,
        Data::I64(x) => Tensor::from_i64(&out, rows(x, &offsets, inner))?,
        Data::Bool(x) => Tensor::from_bool(&out, rows(x, &offsets, inner))?,
    }])
}

/// `GatherND`'s gradient: the upstream rows added back where they were read (inputs: the
/// upstream gradient and the indices).
pub(crate) fn gather_nd_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let (offsets, inner) = nd_targets(&c, &shape)?;
    let dy = c.input_f32(0)?;
    if dy.len() != offsets.len() * inner {
        return Err(c.shape_err(format!(
            "{} upstream gradients for {} rows",
            dy.len(),
            offsets.len()
        )));
    }
    let mut dx = vec![0.0f32; numel(&shape)];
    for (r, &base) in offsets.iter().enumerate() {
        let row = &dy[r * inner..(r + 1) * inner];
        dx[base..base + inner].iter_mut().zip(row).for_each(|(d, &v)| *d += v);
    }
    Ok(vec![tensor(&shape, dx)?])
}
