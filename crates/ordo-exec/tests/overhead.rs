//! Benchmark (ignored; run with `cargo test --release -p ordo-exec --test overhead --
//! --ignored --nocapture`): the engine's own cost per task, with empty kernels, on the
//! training graph of a random 2,000-layer model, on 1 to 4 devices with 1 or 2 workers each.

mod common;

use common::*;
use ordo_exec::{EngineOptions, Executable, Program, Sync, TrainState, synthetic_feeds};
use ordo_ir::op::Optimizer;
use ordo_sched::build_plan;

#[test]
#[ignore = "benchmark"]
fn runtime_overhead_per_task_with_empty_kernels() {
    let graph = training(&random_forward(2000, 1), Optimizer::Sgd);
    let program = Program::new(graph.clone()).unwrap();
    let feeds = synthetic_feeds(&graph, 1).unwrap();
    println!("devices workers sync        tasks  median step ms  per task us");
    for devices in [1, 2, 4] {
        let plan =
            build_plan(&problem(&graph, devices), &random_placement(graph.nodes.len(), devices, 3))
                .unwrap();
        for workers in [1, 2] {
            for sync in [Sync::Events, Sync::DeviceWait] {
                let options = EngineOptions {
                    sync,
                    workers_per_device: workers,
                    empty_kernels: true,
                    ..Default::default()
                };
                let exe = Executable::new(program.clone(), &plan, options).unwrap();
                let mut state = TrainState::new(&program, 1).unwrap();
                let mut walls: Vec<f64> = (0..15)
                    .map(|_| {
                        exe.run_step(&mut state, std::slice::from_ref(&feeds)).unwrap().wall_us
                    })
                    .collect();
                walls.sort_by(f64::total_cmp);
                let median = walls[walls.len() / 2];
                println!(
                    "{devices:>7} {workers:>7} {:<11} {:>6} {:>15.3} {:>12.3}",
                    format!("{sync:?}"),
                    plan.tasks.len(),
                    median / 1e3,
                    median / plan.tasks.len() as f64
                );
            }
        }
    }
}
