//! The gradients of ONNX operators that ordo writes as many IR ops (`Det`, `RoiAlign`,
//! `DeformConv`), checked against central finite differences of the loss. The gradient the
//! training graph computes is read from one plain SGD step of learning rate 1 (the update is
//! the gradient); the loss at a parameter moved by +-eps comes from the same graph's forward.

use std::path::PathBuf;
use std::sync::Arc;

use ordo_exec::cpu::Hyper;
use ordo_exec::sequential::run_step;
use ordo_exec::{Program, RunSettings, TrainState, synthetic_feeds};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ordo-onnx/tests/fixtures").join(name)
}

/// Compares, for up to `elements` elements of each parameter in `params`, the training
/// graph's gradient of `file`'s loss with a central difference of step `eps`.
fn gradients_match_finite_differences(file: &str, params: &[&str], eps: f32, elements: usize) {
    let forward = ordo::Model::onnx(fixture(file), ordo::Size::default()).expect("imports");
    let model = forward.training(ordo::Optimizer::Sgd, None).expect("a training graph");
    let weights = model.file_weights().expect("reads").expect("an import");
    let program = Program::new(model.graph().expect("a graph").clone()).expect("runs");
    let mut state = TrainState::new(&program, 0).expect("a state");
    let graph_params = &program.graph().params;
    for (p, param) in graph_params.iter().enumerate() {
        if let Some(value) = weights.get(&param.name) {
            state.params[p] = Arc::new(value.clone());
        }
    }
    let feeds = synthetic_feeds(program.graph(), 1).expect("feeds");
    let settings = RunSettings {
        hyper: Hyper { lr: 1.0, ..Hyper::default() },
        training: true,
        ..RunSettings::default()
    };
    let loss_at = |state: &TrainState| -> f64 {
        let out = run_step(&program, &mut state.clone(), &feeds, &settings).expect("a step");
        f64::from(out.loss().expect("a loss"))
    };
    let mut stepped = state.clone();
    run_step(&program, &mut stepped, &feeds, &settings).expect("a step");
    for name in params {
        let p = graph_params.iter().position(|q| q.name == *name).expect("the parameter");
        let before = state.params[p].as_f32().expect("f32").to_vec();
        let after = stepped.params[p].as_f32().expect("f32").to_vec();
        let stride = (before.len() / elements).max(1);
        for i in (0..before.len()).step_by(stride).take(elements) {
            let computed = f64::from(before[i] - after[i]);
            let moved = |delta: f32| {
                let mut s = state.clone();
                let mut values = before.clone();
                values[i] += delta;
                s.params[p] = Arc::new(
                    ordo_exec::cpu::Tensor::from_f32(&graph_params[p].fact.shape, values)
                        .expect("a tensor"),
                );
                loss_at(&s)
            };
            let numeric = (moved(eps) - moved(-eps)) / (2.0 * f64::from(eps));
            let tolerance = 2e-2 * numeric.abs().max(computed.abs()) + 1e-5;
            assert!(
                (computed - numeric).abs() <= tolerance,
                "{file}: d loss / d {name}[{i}] = {computed} computed, {numeric} by finite \
                 differences"
            );
        }
    }
}

#[test]
fn det_gradients_match_finite_differences() {
    gradients_match_finite_differences("det_train.onnx", &["w"], 1e-2, 9);
}

#[test]
fn roi_align_gradients_match_finite_differences() {
    gradients_match_finite_differences("roi_align_train.onnx", &["w", "b"], 1e-2, 8);
}

#[test]
fn deform_conv_gradients_match_finite_differences() {
    // The weight and bias enter linearly, the mask through a sigmoid; the offsets move the
    // sample points, whose interpolation has kinks at whole elements: a small step.
    gradients_match_finite_differences("deform_conv_train.onnx", &["w", "b", "mask_w"], 1e-2, 8);
    gradients_match_finite_differences("deform_conv_train.onnx", &["offset_w"], 1e-3, 8);
}
