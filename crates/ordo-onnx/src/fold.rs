//! Constant folding: ONNX ops evaluated on tensors known at import time (shape arithmetic,
//! masks, scalars). Every function refuses to build a tensor larger than [`MAX_FOLD`] elements
//! unless all its elements are equal.

use ordo_ir::DType;
use ordo_ir::element::{E8m0Rounding, cast_float, round_float, wrap_integer};

use crate::tensor::{ConstData, ConstTensor, MAX_FOLD, check_shape, code};

pub(crate) use ordo_ir::op::broadcast_shapes as broadcast;

/// Row-major strides of `shape`, with stride 0 on broadcast dimensions of size 1, aligned to
/// the last dims of `out_rank`.
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; out.len()];
    let mut acc = 1;
    for (i, &d) in shape.iter().enumerate().rev() {
        let o = out.len() - shape.len() + i;
        strides[o] = if d == 1 && out[o] != 1 { 0 } else { acc };
        acc *= d;
    }
    strides
}

/// Source index in a tensor with `strides` of every element of `out`, in row-major order.
fn gather_indices(out: &[usize], strides: &[usize]) -> Vec<usize> {
    let numel: usize = out.iter().product();
    let mut result = Vec::with_capacity(numel);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..numel {
        result.push(idx.iter().zip(strides).map(|(i, s)| i * s).sum());
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    result
}

fn check_size(shape: &[usize]) -> Result<(), String> {
    check_shape(shape)?;
    let numel: u64 = shape.iter().map(|&d| d as u64).product();
    if numel > MAX_FOLD {
        return Err(format!("the constant of shape {shape:?} is too large to fold"));
    }
    Ok(())
}

/// Elements of `c` rearranged by source indices.
fn pick(c: &ConstTensor, shape: Vec<usize>, indices: &[usize]) -> Result<ConstTensor, String> {
    let data = match &c.data {
        ConstData::Splat(x) => ConstData::Splat(*x),
        ConstData::Int(v) => ConstData::Int(
            indices
                .iter()
                .map(|&i| v.get(i).copied().ok_or("index out of range"))
                .collect::<Result<_, _>>()?,
        ),
        ConstData::Float(v) => ConstData::Float(
            indices
                .iter()
                .map(|&i| v.get(i).copied().ok_or("index out of range"))
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(c.with(shape, data))
}

/// An elementwise binary op with broadcasting; integer result when both inputs are integers.
pub(crate) fn binary(
    a: &ConstTensor,
    b: &ConstTensor,
    f: impl Fn(f64, f64) -> f64,
    int: impl Fn(i64, i64) -> Option<i64>,
) -> Result<ConstTensor, String> {
    let shape = broadcast(&a.shape, &b.shape)
        .ok_or_else(|| format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape))?;
    check_shape(&shape)?;
    let elem = if a.is_int() && b.is_int() {
        a.elem
    } else if a.is_int() {
        b.elem
    } else {
        a.elem
    };
    if let (Some(x), Some(y)) = (splat(a), splat(b)) {
        let numel: u64 = shape.iter().map(|&d| d as u64).product();
        if numel > MAX_FOLD {
            return Ok(ConstTensor { elem, shape, data: ConstData::Splat(f(x, y)) });
        }
    }
    check_size(&shape)?;
    let ia = gather_indices(&shape, &broadcast_strides(&a.shape, &shape));
    let ib = gather_indices(&shape, &broadcast_strides(&b.shape, &shape));
    let data = if a.is_int() && b.is_int() {
        let (va, vb) = (a.to_i64s().ok_or("too large")?, b.to_i64s().ok_or("too large")?);
        ConstData::Int(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| int(va[i], vb[j]).ok_or("integer overflow or division by zero"))
                .collect::<Result<_, _>>()?,
        )
    } else {
        let (va, vb) = (a.to_f64s().ok_or("too large")?, b.to_f64s().ok_or("too large")?);
        ConstData::Float(ia.iter().zip(&ib).map(|(&i, &j)| f(va[i], vb[j])).collect())
    };
    Ok(ConstTensor { elem, shape, data })
}

/// The single value of a splat or one-element tensor.
fn splat(c: &ConstTensor) -> Option<f64> {
    c.scalar()
}

/// `Transpose`.
pub(crate) fn transpose(c: &ConstTensor, perm: &[usize]) -> Result<ConstTensor, String> {
    let shape: Vec<usize> = perm.iter().map(|&p| c.shape[p]).collect();
    if let ConstData::Splat(x) = c.data {
        return Ok(c.with(shape, ConstData::Splat(x)));
    }
    check_size(&shape)?;
    let mut src = vec![0; c.shape.len()];
    let mut acc = 1;
    for d in (0..c.shape.len()).rev() {
        src[d] = acc;
        acc *= c.shape[d];
    }
    let strides: Vec<usize> = perm.iter().map(|&p| src[p]).collect();
    pick(c, shape.clone(), &gather_indices(&shape, &strides))
}

/// `Slice` along one axis with a positive step.
pub(crate) fn slice(
    c: &ConstTensor,
    axis: usize,
    from: usize,
    to: usize,
    step: usize,
) -> Result<ConstTensor, String> {
    let taken: Vec<usize> = (from..to.max(from)).step_by(step.max(1)).collect();
    take(c, axis, &taken)
}

/// The slices at `taken` (valid indices, in that order) along `axis`.
pub(crate) fn take(c: &ConstTensor, axis: usize, taken: &[usize]) -> Result<ConstTensor, String> {
    let mut shape = c.shape.clone();
    shape[axis] = taken.len();
    if let ConstData::Splat(x) = c.data {
        return Ok(c.with(shape, ConstData::Splat(x)));
    }
    check_size(&shape)?;
    let outer: usize = c.shape[..axis].iter().product();
    let inner: usize = c.shape[axis + 1..].iter().product();
    let mut indices = Vec::with_capacity(outer * taken.len() * inner);
    for o in 0..outer {
        for &k in taken {
            let row = (o * c.shape[axis] + k) * inner;
            indices.extend(row..row + inner);
        }
    }
    pick(c, shape, &indices)
}

/// `Gather` of integer indices along an axis.
pub(crate) fn gather(
    c: &ConstTensor,
    indices: &ConstTensor,
    axis: usize,
) -> Result<ConstTensor, String> {
    let n = c.shape[axis] as i64;
    let idx = indices.to_i64s().ok_or("too many indices")?;
    let idx: Vec<usize> = idx
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n } else { i };
            (0..n).contains(&j).then_some(j as usize).ok_or(format!("index {i} out of range"))
        })
        .collect::<Result<_, _>>()?;
    let mut shape = c.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&c.shape[axis + 1..]);
    if let ConstData::Splat(x) = c.data {
        return Ok(c.with(shape, ConstData::Splat(x)));
    }
    check_size(&shape)?;
    let outer: usize = c.shape[..axis].iter().product();
    let inner: usize = c.shape[axis + 1..].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for &i in &idx {
            let row = (o * c.shape[axis] + i) * inner;
            out.extend(row..row + inner);
        }
    }
    pick(c, shape, &out)
}

/// `GatherElements`: each output element is `c`'s element at its own position with the
/// coordinate on `axis` taken from `indices` (same rank as `c`; negative counts from the end).
pub(crate) fn gather_elements(
    c: &ConstTensor,
    indices: &ConstTensor,
    axis: usize,
) -> Result<ConstTensor, String> {
    let fits = |d: usize| d == axis || indices.shape[d] <= c.shape[d];
    if indices.shape.len() != c.shape.len()
        || axis >= c.shape.len()
        || !(0..c.shape.len()).all(fits)
    {
        return Err(format!(
            "indices of shape {:?} do not match data of shape {:?} on axis {axis}",
            indices.shape, c.shape
        ));
    }
    check_size(&indices.shape)?;
    let idx = indices.to_i64s().ok_or("too many indices")?;
    let n = c.shape[axis] as i64;
    let data_strides = row_major(&c.shape);
    let mut sources = Vec::with_capacity(idx.len());
    for (flat, &i) in idx.iter().enumerate() {
        let j = if i < 0 { i + n } else { i };
        if !(0..n).contains(&j) {
            return Err(format!("index {i} out of range for axis {axis} of size {n}"));
        }
        // The output position's coordinates, its axis coordinate replaced by the index.
        let mut rest = flat;
        let mut source = 0;
        for (d, &size) in indices.shape.iter().enumerate().rev() {
            let coordinate = if d == axis { j as usize } else { rest % size };
            rest /= size;
            source += coordinate * data_strides[d];
        }
        sources.push(source);
    }
    pick(c, indices.shape.clone(), &sources)
}

fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// `ScatterND`: `data` with the slices that `indices` (`[..., k]`, each row the first `k`
/// coordinates of a slice) address replaced by, or combined (`reduce`) with, `updates`.
pub(crate) fn scatter_nd(
    data: &ConstTensor,
    indices: &ConstTensor,
    updates: &ConstTensor,
    reduce: fn(f64, f64) -> f64,
) -> Result<ConstTensor, String> {
    let k = *indices.shape.last().ok_or("indices of rank 0")?;
    let rows: usize = indices.shape[..indices.shape.len() - 1].iter().product();
    let mut want = indices.shape[..indices.shape.len() - 1].to_vec();
    want.extend(data.shape.get(k..).ok_or("indices longer than the data's rank")?);
    if updates.shape != want {
        return Err(format!("updates of shape {:?}, expected {want:?}", updates.shape));
    }
    check_size(&data.shape)?;
    let inner: usize = data.shape[k..].iter().product();
    let (Some(idx), Some(mut out), Some(up)) =
        (indices.to_i64s(), data.to_f64s(), updates.to_f64s())
    else {
        return Err("too many elements to scatter".into());
    };
    let strides = row_major(&data.shape);
    for r in 0..rows {
        let mut base = 0;
        for (d, &i) in idx[r * k..(r + 1) * k].iter().enumerate() {
            let n = data.shape[d] as i64;
            let j = if i < 0 { i + n } else { i };
            if !(0..n).contains(&j) {
                return Err(format!("index {i} out of range for dimension {d} of size {n}"));
            }
            base += j as usize * strides[d];
        }
        for e in 0..inner {
            out[base + e] = reduce(out[base + e], up[r * inner + e]);
        }
    }
    let values = if data.is_int() {
        ConstData::Int(out.iter().map(|&v| v as i64).collect())
    } else {
        ConstData::Float(out)
    };
    Ok(data.with(data.shape.clone(), values))
}

/// `Tile`: `c` repeated `repeats[d]` times along each dim `d`.
pub(crate) fn tile(c: &ConstTensor, repeats: &[i64]) -> Result<ConstTensor, String> {
    if repeats.len() != c.shape.len() || repeats.iter().any(|&r| r < 0) {
        return Err(format!("repeats {repeats:?} for a tensor of shape {:?}", c.shape));
    }
    let shape: Vec<usize> = c.shape.iter().zip(repeats).map(|(&d, &r)| d * r as usize).collect();
    if let ConstData::Splat(x) = c.data {
        return Ok(c.with(shape, ConstData::Splat(x)));
    }
    check_size(&shape)?;
    let strides = row_major(&c.shape);
    let sources: Vec<usize> = (0..shape.iter().product::<usize>())
        .map(|flat| {
            let (mut rest, mut source) = (flat, 0);
            for d in (0..shape.len()).rev() {
                source += (rest % shape[d]) % c.shape[d] * strides[d];
                rest /= shape[d];
            }
            source
        })
        .collect();
    pick(c, shape, &sources)
}

/// `Concat` along an axis.
pub(crate) fn concat(parts: &[&ConstTensor], axis: usize) -> Result<ConstTensor, String> {
    let first = parts.first().ok_or("nothing to concatenate")?;
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for p in parts {
        let same = p.shape.len() == first.shape.len()
            && (0..shape.len()).all(|d| d == axis || p.shape[d] == first.shape[d]);
        if !same {
            return Err(format!("cannot concatenate {:?} and {:?}", first.shape, p.shape));
        }
        shape[axis] += p.shape[axis];
    }
    check_size(&shape)?;
    let outer: usize = first.shape[..axis].iter().product();
    let int = parts.iter().all(|p| p.is_int());
    let (mut ints, mut floats) = (Vec::new(), Vec::new());
    for o in 0..outer {
        for p in parts {
            let chunk: usize = p.shape[axis..].iter().product();
            if int {
                let v = p.to_i64s().ok_or("too large")?;
                ints.extend_from_slice(v.get(o * chunk..(o + 1) * chunk).ok_or("bad constant")?);
            } else {
                let v = p.to_f64s().ok_or("too large")?;
                floats.extend_from_slice(v.get(o * chunk..(o + 1) * chunk).ok_or("bad constant")?);
            }
        }
    }
    let data = if int { ConstData::Int(ints) } else { ConstData::Float(floats) };
    let elem = parts.iter().find(|p| !p.is_int()).map_or(first.elem, |p| p.elem);
    Ok(ConstTensor { elem, shape, data })
}

/// `Expand` to a shape (broadcasting both ways, as ONNX does).
pub(crate) fn expand(c: &ConstTensor, target: &[usize]) -> Result<ConstTensor, String> {
    let shape = broadcast(&c.shape, target)
        .ok_or_else(|| format!("cannot expand {:?} to {target:?}", c.shape))?;
    check_shape(&shape)?;
    if let Some(x) = splat(c) {
        let numel: u64 = shape.iter().map(|&d| d as u64).product();
        if numel > MAX_FOLD || matches!(c.data, ConstData::Splat(_)) {
            return Ok(c.with(shape, ConstData::Splat(x)));
        }
    }
    check_size(&shape)?;
    let indices = gather_indices(&shape, &broadcast_strides(&c.shape, &shape));
    pick(c, shape, &indices)
}

/// `Trilu` over the last two dimensions.
pub(crate) fn trilu(c: &ConstTensor, k: i64, upper: bool) -> Result<ConstTensor, String> {
    let rank = c.shape.len();
    if rank < 2 {
        return Err("Trilu needs rank >= 2".into());
    }
    let (rows, cols) = (c.shape[rank - 2], c.shape[rank - 1]);
    let mut values = c.to_f64s().ok_or("too large")?;
    for (i, v) in values.iter_mut().enumerate() {
        let (r, col) = (((i / cols.max(1)) % rows.max(1)) as i64, (i % cols.max(1)) as i64);
        let keep = if upper { col - r >= k } else { col - r <= k };
        if !keep {
            *v = 0.0;
        }
    }
    let data = if c.is_int() {
        ConstData::Int(values.iter().map(|&x| x as i64).collect())
    } else {
        ConstData::Float(values)
    };
    Ok(c.with(c.shape.clone(), data))
}

/// `c` cast to `to` by a `Cast` with ONNX's default options (saturating, e8m0 rounding up).
pub(crate) fn cast(c: &ConstTensor, to: DType) -> ConstTensor {
    cast_with(c, to, true, E8m0Rounding::Up)
}

/// `c` cast to `to` with `Cast`'s `saturate` and `round` options: the values the CPU kernel
/// computes (one code for both, [`ordo_ir::element`]).
pub(crate) fn cast_with(
    c: &ConstTensor,
    to: DType,
    saturate: bool,
    round: E8m0Rounding,
) -> ConstTensor {
    // A float to an integer rounds toward zero and wraps; to bool, "not zero".
    let from_float = |x: f64| match to {
        DType::Bool => i64::from(x != 0.0),
        _ => wrap_integer(x as i64, to),
    };
    let from_int = |x: i64| match to {
        DType::Bool => i64::from(x != 0),
        _ => wrap_integer(x, to),
    };
    let to_float = |x: f64| round_float(cast_float(x, to, saturate, round), to);
    let unsigned = c.elem == code::UINT64;
    let data = match (&c.data, to.is_integer() || to == DType::Bool) {
        (ConstData::Splat(x), true) => ConstData::Splat(from_float(*x) as f64),
        (ConstData::Splat(x), false) => ConstData::Splat(to_float(*x)),
        (ConstData::Float(v), true) => ConstData::Int(v.iter().map(|&x| from_float(x)).collect()),
        (ConstData::Int(v), true) => ConstData::Int(v.iter().map(|&x| from_int(x)).collect()),
        (ConstData::Int(v), false) => ConstData::Float(
            v.iter()
                .map(|&x| to_float(if unsigned { x as u64 as f64 } else { x as f64 }))
                .collect(),
        ),
        (ConstData::Float(v), false) => ConstData::Float(v.iter().map(|&x| to_float(x)).collect()),
    };
    ConstTensor { elem: crate::tensor::onnx_code(to), shape: c.shape.clone(), data }
}
