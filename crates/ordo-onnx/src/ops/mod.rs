//! The op registry: one mapping function per ONNX op type, one file per op family.
//!
//! A mapping reads its node's inputs from the [`Ctx`] (constants, wires, parameters), emits IR
//! nodes through it, and returns the value of each ONNX output: `None` for an output the IR has
//! no counterpart for (a dropout mask, BatchNorm's updated running statistics, an LSTM's last
//! states), which is an error only if something reads it.

mod attention;
mod composite;
mod conv;
mod conv3d;
mod data_sized;
mod deform_conv;
mod det;
mod einsum;
mod elementwise;
pub(crate) mod generic;
mod grid;
mod grid_sample;
mod indexed;
mod interpolate;
mod linear;
mod logic;
mod loss;
mod norm;
mod parts;
mod patches;
mod pool;
mod qconv;
mod qlinear;
mod quantize;
mod random;
mod recurrent;
mod reduce;
mod roi_align;
mod sequence;
mod shape;
mod spectral;

use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// Values of a node's outputs, in order.
pub(crate) type Outputs = Vec<Option<Value>>;

/// A mapping from one ONNX node to IR nodes.
pub(crate) type Mapper = fn(&mut Ctx<'_>, &Node<'_>) -> OnnxResult<Outputs>;

/// The ONNX op types (default domain) the importer maps onto the IR's own ops (runnable); the
/// other operators with a shape rule (`ops/generic`) import as opaque ops (plannable).
pub const SUPPORTED_OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "AffineGrid",
    "And",
    "ArgMax",
    "ArgMin",
    "Attention",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "AveragePool",
    "BatchNormalization",
    "Bernoulli",
    "BitCast",
    "BitShift",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "CenterCropPad",
    "Col2Im",
    "Compress",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvInteger",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumProd",
    "CumSum",
    "DFT",
    "DeformConv",
    "DepthToSpace",
    "DequantizeLinear",
    "Det",
    "Div",
    "DynamicQuantizeLinear",
    "Dropout",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "GRU",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GridSample",
    "GroupNormalization",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LRN",
    "LSTM",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "LpPool",
    "MatMul",
    "MatMulInteger",
    "Max",
    "MaxPool",
    "MaxUnpool",
    "Mean",
    "MeanVarianceNormalization",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "NegativeLogLikelihoodLoss",
    "Not",
    "OneHot",
    "Or",
    "PRelu",
    "QLinearConv",
    "QLinearMatMul",
    "Pad",
    "Pow",
    "QuantizeLinear",
    "RMSNormalization",
    "RNN",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Reshape",
    "ReverseSequence",
    "Resize",
    "RoiAlign",
    "RotaryEmbedding",
    "Round",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Slice",
    "Softmax",
    "SoftmaxCrossEntropyLoss",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "STFT",
    "Squeeze",
    "Sub",
    "Sum",
    "Swish",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Tile",
    "TopK",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Where",
    "Xor",
];

/// The mapping of an op type of the default domain.
pub(crate) fn mapper(op_type: &str) -> Option<Mapper> {
    Some(match op_type {
        "Conv" => conv::conv,
        "BatchNormalization" => norm::batch_norm,
        "LayerNormalization" => norm::layer_norm,
        "RMSNormalization" => norm::rms_norm,
        "MeanVarianceNormalization" => norm::mean_variance_normalization,
        "LRN" => norm::lrn,
        "Relu" | "Sigmoid" | "Tanh" | "HardSwish" | "HardSigmoid" | "Gelu" | "Erf" | "Exp"
        | "Log" | "Abs" | "Sin" | "Cos" | "Reciprocal" | "Softplus" | "Softsign" | "Elu"
        | "Selu" | "LeakyRelu" | "ThresholdedRelu" | "Celu" | "Shrink" | "Tan" | "Asin"
        | "Acos" | "Atan" | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh" | "Mish" | "Floor"
        | "Ceil" | "Round" | "Sign" => elementwise::unary,
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => elementwise::binary,
        "Max" | "Min" | "Sum" | "Mean" => elementwise::extreme,
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or" | "Xor"
        | "Not" | "Where" => logic::logic,
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" | "BitShift" => logic::bitwise,
        "Clip" => elementwise::clip,
        "Neg" | "Sqrt" => elementwise::const_unary,
        "Softmax" | "LogSoftmax" => elementwise::softmax,
        "Hardmax" => elementwise::hardmax,
        "TopK" => elementwise::top_k,
        "Einsum" => einsum::einsum,
        "CumSum" | "CumProd" => elementwise::cum_sum,
        "BitCast" => shape::bit_cast,
        "Mod" => elementwise::modulo,
        "NegativeLogLikelihoodLoss" => loss::nll,
        "SoftmaxCrossEntropyLoss" => loss::softmax_cross_entropy,
        "ArgMax" | "ArgMin" => elementwise::arg_extreme,
        "Dropout" => elementwise::dropout,
        "RandomUniformLike" | "RandomNormalLike" => random::random_like,
        "RandomUniform" | "RandomNormal" => random::random,
        "Bernoulli" => random::bernoulli,
        "Trilu" => elementwise::trilu,
        "MaxPool" | "AveragePool" => pool::pool,
        "GlobalAveragePool" => pool::global_avg,
        "LpPool" => pool::lp_pool,
        "QuantizeLinear" => quantize::quantize,
        "DequantizeLinear" => quantize::dequantize,
        "DynamicQuantizeLinear" => quantize::dynamic_quantize,
        "CenterCropPad" => composite::center_crop_pad,
        "AffineGrid" => grid::affine_grid,
        "Compress" => indexed::compress,
        "ReverseSequence" => indexed::reverse_sequence,
        "MaxUnpool" => indexed::max_unpool,
        "Col2Im" => indexed::col2im,
        "MatMulInteger" => qlinear::matmul_integer,
        "QLinearMatMul" => qlinear::qlinear_matmul,
        "ConvInteger" => qconv::conv_integer,
        "DeformConv" => deform_conv::deform_conv,
        "RoiAlign" => roi_align::roi_align,
        "Det" => det::det,
        "QLinearConv" => qconv::qlinear_conv,
        "DFT" => spectral::dft,
        "STFT" => spectral::stft,
        "GridSample" => grid_sample::grid_sample,
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd"
        | "ReduceSumSquare" | "ReduceL1" | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" => {
            reduce::reduce
        }
        "Gemm" => linear::gemm,
        "MatMul" => linear::matmul,
        "Gather" => sequence::gather,
        "InstanceNormalization" => norm::instance_norm,
        "Attention" => attention::attention,
        "Resize" => interpolate::resize,
        "Upsample" => interpolate::upsample,
        "GlobalMaxPool" => composite::global_max_pool,
        "IsNaN" | "IsInf" => composite::is_special,
        "PRelu" => composite::prelu,
        "LpNormalization" => composite::lp_normalization,
        "DepthToSpace" | "SpaceToDepth" => composite::depth_space,
        "EyeLike" => composite::eye_like,
        "OneHot" => composite::one_hot,
        "Swish" => composite::swish,
        "RotaryEmbedding" => composite::rotary_embedding,
        "ConvTranspose" => conv::conv_transpose,
        "GroupNormalization" => norm::group_norm,
        "GatherElements" => sequence::gather_elements,
        "GatherND" => sequence::gather_nd,
        "ScatterND" | "ScatterElements" | "Scatter" => sequence::scatter_nd,
        "LSTM" => sequence::lstm,
        "GRU" | "RNN" => recurrent::unrolled,
        "Constant" => shape::constant,
        "ConstantOfShape" => shape::constant_of_shape,
        "Shape" => shape::shape,
        "Size" => shape::size,
        "Identity" => shape::identity,
        "Cast" => shape::cast,
        "Split" => shape::split,
        "Pad" => shape::pad,
        "Tile" => shape::tile,
        "CastLike" => shape::cast_like,
        "Reshape" => shape::reshape,
        "Flatten" => shape::flatten,
        "Squeeze" => shape::squeeze,
        "Unsqueeze" => shape::unsqueeze,
        "Transpose" => shape::transpose,
        "Slice" => shape::slice,
        "Concat" => shape::concat,
        "Expand" => shape::expand,
        "Range" => data_sized::range,
        "NonZero" => data_sized::non_zero,
        "NonMaxSuppression" => data_sized::non_max_suppression,
        "Unique" => data_sized::unique,
        other if generic::has_rule(other) => generic::generic,
        _ => return None,
    })
}

/// Inputs of an op type that hold weights when fed by a graph input: what tells parameters
/// from data in a model exported without its weights.
pub(crate) fn weight_slots(op_type: &str) -> &'static [usize] {
    match op_type {
        "Conv" | "ConvTranspose" | "LayerNormalization" | "Gemm" => &[1, 2],
        "DeformConv" => &[1, 3],
        "BatchNormalization" => &[1, 2, 3, 4],
        "LSTM" | "GRU" | "RNN" => &[1, 2, 3],
        "Gather" => &[0],
        _ => &[],
    }
}

/// Whether output `k` of `node` is read: by a node or as a graph output (an export may name
/// outputs that nothing reads, as PyTorch's names an LSTM's last states).
pub(crate) fn output_read(ctx: &Ctx<'_>, node: &Node<'_>, k: usize) -> bool {
    node.proto.output.get(k).is_some_and(|t| !t.is_empty() && ctx.uses(t) > 0)
}

/// Checks, before a mapping computes a constant of `shape` (index tables, transform
/// matrices: their size follows from the model's sizes), that ordo keeps a constant that large;
/// otherwise the mapping is unsupported and, having emitted nothing yet, the node falls back to
/// the plannable import. The sizes are multiplied saturating: they may come from attributes.
pub(crate) fn check_constant(node: &Node<'_>, what: &str, shape: &[usize]) -> OnnxResult<()> {
    let elements = shape.iter().fold(1u64, |n, &d| n.saturating_mul(d as u64));
    if elements > crate::tensor::MAX_CONSTANT {
        return Err(node.unsupported(format!(
            "its {what} would be a constant of {elements} elements; ordo keeps constants of at \
             most {}",
            crate::tensor::MAX_CONSTANT
        )));
    }
    Ok(())
}

/// A node with a single output.
pub(crate) fn one(value: Value) -> OnnxResult<Outputs> {
    Ok(vec![Some(value)])
}

/// A `Reshape` to a resolved shape.
pub(crate) fn reshape_op(shape: &[usize]) -> ordo_ir::Op {
    ordo_ir::Op::Reshape { shape: shape.iter().map(|&d| d as i64).collect() }
}

/// Resolves a possibly negative axis against a rank.
pub(crate) fn resolve_axis(node: &Node<'_>, axis: i64, rank: usize) -> OnnxResult<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(node.malformed(format!("axis {axis} is out of range for rank {rank}")))
    }
}
