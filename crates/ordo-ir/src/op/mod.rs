//! The op set: a closed enum of plain-data ops, each with shape inference, parameter shapes and
//! a forward FLOP count. One file per op family.
//!
//! Conventions (PyTorch's, unless said otherwise): images are NCHW; `Linear` acts on the last
//! dimension; `Lstm` is sequence-first (`[T, B, I]`); `CrossEntropyLoss` takes logits with the
//! classes in the last dimension and integer targets of the remaining shape, and returns the
//! mean as a scalar. FLOPs count a multiply-add as two and follow the cost-graph converter's
//! rules (see `doc/costgraph.md`).

mod conv;
mod conv_transpose;
mod data_sized;
mod einsum;
mod elementwise;
mod grad;
mod linear;
mod logic;
mod loss;
mod norm;
mod opaque;
mod parallel;
mod pool;
mod random;
mod reduce;
mod scatter;
mod sequence;
mod shape;

use serde::{Deserialize, Serialize};

use crate::element::E8m0Rounding;
use crate::fact::{DType, TensorFact};

pub use conv::Conv2d;
pub use conv_transpose::ConvTranspose2d;
pub use data_sized::{NonMaxSuppression, Unique, UniquePart};
pub use einsum::Einsum;
pub use elementwise::{ActivationKind, UnaryOp, broadcast_shapes};
pub use grad::{Grad, Optimizer, Saved, Update, Wrt};
pub use linear::Linear;
pub use logic::{BitwiseKind, CompareKind, LogicKind};
pub use loss::{LossReduction, NllLoss};
pub use norm::{BatchNorm, LayerNorm};
pub use opaque::Opaque;
pub use parallel::{TensorParallel, TensorParallelKind, TensorParallelPass};
pub use pool::{Pool2d, PoolNd};
pub use random::Distribution;
pub use reduce::{Reduce, ReduceKind};
pub use scatter::ScatterReduction;
pub use sequence::{Embedding, Lstm};
pub use shape::PadMode;

/// A parameter (or buffer) an op needs, as the op's shape rules derive it from its inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Name suffix in the reference framework, e.g. `weight`, `running_mean`, `weight_ih_l0`.
    pub suffix: String,
    /// Shape and dtype.
    pub fact: TensorFact,
    /// `false` for buffers such as BatchNorm running statistics: they occupy memory but are
    /// not counted as parameters and get no gradient.
    pub trainable: bool,
}

impl ParamSpec {
    fn trainable(suffix: &str, shape: Vec<usize>) -> Self {
        Self { suffix: suffix.to_string(), fact: TensorFact::f32(shape), trainable: true }
    }

    fn buffer(suffix: &str, shape: Vec<usize>) -> Self {
        Self { suffix: suffix.to_string(), fact: TensorFact::f32(shape), trainable: false }
    }
}

/// One operation of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Op {
    /// A graph input; its single output fact is stored on the node.
    Input,
    /// A parameter or buffer used directly as a value (an attention vector, a positional
    /// encoding): one parameter, one output equal to it. Takes no inputs.
    Parameter,
    /// 2-D convolution (NCHW).
    Conv2d(Conv2d),
    /// 2-D transposed convolution (the input gradient of a convolution, as a layer).
    ConvTranspose2d(ConvTranspose2d),
    /// Batch normalisation over dim 1, with running-statistics buffers.
    BatchNorm(BatchNorm),
    /// Layer normalisation over the trailing dimensions.
    LayerNorm(LayerNorm),
    /// Elementwise function of one input.
    Unary {
        /// Which function.
        func: UnaryOp,
    },
    /// An activation with constant parameters (their meaning per kind: [`ActivationKind`]).
    Activation {
        /// Which function.
        kind: ActivationKind,
        /// Its first parameter.
        alpha: f64,
        /// Its second parameter (unused by some kinds).
        beta: f64,
    },
    /// Multiplication by a constant (of a float tensor, or of an integer one by an integer).
    Scale {
        /// The constant.
        factor: f64,
    },
    /// Elementwise sum of two tensors with NumPy broadcasting.
    Add,
    /// Elementwise product of two tensors with NumPy broadcasting.
    Mul,
    /// Elementwise quotient `a / b` of two tensors with NumPy broadcasting.
    Div,
    /// Elementwise maximum of two tensors with NumPy broadcasting (NaN if either is NaN).
    Max,
    /// Elementwise minimum of two tensors with NumPy broadcasting (NaN if either is NaN).
    Min,
    /// Elementwise power `a ^ b` of two tensors with NumPy broadcasting.
    Pow,
    /// Elementwise comparison of two tensors of one element type with NumPy broadcasting:
    /// a bool tensor.
    Compare(CompareKind),
    /// Elementwise logic of two bool tensors with NumPy broadcasting.
    Logic(LogicKind),
    /// Elementwise negation of a bool tensor.
    Not,
    /// An elementwise bit operation of integer tensors with NumPy broadcasting.
    Bitwise(BitwiseKind),
    /// `Where(condition, x, y)`: `x` where the condition holds, else `y` (all three broadcast).
    Where,
    /// `x` clamped to `[min, max]` (either may be infinite: no bound on that side).
    Clip {
        /// The lower bound.
        min: f64,
        /// The upper bound.
        max: f64,
    },
    /// A sum or mean over axes.
    Reduce(Reduce),
    /// Max pooling (NCHW).
    MaxPool2d(Pool2d),
    /// Average pooling (NCHW).
    AvgPool2d(Pool2d),
    /// Max or average pooling over any number of spatial dims with any window.
    Pool(PoolNd),
    /// Adaptive average pooling to 1x1: `[N, C, H, W] -> [N, C, 1, 1]`.
    GlobalAvgPool,
    /// Concatenation along an axis (negative counts from the end).
    Concat {
        /// The axis.
        axis: i64,
    },
    /// Affine map of the last dimension.
    Linear(Linear),
    /// Batched matrix product `[..., M, K] x [..., K, N]` with broadcast batch dimensions.
    MatMul,
    /// Softmax along an axis.
    Softmax {
        /// The axis.
        axis: i64,
    },
    /// Log-softmax along an axis: `x - log(sum(exp(x)))`, computed stably.
    LogSoftmax {
        /// The axis.
        axis: i64,
    },
    /// The upper (or lower) triangle of the last two dims, other entries 0: `upper` keeps
    /// `col - row >= k`, else `col - row <= k` (ONNX's `Trilu`, `torch.triu`/`tril`).
    Trilu {
        /// The diagonal offset.
        k: i64,
        /// Upper or lower triangle.
        upper: bool,
    },
    /// `start + i * delta` for `i` in `0..len` (ONNX's `Range` of values computed at run
    /// time): three scalar inputs of one type, `start`, `limit` and `delta`, and a 1-D output
    /// of that type. Its length depends on the values, so the plan fixes it (the size the file
    /// declares); a run whose `ceil((limit - start) / delta)` is another length is an error.
    Range {
        /// The planned number of elements.
        len: usize,
    },
    /// The coordinates of the nonzero elements (ONNX's `NonZero`): `I64` `[rank, count]`,
    /// in row-major order. Their number depends on the values, so the plan fixes it (the size
    /// the file declares); a run with another number of nonzero elements is an error.
    NonZero {
        /// The planned number of nonzero elements.
        count: usize,
    },
    /// ONNX's `NonMaxSuppression` at a planned number of selected boxes (the size the file
    /// declares); a run that selects another number is an error.
    NonMaxSuppression(NonMaxSuppression),
    /// One output of ONNX's `Unique` at a planned number of distinct elements (the size the
    /// file declares); a run with another number is an error.
    Unique(Unique),
    /// The index of the largest (`max`) or smallest element along an axis: an `I64` tensor.
    /// Ties: the first index, or the last with `select_last`; a NaN counts as the extreme.
    ArgExtreme {
        /// Largest or smallest.
        max: bool,
        /// The axis (negative counts from the end).
        axis: i64,
        /// Whether the axis stays as a dimension of size 1.
        keepdims: bool,
        /// Whether ties take the last index.
        select_last: bool,
    },
    /// Sets entries above the diagonal of the last two dims to -inf (causal attention mask).
    CausalMask,
    /// Table lookup of integer ids.
    Embedding(Embedding),
    /// One LSTM layer, sequence-first.
    Lstm(Lstm),
    /// Dropout with drop probability `p` (identity shape).
    Dropout {
        /// Drop probability.
        p: f64,
    },
    /// The same bits read as `to`, a type of the same width (opset 26's `BitCast`): f32 to
    /// i32, u16 to i16, bool to u8... No gradient.
    BitCast {
        /// The element type of the output.
        to: DType,
    },
    /// Converts every element to `to`: a float to an integer rounds toward zero (then wraps
    /// to the type), to bool is "not zero", bool to a number is 0 or 1, a float to a narrower
    /// float rounds to nearest even ([`crate::element`]). No gradient.
    Cast {
        /// The element type of the output.
        to: DType,
        /// To a float8 format (but e8m0): values past its largest are the largest (ONNX's
        /// `saturate`, its default) instead of infinity or NaN. To e8m0: a rounding up past
        /// the largest exponent stays there.
        #[serde(default = "yes")]
        saturate: bool,
        /// To float8 e8m0: how the exponent rounds.
        #[serde(default)]
        round: E8m0Rounding,
    },
    /// Random f32 values shaped like the input, whose values are not read (ONNX's
    /// `RandomUniformLike`, `RandomNormalLike`); drawn from the node's seed. No gradient.
    RandomLike(Distribution),
    /// 1 with the probability that each input element gives, else 0 (`Bernoulli`); drawn from
    /// the node's seed. No gradient.
    Bernoulli,
    /// `ScatterND(data, indices, updates)`: `data` with the slices that the rows of `indices`
    /// address replaced by (or added to) `updates`.
    ScatterNd {
        /// How an update combines with the element it lands on.
        reduction: ScatterReduction,
    },
    /// `ScatterElements(data, indices, updates)`: `data` with the element that each index
    /// names along `axis` replaced by (or added to) the update at the index's position.
    ScatterElements {
        /// The axis the indices index.
        axis: i64,
        /// How an update combines with the element it lands on.
        reduction: ScatterReduction,
    },
    /// Reshape; one entry may be -1 (inferred).
    Reshape {
        /// Target shape.
        shape: Vec<i64>,
    },
    /// Permutation of dimensions.
    Transpose {
        /// `output dim i = input dim perm[i]`.
        perm: Vec<usize>,
    },
    /// Python-style slice `start:end:step` along one axis (indices clamped, negative from end).
    Slice {
        /// The axis.
        axis: i64,
        /// First index.
        start: i64,
        /// One past the last index.
        end: i64,
        /// Step, at least 1.
        step: i64,
    },
    /// The input broadcast to `shape` (NumPy's rules; ONNX's `Expand` with its target and the
    /// input's shape combined).
    Expand {
        /// The output's shape.
        shape: Vec<usize>,
    },
    /// A sum of products over labelled dims (ONNX's `Einsum`, subscripts resolved).
    Einsum(Einsum),
    /// The `k` largest (or smallest) elements along an axis, sorted from the extreme (ties:
    /// the lower index first; NaN counts as the largest): their values, or with `indices`
    /// their indices (`I64`, no gradient). ONNX's `TopK` imports as one op per output.
    TopK {
        /// How many.
        k: usize,
        /// The axis (negative counts from the end).
        axis: i64,
        /// Largest (else smallest).
        largest: bool,
        /// The indices output (else the values).
        indices: bool,
    },
    /// One at the first largest element along an axis, zeros elsewhere (ONNX's `Hardmax`; no
    /// gradient).
    Hardmax {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// The remainder of `a / b` with NumPy broadcasting: with `fmod` C's (the dividend's
    /// sign, truncated division), else Python's (the divisor's sign; integers only, as ONNX).
    Mod {
        /// C's remainder.
        fmod: bool,
    },
    /// Running sums along an axis (`exclusive`: each without its own element; `reverse`:
    /// from the end).
    CumSum {
        /// The axis (negative counts from the end).
        axis: i64,
        /// Leave each element out of its own sum.
        exclusive: bool,
        /// Sum from the end of the axis.
        reverse: bool,
    },
    /// Running products along an axis, as `CumSum` (opset 26's `CumProd`). Its gradient has
    /// no kernel.
    CumProd {
        /// The axis (negative counts from the end).
        axis: i64,
        /// Leave each element out of its own product.
        exclusive: bool,
        /// Multiply from the end of the axis.
        reverse: bool,
    },
    /// A border added to (or, negative, cropped from) every dim, filled as `mode` says.
    Pad {
        /// Every dim's count before, then every dim's count after.
        pads: Vec<i64>,
        /// How the border is filled.
        mode: PadMode,
        /// The constant of [`PadMode::Constant`].
        value: f64,
    },
    /// Every dim repeated (`torch.tile`).
    Tile {
        /// Repeats per dim.
        repeats: Vec<usize>,
    },
    /// `Gather(data, indices)` along an axis: the output is `data`'s shape with the axis
    /// replaced by the indices' shape (negative indices count from the end).
    Gather {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// `GatherElements(data, indices)`: each output element is `data` at its own index with
    /// the axis coordinate taken from `indices` (of `data`'s rank; the output has its shape).
    GatherElements {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// `GatherND(data, indices)` without batch dims: the slices that the rows of `indices`
    /// (`[..., k]`) address.
    GatherNd,
    /// Negative log-likelihood of log-probabilities (classes second) against integer targets.
    NllLoss(NllLoss),
    /// Mean cross-entropy of logits (classes last) against integer targets.
    CrossEntropyLoss,
    /// A constant tensor filled with `value`; its single output fact is stored on the node
    /// (the seed `dL/dL = 1` of the backward pass).
    Fill {
        /// The value of every element.
        value: f64,
    },
    /// A gradient of a forward op (backward pass).
    Grad(Grad),
    /// The optimizer step of one parameter.
    Update(Update),
    /// A framework op known by its output and cost only: plannable, not runnable.
    Opaque(Opaque),
    /// A collective across a tensor-parallel group: an all-gather in one pass, a
    /// reduce-scatter in the other (Megatron-LM's `f` and `g` with sequence parallelism):
    /// plannable, not runnable.
    TensorParallel(TensorParallel),
}

impl Op {
    /// Short name of the op kind, e.g. `Conv2d`.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input => "Input",
            Op::Parameter => "Parameter",
            Op::Conv2d(_) => "Conv2d",
            Op::ConvTranspose2d(_) => "ConvTranspose2d",
            Op::BatchNorm(_) => "BatchNorm",
            Op::LayerNorm(_) => "LayerNorm",
            Op::Unary { func } => func.name(),
            Op::Activation { kind, .. } => kind.name(),
            Op::Scale { .. } => "Scale",
            Op::Add => "Add",
            Op::Mul => "Mul",
            Op::Div => "Div",
            Op::Max => "Max",
            Op::Min => "Min",
            Op::Pow => "Pow",
            Op::Clip { .. } => "Clip",
            Op::Compare(k) => k.onnx_name(),
            Op::LogSoftmax { .. } => "LogSoftmax",
            Op::Trilu { .. } => "Trilu",
            Op::Range { .. } => "Range",
            Op::NonZero { .. } => "NonZero",
            Op::NonMaxSuppression(_) => "NonMaxSuppression",
            Op::Unique(_) => "Unique",
            Op::ArgExtreme { max: true, .. } => "ArgMax",
            Op::ArgExtreme { max: false, .. } => "ArgMin",
            Op::Logic(k) => k.onnx_name(),
            Op::Bitwise(k) => k.onnx_name(),
            Op::Not => "Not",
            Op::Cast { .. } => "Cast",
            Op::BitCast { .. } => "BitCast",
            Op::RandomLike(Distribution::Uniform { .. }) => "RandomUniformLike",
            Op::RandomLike(Distribution::Normal { .. }) => "RandomNormalLike",
            Op::Bernoulli => "Bernoulli",
            Op::ScatterNd { .. } => "ScatterND",
            Op::ScatterElements { .. } => "ScatterElements",
            Op::Where => "Where",
            Op::Reduce(r) => r.kind.onnx_name(),
            Op::MaxPool2d(_) => "MaxPool2d",
            Op::Pool(p) => {
                if p.max {
                    "MaxPool"
                } else {
                    "AveragePool"
                }
            }
            Op::AvgPool2d(_) => "AvgPool2d",
            Op::GlobalAvgPool => "GlobalAvgPool",
            Op::Concat { .. } => "Concat",
            Op::Linear(_) => "Linear",
            Op::MatMul => "MatMul",
            Op::Softmax { .. } => "Softmax",
            Op::CausalMask => "CausalMask",
            Op::Embedding(_) => "Embedding",
            Op::Lstm(_) => "Lstm",
            Op::Dropout { .. } => "Dropout",
            Op::Reshape { .. } => "Reshape",
            Op::Transpose { .. } => "Transpose",
            Op::Slice { .. } => "Slice",
            Op::CrossEntropyLoss => "CrossEntropyLoss",
            Op::NllLoss(_) => "NegativeLogLikelihoodLoss",
            Op::Expand { .. } => "Expand",
            Op::Pad { .. } => "Pad",
            Op::Hardmax { .. } => "Hardmax",
            Op::TopK { .. } => "TopK",
            Op::Einsum(_) => "Einsum",
            Op::Mod { .. } => "Mod",
            Op::CumSum { .. } => "CumSum",
            Op::CumProd { .. } => "CumProd",
            Op::Tile { .. } => "Tile",
            Op::Gather { .. } => "Gather",
            Op::GatherElements { .. } => "GatherElements",
            Op::GatherNd => "GatherND",
            Op::Fill { .. } => "Fill",
            Op::Grad(g) => match g.wrt {
                Wrt::Input(_) => "GradInput",
                Wrt::Params => "GradParams",
            },
            Op::Update(_) => "Update",
            Op::Opaque(_) => "Opaque",
            Op::TensorParallel(_) => "TensorParallel",
        }
    }

    /// A `Cast` to `to` with ONNX's defaults (saturating, e8m0 rounding up).
    pub fn cast(to: DType) -> Op {
        Op::Cast { to, saturate: true, round: E8m0Rounding::Up }
    }

    /// The op's name as a user reads it: [`Op::name`], or the framework's op type for an
    /// opaque op (`Erf`, `TopK:1`).
    pub fn label(&self) -> &str {
        match self {
            Op::Opaque(o) => &o.op_type,
            _ => self.name(),
        }
    }

    /// Output facts for the given input facts, or a message saying why the inputs are wrong.
    ///
    /// `Input`, `Parameter` and `Fill` have no rule here: their fact is stored on the node.
    pub fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        use elementwise as ew;
        match self {
            Op::Input | Op::Parameter | Op::Fill { .. } => {
                Err("source ops have no inference rule".into())
            }
            Op::Grad(g) => g.infer(inputs),
            Op::Update(_) => Update::infer(inputs),
            Op::Conv2d(c) => c.infer(inputs),
            Op::ConvTranspose2d(c) => c.infer(inputs),
            Op::BatchNorm(_) => norm::infer_batch_norm(inputs),
            Op::LayerNorm(l) => l.infer(inputs),
            Op::Unary { .. } | Op::Activation { .. } | Op::Dropout { .. } => {
                ew::infer_unary(inputs)
            }
            Op::Scale { factor } => ew::infer_scale(*factor, inputs),
            Op::Clip { .. } => ew::infer_clip(inputs),
            Op::Add | Op::Mul | Op::Div | Op::Max | Op::Min | Op::Pow => ew::infer_binary(inputs),
            Op::Reduce(r) => r.infer(inputs),
            Op::Compare(_) => logic::infer_compare(inputs),
            Op::Logic(_) => logic::infer_logic(inputs),
            Op::Bitwise(k) => logic::infer_bitwise(*k, inputs),
            Op::Not => logic::infer_not(inputs),
            Op::Cast { to, .. } => random::infer_cast(*to, inputs),
            Op::BitCast { to } => random::infer_bit_cast(*to, inputs),
            Op::RandomLike(d) => random::infer_random_like(d, inputs),
            Op::Bernoulli => random::infer_bernoulli(inputs),
            Op::ScatterNd { .. } => scatter::infer_scatter_nd(inputs),
            Op::GatherNd => scatter::infer_gather_nd(inputs),
            Op::ScatterElements { axis, .. } => scatter::infer_scatter_elements(*axis, inputs),
            Op::Where => logic::infer_where(inputs),
            Op::MaxPool2d(p) | Op::AvgPool2d(p) => p.infer(inputs),
            Op::Pool(p) => p.infer(inputs),
            Op::GlobalAvgPool => pool::infer_global(inputs),
            Op::Concat { axis } => shape::infer_concat(*axis, inputs),
            Op::Linear(l) => l.infer(inputs),
            Op::MatMul => linear::infer_matmul(inputs),
            Op::Softmax { axis } | Op::LogSoftmax { axis } => ew::infer_softmax(*axis, inputs),
            Op::Trilu { .. } => ew::infer_trilu(inputs),
            Op::Range { len } => data_sized::infer_range(*len, inputs),
            Op::NonZero { count } => data_sized::infer_non_zero(*count, inputs),
            Op::NonMaxSuppression(n) => n.infer(inputs),
            Op::Unique(u) => u.infer(inputs),
            Op::ArgExtreme { axis, keepdims, .. } => {
                ew::infer_arg_extreme(*axis, *keepdims, inputs)
            }
            Op::CausalMask => ew::infer_causal_mask(inputs),
            Op::Embedding(e) => e.infer(inputs),
            Op::Lstm(l) => l.infer(inputs),
            Op::Reshape { shape } => shape::infer_reshape(shape, inputs),
            Op::Transpose { perm } => shape::infer_transpose(perm, inputs),
            Op::Slice { axis, start, end, step } => {
                shape::infer_slice(*axis, *start, *end, *step, inputs)
            }
            Op::CrossEntropyLoss => loss::infer_cross_entropy(inputs),
            Op::NllLoss(n) => n.infer(inputs),
            Op::Expand { shape } => shape::infer_expand(shape, inputs),
            Op::Pad { pads, .. } => shape::infer_pad(pads, inputs),
            Op::Hardmax { axis } | Op::CumSum { axis, .. } | Op::CumProd { axis, .. } => {
                expect_inputs(inputs, 1)?;
                resolve_axis(*axis, inputs[0].rank())?;
                Ok(vec![inputs[0].clone()])
            }
            Op::Mod { .. } => ew::infer_binary(inputs),
            Op::TopK { k, axis, indices, .. } => {
                expect_inputs(inputs, 1)?;
                let x = inputs[0];
                let a = resolve_axis(*axis, x.rank())?;
                if *k > x.shape[a] {
                    return Err(format!("k = {k} for an axis of {} in {x}", x.shape[a]));
                }
                let mut shape = x.shape.clone();
                shape[a] = *k;
                let dtype = if *indices { crate::fact::DType::I64 } else { x.dtype };
                Ok(vec![TensorFact::new(dtype, shape)])
            }
            Op::Einsum(e) => e.infer(inputs),
            Op::Tile { repeats } => shape::infer_tile(repeats, inputs),
            Op::Gather { axis } => shape::infer_gather(*axis, inputs),
            Op::GatherElements { axis } => shape::infer_gather_elements(*axis, inputs),
            Op::Opaque(o) => o.infer(inputs),
            Op::TensorParallel(t) => t.infer(inputs),
        }
    }

    /// Parameters and buffers the op needs, in the reference framework's order. Call only with
    /// inputs that [`Op::infer`] accepted.
    pub fn param_specs(&self, inputs: &[&TensorFact]) -> Vec<ParamSpec> {
        match self {
            Op::Conv2d(c) => c.param_specs(inputs),
            Op::ConvTranspose2d(c) => c.param_specs(inputs),
            Op::BatchNorm(_) => norm::batch_norm_params(inputs),
            Op::LayerNorm(l) => l.param_specs(),
            Op::Linear(l) => l.param_specs(inputs),
            Op::Embedding(e) => e.param_specs(),
            Op::Lstm(l) => l.param_specs(inputs),
            _ => Vec::new(),
        }
    }

    /// Forward FLOPs for the given input and output facts.
    pub fn flops(&self, inputs: &[&TensorFact], outputs: &[TensorFact]) -> u64 {
        let out_elems: u64 = outputs.iter().map(TensorFact::numel).sum();
        match self {
            Op::Input | Op::Parameter | Op::Fill { .. } => 0,
            Op::Grad(g) => g.flops,
            Op::Update(u) => u.optimizer.flops_per_element() * out_elems,
            Op::Conv2d(c) => c.flops(inputs, outputs),
            Op::ConvTranspose2d(c) => c.flops(inputs, outputs),
            Op::BatchNorm(_) | Op::LayerNorm(_) => 10 * out_elems,
            Op::Unary { func } => func.flops_per_element() * out_elems,
            Op::Activation { .. } => 4 * out_elems,
            Op::Scale { .. } | Op::Add | Op::Mul | Op::CausalMask => out_elems,
            Op::Max | Op::Min | Op::Clip { .. } => out_elems,
            Op::Compare(_)
            | Op::Logic(_)
            | Op::Not
            | Op::Bitwise(_)
            | Op::Where
            | Op::Cast { .. }
            | Op::BitCast { .. } => out_elems,
            // A hash of the counter per element (two for a normal's Box-Muller pair).
            Op::RandomLike(_) | Op::Bernoulli => 10 * out_elems,
            Op::Div => 4 * out_elems,
            // exp(b ln a): a logarithm and an exponential, about 20 FLOPs each.
            Op::Pow => 40 * out_elems,
            Op::Reduce(_) => inputs.first().map_or(0, |i| i.numel()),
            Op::Dropout { .. } => 3 * out_elems,
            Op::MaxPool2d(p) | Op::AvgPool2d(p) => p.flops(outputs),
            Op::Pool(p) => out_elems * p.kernel.iter().product::<usize>() as u64,
            Op::GlobalAvgPool => inputs.first().map_or(0, |i| i.numel()),
            Op::Linear(l) => l.flops(inputs, outputs),
            Op::MatMul => linear::matmul_flops(inputs, outputs),
            Op::Softmax { .. } | Op::LogSoftmax { .. } => 5 * out_elems,
            Op::Trilu { .. } | Op::Range { .. } => out_elems,
            // A pass over the input; a sort of each class's scores and the overlap tests.
            Op::NonZero { .. } => inputs.first().map_or(0, |i| i.numel()),
            // A sort of the input.
            Op::Unique(_) => 8 * inputs.first().map_or(0, |i| i.numel()),
            Op::NonMaxSuppression(_) => 16 * inputs.get(1).map_or(0, |s| s.numel()),
            Op::ArgExtreme { .. } => inputs.first().map_or(0, |i| i.numel()),
            Op::Lstm(l) => l.flops(inputs),
            Op::CrossEntropyLoss => 5 * inputs.first().map_or(0, |i| i.numel()),
            Op::NllLoss(_) => 2 * inputs.get(1).map_or(0, |t| t.numel()),
            // Data movement.
            Op::Expand { .. }
            | Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::ScatterNd { .. }
            | Op::ScatterElements { .. }
            | Op::GatherNd
            | Op::Pad { .. }
            | Op::Tile { .. } => 0,
            Op::Hardmax { .. } | Op::CumSum { .. } | Op::CumProd { .. } => out_elems,
            // A partial sort: about log2(axis) comparisons per input element.
            Op::TopK { .. } => 4 * inputs.first().map_or(0, |i| i.numel()),
            Op::Mod { .. } => 4 * out_elems,
            Op::Einsum(e) => e.flops(inputs),
            Op::Opaque(o) => o.flops,
            // The sum of the ranks' tensors (nothing to gather them); its time is the
            // collective's, which the cost model takes from the cluster's links.
            Op::TensorParallel(t) => match t.forward() {
                TensorParallelPass::ReduceScatter => out_elems * t.ranks as u64,
                TensorParallelPass::AllGather => 0,
            },
            Op::Embedding(_)
            | Op::Concat { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. } => 0,
        }
    }

    /// Whether the op only reinterprets its input's memory (no data moves).
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape { .. })
    }
}

/// Checks the number of inputs.
/// `true`, for serde's defaults.
fn yes() -> bool {
    true
}

pub(crate) fn expect_inputs(inputs: &[&TensorFact], n: usize) -> Result<(), String> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(format!("expects {n} input(s), got {}", inputs.len()))
    }
}

/// Checks that a tensor has the given rank.
pub(crate) fn expect_rank(what: &str, fact: &TensorFact, rank: usize) -> Result<(), String> {
    if fact.rank() == rank {
        Ok(())
    } else {
        Err(format!("{what} must have rank {rank}, got {fact}"))
    }
}

/// Checks that a tensor is floating point.
pub(crate) fn expect_float(what: &str, fact: &TensorFact) -> Result<(), String> {
    if fact.dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{what} must be floating point, got {fact}"))
    }
}

/// Resolves a possibly negative axis against a rank.
pub(crate) fn resolve_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}
