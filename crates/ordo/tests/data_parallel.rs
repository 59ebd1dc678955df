//! Data parallel with reverse first-k and gradient buckets runs: whatever the order of the
//! weight-gradient work and the grouping of the all-reduces, the losses, parameters and
//! optimizer state are bitwise those of the default order.

use ordo::{
    CommModel, DataParallel, EngineOptions, Model, OneDeviceSchedule, Optimizer, Problem, Runner,
    Size, StepMode, Strategy, Target,
};

const STEPS: usize = 3;

/// Losses, parameters and optimizer state after `STEPS` steps of `config` on `problem`.
fn train(problem: &Problem, config: DataParallel) -> (Vec<f32>, ordo::TrainState) {
    let planned = ordo::plan(problem, &Strategy::DataParallel(config)).expect("plan");
    let options = EngineOptions { workers_per_device: 2, ..EngineOptions::default() };
    let mut runner = Runner::new(problem, &planned, options).expect("runner");
    let losses = (0..STEPS).map(|_| runner.step().expect("step").loss).collect();
    (losses, runner.state().clone())
}

#[test]
fn reverse_first_k_and_buckets_train_bitwise_as_the_default_order() {
    for name in ["resnet50", "bert_base"] {
        let model = Model::zoo(name, Size::small()).expect("zoo model");
        let training = model.training(Optimizer::Adam, None).expect("training graph");
        let target = Target::uniform(1, u64::MAX).expect("device");
        let problem = Problem::new(&training, &target, StepMode::TrainingGraph).expect("problem");
        let layers = ordo::stages::sched::layers_with_weights(&problem.place).len();
        let base = DataParallel {
            replicas: 3,
            network: CommModel::baechi_default(),
            bucket_bytes: 0,
            first_k: 0,
            schedule: OneDeviceSchedule::InOrder,
        };
        let (want_losses, want) = train(&problem, base);
        assert!(want_losses.iter().all(|l| l.is_finite()), "{name}: {want_losses:?}");
        for first_k in [1, layers / 2, layers] {
            for bucket_bytes in [0, 16 << 10, 1 << 30] {
                for schedule in [OneDeviceSchedule::InOrder, OneDeviceSchedule::Ooo] {
                    let config = DataParallel { first_k, bucket_bytes, schedule, ..base };
                    let label = format!("{name}: {config:?}");
                    let (losses, state) = train(&problem, config);
                    assert_eq!(losses, want_losses, "{label}");
                    for (p, (got, want)) in state.params.iter().zip(&want.params).enumerate() {
                        assert_eq!(got.as_f32(), want.as_f32(), "{label}: parameter {p}");
                    }
                    assert_eq!(state.slots, want.slots, "{label}: optimizer state");
                }
            }
        }
    }
}
