//! One-device training schedules of a small MLP's training graph.

use ordo_cost::StepMode;
use ordo_ir::Role;
use ordo_ir::op::Optimizer;
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{OneDeviceSchedule, StreamKind, one_device_plan, validate};

/// x -> fc1 -> relu -> fc2 -> loss, as its training graph on one device.
fn mlp_training() -> PlaceProblem {
    let (forward, loss) = ordo_ir::samples::mlp();
    let graph = ordo_ir::training::training_graph(&forward, loss, Optimizer::Adam).unwrap();
    let costed = ordo_cost::costgraph_from_graph(&graph);
    PlaceProblem::new(&costed, Devices::uniform(1, u64::MAX / 4), StepMode::TrainingGraph).unwrap()
}

#[test]
fn inorder_runs_every_node_on_one_stream_in_the_builders_order() {
    let problem = mlp_training();
    let plan = one_device_plan(&problem, OneDeviceSchedule::InOrder).unwrap();
    validate(&plan).unwrap();
    assert_eq!(plan.streams.len(), 1);
    let order: Vec<usize> = plan.streams[0].tasks.iter().map(|t| t.0 as usize).collect();
    assert_eq!(order, (0..problem.len()).collect::<Vec<_>>());
    assert!(plan.events.is_empty());
}

#[test]
fn ooo_moves_weight_gradients_and_updates_to_the_sub_stream() {
    let problem = mlp_training();
    let plan = one_device_plan(&problem, OneDeviceSchedule::Ooo).unwrap();
    validate(&plan).unwrap();
    let kinds: Vec<StreamKind> = plan.streams.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [StreamKind::Compute, StreamKind::SubCompute]);
    let on_sub: Vec<&str> =
        plan.streams[1].tasks.iter().map(|t| plan.tasks[t.0 as usize].name.as_str()).collect();
    let expected: Vec<&str> = (0..problem.len())
        .filter(|&v| matches!(problem.roles[v], Role::Dw | Role::Update))
        .map(|v| problem.names[v].as_str())
        .collect();
    assert_eq!(on_sub, expected);
    assert!(on_sub.contains(&"fc2.dw") && on_sub.contains(&"fc1.weight.update"));
    // fc2.dw reads the loss gradient computed on the main stream: it waits for an event.
    let dw = plan.tasks.iter().find(|t| t.name == "fc2.dw").unwrap();
    let after: Vec<&str> = dw
        .waits
        .iter()
        .map(|e| plan.tasks[plan.events[e.0 as usize].after.0 as usize].name.as_str())
        .collect();
    assert!(after.contains(&"loss.dx"), "{after:?}");
}
