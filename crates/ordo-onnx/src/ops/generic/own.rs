//! The shape rules of the generic operators that have one of their own (not a family of
//! [`super::rules::Family`]): padding, tiling, ranges, splits, `Einsum`, `TopK`, gathers and
//! scatters, casts, random generators, windows, quantization, spectral transforms, losses;
//! the spatial and product ones are in `conv.rs`.

use ordo_ir::op::broadcast_shapes;
use ordo_ir::{DType, TensorFact};

use super::rules::{broadcast_all, const_ints, reduced};
use super::{In, const_of, conv};
use crate::error::OnnxResult;
use crate::node::Node;
use crate::ops::common::resolve_axis;
use crate::tensor::{ConstTensor, ir_dtype};

pub(crate) fn dtype_attr(node: &Node<'_>, name: &str, default: DType) -> OnnxResult<DType> {
    if !node.has_attr(name) {
        return Ok(default);
    }
    let code = node.int(name, 0)? as i32;
    ir_dtype(code).ok_or_else(|| {
        node.unsupported(format!("{name} = {} (no IR type)", crate::tensor::elem_name(code)))
    })
}

/// Whether `node`'s output size depends on the data, so that [`own`] gives its largest.
pub(super) fn bounded(node: &Node<'_>, ins: &[Option<In>]) -> bool {
    match node.op_type() {
        "NonZero" | "Unique" | "NonMaxSuppression" => true,
        "Compress" => const_of(ins, 1).is_none(),
        _ => super::strings::bounded(node),
    }
}

/// The operators with a rule of their own.
pub(super) fn own(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let x = |i: usize| super::fact_at(node, ins, i);
    let one = |dtype: DType, shape: Vec<usize>| Ok(vec![TensorFact::new(dtype, shape)]);
    match node.op_type() {
        op if super::strings::OPS.contains(&op) => super::strings::infer(node, ins),
        "Where" => {
            let shape = broadcast_all(node, ins)?;
            one(x(1)?.dtype, shape)
        }
        "Pad" => {
            let input = x(0)?;
            let pads = match node.ints("pads") {
                Some(p) => p.to_vec(),
                None => const_ints(node, ins, 1, "pads")?,
            };
            let axes: Vec<usize> = match ins.get(3).and_then(Option::as_ref) {
                Some(_) => const_ints(node, ins, 3, "axes")?
                    .iter()
                    .map(|&a| resolve_axis(node, a, input.rank()))
                    .collect::<OnnxResult<_>>()?,
                None => (0..input.rank()).collect(),
            };
            if pads.len() != 2 * axes.len() {
                return Err(node.malformed(format!(
                    "{} pads for {} axes (expected two per axis)",
                    pads.len(),
                    axes.len()
                )));
            }
            let mut shape = input.shape.clone();
            for (j, &a) in axes.iter().enumerate() {
                let size = shape[a] as i64 + pads[j] + pads[j + axes.len()];
                shape[a] = usize::try_from(size)
                    .map_err(|_| node.shape_error(format!("padding makes axis {a} {size} long")))?;
            }
            one(input.dtype, shape)
        }
        "Tile" => {
            let input = x(0)?;
            let repeats = const_ints(node, ins, 1, "repeats")?;
            if repeats.len() != input.rank() || repeats.iter().any(|&r| r < 0) {
                return Err(
                    node.malformed(format!("repeats {repeats:?} for rank {}", input.rank()))
                );
            }
            let shape = input
                .shape
                .iter()
                .zip(&repeats)
                .map(|(&d, &r)| d.checked_mul(r as usize))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| node.shape_error(format!("repeats {repeats:?} overflow")))?;
            one(input.dtype, shape)
        }
        "Range" => {
            let value = |i: usize, what: &str| {
                // A Range of run-time bounds that the file sizes is imported by ops::range.
                const_of(ins, i).and_then(|c| c.scalar()).ok_or_else(|| {
                    node.unsupported(format!(
                        "its {what} (input {i}) is not a constant scalar, and the file declares \
                         no 1-D size for its output: its length would depend on the data, and \
                         ordo plans static shapes"
                    ))
                })
            };
            let (start, limit, delta) =
                (value(0, "start")?, value(1, "limit")?, value(2, "delta")?);
            if delta == 0.0 {
                return Err(node.malformed("delta is 0: the range would never end"));
            }
            let n = ((limit - start) / delta).ceil();
            if !(0.0..=f64::from(u32::MAX)).contains(&n.max(0.0)) {
                return Err(node.shape_error(format!("{n} elements")));
            }
            let n = n.max(0.0) as usize;
            one(x(0)?.dtype, vec![n])
        }
        "Split" => split(node, ins, x(0)?),
        "Einsum" => {
            let inputs: Vec<&TensorFact> = ins.iter().flatten().map(|x| &x.fact).collect();
            let (shape, _) = conv::einsum(node, &inputs)?;
            one(inputs[0].dtype, shape)
        }
        "TopK" => {
            let input = x(0)?;
            let k = match node.has_attr("k") {
                true => node.int("k", 0)?,
                false => const_ints(node, ins, 1, "K")?.first().copied().unwrap_or(-1),
            };
            let axis = resolve_axis(node, node.int("axis", -1)?, input.rank())?;
            if k < 0 || k as usize > input.shape[axis] {
                return Err(node.malformed(format!("K = {k} for an axis of {}", input.shape[axis])));
            }
            let mut shape = input.shape.clone();
            shape[axis] = k as usize;
            Ok(vec![
                TensorFact::new(input.dtype, shape.clone()),
                TensorFact::new(DType::I64, shape),
            ])
        }
        "GatherElements" => one(x(0)?.dtype, x(1)?.shape.clone()),
        "Gather" => {
            let (data, indices) = (x(0)?, x(1)?);
            let axis = resolve_axis(node, node.int("axis", 0)?, data.rank())?;
            let mut shape = data.shape[..axis].to_vec();
            shape.extend(&indices.shape);
            shape.extend(&data.shape[axis + 1..]);
            one(data.dtype, shape)
        }
        "GatherND" => {
            let (data, indices) = (x(0)?, x(1)?);
            let batch = node.int("batch_dims", 0)? as usize;
            let last = *indices.shape.last().ok_or_else(|| node.malformed("scalar indices"))?;
            if batch + last > data.rank() || indices.rank() < 1 {
                return Err(node.malformed("indices address more axes than the data has"));
            }
            let mut shape = indices.shape[..indices.rank() - 1].to_vec();
            shape.extend(&data.shape[batch + last..]);
            one(data.dtype, shape)
        }
        "ScatterND" | "ScatterElements" | "Scatter" => one(x(0)?.dtype, x(0)?.shape.clone()),
        "OneHot" => {
            let indices = x(0)?;
            let depth = const_of(ins, 1).and_then(|c| c.scalar()).ok_or_else(|| {
                node.unsupported("depth (input 1) must be a constant to know the output's shape")
            })?;
            let rank = indices.rank() + 1;
            let axis = resolve_axis(node, node.int("axis", -1)?, rank)?;
            let mut shape = indices.shape.clone();
            shape.insert(axis, depth as usize);
            one(x(2)?.dtype, shape)
        }
        "DepthToSpace" | "SpaceToDepth" => {
            let input = x(0)?;
            let b = node.int("blocksize", 0)? as usize;
            if input.rank() != 4 || b == 0 {
                return Err(node.malformed("expects NCHW input and a blocksize"));
            }
            let [n, c, h, w] = [input.shape[0], input.shape[1], input.shape[2], input.shape[3]];
            let shape = if node.op_type() == "DepthToSpace" {
                vec![n, c / (b * b), h * b, w * b]
            } else {
                vec![n, c * b * b, h / b, w / b]
            };
            one(input.dtype, shape)
        }
        "EyeLike" => one(dtype_attr(node, "dtype", x(0)?.dtype)?, x(0)?.shape.clone()),
        // The same bits as another type of the same width (opset 26).
        "BitCast" => {
            let (input, to) = (x(0)?, dtype_attr(node, "to", x(0)?.dtype)?);
            if to.bits() != input.dtype.bits() {
                return Err(
                    node.malformed(format!("BitCast of {} to {to}: widths differ", input.dtype))
                );
            }
            one(to, input.shape.clone())
        }
        "Bernoulli" if !x(0)?.dtype.is_float() => {
            Err(node.malformed(format!("{} probabilities: expected floats", x(0)?.dtype)))
        }
        "Bernoulli" | "RandomUniformLike" | "RandomNormalLike" => {
            one(dtype_attr(node, "dtype", x(0)?.dtype)?, x(0)?.shape.clone())
        }
        "RandomUniform" | "RandomNormal" => {
            let shape = node.ints("shape").ok_or_else(|| node.malformed("no shape"))?;
            let shape = crate::tensor::dims_to_shape(shape).map_err(|m| node.malformed(m))?;
            one(dtype_attr(node, "dtype", DType::F32)?, shape)
        }
        "Multinomial" => {
            let input = x(0)?;
            if input.rank() != 2 {
                return Err(node.malformed("expects [batch, classes]"));
            }
            let samples = node.int("sample_size", 1)? as usize;
            one(dtype_attr(node, "dtype", DType::I32)?, vec![input.shape[0], samples])
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let size = const_of(ins, 0).and_then(|c| c.scalar()).ok_or_else(|| {
                node.unsupported("size (input 0) must be a constant to know the output's shape")
            })?;
            one(dtype_attr(node, "output_datatype", DType::F32)?, vec![size as usize])
        }
        "CastLike" => one(x(1)?.dtype, x(0)?.shape.clone()),
        "Cast" => one(dtype_attr(node, "to", x(0)?.dtype)?, x(0)?.shape.clone()),
        "DequantizeLinear" => {
            let dtype = ins.get(1).and_then(Option::as_ref).map_or(DType::F32, |s| s.fact.dtype);
            one(dtype, x(0)?.shape.clone())
        }
        "QuantizeLinear" => {
            let dtype = match ins.get(2).and_then(Option::as_ref) {
                Some(zero_point) => zero_point.fact.dtype,
                None => dtype_attr(node, "output_dtype", DType::U8)?,
            };
            one(dtype, x(0)?.shape.clone())
        }
        "DynamicQuantizeLinear" => Ok(vec![
            TensorFact::new(DType::U8, x(0)?.shape.clone()),
            TensorFact::new(DType::F32, vec![]),
            TensorFact::new(DType::U8, vec![]),
        ]),
        "DFT" => dft(node, ins, x(0)?),
        "STFT" => {
            let signal = x(0)?;
            if signal.rank() != 3 {
                return Err(node.malformed("expects a signal [batch, length, 1 or 2]"));
            }
            let step = const_ints(node, ins, 1, "frame_step")?.first().copied().unwrap_or(0);
            let length = match ins.get(3).and_then(Option::as_ref) {
                Some(_) => const_ints(node, ins, 3, "frame_length")?.first().copied().unwrap_or(0),
                None => x(2)?.shape.first().copied().unwrap_or(0) as i64,
            };
            if step < 1 || length < 1 || length as usize > signal.shape[1] {
                return Err(node.malformed(format!("frame_step {step}, frame_length {length}")));
            }
            let frames = (signal.shape[1] - length as usize) / step as usize + 1;
            let onesided = node.int("onesided", 1)? != 0;
            let bins = if onesided { length as usize / 2 + 1 } else { length as usize };
            one(signal.dtype, vec![signal.shape[0], frames, bins, 2])
        }
        "MelWeightMatrix" => {
            let scalar = |i: usize, what: &str| {
                const_of(ins, i).and_then(|c| c.scalar()).ok_or_else(|| {
                    node.unsupported(format!("{what} (input {i}) must be a constant scalar"))
                })
            };
            let (bins, dft_length) = (scalar(0, "num_mel_bins")?, scalar(1, "dft_length")?);
            let shape = vec![(dft_length.max(0.0) as usize) / 2 + 1, bins.max(0.0) as usize];
            one(dtype_attr(node, "output_datatype", DType::F32)?, shape)
        }
        "Det" => {
            let input = x(0)?;
            if input.rank() < 2 {
                return Err(node.malformed("expects [..., M, M]"));
            }
            one(input.dtype, input.shape[..input.rank() - 2].to_vec())
        }
        "Expand" => {
            let target = const_ints(node, ins, 1, "shape")?;
            let target: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
            let input = x(0)?;
            let shape = broadcast_shapes(&input.shape, &target).ok_or_else(|| {
                node.shape_error(format!("{:?} does not expand to {target:?}", input.shape))
            })?;
            one(input.dtype, shape)
        }
        "Flatten" => {
            let input = x(0)?;
            let axis = node.int("axis", 1)?;
            let axis = if axis < 0 { axis + input.rank() as i64 } else { axis } as usize;
            let outer: usize = input.shape[..axis.min(input.rank())].iter().product();
            let inner: usize = input.shape[axis.min(input.rank())..].iter().product();
            one(input.dtype, vec![outer, inner])
        }
        "Unsqueeze" | "Squeeze" => squeeze(node, ins, x(0)?),
        "Concat" => {
            let first = x(0)?;
            let axis = resolve_axis(node, node.int("axis", 0)?, first.rank())?;
            let mut shape = first.shape.clone();
            shape[axis] =
                ins.iter().flatten().map(|x| x.fact.shape.get(axis).copied().unwrap_or(0)).sum();
            one(first.dtype, shape)
        }
        "Compress" if const_of(ins, 1).is_some() => {
            let input = x(0)?;
            let kept = const_of(ins, 1).and_then(|c| c.to_f64s()).unwrap_or_default();
            let count = kept.iter().filter(|&&v| v != 0.0).count();
            let shape = match node.has_attr("axis") {
                true => {
                    let axis = resolve_axis(node, node.int("axis", 0)?, input.rank())?;
                    let mut s = input.shape.clone();
                    s[axis] = count;
                    s
                }
                false => vec![count],
            };
            one(input.dtype, shape)
        }
        // The largest sizes of the data-dependent ones (see `bounded`).
        "Compress" => {
            let (input, kept) = (x(0)?, x(1)?.shape.iter().product::<usize>());
            let shape = match node.has_attr("axis") {
                true => {
                    let axis = resolve_axis(node, node.int("axis", 0)?, input.rank())?;
                    let mut s = input.shape.clone();
                    s[axis] = s[axis].min(kept);
                    s
                }
                false => vec![input.shape.iter().product::<usize>().min(kept)],
            };
            one(input.dtype, shape)
        }
        "NonZero" => {
            let input = x(0)?;
            one(DType::I64, vec![input.rank(), input.shape.iter().product()])
        }
        "Unique" => {
            let input = x(0)?;
            let (values, n) = match node.has_attr("axis") {
                true => {
                    let axis = resolve_axis(node, node.int("axis", 0)?, input.rank())?;
                    (input.shape.clone(), input.shape[axis])
                }
                false => {
                    let n = input.shape.iter().product();
                    (vec![n], n)
                }
            };
            let index = TensorFact::new(DType::I64, vec![n]);
            Ok(vec![TensorFact::new(input.dtype, values), index.clone(), index.clone(), index])
        }
        "NonMaxSuppression" => {
            let (boxes, scores) = (x(0)?, x(1)?);
            let (Some(&batches), Some(&classes), Some(&n)) =
                (boxes.shape.first(), scores.shape.get(1), boxes.shape.get(1))
            else {
                return Err(node.malformed(format!("boxes {boxes} and scores {scores}")));
            };
            let per_class = const_of(ins, 2)
                .and_then(ConstTensor::scalar)
                .map_or(n, |m| (m.max(0.0) as usize).min(n));
            one(DType::I64, vec![batches * classes * per_class, 3])
        }
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            let scores = x(0)?;
            let target = x(1)?;
            let loss = match node.string("reduction", "mean")?.as_str() {
                "none" => target.shape.clone(),
                _ => vec![],
            };
            Ok(vec![TensorFact::new(scores.dtype, loss), scores.clone()])
        }
        "GRU" | "RNN" | "LSTM" => conv::recurrent(node, x(0)?, x(1)?),
        _ => conv::spatial(node, ins),
    }
}

/// `DFT`: the signal `[..., n, 1 or 2]` transformed along `axis` (input 2 from opset 20, else
/// the attribute) to `dft_length` (input 1) points, half and one of them when `onesided`; the
/// last dimension 2 (real and imaginary parts).
fn dft(node: &Node<'_>, ins: &[Option<In>], signal: &TensorFact) -> OnnxResult<Vec<TensorFact>> {
    if signal.rank() < 2 {
        return Err(node.malformed("expects a signal [..., n, 1 or 2]"));
    }
    let axis = match ins.get(2).and_then(Option::as_ref) {
        Some(_) => const_ints(node, ins, 2, "axis")?.first().copied().unwrap_or(-2),
        None => node.int("axis", if node.opset >= 20 { -2 } else { 1 })?,
    };
    let axis = resolve_axis(node, axis, signal.rank())?;
    if axis == signal.rank() - 1 {
        return Err(node.malformed("the transformed axis cannot be the last (real, imaginary)"));
    }
    let onesided = node.int("onesided", 0)? != 0;
    let inverse = node.int("inverse", 0)? != 0;
    let length = match ins.get(1).and_then(Option::as_ref) {
        Some(_) => {
            const_ints(node, ins, 1, "dft_length")?.first().copied().unwrap_or(0).max(0) as usize
        }
        // A one-sided spectrum of n bins is the inverse of 2 (n - 1) real points.
        None if onesided && inverse => 2 * signal.shape[axis].saturating_sub(1),
        None => signal.shape[axis],
    };
    let mut shape = signal.shape.clone();
    if onesided && inverse {
        // The inverse of a one-sided spectrum is a real signal of `dft_length` points.
        shape[axis] = length;
        *shape.last_mut().expect("rank >= 2") = 1;
    } else {
        shape[axis] = if onesided { length / 2 + 1 } else { length };
        *shape.last_mut().expect("rank >= 2") = 2;
    }
    Ok(vec![TensorFact::new(signal.dtype, shape)])
}

/// `Split`: sizes from input 1 (opset 13) or the `split` attribute, else equal parts (the last
/// smaller, opset 18), one per output or `num_outputs`.
fn split(node: &Node<'_>, ins: &[Option<In>], input: &TensorFact) -> OnnxResult<Vec<TensorFact>> {
    let axis = resolve_axis(node, node.int("axis", 0)?, input.rank())?;
    let total = input.shape[axis];
    let sizes: Vec<usize> = if let Some(s) = node.ints("split") {
        s.iter().map(|&v| v.max(0) as usize).collect()
    } else if ins.get(1).is_some_and(Option::is_some) {
        const_ints(node, ins, 1, "split")?.iter().map(|&v| v.max(0) as usize).collect()
    } else {
        let parts = node.int("num_outputs", node.num_outputs() as i64)?.max(1) as usize;
        let each = total.div_ceil(parts);
        (0..parts).map(|i| each.min(total.saturating_sub(i * each))).collect()
    };
    if sizes.iter().sum::<usize>() != total {
        return Err(node.malformed(format!("split sizes {sizes:?} do not add up to {total}")));
    }
    Ok(sizes
        .into_iter()
        .map(|size| {
            let mut shape = input.shape.clone();
            shape[axis] = size;
            TensorFact::new(input.dtype, shape)
        })
        .collect())
}

/// `Squeeze` and `Unsqueeze` with axes from the attribute (before opset 13) or input 1.
fn squeeze(node: &Node<'_>, ins: &[Option<In>], input: &TensorFact) -> OnnxResult<Vec<TensorFact>> {
    let axes: Option<Vec<i64>> = match node.ints("axes") {
        Some(a) => Some(a.to_vec()),
        None if ins.get(1).is_some_and(Option::is_some) => Some(const_ints(node, ins, 1, "axes")?),
        None => None,
    };
    let shape = if node.op_type() == "Squeeze" {
        match axes {
            None => input.shape.iter().copied().filter(|&d| d != 1).collect(),
            Some(a) => {
                let axes: Vec<usize> = a
                    .iter()
                    .map(|&a| resolve_axis(node, a, input.rank()))
                    .collect::<OnnxResult<_>>()?;
                reduced(&input.shape, &axes, false)
            }
        }
    } else {
        let axes = axes.ok_or_else(|| node.malformed("no axes"))?;
        let rank = input.rank() + axes.len();
        let mut axes: Vec<usize> =
            axes.iter().map(|&a| resolve_axis(node, a, rank)).collect::<OnnxResult<_>>()?;
        axes.sort_unstable();
        let mut shape = input.shape.clone();
        for a in axes {
            shape.insert(a.min(shape.len()), 1);
        }
        shape
    };
    Ok(vec![TensorFact::new(input.dtype, shape)])
}
