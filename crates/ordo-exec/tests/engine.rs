//! The engine against the sequential reference: any placement, schedule, synchronisation and
//! number of workers gives bitwise the same losses and parameters, step after step.

mod common;

use common::*;
use ordo_exec::{EngineOptions, ExecError, Executable, Program, Sync, TrainState, synthetic_feeds};
use ordo_ir::op::Optimizer;
use ordo_sched::{OneDeviceSchedule, build_plan, one_device_plan};
use proptest::prelude::*;

const STEPS: usize = 3;

fn options(sync: Sync, workers: usize) -> EngineOptions {
    EngineOptions { sync, workers_per_device: workers, settings: settings(), ..Default::default() }
}

/// Runs `plan` for `STEPS` steps and checks each step's outputs and the final parameters
/// against the sequential reference.
fn same_as_sequential(program: &Program, plan: &ordo_sched::Plan, options: EngineOptions) {
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let (want, want_state) = reference(program, &feeds, STEPS);
    let exe = Executable::new(program.clone(), plan, options).unwrap();
    let mut state = TrainState::new(program, 5).unwrap();
    for (step, want) in want.iter().enumerate() {
        let run = exe.run_step(&mut state, std::slice::from_ref(&feeds)).unwrap();
        assert!(bitwise(&run.outputs[0].outputs, &want.outputs), "step {step} differs");
    }
    let params = |s: &TrainState| s.params.iter().map(|p| (**p).clone()).collect::<Vec<_>>();
    assert!(bitwise(&params(&state), &params(&want_state)), "final parameters differ");
    assert_eq!(state.slots, want_state.slots, "optimizer state differs");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_placements_match_sequential_execution(
        n in 1usize..14,
        seed in 0u64..1_000_000,
        devices in 1usize..4,
        device_wait in any::<bool>(),
        workers in 1usize..3,
        adam in any::<bool>(),
    ) {
        let optimizer = if adam { Optimizer::Adam } else { Optimizer::SgdMomentum };
        let graph = training(&random_forward(n, seed), optimizer);
        let problem = problem(&graph, devices);
        let plan = build_plan(&problem, &random_placement(graph.nodes.len(), devices, seed)).unwrap();
        let sync = if device_wait { Sync::DeviceWait } else { Sync::Events };
        same_as_sequential(&Program::new(graph).unwrap(), &plan, options(sync, workers));
    }
}

#[test]
fn placers_plans_match_sequential_execution() {
    let graph = training(&random_forward(20, 7), Optimizer::Adam);
    let program = Program::new(graph.clone()).unwrap();
    let problem = problem(&graph, 3);
    for algo in ordo_place::Algorithm::all() {
        let placement = ordo_place::place(&problem, *algo, &Default::default()).unwrap();
        let plan = build_plan(&problem, &placement).unwrap();
        same_as_sequential(&program, &plan, options(Sync::Events, 1));
    }
}

#[test]
fn one_device_schedules_match_sequential_execution() {
    let graph = training(&random_forward(16, 3), Optimizer::SgdMomentum);
    let program = Program::new(graph.clone()).unwrap();
    let problem = problem(&graph, 1);
    for schedule in [OneDeviceSchedule::InOrder, OneDeviceSchedule::Ooo] {
        let plan = one_device_plan(&problem, schedule).unwrap();
        for workers in [1, 2] {
            same_as_sequential(&program, &plan, options(Sync::Events, workers));
        }
    }
}

#[test]
fn a_failing_kernel_ends_the_step_with_its_name_and_changes_nothing() {
    let graph = training(&random_forward(10, 1), Optimizer::Adam);
    let program = Program::new(graph.clone()).unwrap();
    let problem = problem(&graph, 2);
    let plan = build_plan(&problem, &random_placement(graph.nodes.len(), 2, 1)).unwrap();
    let exe = Executable::new(program.clone(), &plan, options(Sync::Events, 2)).unwrap();
    let mut state = TrainState::new(&program, 5).unwrap();
    let mut feeds = synthetic_feeds(program.graph(), 3).unwrap();
    // A label past the last class: the loss kernel rejects it mid-step.
    feeds.insert("labels".into(), ordo_exec::cpu::Tensor::from_i64(&[3], vec![0, 1, 99]).unwrap());
    let before = state.clone();
    let err = exe.run_step(&mut state, std::slice::from_ref(&feeds)).unwrap_err();
    assert!(matches!(&err, ExecError::Kernel { node, .. } if node == "loss"), "{err}");
    assert_eq!(state.step, before.step);
    assert_eq!(state.params, before.params);
    // The executable is still usable: a good step runs after the failed one.
    let good = synthetic_feeds(program.graph(), 3).unwrap();
    assert!(exe.run_step(&mut state, &[good]).is_ok());
}

#[test]
fn a_device_over_its_budget_is_named() {
    let graph = training(&random_forward(8, 2), Optimizer::Sgd);
    let program = Program::new(graph.clone()).unwrap();
    let problem = problem(&graph, 2);
    let plan = build_plan(&problem, &random_placement(graph.nodes.len(), 2, 4)).unwrap();
    let budget = plan.persistent_bytes[1] + 64;
    let mut opts = options(Sync::Events, 1);
    opts.memory_budget = vec![None, Some(budget)];
    let exe = Executable::new(program.clone(), &plan, opts).unwrap();
    let mut state = TrainState::new(&program, 5).unwrap();
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let err = exe.run_step(&mut state, &[feeds]).unwrap_err();
    assert!(matches!(err, ExecError::OutOfMemory { device: 1, .. }), "{err}");
}

#[test]
fn peak_memory_stays_within_what_the_plan_says() {
    let graph = training(&random_forward(12, 9), Optimizer::Adam);
    let program = Program::new(graph.clone()).unwrap();
    let problem = problem(&graph, 2);
    let plan = build_plan(&problem, &random_placement(graph.nodes.len(), 2, 9)).unwrap();
    let exe = Executable::new(program.clone(), &plan, options(Sync::Events, 1)).unwrap();
    let mut state = TrainState::new(&program, 5).unwrap();
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    let run = exe.run_step(&mut state, &[feeds]).unwrap();
    // Everything the plan allocates at once is at most all of it; at least what lives all
    // step long.
    for d in 0..2 {
        let all: u64 = plan.buffers.iter().filter(|b| b.device == d).map(|b| b.bytes).sum::<u64>()
            + plan.persistent_bytes[d]
            + plan.tasks.iter().map(|t| t.workspace_bytes).sum::<u64>();
        assert!(run.peak_memory_bytes[d] >= plan.persistent_bytes[d]);
        assert!(run.peak_memory_bytes[d] <= all, "device {d}");
    }
}

#[test]
fn a_plan_for_another_graph_is_rejected_by_name() {
    let graph = training(&random_forward(6, 1), Optimizer::Sgd);
    let other = training(&random_forward(9, 2), Optimizer::Sgd);
    let plan = build_plan(&problem(&other, 1), &random_placement(other.nodes.len(), 1, 0)).unwrap();
    let err =
        Executable::new(Program::new(graph).unwrap(), &plan, EngineOptions::default()).unwrap_err();
    assert!(matches!(err, ExecError::Mismatch(_)), "{err}");
    assert!(err.to_string().contains('`'), "{err}");
}

/// Compute tasks name their node by id, and the runtime binds them by it: a plan without
/// ids (written before they were recorded), or whose ids point at other nodes (a plan of a
/// graph numbered otherwise), is refused, naming the task, rather than joined by names.
#[test]
fn plans_bind_by_id_and_refuse_tasks_without_one() {
    let graph = training(&random_forward(12, 4), Optimizer::Adam);
    let program = Program::new(graph.clone()).unwrap();
    let plan = build_plan(&problem(&graph, 2), &random_placement(graph.nodes.len(), 2, 9)).unwrap();
    let mut ids = 0;
    for task in &plan.tasks {
        if let ordo_sched::TaskKind::Compute { node, id } = &task.kind {
            assert_eq!(graph.nodes[id.unwrap() as usize].name, *node);
            ids += 1;
        }
    }
    assert_eq!(ids, graph.nodes.len());
    same_as_sequential(&program, &plan, options(Sync::Events, 1));
    let n = graph.nodes.len() as u32;
    type Rewrite = fn(u32, u32) -> Option<u32>;
    let rewrites: [(Rewrite, &str); 2] =
        [(|_, _| None, "records no node id"), (|id, n| Some((id + 1) % n), "but the graph's node")];
    for (rewrite, message) in rewrites {
        let mut other = plan.clone();
        for task in &mut other.tasks {
            if let ordo_sched::TaskKind::Compute { id, .. } = &mut task.kind {
                *id = id.and_then(|i| rewrite(i, n));
            }
        }
        let options = EngineOptions::default();
        let Err(err) = Executable::new(program.clone(), &other, options) else {
            panic!("a plan whose tasks do not bind by id was accepted ({message})");
        };
        assert!(matches!(err, ExecError::Mismatch(_)), "{err}");
        assert!(err.to_string().contains(message) && err.to_string().contains("task `"), "{err}");
    }
}
