//! 1,000 runs of random graphs, placements, schedules, synchronisations and worker counts,
//! some of them with a kernel that fails mid-step: every run ends (a watchdog fails the test
//! if one takes more than 20 seconds), with the reference's result or with the failure.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use ordo_cost::CommModel;
use ordo_exec::{
    EngineOptions, Executable, Program, Sync, TrainState, scale_backward_seed, synthetic_feeds,
};
use ordo_ir::op::Optimizer;
use ordo_sched::{
    DataParallel, OneDeviceSchedule, build_plan, data_parallel_plan, one_device_plan,
};

/// Run `i`: whether it was fed labels out of range (and so failed, naming the loss).
fn one_run(i: u64) -> bool {
    let mut rng = fastrand::Rng::with_seed(i);
    let graph = training(&random_forward(rng.usize(1..8), i), Optimizer::SgdMomentum);
    let devices = rng.usize(1..4);
    let mut program_graph = graph.clone();
    let plan = match rng.u8(0..4) {
        0 | 1 => {
            build_plan(&problem(&graph, devices), &random_placement(graph.nodes.len(), devices, i))
        }
        2 => {
            let schedule =
                if rng.bool() { OneDeviceSchedule::Ooo } else { OneDeviceSchedule::InOrder };
            one_device_plan(&problem(&graph, 1), schedule)
        }
        _ => {
            let replicas = 2;
            scale_backward_seed(&mut program_graph, 0.5);
            let config = DataParallel {
                replicas,
                network: CommModel::baechi_default().into(),
                bucket_bytes: rng.u64(0..512),
                first_k: 0,
                schedule: OneDeviceSchedule::Ooo,
            };
            data_parallel_plan(&problem(&graph, replicas), &config, 1)
        }
    }
    .unwrap();
    let sync = if rng.bool() { Sync::Events } else { Sync::DeviceWait };
    let options = EngineOptions { sync, workers_per_device: rng.usize(1..4), ..Default::default() };
    let program = Program::new(program_graph).unwrap();
    let exe = Executable::new(program.clone(), &plan, options).unwrap();
    let mut feeds = synthetic_feeds(&graph, i).unwrap();
    let bad = rng.u8(0..5) == 0;
    if bad {
        feeds.insert(
            "labels".into(),
            ordo_exec::cpu::Tensor::from_i64(&[3], vec![0, 7, 1]).unwrap(),
        );
    }
    let mut state = TrainState::new(&program, i).unwrap();
    let result = exe.run_step(&mut state, &vec![feeds; exe.replicas()]);
    if let Err(e) = &result {
        assert!(bad && e.to_string().contains("loss"), "run {i} failed: {e}");
    }
    assert_eq!(result.is_err(), bad, "run {i}");
    bad
}

#[test]
fn a_thousand_random_runs_all_end() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..1000 {
            let failed = one_run(i);
            if tx.send((i, failed)).is_err() {
                return;
            }
        }
    });
    let mut failures = 0;
    for expected in 0..1000 {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok((i, failed)) => {
                assert_eq!(i, expected);
                failures += usize::from(failed);
            }
            Err(e) => panic!("run {expected} did not end within 20 s ({e}): a deadlock?"),
        }
    }
    // About a fifth of the runs were fed bad labels, and each of those failed cleanly.
    assert!(failures > 100, "{failures} runs failed as they should");
}
