//! Gradient kernels against central finite differences of the reference forward (in f64).

use ordo_ir::op::{Grad, Saved, ScatterReduction, UnaryOp, Wrt};
use ordo_ir::{Op, TensorFact};

use super::super::reference::{self, Dense};
use super::super::{KernelContext, Tensor, run, supports};
use super::cases::{self, Case, conv_case, conv_transpose_case};
use super::{GRAD_TOL, close, ctx, rand};

/// What the training builder saves for each gradient (mirrors its rules).
fn saved(op: &Op, wrt: Wrt, inputs: usize) -> Vec<Saved> {
    use Saved::{Input, Output};
    match (op, wrt) {
        (Op::Conv2d(_) | Op::ConvTranspose2d(_) | Op::Linear(_), Wrt::Input(_)) => vec![],
        (Op::MatMul | Op::Mul, Wrt::Input(k)) => vec![Input(1 - k)],
        (Op::Max | Op::Min | Op::Pow | Op::Mod { .. }, _) => vec![Input(0), Input(1)],
        (Op::Clip { .. } | Op::Where | Op::Activation { .. }, _) => vec![Input(0)],
        (Op::Div, Wrt::Input(0)) => vec![Input(1)],
        (Op::Div, Wrt::Input(_)) => vec![Input(0), Input(1)],
        (Op::BatchNorm(_) | Op::LayerNorm(_) | Op::Embedding(_), _) => vec![Input(0)],
        (Op::Conv2d(_) | Op::ConvTranspose2d(_) | Op::Linear(_), Wrt::Params) => vec![Input(0)],
        (Op::Unary { func }, _) => match func {
            UnaryOp::Relu
            | UnaryOp::Sigmoid
            | UnaryOp::Tanh
            | UnaryOp::Rsqrt
            | UnaryOp::Exp
            | UnaryOp::Sqrt
            | UnaryOp::Reciprocal => vec![Output],
            _ => vec![Input(0)],
        },
        (Op::Dropout { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. }, _) => vec![Output],
        (Op::MaxPool2d(_) | Op::Lstm(_), _) => vec![Input(0), Output],
        (Op::Reduce(r), _) => {
            use ordo_ir::op::ReduceKind::*;
            match r.kind {
                Sum | Mean => vec![],
                SumSquare | L1 | Prod => vec![Input(0)],
                LogSum => vec![Output],
                Max | Min | L2 | LogSumExp => vec![Input(0), Output],
            }
        }
        (Op::CrossEntropyLoss, _) => vec![Input(0), Input(1)],
        (Op::NllLoss(_), _) => (1..inputs).map(Input).collect(),
        (
            Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::ScatterNd { .. }
            | Op::ScatterElements { .. }
            | Op::GatherNd,
            _,
        ) => vec![Input(1)],
        (Op::Pool(p), _) if p.max => vec![Input(0)],
        (Op::TopK { .. }, _) => vec![Input(0)],
        (Op::Einsum(_), Wrt::Input(k)) => (0..inputs).filter(|&j| j != k).map(Input).collect(),
        _ => vec![],
    }
}

/// Whether the op has a gradient with respect to `wrt` (a float input of a mask op has none).
fn has_gradient(op: &Op, wrt: Wrt) -> bool {
    !matches!(
        (op, wrt),
        (
            Op::Compare(_)
                | Op::Logic(_)
                | Op::Not
                | Op::ArgExtreme { .. }
                | Op::Hardmax { .. }
                | Op::Cast { .. }
                | Op::BitCast { .. }
                | Op::CumProd { .. }
                | Op::RandomLike(_)
                | Op::Bernoulli
                | Op::Range { .. },
            _
        ) | (Op::TopK { indices: true, .. }, _)
            | (Op::Where, Wrt::Input(0))
            | (Op::NllLoss(_), Wrt::Input(2))
            | (Op::ScatterNd { .. } | Op::ScatterElements { .. }, Wrt::Input(1))
    ) && !matches!(
        op,
        Op::ScatterNd { reduction } | Op::ScatterElements { reduction, .. }
            if !matches!(reduction, ScatterReduction::None | ScatterReduction::Add)
    )
}

/// Whether the gradient node gets the forward parameters.
fn reads_params(op: &Op, wrt: Wrt) -> bool {
    match wrt {
        Wrt::Input(_) => {
            matches!(
                op,
                Op::Conv2d(_)
                    | Op::ConvTranspose2d(_)
                    | Op::Linear(_)
                    | Op::BatchNorm(_)
                    | Op::LayerNorm(_)
                    | Op::Lstm(_)
            )
        }
        Wrt::Params => matches!(op, Op::Lstm(_)),
    }
}

/// `sum(w * y)` over the finite outputs of the reference forward.
fn objective(op: &Op, inputs: &[Dense], params: &[Dense], w: &[f32], ctx: &KernelContext) -> f64 {
    let y = &reference::forward(op, inputs, params, ctx)[0];
    y.data.iter().zip(w).filter(|(v, _)| v.is_finite()).map(|(v, &w)| v * f64::from(w)).sum()
}

/// Checks every gradient of one instance against finite differences.
fn check(c: &Case, seed: u64) {
    let ctx = ctx();
    let facts: Vec<TensorFact> = c.inputs.iter().map(Tensor::fact).collect();
    let (inputs, params): (Vec<&Tensor>, Vec<&Tensor>) =
        (c.inputs.iter().collect(), c.params.iter().collect());
    let y = run(&c.op, &inputs, &params, &mut [], &ctx).unwrap().remove(0);
    let dy = rand(y.shape(), seed);
    let refs: Vec<&TensorFact> = facts.iter().collect();
    let specs = c.op.param_specs(&refs);
    let trainable: Vec<usize> = (0..specs.len()).filter(|&i| specs[i].trainable).collect();
    let mut wrts: Vec<Wrt> =
        (0..c.inputs.len()).filter(|&k| facts[k].dtype.is_float()).map(Wrt::Input).collect();
    if !trainable.is_empty() {
        wrts.push(Wrt::Params);
    }
    let (dense_in, dense_p): (Vec<Dense>, Vec<Dense>) = (
        c.inputs.iter().map(Dense::from_tensor).collect(),
        c.params.iter().map(Dense::from_tensor).collect(),
    );
    let w = dy.as_f32().unwrap();
    for wrt in wrts.into_iter().filter(|&w| has_gradient(&c.op, w)) {
        let saved = saved(&c.op, wrt, c.inputs.len());
        let produces = match wrt {
            Wrt::Input(k) => vec![facts[k].clone()],
            Wrt::Params => trainable.iter().map(|&i| specs[i].fact.clone()).collect(),
        };
        let grad = Op::Grad(Grad {
            of: Box::new(c.op.clone()),
            wrt,
            saved: saved.clone(),
            produces,
            flops: 0,
        });
        supports(&grad).unwrap();
        let mut reads = vec![&dy];
        reads.extend(saved.iter().map(|s| match *s {
            Saved::Input(k) => &c.inputs[k],
            Saved::Output => &y,
        }));
        let gparams = if reads_params(&c.op, wrt) { params.clone() } else { vec![] };
        let gctx = KernelContext { forward_inputs: &facts, ..ctx.clone() };
        let got = run(&grad, &reads, &gparams, &mut [], &gctx).unwrap_or_else(|e| panic!("{e}"));
        // (is a parameter, index) of each produced gradient.
        let targets: Vec<(bool, usize)> = match wrt {
            Wrt::Input(k) => vec![(false, k)],
            Wrt::Params => trainable.iter().map(|&i| (true, i)).collect(),
        };
        assert_eq!(got.len(), targets.len());
        for (g, &(is_param, idx)) in got.iter().zip(&targets) {
            let g = g.as_f32().unwrap();
            for (e, &ge) in g.iter().enumerate() {
                let h = 1e-4;
                let eval = |delta: f64| {
                    let (mut i, mut p) = (dense_in.clone(), dense_p.clone());
                    let t = if is_param { &mut p[idx] } else { &mut i[idx] };
                    t.data[e] += delta;
                    objective(&c.op, &i, &p, w, &ctx)
                };
                let fd = (eval(h) - eval(-h)) / (2.0 * h);
                assert!(
                    close(f64::from(ge), fd, GRAD_TOL),
                    "{:?} {wrt:?} target {idx} element {e}: kernel {} finite difference {fd}",
                    c.op,
                    ge
                );
            }
        }
    }
}

#[test]
fn every_gradient_matches_finite_differences() {
    for seed in 0..3 {
        for c in cases::all(seed) {
            check(&c, seed + 100);
        }
    }
}

#[test]
fn convolution_gradients_on_random_geometries() {
    for seed in 0..12 {
        let c = conv_case(&mut fastrand::Rng::with_seed(seed + 50), seed);
        check(&c, seed);
        let c = conv_transpose_case(&mut fastrand::Rng::with_seed(seed + 70), seed);
        check(&c, seed);
    }
}

#[test]
fn dropout_gradient_recomputes_the_mask_for_kept_zeros() {
    let p = 0.5;
    let x = Tensor::full(&[64], 0.0).unwrap();
    let ctx = ctx();
    let y = run(&Op::Dropout { p }, &[&x], &[], &mut [], &ctx).unwrap().remove(0);
    let grad = Op::Grad(Grad {
        of: Box::new(Op::Dropout { p }),
        wrt: Wrt::Input(0),
        saved: vec![Saved::Output],
        produces: vec![x.fact()],
        flops: 0,
    });
    let dy = Tensor::full(&[64], 1.0).unwrap();
    let dx = run(&grad, &[&dy, &y], &[], &mut [], &ctx).unwrap().remove(0);
    let kept = dx.as_f32().unwrap().iter().filter(|&&v| v == 2.0).count();
    assert!(kept > 10 && kept < 54, "{kept}");
}
