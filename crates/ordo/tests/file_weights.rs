//! An imported model runs from the file's weights: the runner starts from the values read
//! from the file, and its first step computes bitwise what the sequential reference computes
//! from a state built by hand from those values, on one device and on two.

use std::sync::Arc;

use ordo::{EngineOptions, Model, Placer, Problem, Size, StepMode, Strategy, Target};
use ordo_exec::{RunSettings, TrainState, sequential};

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ordo-onnx/tests/fixtures")
        .join(format!("{name}.onnx"))
}

#[test]
fn an_imported_model_starts_from_the_files_weights() {
    let model = Model::onnx(fixture("convnet"), Size::default()).unwrap();
    let weights = model.file_weights().unwrap().expect("an import has a file");
    let graph = model.graph().unwrap().clone();
    let values: Vec<_> = graph.params.iter().map(|p| Arc::new(weights[&p.name].clone())).collect();
    for devices in [1, 2] {
        let target = Target::uniform(devices, u64::MAX).unwrap();
        let problem = Problem::new(&model, &target, StepMode::ForwardOnly).unwrap();
        let placer: Placer = "m-etf".parse().unwrap();
        let strategy = Strategy::Placed { placer, order: Default::default() };
        let planned = ordo::plan(&problem, &strategy).unwrap();
        let mut runner = ordo::Runner::new(&problem, &planned, EngineOptions::default()).unwrap();
        assert_eq!(runner.parameters_from_file(), Some((13, 13)));
        assert_eq!(runner.parameters(), &values[..], "{devices} devices");

        let program = runner.program().clone();
        let slots = program.initial_state().unwrap();
        let mut state = TrainState { params: values.clone(), slots, step: 0 };
        let feeds = runner.feeds()[0].clone();
        let want = sequential::run_step(&program, &mut state, &feeds, &RunSettings::default());
        let got = runner.step().unwrap();
        assert_eq!(got.run.outputs[0], want.unwrap(), "{devices} devices");
    }
    // A zoo model has no file: every parameter is seeded.
    let zoo = Model::zoo("resnet50", Size::small()).unwrap();
    assert!(zoo.file_weights().unwrap().is_none());
}
