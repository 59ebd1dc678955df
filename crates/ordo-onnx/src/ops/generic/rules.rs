//! ONNX's shape inference for the operators imported as opaque ops, and their FLOP estimates.
//! Each rule follows the operator's specification (onnx/docs/Operators.md) for the opsets
//! PyTorch exports (17-21), older attribute forms included where they are common.

use ordo_ir::op::broadcast_shapes;
use ordo_ir::{DType, TensorFact};

use super::{In, const_of, conv};
use crate::error::{OnnxError, OnnxResult};
use crate::node::Node;
use crate::ops::resolve_axis;
use crate::tensor::ir_dtype;

/// How an operator's outputs follow from its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// The shape and type of input 0; `flops` per element.
    Same(u64),
    /// The shape of input 0, boolean.
    SameBool,
    /// NumPy broadcasting of every input; the type of input 0.
    Broadcast,
    /// Broadcasting, boolean (comparisons, logic).
    BroadcastBool,
    /// A reduction over `axes` (attribute or input 1).
    Reduce,
    /// `ArgMax`, `ArgMin`: one axis reduced to its index.
    ArgReduce,
    /// A rule of its own (see [`infer`]).
    Own,
}

/// The family of `op_type`, `None` for an operator without a rule here.
pub(crate) fn family(op_type: &str) -> Option<Family> {
    use Family::*;
    Some(match op_type {
        "Abs" | "Ceil" | "Floor" | "Neg" | "Relu" | "Round" | "Sign" | "BitwiseNot" | "Not"
        | "Identity" | "Clip" | "Shrink" | "ThresholdedRelu" | "LeakyRelu" | "HardSigmoid"
        | "HardSwish" | "ReverseSequence" | "Trilu" | "CumSum" | "Reciprocal" => Same(1),
        "Acos" | "Acosh" | "Asin" | "Asinh" | "Atan" | "Atanh" | "Cos" | "Cosh" | "Sin"
        | "Sinh" | "Tan" | "Tanh" | "Erf" | "Exp" | "Log" | "Sigmoid" | "Softplus" | "Softsign"
        | "Elu" | "Selu" | "Celu" | "Mish" | "Gelu" | "Sqrt" => Same(8),
        "Softmax"
        | "LogSoftmax"
        | "Hardmax"
        | "LpNormalization"
        | "LRN"
        | "MeanVarianceNormalization"
        | "InstanceNormalization"
        | "GroupNormalization"
        | "LayerNormalization"
        | "BatchNormalization"
        | "Dropout" => Same(5),
        "IsInf" | "IsNaN" => SameBool,
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "BitShift" | "BitwiseAnd" | "BitwiseOr"
        | "BitwiseXor" | "Max" | "Min" | "Mean" | "Sum" | "PRelu" => Broadcast,
        "And" | "Or" | "Xor" | "Equal" | "Greater" | "GreaterOrEqual" | "Less" | "LessOrEqual" => {
            BroadcastBool
        }
        "ReduceL1" | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" | "ReduceMax"
        | "ReduceMean" | "ReduceMin" | "ReduceProd" | "ReduceSum" | "ReduceSumSquare" => Reduce,
        "ArgMax" | "ArgMin" => ArgReduce,
        "Where"
        | "Pad"
        | "Tile"
        | "Range"
        | "Split"
        | "Einsum"
        | "TopK"
        | "GatherElements"
        | "GatherND"
        | "Gather"
        | "ScatterND"
        | "ScatterElements"
        | "OneHot"
        | "DepthToSpace"
        | "SpaceToDepth"
        | "EyeLike"
        | "ConvTranspose"
        | "Conv"
        | "MaxPool"
        | "AveragePool"
        | "LpPool"
        | "GlobalMaxPool"
        | "GlobalAveragePool"
        | "GlobalLpPool"
        | "MaxUnpool"
        | "MatMul"
        | "Gemm"
        | "MatMulInteger"
        | "Det"
        | "CastLike"
        | "Cast"
        | "Expand"
        | "Bernoulli"
        | "RandomUniformLike"
        | "RandomNormalLike"
        | "RandomUniform"
        | "RandomNormal"
        | "Multinomial"
        | "HannWindow"
        | "HammingWindow"
        | "BlackmanWindow"
        | "DequantizeLinear"
        | "GRU"
        | "RNN"
        | "LSTM"
        | "NegativeLogLikelihoodLoss"
        | "SoftmaxCrossEntropyLoss"
        | "GridSample"
        | "AffineGrid"
        | "RoiAlign"
        | "MaxRoiPool"
        | "Resize"
        | "CenterCropPad"
        | "Compress"
        | "NonZero"
        | "Unique"
        | "NonMaxSuppression"
        | "Flatten"
        | "Unsqueeze"
        | "Squeeze"
        | "Concat"
        | "ConvInteger"
        | "DeformConv"
        | "QLinearConv"
        | "QLinearMatMul"
        | "QuantizeLinear"
        | "DynamicQuantizeLinear"
        | "Col2Im"
        | "DFT"
        | "STFT"
        | "MelWeightMatrix" => Own,
        _ => return None,
    })
}

/// The facts of `node`'s outputs (as many as the operator defines; the caller takes those the
/// node declares).
pub(crate) fn infer(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let family = family(node.op_type())
        .ok_or_else(|| node.unsupported("no shape rule for this operator"))?;
    let x = |i: usize| -> OnnxResult<&TensorFact> {
        ins.get(i)
            .and_then(Option::as_ref)
            .map(|x| &x.fact)
            .ok_or_else(|| node.malformed(format!("input {i} is missing")))
    };
    Ok(match family {
        Family::Same(_) => {
            let fact = x(0)?.clone();
            match node.op_type() {
                "Dropout" => vec![fact.clone(), TensorFact::new(DType::Bool, fact.shape)],
                "BatchNormalization" => batch_norm_outputs(&fact, ins),
                "LayerNormalization" => layer_norm_outputs(node, &fact)?,
                _ => vec![fact],
            }
        }
        Family::SameBool => vec![TensorFact::new(DType::Bool, x(0)?.shape.clone())],
        Family::Broadcast | Family::BroadcastBool => {
            let shape = broadcast_all(node, ins)?;
            let dtype = if family == Family::BroadcastBool { DType::Bool } else { x(0)?.dtype };
            vec![TensorFact::new(dtype, shape)]
        }
        Family::Reduce => vec![reduce(node, ins, x(0)?)?],
        Family::ArgReduce => {
            let input = x(0)?;
            let axis = resolve_axis(node, node.int("axis", 0)?, input.rank())?;
            let keep = node.int("keepdims", 1)? != 0;
            vec![TensorFact::new(DType::I64, reduced(&input.shape, &[axis], keep))]
        }
        Family::Own => own(node, ins)?,
    })
}

/// `BatchNormalization`: Y, and in training mode the running mean and variance (the shape of
/// the scale).
fn batch_norm_outputs(x: &TensorFact, ins: &[Option<In>]) -> Vec<TensorFact> {
    let stats = ins.get(1).and_then(Option::as_ref).map_or_else(
        || TensorFact::new(x.dtype, vec![x.shape.get(1).copied().unwrap_or(1)]),
        |s| s.fact.clone(),
    );
    vec![x.clone(), stats.clone(), stats]
}

/// `LayerNormalization`: Y, the mean and the inverse standard deviation (reduced from `axis`
/// on, kept as ones).
fn layer_norm_outputs(node: &Node<'_>, x: &TensorFact) -> OnnxResult<Vec<TensorFact>> {
    let axis = resolve_axis(node, node.int("axis", -1)?, x.rank())?;
    let mut stat = x.shape.clone();
    stat[axis..].iter_mut().for_each(|d| *d = 1);
    let f32 = TensorFact::new(DType::F32, stat);
    Ok(vec![x.clone(), f32.clone(), f32])
}

/// The broadcast shape of every present input.
fn broadcast_all(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<usize>> {
    let mut shape: Option<Vec<usize>> = None;
    for x in ins.iter().flatten() {
        shape = Some(match shape {
            None => x.fact.shape.clone(),
            Some(s) => broadcast_shapes(&s, &x.fact.shape).ok_or_else(|| {
                node.shape_error(format!("shapes {s:?} and {:?} do not broadcast", x.fact.shape))
            })?,
        });
    }
    shape.ok_or_else(|| node.malformed("no inputs"))
}

/// `shape` with `axes` removed, or kept as ones.
fn reduced(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Integers of constant input `i`, or an error naming what they are.
pub(super) fn const_ints(
    node: &Node<'_>,
    ins: &[Option<In>],
    i: usize,
    what: &str,
) -> OnnxResult<Vec<i64>> {
    const_of(ins, i).and_then(|c| c.to_i64s()).ok_or_else(|| {
        node.unsupported(format!(
            "{what} (input {i}) must be a constant to know the output's shape"
        ))
    })
}

fn reduce(node: &Node<'_>, ins: &[Option<In>], x: &TensorFact) -> OnnxResult<TensorFact> {
    let keep = node.int("keepdims", 1)? != 0;
    let axes: Option<Vec<i64>> = match node.ints("axes") {
        Some(a) => Some(a.to_vec()),
        None if ins.get(1).is_some_and(Option::is_some) => Some(const_ints(node, ins, 1, "axes")?),
        None => None,
    };
    let axes: Vec<usize> = match axes {
        Some(a) if !a.is_empty() => {
            a.iter().map(|&a| resolve_axis(node, a, x.rank())).collect::<OnnxResult<_>>()?
        }
        _ if node.int("noop_with_empty_axes", 0)? != 0 => return Ok(x.clone()),
        _ => (0..x.rank()).collect(),
    };
    Ok(TensorFact::new(x.dtype, reduced(&x.shape, &axes, keep)))
}

fn dtype_attr(node: &Node<'_>, name: &str, default: DType) -> OnnxResult<DType> {
    if !node.has_attr(name) {
        return Ok(default);
    }
    let code = node.int(name, 0)? as i32;
    ir_dtype(code).ok_or_else(|| {
        node.unsupported(format!("{name} = {} (no IR type)", crate::tensor::elem_name(code)))
    })
}

fn data_dependent(node: &Node<'_>) -> OnnxError {
    node.unsupported(
        "the output's size depends on the input's values, which are known only at run time",
    )
}

/// The operators with a rule of their own.
fn own(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let x = |i: usize| -> OnnxResult<&TensorFact> {
        ins.get(i)
            .and_then(Option::as_ref)
            .map(|x| &x.fact)
            .ok_or_else(|| node.malformed(format!("input {i} is missing")))
    };
    let one = |dtype: DType, shape: Vec<usize>| Ok(vec![TensorFact::new(dtype, shape)]);
    match node.op_type() {
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
                const_of(ins, i).and_then(|c| c.scalar()).ok_or_else(|| {
                    node.unsupported(format!("{what} (input {i}) must be a constant scalar"))
                })
            };
            let (start, limit, delta) =
                (value(0, "start")?, value(1, "limit")?, value(2, "delta")?);
            if delta == 0.0 {
                return Err(node.malformed("delta is 0"));
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
        "ScatterND" | "ScatterElements" => one(x(0)?.dtype, x(0)?.shape.clone()),
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
        "Compress" | "NonZero" | "Unique" | "NonMaxSuppression" => Err(data_dependent(node)),
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
    let length = match ins.get(1).and_then(Option::as_ref) {
        Some(_) => {
            const_ints(node, ins, 1, "dft_length")?.first().copied().unwrap_or(0).max(0) as usize
        }
        None => signal.shape[axis],
    };
    let onesided = node.int("onesided", 0)? != 0;
    let mut shape = signal.shape.clone();
    if onesided && node.int("inverse", 0)? != 0 {
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

/// A generic estimate of the operator's forward FLOPs: products count their multiply-adds,
/// reductions and normalizations a few operations per input element, the rest a few per
/// output element (ordo's cost model adds the bytes moved).
pub(crate) fn flops(node: &Node<'_>, ins: &[Option<In>], outputs: &[TensorFact]) -> u64 {
    let out: u64 = outputs.iter().map(TensorFact::numel).sum();
    let input = |i: usize| ins.get(i).and_then(Option::as_ref).map_or(0, |x| x.fact.numel());
    match family(node.op_type()) {
        Some(Family::Same(per)) => per * out,
        Some(Family::Reduce | Family::ArgReduce) => input(0),
        Some(Family::Own) => conv::product_flops(node, ins, outputs).unwrap_or(out),
        _ => out,
    }
}
