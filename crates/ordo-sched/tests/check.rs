//! A plan checked against the graph it claims to run.

mod common;

use common::{two_device_plan, two_device_problem};
use ordo_cost::StepMode;
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{SchedError, TaskKind, check_against};

fn mismatch(result: Result<(), SchedError>) -> String {
    match result {
        Err(SchedError::Mismatch(message)) => message,
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

#[test]
fn the_plan_of_a_graph_matches_it() {
    check_against(&two_device_plan(), &two_device_problem(StepMode::ForwardOnly)).unwrap();
}

#[test]
fn an_unknown_node_is_named_with_its_task() {
    let mut plan = two_device_plan();
    plan.tasks[2].kind = TaskKind::Compute { node: "zz".into(), id: None };
    let message = mismatch(check_against(&plan, &two_device_problem(StepMode::ForwardOnly)));
    assert!(message.contains("task `c` runs node `zz`"), "{message}");
}

#[test]
fn a_node_run_twice_or_never_is_named() {
    let problem = two_device_problem(StepMode::ForwardOnly);
    let mut plan = two_device_plan();
    plan.tasks[2].kind = TaskKind::Compute { node: "b".into(), id: None };
    let message = mismatch(check_against(&plan, &problem));
    assert!(message.contains("node `b` is run by tasks `b` and `c`"), "{message}");
    let mut plan = two_device_plan();
    plan.tasks.retain(|t| t.name != "f");
    let message = mismatch(check_against(&plan, &problem));
    assert!(message.contains("1 of the graph's 7 nodes have no task, the first `f`"), "{message}");
}

#[test]
fn a_plan_on_more_devices_than_the_problem_has() {
    let devices = Devices { memory: vec![u64::MAX / 4], comm: common::BYTES_AS_US };
    let one = PlaceProblem::new(&common::two_device_graph(), devices, StepMode::ForwardOnly);
    let message = mismatch(check_against(&two_device_plan(), &one.unwrap()));
    assert!(message.contains("the plan uses 2 devices, the graph has 1"), "{message}");
}
