//! Data parallel with reverse first-k and gradient buckets runs: whatever the order of the
//! weight-gradient work, the grouping of the all-reduces, and whether the deferred updates are
//! applied at the end of the step or in the next step's forward pass (several steps in one
//! plan), the losses, parameters and optimizer state are bitwise those of the default order.

use ordo::{
    CommModel, DataParallel, EngineOptions, Model, OneDeviceSchedule, Optimizer, Problem, Runner,
    Size, StepMode, Strategy, Target,
};

const STEPS: usize = 3;

/// Losses, parameters and optimizer state after `STEPS` training steps of `config` on
/// `problem`, `steps` of them in each plan.
fn train(problem: &Problem, config: DataParallel, steps: usize) -> (Vec<f32>, ordo::TrainState) {
    let planned = ordo::plan(problem, &Strategy::DataParallel { config, steps }).expect("plan");
    let options = EngineOptions { workers_per_device: 2, ..EngineOptions::default() };
    let mut runner = Runner::new(problem, &planned, options).expect("runner");
    let losses = (0..STEPS / steps).flat_map(|_| runner.step().expect("step").losses).collect();
    (losses, runner.state().clone())
}

#[test]
fn reverse_first_k_and_buckets_train_bitwise_as_the_default_order() {
    for name in ["resnet50", "bert_base"] {
        let model = Model::zoo(name, Size::small()).expect("zoo model");
        let training = model.training(Optimizer::Adam, None).expect("training graph");
        let target = Target::uniform(1, u64::MAX).expect("device");
        let problem = Problem::new(&training, &target, StepMode::TrainingGraph).expect("problem");
        let layers = ordo_sched::layers_with_weights(&problem.place).len();
        let base = DataParallel {
            replicas: 3,
            network: CommModel::baechi_default().into(),
            bucket_bytes: 0,
            first_k: 0,
            schedule: OneDeviceSchedule::InOrder,
        };
        let (want_losses, want) = train(&problem, base, 1);
        assert!(want_losses.iter().all(|l| l.is_finite()), "{name}: {want_losses:?}");
        for first_k in [1, layers / 2, layers] {
            for bucket_bytes in [0, 16 << 10, 1 << 30] {
                for (schedule, steps) in [
                    (OneDeviceSchedule::InOrder, 1),
                    (OneDeviceSchedule::Ooo, 1),
                    (OneDeviceSchedule::InOrder, STEPS),
                ] {
                    let config = DataParallel { first_k, bucket_bytes, schedule, ..base };
                    let label = format!("{name}: {config:?}, {steps} steps a plan");
                    let (losses, state) = train(&problem, config, steps);
                    assert_eq!(losses, want_losses, "{label}");
                    for (p, (got, want)) in state.params.iter().zip(&want.params).enumerate() {
                        assert_eq!(got.as_f32(), want.as_f32(), "{label}: parameter {p}");
                    }
                    // An unrolled plan's state keeps each update's at its step-0 copy.
                    let slots = &state.slots[..want.slots.len()];
                    assert_eq!(slots, &want.slots[..], "{label}: optimizer state");
                }
            }
        }
    }
}

/// The steady-state comparison: reverse first-k with k = 0 is the default order, the search
/// never does worse than the default, and nonsensical networks are refused by name.
#[test]
fn the_steady_state_comparison_is_consistent_and_refuses_bad_networks() {
    let model = Model::zoo("bert_base", Size::small()).expect("zoo model");
    let training = model.training(Optimizer::SgdMomentum, None).expect("training graph");
    let cpu = ordo::cluster("cpu").expect("cpu cluster");
    let target = Target::uniform(1, u64::MAX).expect("device").costed_by(cpu);
    let problem = Problem::new(&training, &target, StepMode::TrainingGraph).expect("problem");
    let config = DataParallel {
        replicas: 4,
        network: ordo::network(10.0, 25.0).expect("10 Gb/s").into(),
        bucket_bytes: 0,
        first_k: 0,
        schedule: OneDeviceSchedule::InOrder,
    };
    let options = ordo::SimOptions::default();
    let fixed = ordo::data_parallel_steady(&problem, &config, ordo::FirstK::Fixed(0), &options)
        .expect("k = 0");
    assert_eq!(fixed.chosen.step_time_us, fixed.default.step_time_us);
    let auto = ordo::FirstK::Auto { max_tries: 16 };
    let searched = ordo::data_parallel_steady(&problem, &config, auto, &options).expect("search");
    assert!(searched.chosen.step_time_us <= searched.default.step_time_us);
    assert_eq!(searched.config.first_k, searched.search.as_ref().unwrap().deferred.len());
    assert!(searched.single.step_time_us <= searched.default.step_time_us);
    for (gbps, latency, culprit) in [
        (0.0, 25.0, "network_gbps=0:"),
        (f64::NAN, 1.0, "network_gbps=NaN:"),
        (10.0, -1.0, "latency_us=-1:"),
    ] {
        let err = ordo::network(gbps, latency).unwrap_err().to_string();
        assert!(err.contains(culprit), "{err}");
    }
    let none = DataParallel { replicas: 0, ..config };
    let err = ordo::data_parallel_steady(&problem, &none, auto, &options).unwrap_err();
    assert!(matches!(&err, ordo::Error::Parameter(p) if p.parameter == ordo::Parameter::Replicas));
    assert!(err.to_string().contains("replicas=0: data parallelism needs"), "{err}");
}
