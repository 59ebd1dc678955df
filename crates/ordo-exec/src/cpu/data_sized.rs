//! Kernels of the ops whose output size depends on the values ([`ordo_ir::op`]'s data-sized
//! ops: `Range`, `NonZero`, `NonMaxSuppression`, `Unique`). The plan fixes each output's size
//! (the size the file declares); each kernel computes what the values give and checks it
//! against that size, so other values are an error naming them, never a tensor of another
//! size.

use ordo_ir::Op;
use std::cmp::Ordering;

use ordo_ir::op::{NonMaxSuppression, Unique, UniquePart};

use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::Call;

/// `Range`: `start + i * delta` for `i` in `0..len`, after checking that the run's values give
/// the planned length, `ceil((limit - start) / delta)` (0 when negative). Integers are computed
/// exactly (in `i128`) and wrapped to the node's type by the caller's narrowing; floats in
/// `f64`, rounded to `f32`.
pub(crate) fn range(op: &Op, len: usize, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?;
    let wrong_length = |n: String, values: String| {
        c.value_err(format!(
            "{values} give {n} elements; the plan holds {len} (the size the file declares \
             for its output)"
        ))
    };
    let values = if c.inputs[0].as_i64().is_some() {
        let [start, limit, delta] = [0, 1, 2].map(|i| c.input_i64(i).map(|v| i128::from(v[0])));
        let (start, limit, delta) = (start?, limit?, delta?);
        if delta == 0 {
            return Err(c.value_err("delta is 0: the range would never end"));
        }
        // ceil((limit - start) / delta) of integers, with the sign of delta.
        let span = limit - start;
        let n = (span / delta + i128::from(span % delta != 0 && (span < 0) == (delta < 0))).max(0);
        if n != len as i128 {
            let values = format!("start {start}, limit {limit}, delta {delta}");
            return Err(wrong_length(n.to_string(), values));
        }
        let v = (0..len as i128).map(|i| (start + i * delta) as i64).collect();
        Tensor::from_i64(&out.shape, v)?
    } else {
        let [start, limit, delta] = [0, 1, 2].map(|i| c.input_f32(i).map(|v| f64::from(v[0])));
        let (start, limit, delta) = (start?, limit?, delta?);
        if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
            let values = format!("start {start}, limit {limit}, delta {delta}");
            return Err(c.value_err(format!("{values}: the range has no length")));
        }
        let n = ((limit - start) / delta).ceil().max(0.0);
        if n != len as f64 {
            let values = format!("start {start}, limit {limit}, delta {delta}");
            return Err(wrong_length(n.to_string(), values));
        }
        let v = (0..len).map(|i| (start + i as f64 * delta) as f32).collect();
        Tensor::from_f32(&out.shape, v)?
    };
    Ok(vec![values])
}

/// `NonZero`: the row-major coordinates of the nonzero elements, `[rank, count]` (a scalar as
/// rank 1), after checking that there are `count` of them.
pub(crate) fn non_zero(op: &Op, count: usize, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?;
    let x = c.inputs[0];
    let nonzero: Vec<usize> = match x.data() {
        Data::F32(v) => (0..v.len()).filter(|&i| v[i] != 0.0).collect(),
        Data::I64(v) => (0..v.len()).filter(|&i| v[i] != 0).collect(),
        Data::Bool(v) => (0..v.len()).filter(|&i| v[i]).collect(),
    };
    if nonzero.len() != count {
        return Err(c.value_err(format!(
            "{} nonzero elements; the plan holds {count} (the size the file declares for its \
             output)",
            nonzero.len()
        )));
    }
    let shape = if x.shape().is_empty() { vec![1] } else { x.shape().to_vec() };
    let rank = shape.len();
    let mut coords = vec![0i64; rank * count];
    for (k, &flat) in nonzero.iter().enumerate() {
        let mut rest = flat;
        for d in (0..rank).rev() {
            coords[d * count + k] = (rest % shape[d]) as i64;
            rest /= shape[d];
        }
    }
    Ok(vec![Tensor::from_i64(&out.shape, coords)?])
}

/// `NonMaxSuppression` as ONNX's reference computes it (see [`NonMaxSuppression`]), after
/// checking that it selects `count` boxes.
pub(crate) fn non_max_suppression(
    op: &Op,
    n: &NonMaxSuppression,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?;
    let (boxes, scores) = (c.input_f32(0)?, c.input_f32(1)?);
    let (batches, classes, boxes_each) =
        (c.inputs[1].shape()[0], c.inputs[1].shape()[1], c.inputs[1].shape()[2]);
    let mut rows = Vec::new();
    for b in 0..batches {
        let corners: Vec<[f32; 4]> = (0..boxes_each)
            .map(|i| extent(&boxes[(b * boxes_each + i) * 4..][..4], n.center_point_box))
            .collect();
        for class in 0..classes {
            let scored = &scores[(b * classes + class) * boxes_each..][..boxes_each];
            let mut candidates: Vec<usize> = (0..boxes_each)
                .filter(|&i| n.score_threshold.is_none_or(|t| f64::from(scored[i]) > t))
                .collect();
            // Descending score, ties by the lower index (a stable sort of the ascending indices).
            candidates.sort_by(|&i, &j| scored[j].total_cmp(&scored[i]));
            let mut taken: Vec<usize> = Vec::new();
            for i in candidates {
                if taken.len() >= n.max_per_class {
                    break;
                }
                if taken.iter().all(|&t| !overlaps(&corners[i], &corners[t], n.iou_threshold)) {
                    taken.push(i);
                    rows.extend([b as i64, class as i64, i as i64]);
                }
            }
        }
    }
    if rows.len() / 3 != n.count {
        return Err(c.value_err(format!(
            "{} boxes selected; the plan holds {} (the size the file declares for its output)",
            rows.len() / 3,
            n.count
        )));
    }
    Ok(vec![Tensor::from_i64(&out.shape, rows)?])
}

/// A box as `[x_min, x_max, y_min, y_max]`, from a centre and size or from two corners
/// (`[y1, x1, y2, x2]`, either diagonal).
fn extent(b: &[f32], center_point_box: bool) -> [f32; 4] {
    if center_point_box {
        let (half_w, half_h) = (b[2] / 2.0, b[3] / 2.0);
        [b[0] - half_w, b[0] + half_w, b[1] - half_h, b[1] + half_h]
    } else {
        [b[1].min(b[3]), b[1].max(b[3]), b[0].min(b[2]), b[0].max(b[2])]
    }
}

/// Whether two boxes' intersection over union exceeds `threshold` (ONNX's reference: boxes
/// that do not meet, or of no area, never do).
fn overlaps(a: &[f32; 4], b: &[f32; 4], threshold: f64) -> bool {
    let (x_min, x_max) = (a[0].max(b[0]), a[1].min(b[1]));
    let (y_min, y_max) = (a[2].max(b[2]), a[3].min(b[3]));
    if x_max <= x_min || y_max <= y_min {
        return false;
    }
    let intersection = (x_max - x_min) * (y_max - y_min);
    let area = |r: &[f32; 4]| (r[1] - r[0]) * (r[3] - r[2]);
    let union = area(a) + area(b) - intersection;
    if intersection <= 0.0 || area(a) <= 0.0 || area(b) <= 0.0 || union <= 0.0 {
        return false;
    }
    f64::from(intersection / union) > threshold
}

/// `Unique`: one of its outputs, after checking that the input has `count` distinct elements
/// (or slices). Slices compare element by element in order (floats by value, `-0 == 0`, NaN
/// after every number, as NumPy's sort has them); equal slices keep the first position.
pub(crate) fn unique(op: &Op, u: &Unique, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?;
    let x = c.inputs[0];
    let shape = x.shape();
    // Slice `i` is element `(o, i, r)` for every outer `o` and inner `r` along the axis.
    let (outer, n, inner) = match u.axis {
        Some(a) => (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product()),
        None => (1, x.numel(), 1),
    };
    let at = |i: usize, j: usize| (j / inner * n + i) * inner + j % inner;
    let width = outer * inner;
    let compare = |a: usize, b: usize| -> Ordering {
        let element = |j: usize| match x.data() {
            Data::F32(v) => {
                let (p, q) = (v[at(a, j)], v[at(b, j)]);
                p.partial_cmp(&q).unwrap_or_else(|| p.is_nan().cmp(&q.is_nan()))
            }
            Data::I64(v) => v[at(a, j)].cmp(&v[at(b, j)]),
            Data::Bool(v) => v[at(a, j)].cmp(&v[at(b, j)]),
        };
        (0..width).map(element).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    };
    // Stable: equal slices stay in ascending position, so each group starts at its first.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| compare(a, b));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match groups.last_mut() {
            Some(g) if compare(g[0], i).is_eq() => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    if groups.len() != u.count {
        return Err(c.value_err(format!(
            "{} distinct {}; the plan holds {} (the size the file declares for its outputs)",
            groups.len(),
            if u.axis.is_some() { "slices" } else { "elements" },
            u.count
        )));
    }
    if !u.sorted {
        groups.sort_by_key(|g| g[0]);
    }
    let ids =
        |v: Vec<usize>| Tensor::from_i64(&out.shape, v.into_iter().map(|i| i as i64).collect());
    Ok(vec![match u.part {
        UniquePart::Indices => ids(groups.iter().map(|g| g[0]).collect())?,
        UniquePart::Counts => ids(groups.iter().map(Vec::len).collect())?,
        UniquePart::Inverse => {
            let mut inverse = vec![0; n];
            for (k, g) in groups.iter().enumerate() {
                g.iter().for_each(|&i| inverse[i] = k);
            }
            ids(inverse)?
        }
        UniquePart::Values => {
            // Element (o, k, r) of the output is element (o, first of group k, r).
            let count = groups.len();
            let picks: Vec<usize> = (0..outer * count * inner)
                .map(|f| {
                    let (o, k, r) = (f / (count * inner), f / inner % count, f % inner);
                    (o * n + groups[k][0]) * inner + r
                })
                .collect();
            match x.data() {
                Data::F32(v) => {
                    Tensor::from_f32(&out.shape, picks.iter().map(|&i| v[i]).collect())?
                }
                Data::I64(v) => {
                    Tensor::from_i64(&out.shape, picks.iter().map(|&i| v[i]).collect())?
                }
                Data::Bool(v) => {
                    Tensor::from_bool(&out.shape, picks.iter().map(|&i| v[i]).collect())?
                }
            }
        }
    }])
}
