//! Tests of the CPU kernels: optimised against reference (forward), gradients against central
//! finite differences of the reference forward, optimizers against hand-worked steps, errors.
//!
//! Tolerances: a forward output `a` matches the f64 reference `b` when
//! `|a - b| <= 1e-4 (1 + |b|)`; a gradient `g` matches the finite difference `d` (step 1e-4,
//! in f64) when `|g - d| <= 2e-3 (1 + |d|)` (f32 kernels against an f64 derivative).

mod cases;
mod data_sized;
mod errors;
mod forward;
mod grads;
mod optim;
mod types;

use ordo_ir::{Op, TensorFact};

use super::reference::{self, Dense};
use super::{KernelContext, Tensor, run};

/// Forward tolerance (relative, with an absolute floor of the same size).
pub(super) const FWD_TOL: f64 = 1e-4;
/// Gradient tolerance against finite differences.
pub(super) const GRAD_TOL: f64 = 2e-3;

/// The context the tests run under: training mode, a fixed dropout seed.
pub(super) fn ctx() -> KernelContext<'static> {
    KernelContext { seed: 0x5eed, ..KernelContext::default() }
}

/// A random f32 tensor in `[-1, 1)`.
pub(super) fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::random(&TensorFact::f32(shape), seed).unwrap()
}

/// Random parameters for `op` over `inputs` (variances positive).
pub(super) fn params_for(op: &Op, inputs: &[Tensor], seed: u64) -> Vec<Tensor> {
    let facts: Vec<TensorFact> = inputs.iter().map(Tensor::fact).collect();
    let refs: Vec<&TensorFact> = facts.iter().collect();
    op.param_specs(&refs)
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let t = Tensor::random(&spec.fact, seed * 31 + i as u64).unwrap();
            if spec.suffix == "running_var" { positive(t) } else { t }
        })
        .collect()
}

/// `|x| + 0.5` elementwise.
pub(super) fn positive(t: Tensor) -> Tensor {
    let v = t.as_f32().unwrap().iter().map(|x| x.abs() + 0.5).collect();
    Tensor::from_f32(t.shape(), v).unwrap()
}

/// Runs the optimised kernel.
pub(super) fn run_op(
    op: &Op,
    inputs: &[Tensor],
    params: &[Tensor],
    ctx: &KernelContext,
) -> Vec<Tensor> {
    let (i, p): (Vec<&Tensor>, Vec<&Tensor>) = (inputs.iter().collect(), params.iter().collect());
    run(op, &i, &p, &mut [], ctx).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the reference forward.
pub(super) fn run_ref(
    op: &Op,
    inputs: &[Tensor],
    params: &[Tensor],
    ctx: &KernelContext,
) -> Vec<Dense> {
    let i: Vec<Dense> = inputs.iter().map(Dense::from_tensor).collect();
    let p: Vec<Dense> = params.iter().map(Dense::from_tensor).collect();
    reference::forward(op, &i, &p, ctx)
}

/// Whether `got` is within `tol` of `want` (equal infinities match).
pub(super) fn close(got: f64, want: f64, tol: f64) -> bool {
    got == want || (got - want).abs() <= tol * (1.0 + want.abs())
}

/// Asserts that every element of `got` is close to `want`.
pub(super) fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close(f64::from(g), w, tol), "{what}: element {i}: got {g}, want {w}");
    }
}

/// Compares the optimised kernel with the reference on one instance.
pub(super) fn check_forward(op: &Op, inputs: &[Tensor], params: &[Tensor]) {
    let ctx = ctx();
    let got = run_op(op, inputs, params, &ctx);
    let want = run_ref(op, inputs, params, &ctx);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), w.shape.as_slice(), "{op:?}");
        assert_eq!(g.dtype(), w.dtype, "{op:?}");
        let what = format!("{op:?} on {:?}", inputs.iter().map(Tensor::shape).collect::<Vec<_>>());
        match g.as_f32() {
            Some(v) => assert_close(v, &w.data, FWD_TOL, &what),
            None => assert_eq!(Dense::from_tensor(g).data, w.data, "{what}"),
        }
    }
}
