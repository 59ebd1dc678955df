//! The CPU backend's kernels: one pure, single-threaded, deterministic function per op of
//! [`ordo_ir::Op`], including the backward ([`Grad`]) and optimizer ([`ordo_ir::op::Update`])
//! ops of training graphs.
//!
//! [`run`] is the one entry point; [`supports`] says whether [`run`] has a kernel for an op,
//! through the same dispatch. Every kernel checks its arguments (counts, shapes, dtypes,
//! values) and answers a [`KernelError`] instead of panicking. The same inputs give bitwise the
//! same outputs on any thread: kernels are single-threaded, their reduction orders fixed, and
//! dropout masks are a counter-based hash of `(seed, element index)`.
//!
//! # Conventions
//!
//! The IR's (PyTorch's): tensors are dense and row-major ([`Tensor`]), `f32` for floats and
//! `i64` for integer ids and labels. Images are NCHW; a convolution's weight is
//! `[out, in / groups, kh, kw]`; `Linear` maps the last dimension with a weight `[out, in]`;
//! `MatMul` broadcasts batch dimensions; `Lstm` is sequence-first `[T, B, I]` with PyTorch's
//! `weight_ih_l0 [4H, I]`, `weight_hh_l0 [4H, H]`, `bias_ih_l0 [4H]`, `bias_hh_l0 [4H]` (gate
//! order input, forget, cell, output; zero initial state), then the same `_reverse` for a
//! bidirectional layer's backward direction, whose output fills the second half of the last
//! dimension; `CrossEntropyLoss` takes classes last and returns the mean over targets (a
//! target of -100 is ignored, as PyTorch's default `ignore_index`).
//!
//! # Arguments
//!
//! A node's kernel gets its inputs in the node's order, its parameters in the node's order
//! (for a [`Grad`], the upstream gradient first, then the saved tensors its `saved` lists), its
//! optimizer state ([`init_state`]), and a [`KernelContext`]. Source ops: `Input` takes the
//! fed tensor as its one input (checked against [`KernelContext::outputs`] when given), `Fill`
//! takes its shape from [`KernelContext::outputs`], `Parameter` returns its one parameter;
//! [`Tensor::random`] and [`Tensor::random_ids`] make synthetic inputs. What each gradient
//! reads is exactly what the training builder gives it, with two exceptions the IR cannot
//! express:
//! `Concat`'s input gradient needs the facts of every forward input (for its offset;
//! [`KernelContext::forward_inputs`]), and `Lstm`'s parameter gradient needs the forward
//! weights, which the IR's dW node does not list: pass the forward node's parameters.
//!
//! # Training semantics
//!
//! With [`KernelContext::training`] (the default) `BatchNorm` normalises with batch
//! statistics (biased variance) and does not update its running statistics (they are
//! parameters, which kernels never write); out of training it uses the running statistics and
//! `Dropout` is the identity. Gradients are always those of training mode. Dropout keeps an
//! element when `hash(seed, index) >= p` and scales it by `1 / (1 - p)`; its gradient
//! recomputes the mask from [`KernelContext::seed`], so a `Dropout` node and its gradient must
//! get the same seed (the saved output is checked for shape only).

mod axis;
mod conv;
mod conv_transpose;
mod data_sized;
mod einsum;
mod element;
mod elementwise;
mod error;
mod gather;
mod integer;
mod linear;
mod logic;
mod loss;
mod modulo;
mod nll;
mod norm;
mod optim;
mod pool;
mod pool_nd;
mod random;
mod reduce;
mod scatter;
mod sequence;
mod shape;
mod source;
mod tensor;
mod util;

#[cfg(any(test, feature = "reference"))]
pub mod reference;
#[cfg(test)]
mod tests;

use ordo_ir::op::{Grad, Saved, ScatterReduction, Wrt};
use ordo_ir::{Op, TensorFact};

pub use element::{bits_held, held_as, reads_strings, reads_u64};
pub use error::{KernelError, KernelResult};
pub use optim::init_state;
pub use tensor::{Data, Tensor};

use util::Call;

/// Optimizer hyper-parameters, PyTorch's defaults: learning rate 1e-3 (`torch.optim.SGD`'s and
/// `Adam`'s default), momentum 0.9 (PyTorch has no default momentum; 0.9 is the usual choice),
/// no dampening, no Nesterov, no weight decay, Adam betas (0.9, 0.999) and eps 1e-8.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hyper {
    /// Learning rate.
    pub lr: f32,
    /// SGD momentum.
    pub momentum: f32,
    /// Adam's first-moment decay.
    pub beta1: f32,
    /// Adam's second-moment decay.
    pub beta2: f32,
    /// Adam's denominator epsilon.
    pub eps: f32,
}

impl Default for Hyper {
    fn default() -> Self {
        Self { lr: 1e-3, momentum: 0.9, beta1: 0.9, beta2: 0.999, eps: 1e-8 }
    }
}

/// What a kernel needs besides its tensors: the node's facts where the op does not determine
/// them, the step, the seed and the mode.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelContext<'a> {
    /// The node's output facts. Needed by `Fill` (its shape) and checked by `Input`; ignored
    /// by other ops.
    pub outputs: &'a [TensorFact],
    /// The node's input facts as the graph declares them: their element types where the
    /// storage widens them (a u64 is held in `i64`; see [`held_as`]). Read by the kernels
    /// whose result depends on signedness; empty means every input is of its storage type.
    pub inputs: &'a [TensorFact],
    /// For a gradient node, the facts of its forward node's inputs. Needed by `Concat`'s
    /// input gradient; ignored by other ops.
    pub forward_inputs: &'a [TensorFact],
    /// The training step, from 1 (Adam's bias correction).
    pub step: u64,
    /// The node's random seed (`Dropout` and its gradient must share it; [`node_seed`]).
    pub seed: u64,
    /// Training mode (batch statistics, active dropout); `true` by default.
    pub training: bool,
    /// Optimizer hyper-parameters.
    pub hyper: Hyper,
}

impl Default for KernelContext<'_> {
    fn default() -> Self {
        Self {
            outputs: &[],
            inputs: &[],
            forward_inputs: &[],
            step: 1,
            seed: 0,
            training: true,
            hyper: Hyper::default(),
        }
    }
}

/// A seed for the random op of forward node `node` at `step` from a run's `base` seed: what a
/// `Dropout` node and its gradient should both get, so that every step draws a new mask and
/// every node its own.
pub fn node_seed(base: u64, node: u32, step: u64) -> u64 {
    elementwise::mix(elementwise::mix(base ^ u64::from(node)) ^ step)
}

/// The label kernel errors use for `op`: its name, and for a gradient which one of which op,
/// e.g. `GradInput(1) of MatMul`.
pub fn op_label(op: &Op) -> String {
    match op {
        Op::Grad(g) => match g.wrt {
            Wrt::Input(k) => format!("GradInput({k}) of {}", op_label(&g.of)),
            Wrt::Params => format!("GradParams of {}", op_label(&g.of)),
        },
        Op::Opaque(o) => o.op_type.clone(),
        _ => op.name().to_string(),
    }
}

/// The error of an op imported for planning only.
fn planning_only(op: &Op, why: &str) -> KernelError {
    KernelError::Unsupported { op: op_label(op), message: format!("no CPU kernel ({why})") }
}

/// Why a tensor-parallel collective has no CPU kernel.
const TENSOR_PARALLEL: &str = "a tensor-parallel rank's collective: the graph of one rank plans and simulates, it does not run";

/// Runs `op`'s kernel on `inputs` and `params` (see the [module documentation](self) for what
/// each op reads), updating `state` (an `Update` node's optimizer slots, from
/// [`init_state`]), and returns the node's outputs.
///
/// # Errors
/// [`KernelError`] naming the op: no kernel ([`supports`] fails), or arguments of the wrong
/// count, shape, dtype or value, or a context lacking what the op needs.
pub fn run(
    op: &Op,
    inputs: &[&Tensor],
    params: &[&Tensor],
    state: &mut [Tensor],
    ctx: &KernelContext,
) -> KernelResult<Vec<Tensor>> {
    let kernel = select(op)?;
    let mut outputs = kernel(Call { label: op_label(op), inputs, params, state, ctx })?;
    for (output, fact) in outputs.iter_mut().zip(ctx.outputs) {
        element::narrow(output, fact.dtype);
    }
    Ok(outputs)
}

/// `output += partial`, element by element: a micro-batch's gradient accumulated into the
/// partial sum of the micro-batches before it, as PyTorch's `param.grad += g` (IEEE addition
/// commutes, so the order of the operands does not change the bits).
///
/// # Errors
/// [`KernelError::Shape`] when the shapes differ, [`KernelError::Unsupported`] when either
/// tensor is not `f32`.
pub fn accumulate(partial: &Tensor, output: &mut Tensor) -> KernelResult<()> {
    let op = "Accumulate".to_string();
    if partial.shape() != output.shape() {
        return Err(KernelError::Shape {
            op,
            message: format!(
                "partial sum {:?} and gradient {:?} differ in shape",
                partial.shape(),
                output.shape()
            ),
        });
    }
    match (partial.as_f32(), output.as_f32_mut()) {
        (Some(partial), Some(output)) => {
            for (o, p) in output.iter_mut().zip(partial) {
                *o += *p;
            }
            Ok(())
        }
        _ => Err(KernelError::Unsupported { op, message: "accumulates f32 tensors only".into() }),
    }
}

/// Whether [`run`] has a kernel for `op`: the same dispatch, without running anything. For a
/// gradient it also checks that the saved tensors it lists are those the kernel reads.
///
/// # Errors
/// [`KernelError::Unsupported`] naming the op and what is missing.
pub fn supports(op: &Op) -> KernelResult<()> {
    select(op).map(|_| ())
}

type Kernel<'op> = Box<dyn FnOnce(Call<'_>) -> KernelResult<Vec<Tensor>> + 'op>;

/// The dispatch: the kernel of an op. The one match over ops, shared by [`run`] and
/// [`supports`].
fn select(op: &Op) -> KernelResult<Kernel<'_>> {
    use elementwise as ew;
    Ok(match op {
        Op::Input => Box::new(source::input),
        Op::Parameter => Box::new(source::parameter),
        Op::Fill { value } => Box::new(move |c| source::fill(*value, c)),
        Op::Range { len } => Box::new(move |c| data_sized::range(op, *len, c)),
        Op::NonZero { count } => Box::new(move |c| data_sized::non_zero(op, *count, c)),
        Op::NonMaxSuppression(n) => Box::new(move |c| data_sized::non_max_suppression(op, n, c)),
        Op::Unique(u) => Box::new(move |c| data_sized::unique(op, u, c)),
        Op::Conv2d(conv) => Box::new(move |c| conv::forward(op, conv, c)),
        Op::ConvTranspose2d(ct) => Box::new(move |c| conv_transpose::forward(op, ct, c)),
        Op::BatchNorm(bn) => Box::new(move |c| norm::batch_norm(op, bn, c)),
        Op::LayerNorm(ln) => Box::new(move |c| norm::layer_norm(op, ln, c)),
        Op::Unary { func } => Box::new(move |c| ew::unary(op, *func, c)),
        Op::Scale { factor } => Box::new(move |c| ew::scale(op, *factor, c)),
        Op::Activation { kind, alpha, beta } => {
            Box::new(move |c| ew::activation(op, (*kind, *alpha, *beta), c))
        }
        Op::Add | Op::Mul | Op::Div | Op::Max | Op::Min | Op::Pow => {
            Box::new(move |c| ew::binary(op, c))
        }
        Op::Clip { min, max } => Box::new(move |c| ew::clip(op, *min, *max, c)),
        Op::Compare(kind) => Box::new(move |c| logic::compare(op, *kind, c)),
        Op::Logic(kind) => Box::new(move |c| logic::logic(op, *kind, c)),
        Op::Not => Box::new(move |c| logic::not(op, c)),
        Op::Bitwise(kind) => Box::new(move |c| integer::bitwise(op, *kind, c)),
        Op::Cast { to, saturate, round } => {
            Box::new(move |c| random::cast(op, (*to, *saturate, *round), c))
        }
        Op::BitCast { to } => Box::new(move |c| random::bit_cast(op, *to, c)),
        Op::RandomLike(d) => Box::new(move |c| random::random_like(op, d, c)),
        Op::Bernoulli => Box::new(move |c| random::bernoulli(op, c)),
        Op::ScatterNd { reduction } => {
            Box::new(move |c| scatter::scatter(op, scatter::Layout::Nd, *reduction, c))
        }
        Op::ScatterElements { axis, reduction } => {
            let layout = scatter::Layout::Elements(*axis);
            Box::new(move |c| scatter::scatter(op, layout, *reduction, c))
        }
        Op::Where => Box::new(move |c| logic::select(op, c)),
        Op::Reduce(r) => Box::new(move |c| reduce::reduce(op, r, c)),
        Op::MaxPool2d(p) => Box::new(move |c| pool::max_pool(op, p, c)),
        Op::AvgPool2d(p) => Box::new(move |c| pool::avg_pool(op, p, c)),
        Op::GlobalAvgPool => Box::new(move |c| pool::global_avg_pool(op, c)),
        Op::Pool(p) => Box::new(move |c| pool_nd::pool(op, p, c)),
        Op::Concat { axis } => Box::new(move |c| shape::concat(op, *axis, c)),
        Op::Linear(l) => Box::new(move |c| linear::linear(op, l, c)),
        Op::MatMul => Box::new(move |c| linear::matmul(op, c)),
        Op::Softmax { axis } => Box::new(move |c| ew::softmax(op, *axis, c)),
        Op::LogSoftmax { axis } => Box::new(move |c| ew::log_softmax(op, *axis, c)),
        Op::Trilu { k, upper } => Box::new(move |c| ew::trilu(op, *k, *upper, c)),
        Op::ArgExtreme { max, axis, select_last, .. } => {
            Box::new(move |c| ew::arg_extreme(op, (*max, *axis, *select_last), c))
        }
        Op::CausalMask => Box::new(move |c| ew::causal_mask(op, c)),
        Op::Embedding(e) => Box::new(move |c| sequence::embedding(op, e, c)),
        Op::Lstm(l) => Box::new(move |c| sequence::lstm(op, l, c)),
        Op::Dropout { p } => Box::new(move |c| ew::dropout(op, *p, c)),
        Op::Reshape { .. } => Box::new(move |c| shape::reshape(op, c)),
        Op::Transpose { perm } => Box::new(move |c| shape::transpose(op, perm, c)),
        Op::Slice { .. } => Box::new(move |c| shape::slice(op, c)),
        Op::CrossEntropyLoss => Box::new(move |c| loss::cross_entropy(op, c)),
        Op::NllLoss(n) => Box::new(move |c| nll::nll_loss(op, n, c)),
        Op::Expand { .. } => Box::new(move |c| gather::expand(op, c)),
        Op::Pad { .. } | Op::Tile { .. } => Box::new(move |c| gather::lay_out(op, c)),
        Op::Hardmax { axis } => Box::new(move |c| axis::hardmax(op, *axis, c)),
        Op::TopK { k, axis, largest, indices } => {
            Box::new(move |c| axis::top_k(op, (*k, *axis, *largest, *indices), c))
        }
        Op::Einsum(e) => Box::new(move |c| einsum::einsum(op, e, c)),
        Op::CumProd { axis, exclusive, reverse } => {
            Box::new(move |c| axis::cumulative(op, (*axis, *exclusive, *reverse), true, c))
        }
        Op::CumSum { axis, exclusive, reverse } => {
            Box::new(move |c| axis::cumulative(op, (*axis, *exclusive, *reverse), false, c))
        }
        Op::Mod { fmod } => Box::new(move |c| modulo::modulo(op, *fmod, c)),
        Op::Gather { axis } => Box::new(move |c| gather::gather(op, false, *axis, c)),
        Op::GatherElements { axis } => Box::new(move |c| gather::gather(op, true, *axis, c)),
        Op::GatherNd => Box::new(move |c| scatter::gather_nd(op, c)),
        Op::Update(u) => Box::new(move |c| optim::update(u.optimizer, c)),
        Op::Grad(g) => select_grad(g)?,
        Op::Opaque(_) => return Err(planning_only(op, "imported for planning only")),
        Op::TensorParallel(_) => return Err(planning_only(op, TENSOR_PARALLEL)),
    })
}

/// The kernel of a gradient, after checking that it reads the saved tensors the kernel
/// expects (those of the training builder's rules).
fn select_grad(g: &Grad) -> KernelResult<Kernel<'_>> {
    use Saved::{Input, Output};
    use elementwise as ew;
    let of = &*g.of;
    let (saved, kernel): (Vec<Saved>, Kernel<'_>) = match (of, g.wrt) {
        (Op::Conv2d(cv), Wrt::Input(0)) => {
            (vec![], Box::new(move |c| conv::grad_input(of, cv, g, c)))
        }
        (Op::Conv2d(cv), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| conv::grad_params(of, cv, g, c)))
        }
        (Op::ConvTranspose2d(ct), Wrt::Input(0)) => {
            (vec![], Box::new(move |c| conv_transpose::grad_input(of, ct, g, c)))
        }
        (Op::ConvTranspose2d(ct), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| conv_transpose::grad_params(of, ct, g, c)))
        }
        (Op::Linear(l), Wrt::Input(0)) => {
            (vec![], Box::new(move |c| linear::linear_grad_input(of, l, g, c)))
        }
        (Op::Linear(l), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| linear::linear_grad_params(of, l, g, c)))
        }
        (Op::MatMul, Wrt::Input(k @ 0..=1)) => {
            (vec![Input(1 - k)], Box::new(move |c| linear::matmul_grad(of, k, g, c)))
        }
        (Op::BatchNorm(bn), Wrt::Input(0)) => {
            (vec![Input(0)], Box::new(move |c| norm::batch_norm_grad_input(of, bn, g, c)))
        }
        (Op::BatchNorm(bn), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| norm::batch_norm_grad_params(of, bn, g, c)))
        }
        (Op::LayerNorm(ln), Wrt::Input(0)) => {
            (vec![Input(0)], Box::new(move |c| norm::layer_norm_grad_input(of, ln, g, c)))
        }
        (Op::LayerNorm(ln), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| norm::layer_norm_grad_params(of, ln, g, c)))
        }
        (Op::Unary { func }, Wrt::Input(0)) => {
            let saved = if func.grad_reads_output() { Output } else { Input(0) };
            (vec![saved], Box::new(move |c| ew::unary_grad(of, *func, g, c)))
        }
        (Op::Activation { kind, alpha, beta }, Wrt::Input(0)) => (
            vec![Input(0)],
            Box::new(move |c| ew::activation_grad(of, (*kind, *alpha, *beta), g, c)),
        ),
        (Op::Scale { factor }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| ew::scale_grad(of, *factor, g, c)))
        }
        (Op::CausalMask, Wrt::Input(0)) => (vec![], Box::new(move |c| ew::causal_mask_grad(g, c))),
        (Op::Dropout { p }, Wrt::Input(0)) => {
            (vec![Output], Box::new(move |c| ew::dropout_grad(*p, g, c)))
        }
        (Op::Add, Wrt::Input(0 | 1)) => (vec![], Box::new(move |c| ew::add_grad(g, c))),
        (Op::Mul, Wrt::Input(k @ 0..=1)) => {
            (vec![Input(1 - k)], Box::new(move |c| ew::mul_grad(g, c)))
        }
        (Op::Reduce(r), Wrt::Input(0)) => {
            (r.kind.grad_saves(), Box::new(move |c| reduce::reduce_grad(of, r, g, c)))
        }
        (Op::Max | Op::Min | Op::Pow, Wrt::Input(k @ 0..=1)) => {
            (vec![Input(0), Input(1)], Box::new(move |c| ew::pair_grad(of, k, g, c)))
        }
        (Op::Where, Wrt::Input(k @ 1..=2)) => {
            (vec![Input(0)], Box::new(move |c| logic::select_grad(k, g, c)))
        }
        (Op::Clip { min, max }, Wrt::Input(0)) => {
            (vec![Input(0)], Box::new(move |c| ew::clip_grad(of, *min, *max, g, c)))
        }
        (Op::Div, Wrt::Input(0)) => (vec![Input(1)], Box::new(move |c| ew::div_grad(0, g, c))),
        (Op::Div, Wrt::Input(1)) => {
            (vec![Input(0), Input(1)], Box::new(move |c| ew::div_grad(1, g, c)))
        }
        (Op::MaxPool2d(p), Wrt::Input(0)) => {
            (vec![Input(0), Output], Box::new(move |c| pool::max_pool_grad(of, p, c)))
        }
        (Op::AvgPool2d(p), Wrt::Input(0)) => {
            (vec![], Box::new(move |c| pool::avg_pool_grad(of, p, g, c)))
        }
        (Op::Pool(p), Wrt::Input(0)) => {
            let saved = if p.max { vec![Input(0)] } else { vec![] };
            (saved, Box::new(move |c| pool_nd::pool_grad(of, p, g, c)))
        }
        (Op::GlobalAvgPool, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| pool::global_avg_pool_grad(of, g, c)))
        }
        (Op::Concat { axis }, Wrt::Input(k)) => {
            (vec![], Box::new(move |c| shape::concat_grad(of, *axis, k, g, c)))
        }
        (Op::Reshape { .. }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| shape::reshape_grad(g, c)))
        }
        (Op::Transpose { perm }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| shape::transpose_grad(of, perm, g, c)))
        }
        (Op::Slice { .. }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| shape::slice_grad(of, g, c)))
        }
        (Op::LogSoftmax { axis }, Wrt::Input(0)) => {
            (vec![Output], Box::new(move |c| ew::log_softmax_grad(*axis, c)))
        }
        (Op::Trilu { k, upper }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| ew::trilu_grad(of, *k, *upper, g, c)))
        }
        (Op::Softmax { axis }, Wrt::Input(0)) => {
            (vec![Output], Box::new(move |c| ew::softmax_grad(*axis, c)))
        }
        (Op::Lstm(l), Wrt::Input(0)) => {
            (vec![Input(0), Output], Box::new(move |c| sequence::lstm_grad(of, l, g, false, c)))
        }
        (Op::Lstm(l), Wrt::Params) => {
            (vec![Input(0), Output], Box::new(move |c| sequence::lstm_grad(of, l, g, true, c)))
        }
        (Op::TopK { k, axis, largest, indices: false }, Wrt::Input(0)) => {
            (vec![Input(0)], Box::new(move |c| axis::top_k_grad(of, (*k, *axis, *largest), g, c)))
        }
        (Op::CumSum { axis, exclusive, reverse }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| axis::cum_sum_grad(of, (*axis, *exclusive, *reverse), g, c)))
        }
        (Op::Einsum(e), Wrt::Input(k)) if k < e.inputs.len() => {
            let saved = (0..e.inputs.len()).filter(|&j| j != k).map(Input).collect();
            (saved, Box::new(move |c| einsum::einsum_grad(e, k, g, c)))
        }
        (Op::Mod { .. }, Wrt::Input(k @ 0..=1)) => {
            (vec![Input(0), Input(1)], Box::new(move |c| modulo::modulo_grad(k, g, c)))
        }
        (Op::Pad { .. } | Op::Tile { .. }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| gather::lay_out_grad(of, g, c)))
        }
        (Op::Expand { .. }, Wrt::Input(0)) => {
            (vec![], Box::new(move |c| gather::expand_grad(g, c)))
        }
        // Multiplying, max and min scatters have no gradient kernel.
        (Op::ScatterNd { reduction } | Op::ScatterElements { reduction, .. }, _)
            if !matches!(reduction, ScatterReduction::None | ScatterReduction::Add) =>
        {
            return Err(KernelError::Unsupported {
                op: op_label(&Op::Grad(g.clone())),
                message: format!("no gradient kernel for a scatter's reduction {reduction:?}"),
            });
        }
        (Op::ScatterNd { reduction }, Wrt::Input(k @ (0 | 2))) => {
            let layout = scatter::Layout::Nd;
            (
                vec![Input(1)],
                Box::new(move |c| scatter::scatter_grad(layout, *reduction, k == 2, g, c)),
            )
        }
        (Op::ScatterElements { axis, reduction }, Wrt::Input(k @ (0 | 2))) => {
            let layout = scatter::Layout::Elements(*axis);
            (
                vec![Input(1)],
                Box::new(move |c| scatter::scatter_grad(layout, *reduction, k == 2, g, c)),
            )
        }
        (Op::Gather { axis }, Wrt::Input(0)) => {
            (vec![Input(1)], Box::new(move |c| gather::gather_grad(false, *axis, g, c)))
        }
        (Op::GatherElements { axis }, Wrt::Input(0)) => {
            (vec![Input(1)], Box::new(move |c| gather::gather_grad(true, *axis, g, c)))
        }
        (Op::GatherNd, Wrt::Input(0)) => {
            (vec![Input(1)], Box::new(move |c| scatter::gather_nd_grad(g, c)))
        }
        // The targets, and the class weights when the loss has them.
        (Op::NllLoss(n), Wrt::Input(0)) => {
            let saved = if g.saved.len() == 2 { vec![Input(1), Input(2)] } else { vec![Input(1)] };
            (saved, Box::new(move |c| nll::nll_loss_grad(n, g, c)))
        }
        (Op::CrossEntropyLoss, Wrt::Input(0)) => {
            (vec![Input(0), Input(1)], Box::new(move |c| loss::cross_entropy_grad(of, c)))
        }
        (Op::Embedding(e), Wrt::Params) => {
            (vec![Input(0)], Box::new(move |c| sequence::embedding_grad(of, e, g, c)))
        }
        (Op::Parameter, Wrt::Params) => (vec![], Box::new(move |c| source::parameter_grad(g, c))),
        (Op::Opaque(_), _) => {
            return Err(planning_only(&Op::Grad(g.clone()), "imported for planning only"));
        }
        (Op::TensorParallel(_), _) => {
            return Err(planning_only(&Op::Grad(g.clone()), TENSOR_PARALLEL));
        }
        _ => {
            return Err(KernelError::Unsupported {
                op: op_label(&Op::Grad(g.clone())),
                message: "the training builder makes no such gradient and there is no kernel"
                    .into(),
            });
        }
    };
    if g.saved != saved {
        return Err(KernelError::Unsupported {
            op: op_label(&Op::Grad(g.clone())),
            message: format!("reads saved tensors {:?}, the kernel reads {saved:?}", g.saved),
        });
    }
    Ok(kernel)
}
