//! Every zoo model's small variant, run out of order by the engine on several devices (an
//! m-ETF placement on 3 devices with 2 workers each, a random placement on 4 devices, and the
//! `ooo` one-device schedule with 2 workers) gives bitwise the losses, parameters and
//! optimizer state of the sequential reference, over two steps.

mod common;

use common::*;
use ordo_exec::{EngineOptions, Executable, Program, Sync, TrainState, synthetic_feeds};
use ordo_ir::op::Optimizer;
use ordo_models::Variant;
use ordo_sched::{OneDeviceSchedule, Plan, build_plan, one_device_plan};

fn check(name: &str, program: &Program, plan: &Plan, sync: Sync, workers: usize) {
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let (want, want_state) = reference(program, &feeds, 2);
    let options = EngineOptions {
        sync,
        workers_per_device: workers,
        settings: settings(),
        ..Default::default()
    };
    let exe = Executable::new(program.clone(), plan, options).unwrap();
    let mut state = TrainState::new(program, 5).unwrap();
    for want in &want {
        let run = exe.run_step(&mut state, std::slice::from_ref(&feeds)).unwrap();
        assert!(bitwise(&run.outputs[0].outputs, &want.outputs), "{name}: outputs differ");
    }
    let params = |s: &TrainState| s.params.iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    assert!(bitwise(&params(&state), &params(&want_state)), "{name}: parameters differ");
    assert_eq!(state.slots, want_state.slots, "{name}: optimizer state differs");
}

#[test]
fn every_small_zoo_model_runs_out_of_order_as_it_runs_sequentially() {
    for spec in ordo_models::zoo() {
        let forward = ordo_models::build_variant(spec.name, Variant::Small, None, None).unwrap();
        let graph = training(&forward, Optimizer::Adam);
        let program = Program::new(graph.clone()).unwrap();
        let problem3 = problem(&graph, 3);
        let etf =
            ordo_place::place(&problem3, ordo_place::Algorithm::MEtf, &Default::default()).unwrap();
        check(spec.name, &program, &build_plan(&problem3, &etf).unwrap(), Sync::Events, 2);
        let random = random_placement(graph.nodes.len(), 4, 7);
        let plan = build_plan(&problem(&graph, 4), &random).unwrap();
        check(spec.name, &program, &plan, Sync::DeviceWait, 1);
        let ooo = one_device_plan(&problem(&graph, 1), OneDeviceSchedule::Ooo).unwrap();
        check(spec.name, &program, &ooo, Sync::Events, 2);
    }
}
