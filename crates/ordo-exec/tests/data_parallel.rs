//! Data-parallel plans: every device runs a replica, all-reduces sum the gradients in place.
//! With N a power of two, identical shards and the backward seed scaled by 1/N, each replica's
//! gradients are exactly 1/N of the whole batch's and their sum is exact, so N replicas must
//! give bitwise the single-device sequential result.

mod common;

use common::*;
use ordo_cost::CommModel;
use ordo_exec::{
    EngineOptions, Executable, Program, Sync, TrainState, scale_backward_seed, synthetic_feeds,
};
use ordo_ir::op::Optimizer;
use ordo_sched::{DataParallel, OneDeviceSchedule, data_parallel_plan, data_parallel_replica_plan};

fn run(
    replicas: usize,
    bucket_bytes: u64,
    first_k: usize,
    schedule: OneDeviceSchedule,
    sync: Sync,
) {
    let graph = training(&random_forward(14, 21), Optimizer::Adam);
    let program = Program::new(graph.clone()).unwrap();
    let feeds = synthetic_feeds(&graph, 3).unwrap();
    let (want, want_state) = reference(&program, &feeds, 3);

    let mut scaled = graph.clone();
    scale_backward_seed(&mut scaled, 1.0 / replicas as f64);
    let config = DataParallel {
        replicas,
        network: CommModel::baechi_default().into(),
        bucket_bytes,
        first_k,
        schedule,
    };
    let plan = data_parallel_plan(&problem(&graph, replicas), &config, 1).unwrap();
    assert!(plan.tasks.iter().any(|t| matches!(t.kind, ordo_sched::TaskKind::AllReduce { .. })));
    let options =
        EngineOptions { sync, workers_per_device: 2, settings: settings(), ..Default::default() };
    let exe = Executable::new(Program::new(scaled).unwrap(), &plan, options).unwrap();
    assert_eq!(exe.replicas(), replicas);
    let mut state = TrainState::new(&program, 5).unwrap();
    for want in &want {
        let run = exe.run_step(&mut state, &vec![feeds.clone(); replicas]).unwrap();
        for replica in &run.outputs {
            // The loss of each replica is the loss of its shard: here the whole batch.
            assert_eq!(replica.loss(), want.loss());
        }
    }
    let params = |s: &TrainState| s.params.iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    assert!(bitwise(&params(&state), &params(&want_state)), "{replicas} replicas differ");
}

#[test]
fn replicas_with_all_reduce_match_one_device() {
    run(2, 0, 0, OneDeviceSchedule::InOrder, Sync::Events);
    run(4, 0, 0, OneDeviceSchedule::Ooo, Sync::Events);
    run(2, 256, 0, OneDeviceSchedule::Ooo, Sync::DeviceWait);
    run(4, 1 << 20, 0, OneDeviceSchedule::InOrder, Sync::DeviceWait);
}

#[test]
fn the_wrong_number_of_feed_sets_is_an_error() {
    let graph = training(&random_forward(4, 2), Optimizer::Sgd);
    let config = DataParallel {
        replicas: 2,
        network: CommModel::baechi_default().into(),
        bucket_bytes: 0,
        first_k: 0,
        schedule: OneDeviceSchedule::InOrder,
    };
    let plan = data_parallel_plan(&problem(&graph, 2), &config, 1).unwrap();
    let program = Program::new(graph.clone()).unwrap();
    let exe = Executable::new(program.clone(), &plan, EngineOptions::default()).unwrap();
    let mut state = TrainState::new(&program, 1).unwrap();
    let feeds = synthetic_feeds(&graph, 3).unwrap();
    let err = exe.run_step(&mut state, &[feeds]).unwrap_err();
    assert!(err.to_string().contains("2 replica"), "{err}");
}

#[test]
fn a_plan_simulated_by_symmetry_is_refused() {
    let graph = training(&random_forward(4, 2), Optimizer::Sgd);
    let config = DataParallel {
        replicas: 4,
        network: CommModel::baechi_default().into(),
        bucket_bytes: 0,
        first_k: 0,
        schedule: OneDeviceSchedule::InOrder,
    };
    let plan = data_parallel_replica_plan(&problem(&graph, 4), &config, 1).unwrap();
    let made = Executable::new(Program::new(graph).unwrap(), &plan, EngineOptions::default());
    let Err(err) = made else { panic!("a plan of one replica for four was accepted") };
    let err = err.to_string();
    assert!(err.contains("stands for 4 replicas") && err.contains("every replica"), "{err}");
}
