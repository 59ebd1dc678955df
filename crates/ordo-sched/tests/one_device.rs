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

#[test]
fn unrolled_steps_are_copies_chained_by_the_updates() {
    let problem = mlp_training();
    let n = problem.len();
    let two = ordo_sched::unroll(&problem, 2).unwrap();
    assert_eq!(two.len(), 2 * n);
    assert_eq!(two.names[n], format!("{}#1", problem.names[0]));
    assert_eq!(two.tensors.len(), 2 * problem.tensors.len());
    // Parameters and optimizer state are counted once.
    assert!(two.memory[n..].iter().all(|m| m.persistent == 0));
    assert_eq!(two.memory[..n], problem.memory[..]);
    // Each update of step 0 feeds its layer's forward node in step 1.
    let updates = (0..n).filter(|&v| problem.roles[v] == Role::Update).count();
    assert_eq!(two.edges.len(), 2 * problem.edges.len() + updates);
    let update = problem.names.iter().position(|x| x == "fc1.weight.update").unwrap();
    let fc1 = problem.names.iter().position(|x| x == "fc1").unwrap();
    assert!(
        two.edges.iter().any(|e| e.source == update && e.target == n + fc1 && e.tensors.is_empty())
    );
    assert!(ordo_sched::unroll(&problem, 0).is_err());
}

#[test]
fn a_steady_plan_defers_weight_gradients_behind_the_step_in_forward_order() {
    let problem = mlp_training();
    let n = problem.len();
    let inorder = ordo_sched::steady_plan(&problem, OneDeviceSchedule::InOrder, &vec![false; n], 2);
    let inorder = inorder.unwrap();
    validate(&inorder).unwrap();
    assert_eq!(inorder.streams[0].tasks.len(), 2 * n);

    let mut deferred = vec![false; n];
    for layer in ["fc1", "fc2"] {
        deferred[problem.names.iter().position(|x| x == layer).unwrap()] = true;
    }
    let plan = ordo_sched::steady_plan(&problem, OneDeviceSchedule::Ooo, &deferred, 2).unwrap();
    validate(&plan).unwrap();
    let sub: Vec<&str> =
        plan.streams[1].tasks.iter().map(|t| plan.tasks[t.0 as usize].name.as_str()).collect();
    // Step 0's weight-gradient work, fc1's before fc2's, then step 1's.
    let fc1_dw = sub.iter().position(|&x| x == "fc1.dw#0").unwrap();
    let fc2_dw = sub.iter().position(|&x| x == "fc2.dw#0").unwrap();
    assert!(fc1_dw < fc2_dw, "{sub:?}");
    assert!(sub.iter().position(|&x| x == "fc2.dw#1").unwrap() > fc2_dw);

    let err = ordo_sched::steady_plan(&problem, OneDeviceSchedule::InOrder, &deferred, 2);
    assert!(err.unwrap_err().to_string().contains("defers nothing"));
}
