//! The steady state runs: several training steps as one plan, out-of-order backprop deferring
//! the weight-gradient work of the first layers into the next step's forward pass, give
//! bitwise the losses, parameters and optimizer state of running the step's own graph that
//! many times one after the other.

use ordo::{
    EngineOptions, Model, OneDeviceSchedule, Optimizer, Problem, Size, StepMode, Strategy, Target,
};
use ordo_exec::synthetic_feeds;
use ordo_exec::{Executable, Program, RunSettings, TrainState, sequential};

/// Which layers with weights a check defers: the first or the last `k`.
#[derive(Clone, Copy, Debug)]
enum Deferred {
    First(usize),
    Last(usize),
}

fn check(model: &str, optimizer: Optimizer, which: Deferred, steps: usize, runs: usize) {
    let label = format!("{model} {optimizer:?}, {which:?} layers deferred, {steps} steps");
    let training = Model::zoo(model, Size::small()).unwrap().training(optimizer, None).unwrap();
    let target = Target::uniform(1, u64::MAX).unwrap();
    let problem = Problem::new(&training, &target, StepMode::TrainingGraph).unwrap();
    let layers = ordo_sched::layers_with_weights(&problem.place);
    let chosen = match which {
        Deferred::First(k) => &layers[..k.min(layers.len())],
        Deferred::Last(k) => &layers[layers.len().saturating_sub(k)..],
    };
    let deferred = ordo_sched::deferral(&problem.place, chosen);
    let schedule = OneDeviceSchedule::Ooo;
    let planned = ordo::plan(&problem, &Strategy::Steady { schedule, deferred, steps }).unwrap();
    assert_eq!(planned.steps, steps);
    let graph = training.graph().unwrap();
    let program = ordo::program(graph, &planned).expect(&label);
    assert_eq!(program.steps(), steps as u64);

    // The step's own graph, `steps * runs` times one after the other, on the same inputs.
    let settings = RunSettings::default();
    let whole = Program::new(graph.clone()).unwrap();
    let feeds = synthetic_feeds(graph, 11).unwrap();
    let mut expected = TrainState::new(&whole, 0).unwrap();
    let mut expected_losses = Vec::new();
    for _ in 0..steps * runs {
        let out = sequential::run_step(&whole, &mut expected, &feeds, &settings).unwrap();
        expected_losses.push(out.loss().unwrap());
    }

    // Each input's copy in step s (by provenance) gets the batch: every step reads the same.
    let unrolled = ordo_exec::copied_feeds(graph, program.graph(), program.provenance(), &feeds);
    assert_eq!(unrolled.len(), steps * feeds.len());
    let options = EngineOptions { workers_per_device: 2, ..EngineOptions::default() };
    let exe = Executable::new(program.clone(), &planned.plan, options).expect(&label);
    let mut state = TrainState::new(&program, 0).unwrap();
    let mut losses = Vec::new();
    for _ in 0..runs {
        let run = exe.run_step(&mut state, std::slice::from_ref(&unrolled)).expect(&label);
        let outputs = &run.outputs[0].outputs;
        losses.extend(outputs[..steps].iter().map(|t| t.as_f32().unwrap()[0]));
    }
    assert_eq!(losses, expected_losses, "{label}: losses");
    assert_eq!(state.step, expected.step, "{label}: step count");
    for (p, (got, want)) in state.params.iter().zip(&expected.params).enumerate() {
        assert_eq!(got.as_f32(), want.as_f32(), "{label}: parameter {p}");
    }
    let n = graph.nodes.len();
    assert_eq!(state.slots[..n], expected.slots[..], "{label}: optimizer state");
}

#[test]
fn deferred_weight_gradients_run_bitwise_as_consecutive_steps() {
    check("resnet50", Optimizer::SgdMomentum, Deferred::First(4), 2, 2);
    check("bert_base", Optimizer::Adam, Deferred::First(3), 3, 2);
    check("gnmt", Optimizer::Sgd, Deferred::First(2), 2, 1);
    check("transformer", Optimizer::Adam, Deferred::First(0), 2, 1);
}

/// A weight shared by two layers (tied embeddings: BERT's decoder, GPT-2's head, GNMT's
/// softmax) has one gradient sum and one update; deferring only the later layer must defer
/// them too, or the kept sum would wait for work moved after it.
#[test]
fn deferring_one_user_of_a_tied_weight_runs_bitwise_as_consecutive_steps() {
    check("bert_base", Optimizer::Adam, Deferred::Last(1), 2, 2);
    check("gpt2_small", Optimizer::SgdMomentum, Deferred::Last(2), 2, 1);
}

/// Every single layer deferred, and every reverse first-k, plans for the models with tied
/// weights (the schedules were once broken for them).
#[test]
fn every_deferral_of_a_model_with_tied_weights_plans() {
    for model in ["bert_base", "gnmt", "gpt2_small"] {
        let training =
            Model::zoo(model, Size::small()).unwrap().training(Optimizer::Adam, None).unwrap();
        let target = Target::uniform(1, u64::MAX).unwrap();
        let problem = Problem::new(&training, &target, StepMode::TrainingGraph).unwrap();
        let layers = ordo_sched::layers_with_weights(&problem.place);
        for &layer in &layers {
            let deferred = ordo_sched::deferral(&problem.place, &[layer]);
            let schedule = OneDeviceSchedule::Ooo;
            let steady = Strategy::Steady { schedule, deferred, steps: 2 };
            let name = &problem.place.names[layer];
            ordo::plan(&problem, &steady).unwrap_or_else(|e| panic!("{model}, {name}: {e}"));
        }
        for first_k in 0..=layers.len() {
            let config = ordo_sched::DataParallel {
                replicas: 2,
                network: problem.place.devices.comm.into(),
                bucket_bytes: 0,
                first_k,
                schedule: OneDeviceSchedule::Ooo,
            };
            ordo_sched::data_parallel_plan(&problem.place, &config, 2)
                .unwrap_or_else(|e| panic!("{model}, first-{first_k}: {e}"));
        }
    }
}
