//! Benchmarks (ignored; `cargo test --release -p ordo-exec --test speedups -- --ignored
//! --nocapture --test-threads=1`, one benchmark at a time): measured step times of plans side by side in one run, steps interleaved so
//! that the machine's noise hits both alike, medians of 21 steps.
//!
//! * a branchy model (Inception-V3 small) placed by m-ETF on 2 CPU devices vs 1 device;
//! * `ooo` vs `inorder` on one device with two worker threads (DenseNet-121 and
//!   MobileNet-V3 small).

mod common;

use common::*;
use ordo_cost::StepMode;
use ordo_exec::{
    EngineOptions, Executable, ProfileMode, ProfileOptions, Program, TrainState, synthetic_feeds,
};
use ordo_ir::op::Optimizer;
use ordo_models::Variant;
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{OneDeviceSchedule, Plan, build_plan, one_device_plan};

const STEPS: usize = 21;

/// Median step time in ms of each plan, steps interleaved.
fn side_by_side(program: &Program, plans: &[(&str, Plan, usize)]) -> Vec<f64> {
    // As `ordo` does; without it, page faults of fresh pages dominate and serialise workers.
    ordo_exec::keep_freed_memory();
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let exes: Vec<Executable> = plans
        .iter()
        .map(|(_, plan, workers)| {
            let options = EngineOptions { workers_per_device: *workers, ..Default::default() };
            Executable::new(program.clone(), plan, options).unwrap()
        })
        .collect();
    let mut states: Vec<TrainState> =
        exes.iter().map(|_| TrainState::new(program, 1).unwrap()).collect();
    let mut times = vec![Vec::new(); exes.len()];
    for _ in 0..STEPS {
        for (i, exe) in exes.iter().enumerate() {
            let run = exe.run_step(&mut states[i], std::slice::from_ref(&feeds)).unwrap();
            times[i].push(run.wall_us / 1e3);
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}

fn small_training(name: &str, batch: usize) -> (ordo_ir::Graph, Program) {
    let forward = ordo_models::build_variant(name, Variant::Small, Some(batch), None).unwrap();
    let graph = training(&forward, Optimizer::SgdMomentum);
    (graph.clone(), Program::new(graph).unwrap())
}

/// The placement problem of `program`'s graph on `devices` CPU devices, costed as `ordo
/// profile` would: node times measured in the runtime, transfers by the measured link.
fn profiled_problem(program: &Program, devices: usize) -> PlaceProblem {
    let state = TrainState::new(program, 1).unwrap();
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let options = ProfileOptions { mode: ProfileMode::Runtime, ..Default::default() };
    let measured =
        ordo_exec::profile(program, &state, &feeds, &options, Default::default()).unwrap().nodes;
    let mut cost = ordo_cost::costgraph_from_graph(program.graph());
    for (node, m) in cost.nodes.iter_mut().zip(&measured) {
        node.weight = (m.time_us.ceil() as u64).max(1);
    }
    let comm = ordo_exec::measure_link(11).unwrap();
    let devices = Devices { memory: vec![u64::MAX; devices], comm };
    PlaceProblem::new(&cost, devices, StepMode::TrainingGraph).unwrap()
}

#[test]
#[ignore = "benchmark"]
fn branchy_model_on_two_devices_vs_one() {
    for batch in [2, 8] {
        let (graph, program) = small_training("inception_v3", batch);
        let one =
            build_plan(&problem(&graph, 1), &random_placement(graph.nodes.len(), 1, 0)).unwrap();
        let p2 = profiled_problem(&program, 2);
        let etf = ordo_place::place(&p2, ordo_place::Algorithm::MEtf, &Default::default()).unwrap();
        let two = build_plan(&p2, &etf).unwrap();
        let t = side_by_side(&program, &[("1 device", one, 1), ("m-etf 2 devices", two, 1)]);
        println!(
            "inception_v3 small batch {batch}: 1 device {:.2} ms, m-ETF on 2 devices {:.2} ms \
             (predicted {:.2} ms), speedup {:.2}x",
            t[0],
            t[1],
            etf.makespan_us as f64 / 1e3,
            t[0] / t[1]
        );
    }
}

#[test]
#[ignore = "benchmark"]
fn ooo_vs_inorder_with_two_workers() {
    for (name, batch) in [
        ("densenet121", 2),
        ("densenet121", 8),
        ("mobilenet_v3_large", 2),
        ("mobilenet_v3_large", 8),
    ] {
        let (graph, program) = small_training(name, batch);
        let p = problem(&graph, 1);
        let inorder = one_device_plan(&p, OneDeviceSchedule::InOrder).unwrap();
        let ooo = one_device_plan(&p, OneDeviceSchedule::Ooo).unwrap();
        let t = side_by_side(&program, &[("inorder", inorder, 2), ("ooo", ooo, 2)]);
        println!(
            "{name} small batch {batch}, 2 workers: inorder {:.2} ms, ooo {:.2} ms, speedup {:.2}x",
            t[0],
            t[1],
            t[0] / t[1]
        );
    }
}
