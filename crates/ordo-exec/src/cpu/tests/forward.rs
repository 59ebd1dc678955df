//! Optimised forward kernels against the reference, over random shapes.

use ordo_ir::op::{BatchNorm, Conv2d, Distribution, Pool2d};
use ordo_ir::{DType, Op, TensorFact};
use proptest::prelude::*;

use super::super::{KernelContext, Tensor, run};
use super::cases::{self, conv_case, conv_transpose_case, pool_case};
use super::{FWD_TOL, assert_close, check_forward, ctx, params_for, rand, run_ref};

#[test]
fn every_op_matches_the_reference_on_random_instances() {
    for seed in 0..6 {
        for c in cases::all(seed) {
            check_forward(&c.op, &c.inputs, &c.params);
        }
    }
}

#[test]
fn source_ops() {
    let fact = [TensorFact::f32([2, 3])];
    let ctx = KernelContext { outputs: &fact, ..ctx() };
    let out = run(&Op::Fill { value: 2.5 }, &[], &[], &mut [], &ctx).unwrap();
    assert_eq!(out[0], Tensor::full(&[2, 3], 2.5).unwrap());
    let x = rand(&[2, 3], 1);
    assert_eq!(run(&Op::Input, &[&x], &[], &mut [], &ctx).unwrap()[0], x);
}

#[test]
fn evaluation_mode_uses_running_statistics_and_no_dropout() {
    let ctx = KernelContext { training: false, ..ctx() };
    let op = Op::BatchNorm(BatchNorm::new());
    let x = [rand(&[3, 2, 2, 2], 3)];
    let params = params_for(&op, &x, 4);
    let refs: Vec<&Tensor> = params.iter().collect();
    let got = run(&op, &[&x[0]], &refs, &mut [], &ctx).unwrap();
    let want = run_ref(&op, &x, &params, &ctx);
    assert_close(got[0].as_f32().unwrap(), &want[0].data, FWD_TOL, "eval batch norm");
    let d = run(&Op::Dropout { p: 0.5 }, &[&x[0]], &[], &mut [], &ctx).unwrap();
    assert_eq!(d[0], x[0]);
}

#[test]
fn dropout_drops_about_p_and_scales_the_rest() {
    let x = Tensor::full(&[100, 100], 1.0).unwrap();
    let y = run(&Op::Dropout { p: 0.25 }, &[&x], &[], &mut [], &ctx()).unwrap().remove(0);
    let v = y.as_f32().unwrap();
    let kept = v.iter().filter(|&&e| e != 0.0).count();
    assert!((7300..7700).contains(&kept), "{kept} kept");
    assert!(v.iter().all(|&e| e == 0.0 || (e - 1.0 / 0.75).abs() < 1e-6));
}

/// Mean and standard deviation.
fn moments(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn random_ops_draw_their_distribution_the_same_for_a_seed_and_anew_for_another() {
    let like = Tensor::full(&[200, 500], 0.0).unwrap();
    let draw = |d: Distribution, seed: u64| {
        let ctx = KernelContext { seed, ..ctx() };
        run(&Op::RandomLike(d), &[&like], &[], &mut [], &ctx).unwrap().remove(0)
    };
    let uniform = Distribution::Uniform { low: -1.0, high: 3.0 };
    let u = draw(uniform, 1);
    let v = u.as_f32().unwrap();
    assert!(v.iter().all(|&x| (-1.0..3.0).contains(&x)));
    // Uniform on [-1, 3): mean 1, standard deviation 4 / sqrt(12); 1e5 samples.
    let (mean, sd) = moments(v);
    assert!((mean - 1.0).abs() < 0.02 && (sd - 4.0 / 12f64.sqrt()).abs() < 0.02, "{mean} {sd}");
    assert_eq!(draw(uniform, 1), u);
    let other = draw(uniform, 2);
    let same = v.iter().zip(other.as_f32().unwrap()).filter(|(a, b)| a == b).count();
    assert!(same < 10, "{same} equal values under another seed");
    let (mean, sd) =
        moments(draw(Distribution::Normal { mean: -2.0, scale: 0.5 }, 3).as_f32().unwrap());
    assert!((mean + 2.0).abs() < 0.01 && (sd - 0.5).abs() < 0.01, "{mean} {sd}");

    let p = Tensor::from_f32(&[3, 10_000], [0.0, 0.3, 1.0].repeat(10_000)).unwrap();
    let b = run(&Op::Bernoulli, &[&p], &[], &mut [], &ctx()).unwrap().remove(0);
    let b = b.as_f32().unwrap();
    assert!(b.iter().all(|&x| x == 0.0 || x == 1.0));
    let column = |k: usize| b.iter().skip(k).step_by(3).sum::<f32>() / 10_000.0;
    assert_eq!((column(0), column(2)), (0.0, 1.0));
    assert!((column(1) - 0.3).abs() < 0.015, "{}", column(1));
}

#[test]
fn casts_truncate_toward_zero_and_test_for_zero() {
    let x = Tensor::from_f32(&[6], vec![-1.5, -0.0, 0.5, 2.99, f32::NAN, 1e30]).unwrap();
    let cast = |x: &Tensor, to| run(&Op::cast(to), &[x], &[], &mut [], &ctx()).unwrap().remove(0);
    assert_eq!(cast(&x, DType::I64).as_i64().unwrap(), [-1, 0, 0, 2, 0, i64::MAX]);
    assert_eq!(cast(&x, DType::Bool).as_bool().unwrap(), [true, false, true, true, true, true]);
    let b = Tensor::from_bool(&[2], vec![true, false]).unwrap();
    assert_eq!(cast(&b, DType::F32).as_f32().unwrap(), [1.0, 0.0]);
    assert_eq!(cast(&b, DType::I64).as_i64().unwrap(), [1, 0]);
    let i = Tensor::from_i64(&[3], vec![-3, 0, 1 << 40]).unwrap();
    assert_eq!(cast(&i, DType::F32).as_f32().unwrap(), [-3.0, 0.0, (1u64 << 40) as f32]);
    assert_eq!(cast(&i, DType::Bool).as_bool().unwrap(), [true, false, true]);
}

fn pointwise_and_strided(seed: u64) -> Vec<Op> {
    let _ = seed;
    vec![
        Op::Conv2d(Conv2d::new(4, 1).no_bias()),
        Op::Conv2d(Conv2d::new(6, 3).stride(2).padding(1).groups(3)),
        Op::Conv2d(Conv2d::rect(2, 1, 3).padding_hw(0, 1).dilation(2)),
    ]
}

#[test]
fn convolution_special_cases() {
    for (i, op) in pointwise_and_strided(0).into_iter().enumerate() {
        let x = vec![rand(&[2, 3, 7, 6], i as u64)];
        let params = params_for(&op, &x, 9);
        check_forward(&op, &x, &params);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn convolution_matches_the_reference(seed in 0u64..1_000_000) {
        let c = conv_case(&mut fastrand::Rng::with_seed(seed), seed);
        check_forward(&c.op, &c.inputs, &c.params);
        let c = conv_transpose_case(&mut fastrand::Rng::with_seed(seed), seed);
        check_forward(&c.op, &c.inputs, &c.params);
    }

    #[test]
    fn pooling_matches_the_reference(seed in 0u64..1_000_000, max in any::<bool>()) {
        let c = pool_case(&mut fastrand::Rng::with_seed(seed), seed, max);
        check_forward(&c.op, &c.inputs, &c.params);
    }

    #[test]
    fn broadcast_matmul_matches_the_reference(
        (m, k, n) in (1usize..5, 0usize..5, 1usize..5),
        batch_a in proptest::collection::vec(1usize..3, 0..3),
        batch_b in proptest::collection::vec(1usize..3, 0..3),
    ) {
        // Make the batch dimensions broadcastable: where both have one, one side may be 1.
        let rank = batch_a.len().max(batch_b.len());
        let mut a = batch_a.clone();
        let mut b = batch_b.clone();
        for i in 0..rank {
            let (ia, ib) = (i + a.len(), i + b.len());
            if ia >= rank && ib >= rank {
                let (x, y) = (a[ia - rank], b[ib - rank]);
                if x != y && x != 1 && y != 1 {
                    b[ib - rank] = 1;
                }
            }
        }
        a.extend([m, k]);
        b.extend([k, n]);
        check_forward(&Op::MatMul, &[rand(&a, 1), rand(&b, 2)], &[]);
    }

    #[test]
    fn transpose_matches_the_reference(
        shape in proptest::collection::vec(1usize..4, 1..5),
        seed in any::<u64>(),
    ) {
        let mut perm: Vec<usize> = (0..shape.len()).collect();
        fastrand::Rng::with_seed(seed).shuffle(&mut perm);
        check_forward(&Op::Transpose { perm }, &[rand(&shape, seed)], &[]);
    }

    #[test]
    fn broadcast_add_and_mul_match_the_reference(
        shape in proptest::collection::vec(1usize..4, 1..4),
        mask in proptest::collection::vec(any::<bool>(), 4),
        drop in 0usize..3,
    ) {
        let other: Vec<usize> =
            shape.iter().zip(&mask).map(|(&d, &m)| if m { 1 } else { d }).skip(drop).collect();
        for op in [Op::Add, Op::Mul, Op::Div] {
            check_forward(&op, &[rand(&shape, 1), rand(&other, 2)], &[]);
            check_forward(&op, &[rand(&other, 3), rand(&shape, 4)], &[]);
        }
    }
}

#[test]
fn max_pool_with_padding_never_picks_the_padding() {
    let op = Op::MaxPool2d(Pool2d::new(3, 2).padding(1));
    let x = Tensor::full(&[1, 1, 4, 4], -5.0).unwrap();
    let y = run(&op, &[&x], &[], &mut [], &ctx()).unwrap();
    assert!(y[0].as_f32().unwrap().iter().all(|&v| v == -5.0));
}

/// NaN in, NaN out: every unary function and activation keeps a NaN where the reference does
/// (`torch`, ONNX's reference), on the kernels and on the reference alike; infinities give
/// the reference's values. Only the two activations whose ONNX definition compares the input
/// and picks a constant otherwise (`ThresholdedRelu`, `Shrink`) turn NaN into 0, as
/// `np.where` does.
#[test]
fn nan_stays_nan_through_every_elementwise_function() {
    use ordo_ir::op::{ActivationKind as A, UnaryOp as U};
    let unary = [
        U::Relu,
        U::Gelu,
        U::GeluTanh,
        U::Sigmoid,
        U::Tanh,
        U::HardSwish,
        U::HardSigmoid,
        U::Rsqrt,
        U::Erf,
        U::Exp,
        U::Log,
        U::Sqrt,
        U::Abs,
        U::Sin,
        U::Cos,
        U::Reciprocal,
        U::Softplus,
        U::Softsign,
        U::Tan,
        U::Asin,
        U::Acos,
        U::Atan,
        U::Sinh,
        U::Cosh,
        U::Asinh,
        U::Acosh,
        U::Atanh,
        U::Mish,
        U::Floor,
        U::Ceil,
        U::Round,
        U::Sign,
    ];
    let activations =
        [A::Elu, A::Selu, A::LeakyRelu, A::ThresholdedRelu, A::Celu, A::HardSigmoid, A::Shrink];
    let mut ops: Vec<(Op, bool)> =
        unary.into_iter().map(|func| (Op::Unary { func }, true)).collect();
    ops.extend(activations.into_iter().map(|kind| {
        let keeps_nan = !matches!(kind, A::ThresholdedRelu | A::Shrink);
        (Op::Activation { kind, alpha: 0.5, beta: 1.5 }, keeps_nan)
    }));
    let values = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.5];
    let x = Tensor::from_f32(&[4], values.to_vec()).unwrap();
    let fact = [TensorFact::f32([4])];
    let ctx = KernelContext { outputs: &fact, ..ctx() };
    let mut wrong = Vec::new();
    for (op, keeps_nan) in ops {
        let got = run(&op, &[&x], &[], &mut [], &ctx).unwrap();
        let got = got[0].as_f32().unwrap();
        let want = &run_ref(&op, std::slice::from_ref(&x), &[], &ctx)[0].data;
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            let g = f64::from(g);
            let right = if k == 0 {
                g.is_nan() == keeps_nan && w.is_nan() == keeps_nan
            } else {
                (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= FWD_TOL * (1.0 + w.abs())
            };
            if !right {
                wrong.push(format!("{}({}) = {g}, reference {w}", op.name(), values[k]));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
