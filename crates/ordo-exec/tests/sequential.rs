//! The sequential reference trains: the loss of a fixed batch falls step after step, and a
//! failing kernel leaves the state as it was.

use ordo_exec::sequential::run_step;
use ordo_exec::{ExecError, Program, RunSettings, TrainState, synthetic_feeds};
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;

fn mlp_program() -> Program {
    let (forward, loss) = ordo_ir::samples::mlp();
    Program::new(training_graph(&forward, loss, Optimizer::SgdMomentum).unwrap()).unwrap()
}

#[test]
fn the_loss_of_a_fixed_batch_falls() {
    let program = mlp_program();
    let mut state = TrainState::new(&program, 1).unwrap();
    let feeds = synthetic_feeds(program.graph(), 2).unwrap();
    let settings = RunSettings {
        hyper: ordo_exec::cpu::Hyper { lr: 0.1, ..Default::default() },
        ..Default::default()
    };
    let losses: Vec<f32> = (0..20)
        .map(|_| run_step(&program, &mut state, &feeds, &settings).unwrap().loss().unwrap())
        .collect();
    assert_eq!(state.step, 20);
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[19] < 0.7 * losses[0], "{losses:?}");
}

#[test]
fn a_bad_feed_is_named_and_changes_nothing() {
    let program = mlp_program();
    let mut state = TrainState::new(&program, 1).unwrap();
    let mut feeds = synthetic_feeds(program.graph(), 2).unwrap();
    let before = state.params.clone();
    feeds.remove("labels");
    let err = run_step(&program, &mut state, &feeds, &RunSettings::default()).unwrap_err();
    assert!(matches!(&err, ExecError::Feed { name, .. } if name == "labels"), "{err}");
    // Labels out of range make the loss kernel fail.
    let mut feeds = synthetic_feeds(program.graph(), 2).unwrap();
    feeds
        .insert("labels".into(), ordo_exec::cpu::Tensor::from_i64(&[4], vec![0, 1, 2, 9]).unwrap());
    let err = run_step(&program, &mut state, &feeds, &RunSettings::default()).unwrap_err();
    assert!(matches!(&err, ExecError::Kernel { node, .. } if node == "loss"), "{err}");
    assert_eq!(state.step, 0);
    assert_eq!(state.params, before);
}
