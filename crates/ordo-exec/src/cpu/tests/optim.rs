//! Optimizer steps against hand-worked examples.

use ordo_ir::Op;
use ordo_ir::op::{Optimizer, Update};

use super::super::{Hyper, KernelContext, Tensor, init_state, run};

fn step(opt: Optimizer, p: &[f32], g: &[f32], state: &mut [Tensor], step: u64) -> Vec<f32> {
    let hyper = Hyper { lr: 0.1, ..Hyper::default() };
    let ctx = KernelContext { step, hyper, ..KernelContext::default() };
    let (p, g) = (
        Tensor::from_f32(&[p.len()], p.to_vec()).unwrap(),
        Tensor::from_f32(&[g.len()], g.to_vec()).unwrap(),
    );
    let op = Op::Update(Update { optimizer: opt });
    run(&op, &[&g], &[&p], state, &ctx).unwrap().remove(0).as_f32().unwrap().to_vec()
}

fn assert_near(got: &[f32], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!((f64::from(*g) - w).abs() < 1e-6, "got {got:?}, want {want:?}");
    }
}

#[test]
fn sgd() {
    assert!(init_state(Optimizer::Sgd, &ordo_ir::TensorFact::f32([3])).unwrap().is_empty());
    let p = step(Optimizer::Sgd, &[1.0, -2.0, 0.5], &[0.5, -1.0, 0.0], &mut [], 1);
    assert_near(&p, &[0.95, -1.9, 0.5]);
}

#[test]
fn sgd_with_momentum() {
    let mut state = init_state(Optimizer::SgdMomentum, &ordo_ir::TensorFact::f32([3])).unwrap();
    // v = g; p -= 0.1 v.
    let p = step(Optimizer::SgdMomentum, &[1.0, -2.0, 0.5], &[0.5, -1.0, 0.0], &mut state, 1);
    assert_near(&p, &[0.95, -1.9, 0.5]);
    // v = 0.9 v + g = [1.45, -0.9, -0.5]; p -= 0.1 v.
    let p = step(Optimizer::SgdMomentum, &p, &[1.0, 0.0, -0.5], &mut state, 2);
    assert_near(&p, &[0.805, -1.81, 0.55]);
    assert_near(state[0].as_f32().unwrap(), &[1.45, -0.9, -0.5]);
}

#[test]
fn adam() {
    let mut state = init_state(Optimizer::Adam, &ordo_ir::TensorFact::f32([2])).unwrap();
    // Step 1: m = 0.1 g, v = 0.001 g^2; bias-corrected m / sqrt(v) = sign(g): p -= 0.1 sign(g).
    let p = step(Optimizer::Adam, &[1.0, -2.0], &[0.5, -1.0], &mut state, 1);
    assert_near(&p, &[0.9, -1.9]);
    // Step 2: m = [0.07, 0.01], v = [0.00031225, 0.001999], corrections 0.19 and 0.001999.
    let p = step(Optimizer::Adam, &p, &[0.25, 1.0], &mut state, 2);
    assert_near(&p, &[0.806_782_040_5, -1.905_263_158_8]);
    assert_near(state[0].as_f32().unwrap(), &[0.07, 0.01]);
    assert_near(state[1].as_f32().unwrap(), &[0.000_312_25, 0.001_999]);
}
