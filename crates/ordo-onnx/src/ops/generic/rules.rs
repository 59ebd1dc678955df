//! ONNX's shape inference for the operators imported as opaque ops, and their FLOP estimates.
//! Each rule follows the operator's specification (onnx/docs/Operators.md) for the opsets
//! PyTorch exports (17-21), older attribute forms included where they are common.

use ordo_ir::op::broadcast_shapes;
use ordo_ir::{DType, TensorFact};

use super::{In, const_of, conv};
use crate::error::OnnxResult;
use crate::node::Node;
use crate::ops::common::resolve_axis;

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
        | "HardSwish" | "ReverseSequence" | "Trilu" | "CumSum" | "CumProd" | "Reciprocal" => {
            Same(1)
        }
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
        | "Scatter"
        | "OneHot"
        | "DepthToSpace"
        | "SpaceToDepth"
        | "EyeLike"
        | "BitCast"
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
        op if super::strings::OPS.contains(&op) => Own,
        _ => return None,
    })
}

/// The facts of `node`'s outputs (as many as the operator defines; the caller takes those the
/// node declares).
pub(crate) fn infer(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let family = family(node.op_type())
        .ok_or_else(|| node.unsupported("no shape rule for this operator"))?;
    let x = |i: usize| super::fact_at(node, ins, i);
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
        Family::Own => super::own::own(node, ins)?,
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
pub(super) fn broadcast_all(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<usize>> {
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
pub(super) fn reduced(shape: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
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
