//! Ops that move or reinterpret data without arithmetic.

use serde::{Deserialize, Serialize};

use super::{expect_inputs, resolve_axis};
use crate::fact::TensorFact;

/// What a pad fills the new border with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PadMode {
    /// A constant value.
    Constant,
    /// The input mirrored at its edge, the edge itself not repeated (`[a b c] -> b [a b c] b`).
    Reflect,
    /// The edge value repeated.
    Edge,
    /// The input repeated, as if periodic.
    Wrap,
}

impl PadMode {
    /// The input coordinate an output coordinate `i` of a padded dim takes its value from,
    /// for an input of `len` padded by `before` (negative: cropped); `None` for a constant
    /// border.
    pub fn source(self, i: usize, before: i64, len: usize) -> Option<usize> {
        let j = i as i64 - before;
        let n = len as i64;
        if (0..n).contains(&j) {
            return Some(j as usize);
        }
        if n == 0 {
            return None;
        }
        match self {
            PadMode::Constant => None,
            PadMode::Edge => Some(j.clamp(0, n - 1) as usize),
            PadMode::Wrap => Some(j.rem_euclid(n) as usize),
            PadMode::Reflect if n == 1 => Some(0),
            PadMode::Reflect => {
                let period = 2 * (n - 1);
                let k = j.rem_euclid(period);
                Some(if k < n { k } else { period - k } as usize)
            }
        }
    }
}

pub(crate) fn infer_concat(axis: i64, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    let first = inputs.first().ok_or("expects at least one input")?;
    let axis = resolve_axis(axis, first.rank())?;
    let mut shape = first.shape.clone();
    for other in &inputs[1..] {
        let same_elsewhere = other.rank() == first.rank()
            && (0..first.rank()).all(|d| d == axis || other.shape[d] == first.shape[d]);
        if other.dtype != first.dtype || !same_elsewhere {
            return Err(format!("cannot concatenate {first} and {other} along axis {axis}"));
        }
        shape[axis] += other.shape[axis];
    }
    Ok(vec![TensorFact::new(first.dtype, shape)])
}

pub(crate) fn infer_reshape(
    target: &[i64],
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    let mut shape = Vec::with_capacity(target.len());
    let mut inferred = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if inferred.is_none() => {
                inferred = Some(i);
                shape.push(1);
            }
            d if d >= 0 => shape.push(d as usize),
            _ => return Err(format!("invalid target shape {target:?}")),
        }
    }
    let known: u64 = shape.iter().map(|&d| d as u64).product();
    if let Some(i) = inferred {
        if known == 0 || !x.numel().is_multiple_of(known) {
            return Err(format!("cannot reshape {x} to {target:?}"));
        }
        shape[i] = (x.numel() / known) as usize;
    } else if known != x.numel() {
        return Err(format!("cannot reshape {x} ({} elements) to {target:?}", x.numel()));
    }
    Ok(vec![TensorFact::new(x.dtype, shape)])
}

pub(crate) fn infer_transpose(
    perm: &[usize],
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    let mut seen = vec![false; x.rank()];
    if perm.len() != x.rank()
        || perm.iter().any(|&p| p >= x.rank() || std::mem::replace(&mut seen[p], true))
    {
        return Err(format!("{perm:?} is not a permutation of the dimensions of {x}"));
    }
    Ok(vec![TensorFact::new(x.dtype, perm.iter().map(|&p| x.shape[p]).collect::<Vec<_>>())])
}

pub(crate) fn infer_slice(
    axis: i64,
    start: i64,
    end: i64,
    step: i64,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    let axis = resolve_axis(axis, x.rank())?;
    if step < 1 {
        return Err(format!("step must be at least 1, got {step}"));
    }
    let (from, to) = slice_bounds(x.shape[axis], start, end);
    let len = if to > from { (to - from).div_ceil(step as usize) } else { 0 };
    let mut shape = x.shape.clone();
    shape[axis] = len;
    Ok(vec![TensorFact::new(x.dtype, shape)])
}

/// Python's clamping of `start:end` against a dimension of length `len`.
pub fn slice_bounds(len: usize, start: i64, end: i64) -> (usize, usize) {
    let clamp = |i: i64| {
        let i = if i < 0 { i + len as i64 } else { i };
        i.clamp(0, len as i64) as usize
    };
    (clamp(start), clamp(end))
}

pub(crate) fn infer_expand(
    shape: &[usize],
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    if crate::op::broadcast_shapes(&x.shape, shape).as_deref() != Some(shape) {
        return Err(format!("{x} does not broadcast to {shape:?}"));
    }
    Ok(vec![TensorFact::new(x.dtype, shape.to_vec())])
}

pub(crate) fn infer_gather(axis: i64, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (data, indices) = (inputs[0], inputs[1]);
    if !indices.dtype.is_integer() {
        return Err(format!("indices must be integers, got {indices}"));
    }
    let a = resolve_axis(axis, data.rank())?;
    let mut shape = data.shape[..a].to_vec();
    shape.extend_from_slice(&indices.shape);
    shape.extend_from_slice(&data.shape[a + 1..]);
    Ok(vec![TensorFact::new(data.dtype, shape)])
}

pub(crate) fn infer_gather_elements(
    axis: i64,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (data, indices) = (inputs[0], inputs[1]);
    if !indices.dtype.is_integer() {
        return Err(format!("indices must be integers, got {indices}"));
    }
    let a = resolve_axis(axis, data.rank())?;
    let fits = indices.rank() == data.rank()
        && (0..data.rank()).all(|d| d == a || indices.shape[d] <= data.shape[d]);
    if !fits {
        return Err(format!("indices {indices} do not fit data {data} off axis {a}"));
    }
    Ok(vec![TensorFact::new(data.dtype, indices.shape.clone())])
}

/// `Pad`: each dim grows by its `before` and `after` (`pads`: every dim's `before`, then every
/// dim's `after`; negative values crop).
pub(crate) fn infer_pad(pads: &[i64], inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    if pads.len() != 2 * x.rank() {
        return Err(format!("{} pads for an input of rank {}", pads.len(), x.rank()));
    }
    let mut shape = Vec::with_capacity(x.rank());
    for (d, &len) in x.shape.iter().enumerate() {
        let n = len as i64 + pads[d] + pads[d + x.rank()];
        if n < 0 {
            return Err(format!("pads {pads:?} crop dim {d} of {x} below nothing"));
        }
        shape.push(n as usize);
    }
    Ok(vec![TensorFact::new(x.dtype, shape)])
}

/// `Tile`: each dim repeated.
pub(crate) fn infer_tile(
    repeats: &[usize],
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    if repeats.len() != x.rank() {
        return Err(format!("{} repeats for an input of rank {}", repeats.len(), x.rank()));
    }
    let shape =
        x.shape.iter().zip(repeats).map(|(&d, &r)| d.checked_mul(r)).collect::<Option<Vec<_>>>();
    Ok(vec![TensorFact::new(x.dtype, shape.ok_or("the tiled shape overflows")?)])
}
