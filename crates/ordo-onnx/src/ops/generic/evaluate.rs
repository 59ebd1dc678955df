//! Generic operators evaluated at import time when every input is a constant: the index and
//! mask arithmetic that exporters write around attention (`Range`, comparisons, logic,
//! `Where`, `Mod`, `Max`, `Min`, `Abs`...), whose results feed `Expand` targets, `Reshape`
//! shapes and masks that the importer needs as values; and the window functions (`HannWindow`,
//! `HammingWindow`, `BlackmanWindow`), whose one input is a size, and `MelWeightMatrix`.

use super::In;
use crate::error::OnnxResult;
use crate::fold;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

/// The operator's outputs as constants, or `None` when it is not one this file folds or an
/// input is not a constant.
pub(super) fn fold_constants(
    node: &Node<'_>,
    ins: &[Option<In>],
) -> OnnxResult<Option<ConstTensor>> {
    let consts: Vec<&ConstTensor> = match ins.iter().flatten().map(|x| x.value.as_ref()).collect() {
        Some(all) => all,
        None => return Ok(None),
    };
    let bad = |m: String| node.unsupported(m);
    let compare = |f: fn(f64, f64) -> bool| {
        let [a, b] = consts[..] else { return Ok(None) };
        let folded = fold::binary(
            a,
            b,
            |p, q| f64::from(u8::from(f(p, q))),
            |p, q| Some(i64::from(f(p as f64, q as f64))),
        )
        .map_err(bad)?;
        Ok(Some(as_bool(folded)))
    };
    let logic = |f: fn(bool, bool) -> bool| {
        let [a, b] = consts[..] else { return Ok(None) };
        let folded = fold::binary(
            a,
            b,
            |p, q| f64::from(u8::from(f(p != 0.0, q != 0.0))),
            |p, q| Some(i64::from(f(p != 0, q != 0))),
        )
        .map_err(bad)?;
        Ok(Some(as_bool(folded)))
    };
    let unary = |f: fn(f64) -> f64, int: fn(i64) -> Option<i64>| {
        let [c] = consts[..] else { return Ok(None) };
        let zero = ConstTensor::int_scalar(c.elem, 0);
        Ok(Some(fold::binary(&zero, c, |_, x| f(x), |_, x| int(x)).map_err(bad)?))
    };
    match node.op_type() {
        "Equal" => compare(|a, b| a == b),
        "Less" => compare(|a, b| a < b),
        "LessOrEqual" => compare(|a, b| a <= b),
        "Greater" => compare(|a, b| a > b),
        "GreaterOrEqual" => compare(|a, b| a >= b),
        "And" => logic(|a, b| a && b),
        "Or" => logic(|a, b| a || b),
        "Xor" => logic(|a, b| a != b),
        "Not" => {
            let [c] = consts[..] else { return Ok(None) };
            let one = ConstTensor::int_scalar(code::BOOL, 1);
            let folded =
                fold::binary(&one, c, |p, q| p - q, |p, q| p.checked_sub(q)).map_err(bad)?;
            Ok(Some(as_bool(folded)))
        }
        "Abs" => unary(f64::abs, |x| x.checked_abs()),
        "Floor" => unary(f64::floor, Some),
        "Ceil" => unary(f64::ceil, Some),
        "Sign" => unary(f64::signum, |x| Some(x.signum())),
        // Float functions of constants (T5's relative position buckets take a logarithm).
        "Exp" => unary(f64::exp, |_| None),
        "Log" => unary(f64::ln, |_| None),
        "Sin" => unary(f64::sin, |_| None),
        "Cos" => unary(f64::cos, |_| None),
        "Tanh" => unary(f64::tanh, |_| None),
        "Sigmoid" => unary(|x| 1.0 / (1.0 + (-x).exp()), |_| None),
        "Reciprocal" => unary(f64::recip, |_| None),
        "Relu" => unary(|x| x.max(0.0), |x| Some(x.max(0))),
        "Round" => unary(f64::round_ties_even, Some),
        "Max" | "Min" => {
            let max = node.op_type() == "Max";
            let mut folded = (*consts.first().ok_or_else(|| node.malformed("no inputs"))?).clone();
            for c in &consts[1..] {
                folded = fold::binary(
                    &folded,
                    c,
                    move |p, q| if max { p.max(q) } else { p.min(q) },
                    move |p, q| Some(if max { p.max(q) } else { p.min(q) }),
                )
                .map_err(bad)?;
            }
            Ok(Some(folded))
        }
        "Mod" => {
            let [a, b] = consts[..] else { return Ok(None) };
            let fmod = node.int("fmod", 0)? != 0;
            let folded = fold::binary(
                a,
                b,
                move |p, q| if fmod { p % q } else { p - q * (p / q).floor() },
                move |p, q| match fmod {
                    true => p.checked_rem(q),
                    false => p
                        .checked_rem(q)
                        .map(|r| if r != 0 && (r < 0) != (q < 0) { r + q } else { r }),
                },
            )
            .map_err(bad)?;
            Ok(Some(folded))
        }
        "GatherElements" => {
            let [data, indices] = consts[..] else { return Ok(None) };
            let axis =
                crate::ops::common::resolve_axis(node, node.int("axis", 0)?, data.shape.len())?;
            Ok(Some(fold::gather_elements(data, indices, axis).map_err(bad)?))
        }
        "ScatterND" => {
            let [data, indices, updates] = consts[..] else { return Ok(None) };
            let reduce: fn(f64, f64) -> f64 = match node.string("reduction", "none")?.as_str() {
                "none" => |_, u| u,
                "add" => |a, u| a + u,
                "mul" => |a, u| a * u,
                "max" => f64::max,
                "min" => f64::min,
                other => {
                    return Err(node.malformed(format!(
                        "reduction `{other}`: expected none, add, mul, max or min"
                    )));
                }
            };
            Ok(Some(fold::scatter_nd(data, indices, updates, reduce).map_err(bad)?))
        }
        "Clip" => {
            // Bounds by position: inputs 1 and 2 when given (opset 11), else attributes.
            let Some(x) = consts.first() else { return Ok(None) };
            let bound = |i: usize, attr: &str, default: f64| -> OnnxResult<f64> {
                if node.opset < 11 {
                    return node.float(attr, default);
                }
                match ins.get(i).and_then(Option::as_ref).and_then(|b| b.value.as_ref()) {
                    Some(c) => c.scalar().ok_or_else(|| bad(format!("`{attr}` must be a scalar"))),
                    None => Ok(default),
                }
            };
            let (lo, hi) = (bound(1, "min", f64::NEG_INFINITY)?, bound(2, "max", f64::INFINITY)?);
            let zero = ConstTensor::int_scalar(x.elem, 0);
            let folded = fold::binary(
                &zero,
                x,
                move |_, v| v.max(lo).min(hi),
                move |_, v| Some((v as f64).max(lo).min(hi) as i64),
            )
            .map_err(bad)?;
            Ok(Some(folded))
        }
        "Tile" => {
            let [data, repeats] = consts[..] else { return Ok(None) };
            let repeats = repeats.to_i64s().ok_or_else(|| bad("too many repeats".into()))?;
            Ok(Some(fold::tile(data, &repeats).map_err(bad)?))
        }
        "Range" => {
            let [start, limit, delta] = consts[..] else { return Ok(None) };
            let (Some(s), Some(l), Some(d)) = (start.scalar(), limit.scalar(), delta.scalar())
            else {
                return Ok(None);
            };
            let n = ((l - s) / d).ceil().max(0.0) as usize;
            if d == 0.0 || n as u64 > crate::tensor::MAX_FOLD {
                return Ok(None);
            }
            let data = if start.is_int() {
                ConstData::Int((0..n).map(|i| (s + d * i as f64) as i64).collect())
            } else {
                ConstData::Float((0..n).map(|i| s + d * i as f64).collect())
            };
            Ok(Some(ConstTensor { elem: start.elem, shape: vec![n], data }))
        }
        "Where" => {
            let [cond, x, y] = consts[..] else { return Ok(None) };
            let shape = fold::broadcast(&x.shape, &y.shape)
                .and_then(|values| fold::broadcast(&cond.shape, &values))
                .ok_or_else(|| node.shape_error("the condition and the values do not broadcast"))?;
            let expand = |c: &ConstTensor| fold::expand(c, &shape).map_err(bad);
            let (cond, x, y) = (expand(cond)?, expand(x)?, expand(y)?);
            let Some(pick) = cond.to_f64s() else { return Ok(None) };
            let data = match (x.to_i64s(), y.to_i64s(), x.is_int()) {
                (Some(a), Some(b), true) => ConstData::Int(
                    pick.iter()
                        .zip(a.iter().zip(&b))
                        .map(|(&c, (&p, &q))| if c != 0.0 { p } else { q })
                        .collect(),
                ),
                _ => {
                    let (Some(a), Some(b)) = (x.to_f64s(), y.to_f64s()) else { return Ok(None) };
                    ConstData::Float(
                        pick.iter()
                            .zip(a.iter().zip(&b))
                            .map(|(&c, (&p, &q))| if c != 0.0 { p } else { q })
                            .collect(),
                    )
                }
            };
            Ok(Some(ConstTensor { elem: x.elem, shape, data }))
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let [size] = consts[..] else { return Ok(None) };
            let Some(size) = size.scalar().filter(|&n| n >= 1.0 && n as u64 <= MAX_WINDOW) else {
                return Err(node.malformed("size must be a positive integer of at most 2^24"));
            };
            let elem = node.int("output_datatype", i64::from(code::FLOAT))? as i32;
            if !crate::tensor::is_float_code(elem) {
                return Err(bad(format!("a window of output_datatype {elem}: floats only")));
            }
            let n = size as usize;
            let periodic = node.int("periodic", 1)? != 0;
            let span = if periodic { n as f64 } else { n as f64 - 1.0 };
            let value = |i: usize| -> f64 {
                let turn = 2.0 * std::f64::consts::PI * i as f64 / span;
                match node.op_type() {
                    "HannWindow" => (std::f64::consts::PI * i as f64 / span).sin().powi(2),
                    "HammingWindow" => 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * turn.cos(),
                    _ => 0.42 - 0.5 * turn.cos() + 0.08 * (2.0 * turn).cos(),
                }
            };
            let data = ConstData::Float((0..n).map(value).collect());
            let window = ConstTensor { elem: code::FLOAT, shape: vec![n], data };
            let dtype = crate::tensor::ir_dtype(elem).ok_or_else(|| {
                bad(format!("a window of output_datatype {elem}: a type the IR does not hold"))
            })?;
            Ok(Some(fold::cast(&window, dtype)))
        }
        "MelWeightMatrix" => {
            let [bins, length, rate, lower, upper] = consts[..] else { return Ok(None) };
            let scalars = [bins, length, rate, lower, upper].map(|c| c.scalar());
            let [Some(bins), Some(length), Some(rate), Some(lower), Some(upper)] = scalars else {
                return Err(node.malformed("its five inputs must be scalars"));
            };
            let elem = node.int("output_datatype", i64::from(code::FLOAT))? as i32;
            let dtype =
                crate::tensor::ir_dtype(elem).filter(|d| d.is_float()).ok_or_else(|| {
                    bad(format!("a mel matrix of output_datatype {elem}: floats only"))
                })?;
            let matrix =
                mel_weights(bins, length, rate, lower, upper).map_err(|m| node.malformed(m))?;
            Ok(Some(fold::cast(&matrix, dtype)))
        }
        _ => Ok(None),
    }
}

/// ONNX's `MelWeightMatrix` (its reference, step by step): `[length / 2 + 1, bins]` triangles
/// over mel-spaced edges between `lower` and `upper` hertz, the edges rounded down to
/// spectrogram bins.
fn mel_weights(
    bins: f64,
    length: f64,
    rate: f64,
    lower: f64,
    upper: f64,
) -> Result<ConstTensor, String> {
    let valid = bins >= 1.0 && length >= 1.0 && rate > 0.0 && lower >= 0.0 && upper > lower;
    if !valid || bins * length > MAX_WINDOW as f64 {
        return Err(format!(
            "num_mel_bins {bins}, dft_length {length}, sample_rate {rate}, edges {lower} to \
             {upper} Hz: expected positive sizes (their product at most 2^24), a positive rate \
             and 0 <= lower < upper"
        ));
    }
    let (bins, length) = (bins as usize, length as usize);
    let rows = length / 2 + 1;
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let (low, high) = (mel(lower), mel(upper));
    let step = (high - low) / (bins + 2) as f64;
    let edges: Vec<i64> = (0..bins + 2)
        .map(|k| {
            let hz = 700.0 * (10f64.powf((k as f64 * step + low) / 2595.0) - 1.0);
            (((length + 1) as f64 * hz) / rate).floor() as i64
        })
        .collect();
    let mut out = vec![0.0; rows * bins];
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), String> {
        match usize::try_from(j).ok().filter(|&j| j < rows) {
            Some(j) => {
                out[j * bins + i] = v;
                Ok(())
            }
            None => Err(format!("a mel edge at bin {j}, past the {rows} spectrogram bins")),
        }
    };
    for i in 0..bins {
        let (left, center, right) = (edges[i], edges[i + 1], edges[i + 2]);
        if center == left {
            set(center, i, 1.0)?;
        } else {
            for j in left..=center {
                set(j, i, (j - left) as f64 / (center - left) as f64)?;
            }
        }
        for j in center..right {
            set(j, i, (right - j) as f64 / (right - center) as f64)?;
        }
    }
    Ok(ConstTensor { elem: code::FLOAT, shape: vec![rows, bins], data: ConstData::Float(out) })
}

/// The longest window folded (2^24 values).
const MAX_WINDOW: u64 = 1 << 24;

/// A folded comparison or logic result as ONNX's bool.
fn as_bool(c: ConstTensor) -> ConstTensor {
    let data = match c.data {
        ConstData::Float(v) => ConstData::Int(v.into_iter().map(|x| i64::from(x != 0.0)).collect()),
        ConstData::Splat(x) => ConstData::Splat(f64::from(u8::from(x != 0.0))),
        ConstData::Int(v) => ConstData::Int(v.into_iter().map(|x| i64::from(x != 0)).collect()),
    };
    ConstTensor { elem: code::BOOL, shape: c.shape, data }
}
