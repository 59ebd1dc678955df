//! `ScatterND` and `ScatterElements`: a copy of the data with the slices that index rows
//! address (or the elements each index names along an axis) replaced by (or added to)
//! updates. Exporters write it for in-place writes to tensors (`x[idx] = v`), e.g.
//! the attention masks of shifted windows. The gradient goes to the data where no update
//! replaced it, and to each update from where it landed (a replaced update that a later row
//! overwrote gets none).

use serde::{Deserialize, Serialize};

use crate::fact::{DType, TensorFact};
use crate::op::expect_inputs;

/// How an update combines with the element it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScatterReduction {
    /// The update replaces it (the last of duplicate rows wins).
    None,
    /// The update is added to it.
    Add,
    /// It is multiplied by the update (no gradient kernel).
    Mul,
    /// The larger of it and the update (no gradient kernel).
    Max,
    /// The smaller of it and the update (no gradient kernel).
    Min,
}

/// `ScatterND(data, indices, updates)`: `indices` is `[..., k]` (i64, each row the first `k`
/// coordinates of a slice of `data`), `updates` is `indices.shape[..-1] ++ data.shape[k..]`
/// of the data's element type; the output is shaped like `data`.
pub(crate) fn infer_scatter_nd(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 3)?;
    let (data, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    if indices.dtype != DType::I64 {
        return Err(format!("indices must be i64, got {indices}"));
    }
    let Some((&k, rows)) = indices.shape.split_last() else {
        return Err("indices of rank 0".into());
    };
    let Some(slice) = data.shape.get(k..) else {
        return Err(format!("index rows of length {k} for data {data}"));
    };
    let want: Vec<usize> = rows.iter().chain(slice).copied().collect();
    if updates.shape != want || updates.dtype != data.dtype {
        return Err(format!(
            "updates {updates}: expected {}{want:?} for data {data} and indices {indices}",
            data.dtype
        ));
    }
    Ok(vec![data.clone()])
}

/// `ScatterElements(data, indices, updates)` along `axis`: indices of the data's rank, no
/// larger than the data off the axis, updates shaped like the indices.
pub(crate) fn infer_scatter_elements(
    axis: i64,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 3)?;
    let (data, indices, updates) = (inputs[0], inputs[1], inputs[2]);
    let axis = crate::op::resolve_axis(axis, data.rank())?;
    let fits = indices.rank() == data.rank()
        && (0..data.rank()).all(|d| d == axis || indices.shape[d] <= data.shape[d]);
    if indices.dtype != DType::I64 || !fits {
        return Err(format!("indices {indices} for data {data} along axis {axis}"));
    }
    if updates.shape != indices.shape || updates.dtype != data.dtype {
        return Err(format!("updates {updates}: expected the indices' shape and {}", data.dtype));
    }
    Ok(vec![data.clone()])
}

/// `GatherND(data, indices)` (no batch dims): `indices` is `[..., k]` (i64), the output
/// `indices.shape[..-1] ++ data.shape[k..]`, each row the slice its index prefix addresses.
pub(crate) fn infer_gather_nd(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (data, indices) = (inputs[0], inputs[1]);
    let Some((&k, rows)) = indices.shape.split_last() else {
        return Err("indices of rank 0".into());
    };
    let Some(slice) = data.shape.get(k..).filter(|_| indices.dtype == DType::I64) else {
        return Err(format!("indices {indices} for data {data}"));
    };
    let shape: Vec<usize> = rows.iter().chain(slice).copied().collect();
    Ok(vec![TensorFact::new(data.dtype, shape)])
}
