//! The op registry: one mapping function per ONNX op type, one file per op family.
//!
//! A mapping reads its node's inputs from the [`Ctx`] (constants, wires, parameters), emits IR
//! nodes through it, and returns the value of each ONNX output: `None` for an output the IR has
//! no counterpart for (a dropout mask, BatchNorm's updated running statistics, an LSTM's last
//! states), which is an error only if something reads it.

mod attention;
pub(crate) mod common;
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

pub(crate) use common::Outputs;

/// A mapping from one ONNX node to IR nodes.
pub(crate) type Mapper = fn(&mut Ctx<'_>, &Node<'_>) -> OnnxResult<Outputs>;

/// Which list an op type of the registry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    /// Runs on ordo's kernels as its ONNX definition says ([`supported_ops`]).
    Runs,
    /// An output's size depends on the data: planned at its largest, run within that bound.
    SizedByData,
    /// Removed from the current opsets (read from old exports).
    Deprecated,
}

/// One line of the registry: an op type, its mapping and its listing.
struct Entry {
    op_type: &'static str,
    mapper: Mapper,
    listing: Listing,
}

const fn runs(op_type: &'static str, mapper: Mapper) -> Entry {
    Entry { op_type, mapper, listing: Listing::Runs }
}

const fn sized_by_data(op_type: &'static str, mapper: Mapper) -> Entry {
    Entry { op_type, mapper, listing: Listing::SizedByData }
}

const fn deprecated(op_type: &'static str, mapper: Mapper) -> Entry {
    Entry { op_type, mapper, listing: Listing::Deprecated }
}

/// The registry: every op type of the default domain that maps onto the IR's own ops, sorted
/// by name (binary search; a test keeps the order). Adding an op is a mapping in its family's
/// file and one line here. The other operators with a shape rule (`ops/generic`) import as
/// opaque ops (plannable).
static REGISTRY: &[Entry] = &[
    runs("Abs", elementwise::unary),
    runs("Acos", elementwise::unary),
    runs("Acosh", elementwise::unary),
    runs("Add", elementwise::binary),
    runs("AffineGrid", grid::affine_grid),
    runs("And", logic::logic),
    runs("ArgMax", elementwise::arg_extreme),
    runs("ArgMin", elementwise::arg_extreme),
    runs("Asin", elementwise::unary),
    runs("Asinh", elementwise::unary),
    runs("Atan", elementwise::unary),
    runs("Atanh", elementwise::unary),
    runs("Attention", attention::attention),
    runs("AveragePool", pool::pool),
    runs("BatchNormalization", norm::batch_norm),
    runs("Bernoulli", random::bernoulli),
    runs("BitCast", shape::bit_cast),
    runs("BitShift", logic::bitwise),
    runs("BitwiseAnd", logic::bitwise),
    runs("BitwiseNot", logic::bitwise),
    runs("BitwiseOr", logic::bitwise),
    runs("BitwiseXor", logic::bitwise),
    runs("Cast", shape::cast),
    runs("CastLike", shape::cast_like),
    runs("Ceil", elementwise::unary),
    runs("Celu", elementwise::unary),
    runs("CenterCropPad", composite::center_crop_pad),
    runs("Clip", elementwise::clip),
    runs("Col2Im", indexed::col2im),
    runs("Compress", indexed::compress),
    runs("Concat", shape::concat),
    runs("Constant", shape::constant),
    runs("ConstantOfShape", shape::constant_of_shape),
    runs("Conv", conv::conv),
    runs("ConvInteger", qconv::conv_integer),
    runs("ConvTranspose", conv::conv_transpose),
    runs("Cos", elementwise::unary),
    runs("Cosh", elementwise::unary),
    runs("CumProd", elementwise::cum_sum),
    runs("CumSum", elementwise::cum_sum),
    runs("DFT", spectral::dft),
    runs("DeformConv", deform_conv::deform_conv),
    runs("DepthToSpace", composite::depth_space),
    runs("DequantizeLinear", quantize::dequantize),
    runs("Det", det::det),
    runs("Div", elementwise::binary),
    runs("Dropout", elementwise::dropout),
    runs("DynamicQuantizeLinear", quantize::dynamic_quantize),
    runs("Einsum", einsum::einsum),
    runs("Elu", elementwise::unary),
    runs("Equal", logic::logic),
    runs("Erf", elementwise::unary),
    runs("Exp", elementwise::unary),
    runs("Expand", shape::expand),
    runs("EyeLike", composite::eye_like),
    runs("Flatten", shape::flatten),
    runs("Floor", elementwise::unary),
    runs("GRU", recurrent::unrolled),
    runs("Gather", sequence::gather),
    runs("GatherElements", sequence::gather_elements),
    runs("GatherND", sequence::gather_nd),
    runs("Gelu", elementwise::unary),
    runs("Gemm", linear::gemm),
    runs("GlobalAveragePool", pool::global_avg),
    runs("GlobalMaxPool", composite::global_max_pool),
    runs("Greater", logic::logic),
    runs("GreaterOrEqual", logic::logic),
    runs("GridSample", grid_sample::grid_sample),
    runs("GroupNormalization", norm::group_norm),
    runs("HardSigmoid", elementwise::unary),
    runs("HardSwish", elementwise::unary),
    runs("Hardmax", elementwise::hardmax),
    runs("Identity", shape::identity),
    runs("InstanceNormalization", norm::instance_norm),
    runs("IsInf", composite::is_special),
    runs("IsNaN", composite::is_special),
    runs("LRN", norm::lrn),
    runs("LSTM", sequence::lstm),
    runs("LayerNormalization", norm::layer_norm),
    runs("LeakyRelu", elementwise::unary),
    runs("Less", logic::logic),
    runs("LessOrEqual", logic::logic),
    runs("Log", elementwise::unary),
    runs("LogSoftmax", elementwise::softmax),
    runs("LpNormalization", composite::lp_normalization),
    runs("LpPool", pool::lp_pool),
    runs("MatMul", linear::matmul),
    runs("MatMulInteger", qlinear::matmul_integer),
    runs("Max", elementwise::extreme),
    runs("MaxPool", pool::pool),
    runs("MaxUnpool", indexed::max_unpool),
    runs("Mean", elementwise::extreme),
    runs("MeanVarianceNormalization", norm::mean_variance_normalization),
    runs("Min", elementwise::extreme),
    runs("Mish", elementwise::unary),
    runs("Mod", elementwise::modulo),
    runs("Mul", elementwise::binary),
    runs("Neg", elementwise::const_unary),
    runs("NegativeLogLikelihoodLoss", loss::nll),
    sized_by_data("NonMaxSuppression", data_sized::non_max_suppression),
    sized_by_data("NonZero", data_sized::non_zero),
    runs("Not", logic::logic),
    runs("OneHot", composite::one_hot),
    runs("Or", logic::logic),
    runs("PRelu", composite::prelu),
    runs("Pad", shape::pad),
    runs("Pow", elementwise::binary),
    runs("QLinearConv", qconv::qlinear_conv),
    runs("QLinearMatMul", qlinear::qlinear_matmul),
    runs("QuantizeLinear", quantize::quantize),
    runs("RMSNormalization", norm::rms_norm),
    runs("RNN", recurrent::unrolled),
    runs("RandomNormal", random::random),
    runs("RandomNormalLike", random::random_like),
    runs("RandomUniform", random::random),
    runs("RandomUniformLike", random::random_like),
    sized_by_data("Range", data_sized::range),
    runs("Reciprocal", elementwise::unary),
    runs("ReduceL1", reduce::reduce),
    runs("ReduceL2", reduce::reduce),
    runs("ReduceLogSum", reduce::reduce),
    runs("ReduceLogSumExp", reduce::reduce),
    runs("ReduceMax", reduce::reduce),
    runs("ReduceMean", reduce::reduce),
    runs("ReduceMin", reduce::reduce),
    runs("ReduceProd", reduce::reduce),
    runs("ReduceSum", reduce::reduce),
    runs("ReduceSumSquare", reduce::reduce),
    runs("Relu", elementwise::unary),
    runs("Reshape", shape::reshape),
    runs("Resize", interpolate::resize),
    runs("ReverseSequence", indexed::reverse_sequence),
    runs("RoiAlign", roi_align::roi_align),
    runs("RotaryEmbedding", composite::rotary_embedding),
    runs("Round", elementwise::unary),
    runs("STFT", spectral::stft),
    runs("Scatter", sequence::scatter_nd),
    runs("ScatterElements", sequence::scatter_nd),
    runs("ScatterND", sequence::scatter_nd),
    runs("Selu", elementwise::unary),
    runs("Shape", shape::shape),
    runs("Shrink", elementwise::unary),
    runs("Sigmoid", elementwise::unary),
    runs("Sign", elementwise::unary),
    runs("Sin", elementwise::unary),
    runs("Sinh", elementwise::unary),
    runs("Size", shape::size),
    runs("Slice", shape::slice),
    runs("Softmax", elementwise::softmax),
    runs("SoftmaxCrossEntropyLoss", loss::softmax_cross_entropy),
    runs("Softplus", elementwise::unary),
    runs("Softsign", elementwise::unary),
    runs("SpaceToDepth", composite::depth_space),
    runs("Split", shape::split),
    runs("Sqrt", elementwise::const_unary),
    runs("Squeeze", shape::squeeze),
    runs("Sub", elementwise::binary),
    runs("Sum", elementwise::extreme),
    runs("Swish", composite::swish),
    runs("Tan", elementwise::unary),
    runs("Tanh", elementwise::unary),
    runs("ThresholdedRelu", elementwise::unary),
    runs("Tile", shape::tile),
    runs("TopK", elementwise::top_k),
    runs("Transpose", shape::transpose),
    runs("Trilu", elementwise::trilu),
    sized_by_data("Unique", data_sized::unique),
    runs("Unsqueeze", shape::unsqueeze),
    deprecated("Upsample", interpolate::upsample),
    runs("Where", logic::logic),
    runs("Xor", logic::logic),
];

/// The ONNX op types (default domain) the importer maps onto the IR's own ops and runs, in
/// the registry's order; the other operators with a shape rule (`ops/generic`) import as
/// opaque ops (plannable).
pub fn supported_ops() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().filter(|e| e.listing == Listing::Runs).map(|e| e.op_type)
}

/// The mapping of an op type of the default domain.
pub(crate) fn mapper(op_type: &str) -> Option<Mapper> {
    match REGISTRY.binary_search_by(|e| e.op_type.cmp(op_type)) {
        Ok(i) => Some(REGISTRY[i].mapper),
        Err(_) if generic::has_rule(op_type) => Some(generic::generic),
        Err(_) => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_sorted_without_repeats() {
        for pair in REGISTRY.windows(2) {
            assert!(
                pair[0].op_type < pair[1].op_type,
                "{} before {}",
                pair[0].op_type,
                pair[1].op_type
            );
        }
        for entry in REGISTRY {
            assert!(mapper(entry.op_type).is_some(), "{}", entry.op_type);
        }
        assert!(mapper("NoSuchOp").is_none());
        assert_eq!(supported_ops().count(), REGISTRY.len() - 5);
    }
}
