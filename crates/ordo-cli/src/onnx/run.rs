//! ONNX tensors as kernel tensors, and comparisons with ONNX's expected outputs. The graph
//! itself runs through the runtime's sequential interpreter (`ordo_exec::sequential::infer`).

use anyhow::Context;
use ordo_exec::cpu::{self, Tensor};
use ordo_onnx::{TensorValue, Values};

/// A kernel tensor from an ONNX tensor value.
pub fn tensor(value: &TensorValue) -> anyhow::Result<Tensor> {
    let t = match &value.values {
        Values::F32(v) => Tensor::from_f32(&value.shape, v.clone()),
        Values::I64(v) => Tensor::from_i64(&value.shape, v.clone()),
        Values::Bool(v) => Tensor::from_bool(&value.shape, v.clone()),
    };
    t.with_context(|| format!("tensor `{}`", value.name))
}

/// Elements of a kernel tensor as `f64`, for comparisons.
pub fn as_f64(t: &Tensor) -> Vec<f64> {
    match t.data() {
        cpu::Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        cpu::Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        cpu::Data::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// Elements of an ONNX tensor value as `f64`.
pub fn value_f64(v: &TensorValue) -> Vec<f64> {
    match &v.values {
        Values::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Values::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Values::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// How two tensors differ beyond `|got - want| <= atol + rtol * |want|` (NaN matches NaN,
/// infinities must be equal), or `None` when they agree.
pub fn mismatch(
    got: &[f64],
    got_shape: &[usize],
    want: &TensorValue,
    rtol: f64,
    atol: f64,
) -> Option<String> {
    if got_shape != want.shape.as_slice() {
        return Some(format!("shape {got_shape:?}, expected {:?}", want.shape));
    }
    let want_v = value_f64(want);
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&g, &w)) in got.iter().zip(&want_v).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g.is_finite() && w.is_finite() && (g - w).abs() <= atol + rtol * w.abs());
        if !ok {
            bad += 1;
            let err = if (g - w).is_nan() { f64::INFINITY } else { (g - w).abs() };
            if worst.is_none_or(|(_, e)| err > e) {
                worst = Some((i, err));
            }
        }
    }
    worst.map(|(i, _)| {
        format!(
            "{bad} of {} elements differ (e.g. element {i}: {}, expected {})",
            want_v.len(),
            got[i],
            want_v[i]
        )
    })
}
