//! Per op: what each gradient reads and what it costs.
//!
//! The saved tensors follow what PyTorch's autograd keeps for each op, so that activations
//! live exactly until their last backward use: a convolution's dX needs only the weights and
//! the upstream gradient, its dW the input; ReLU's gradient needs the output, GELU's the input;
//! a sum needs nothing. FLOPs: a product's dX and dW each cost as much as the forward product
//! (the usual "backward is twice the forward"); an elementwise gradient costs about its
//! forward; shape ops and sums cost nothing or one pass over the gradient.

use crate::fact::TensorFact;
use crate::op::{Op, Saved};

/// How one gradient of a forward op is computed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rule {
    /// Forward tensors read after the upstream gradient.
    pub saved: Vec<Saved>,
    /// Whether it reads the forward op's parameters.
    pub reads_params: bool,
    /// FLOPs.
    pub flops: u64,
}

/// The facts a rule is computed from.
pub(crate) struct Forward<'a> {
    pub op: &'a Op,
    pub inputs: &'a [&'a TensorFact],
    pub output: &'a TensorFact,
    /// The forward op's FLOPs.
    pub flops: u64,
}

fn rule(saved: Vec<Saved>, reads_params: bool, flops: u64) -> Option<Rule> {
    Some(Rule { saved, reads_params, flops })
}

/// The gradient with respect to input `k`, or `None` if the op has no gradient there.
pub(crate) fn input_gradient(f: &Forward, k: usize) -> Option<Rule> {
    use Saved::{Input, Output};
    let out = f.output.numel();
    let input = |i: usize| f.inputs.get(i).map_or(0, |x| x.numel());
    match f.op {
        Op::Conv2d(_) | Op::ConvTranspose2d(_) | Op::Linear(_) => rule(vec![], true, f.flops),
        Op::MatMul => rule(vec![Input(1 - k.min(1))], false, f.flops),
        Op::BatchNorm(_) | Op::LayerNorm(_) => rule(vec![Input(0)], true, f.flops * 3 / 2),
        Op::Unary { func } => {
            let saved = if func.grad_reads_output() { Output } else { Input(0) };
            rule(vec![saved], false, f.flops.max(out))
        }
        Op::Scale { .. } | Op::CausalMask => rule(vec![], false, out),
        Op::Activation { .. } => rule(vec![Input(0)], false, 4 * out),
        Op::Dropout { .. } => rule(vec![Output], false, out),
        // Broadcasting: the gradient is summed down to the input's shape.
        Op::Add => rule(vec![], false, if input(k) == out { 0 } else { out }),
        Op::Mul => rule(vec![Input(1 - k.min(1))], false, 2 * out),
        // The upstream gradient spread back over the reduced axes (weighted by what the
        // reduction's derivative reads).
        Op::Reduce(r) => {
            let saved = r.kind.grad_saves();
            let flops = input(0) * (1 + saved.len() as u64);
            rule(saved, false, flops)
        }
        // Which operand was the extreme, the power's derivatives: both operands.
        Op::Max | Op::Min => rule(vec![Input(0), Input(1)], false, 2 * out),
        Op::Pow => rule(vec![Input(0), Input(1)], false, 3 * f.flops.max(out)),
        // The selected value's gradient: the upstream gradient where the condition chose it.
        Op::Where if k > 0 => rule(vec![Input(0)], false, out),
        // The mask of the elements inside the bounds.
        Op::Clip { .. } => rule(vec![Input(0)], false, out),
        // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2.
        Op::Div if k == 0 => rule(vec![Input(1)], false, 2 * out),
        Op::Div => rule(vec![Input(0), Input(1)], false, 4 * out),
        Op::MaxPool2d(_) => rule(vec![Input(0), Output], false, input(0)),
        // The max's position is found again from the input.
        Op::Pool(p) if p.max => rule(vec![Input(0)], false, f.flops),
        Op::Pool(_) => rule(vec![], false, f.flops),
        Op::AvgPool2d(_) | Op::GlobalAvgPool => rule(vec![], false, input(0)),
        Op::Concat { .. } | Op::Reshape { .. } | Op::Transpose { .. } | Op::Slice { .. } => {
            rule(vec![], false, 0)
        }
        Op::Softmax { .. } | Op::LogSoftmax { .. } => rule(vec![Output], false, 4 * out),
        // The same triangle of the upstream gradient.
        Op::Trilu { .. } => rule(vec![], false, out),
        Op::Lstm(_) => rule(vec![Input(0), Output], true, f.flops),
        Op::CrossEntropyLoss if k == 0 => rule(vec![Input(0), Input(1)], false, 3 * input(0)),
        // The same sum of products with the upstream gradient in place of input k: every
        // other input.
        Op::Einsum(e) => {
            rule((0..e.inputs.len()).filter(|&j| j != k).map(Input).collect(), false, f.flops)
        }
        // The values' gradient goes to the positions they came from, found again from the
        // input; the indices have none.
        Op::TopK { indices: false, .. } => rule(vec![Input(0)], false, input(0)),
        Op::TopK { .. } => None,
        // The running sums of the upstream gradient in the other direction.
        Op::CumSum { .. } => rule(vec![], false, out),
        // The products of the other elements: read from the input and the output (no kernel).
        Op::CumProd { .. } => rule(vec![Input(0), Output], false, 3 * out),
        // a - b * trunc(a / b): 1 for the dividend, -trunc(a / b) for the divisor.
        Op::Mod { .. } => rule(vec![Input(0), Input(1)], false, 4 * out),
        // Summed back over the broadcast dims, the copies, the padded positions.
        Op::Expand { .. } | Op::Tile { .. } | Op::Pad { .. } => rule(vec![], false, out),
        // Scattered back to the gathered positions (the indices get no gradient).
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd if k == 0 => {
            rule(vec![Input(1)], false, out)
        }
        Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherNd => None,
        // The data where no update replaced it, each update from where it landed: both read
        // the indices (the data's gradient copies the upstream one otherwise).
        Op::ScatterNd { .. } | Op::ScatterElements { .. } if k == 0 || k == 2 => {
            rule(vec![Input(1)], false, out)
        }
        Op::ScatterNd { .. } | Op::ScatterElements { .. } => None,
        // The targets (and the class weights) pick where the upstream gradient goes.
        Op::NllLoss(_) if k == 0 => {
            rule((1..f.inputs.len()).map(Input).collect(), false, input(0) + 2 * input(1))
        }
        Op::NllLoss(_) => None,
        // Known by its shapes only: the gradient reads every input (the most any op keeps)
        // and costs twice the forward.
        Op::Opaque(o) => rule((0..o.inputs).map(Input).collect(), false, (2 * f.flops).max(out)),
        // The gradient of a gather is a reduce-scatter (a sum), of a scatter a gather (the
        // cost model times the collective).
        Op::TensorParallel(t) => {
            let flops = match t.backward() {
                crate::op::TensorParallelPass::ReduceScatter => out,
                crate::op::TensorParallelPass::AllGather => 0,
            };
            rule(vec![], false, flops)
        }
        // Masks: no gradient.
        Op::Where
        | Op::Compare(_)
        | Op::Logic(_)
        | Op::Not
        | Op::Bitwise(_)
        | Op::Cast { .. }
        | Op::BitCast { .. }
        | Op::RandomLike(_)
        | Op::Bernoulli
        | Op::ArgExtreme { .. }
        | Op::Hardmax { .. } => None,
        // Positions and selections: no gradient.
        Op::Range { .. } | Op::NonZero { .. } | Op::NonMaxSuppression(_) | Op::Unique(_) => None,
        Op::CrossEntropyLoss
        | Op::Embedding(_)
        | Op::Input
        | Op::Parameter
        | Op::Fill { .. }
        | Op::Grad(_)
        | Op::Update(_) => None,
    }
}

/// The gradient with respect to the op's trainable parameters, or `None` if it has none.
pub(crate) fn param_gradient(f: &Forward) -> Option<Rule> {
    use Saved::{Input, Output};
    match f.op {
        Op::Conv2d(_) | Op::ConvTranspose2d(_) | Op::Linear(_) => {
            rule(vec![Input(0)], false, f.flops)
        }
        Op::BatchNorm(_) | Op::LayerNorm(_) => rule(vec![Input(0)], false, 4 * f.output.numel()),
        Op::Embedding(_) => rule(vec![Input(0)], false, f.output.numel()),
        Op::Lstm(_) => rule(vec![Input(0), Output], false, f.flops),
        Op::Parameter => rule(vec![], false, 0),
        _ => None,
    }
}
