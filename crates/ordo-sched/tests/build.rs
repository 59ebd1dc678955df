//! The plan of a hand-made two-device graph, checked field by field, and the placements
//! `build_plan` refuses.

mod common;

use common::{
    BYTES_AS_US, placement, two_device_graph, two_device_placement, two_device_plan,
    two_device_problem,
};
use ordo_cost::{CostLink, Optimizer, StepMode};
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{
    Buffer, BufferId, Event, EventId, SchedError, Stream, StreamId, StreamKind, TaskId, TaskKind,
    build_plan, build_plan_on_streams, task_graph, validate,
};

fn ids(list: &[u32]) -> Vec<TaskId> {
    list.iter().map(|&t| TaskId(t)).collect()
}

fn events(list: &[u32]) -> Vec<EventId> {
    list.iter().map(|&e| EventId(e)).collect()
}

#[test]
fn streams_follow_the_placement_and_the_transfer_order() {
    let plan = two_device_plan();
    assert_eq!(plan.format, "ordo.plan/1");
    assert_eq!(plan.devices, 2);
    let stream = |device, kind, tasks: &[u32]| Stream { device, kind, tasks: ids(tasks) };
    assert_eq!(
        plan.streams,
        [
            stream(0, StreamKind::Compute, &[0, 3, 5, 6]),
            stream(0, StreamKind::Tx { peer: 1 }, &[7, 8]),
            stream(0, StreamKind::Rx { peer: 1 }, &[9]),
            stream(1, StreamKind::Compute, &[1, 2, 4]),
            stream(1, StreamKind::Tx { peer: 0 }, &[9]),
            stream(1, StreamKind::Rx { peer: 0 }, &[7, 8]),
        ]
    );
}

#[test]
fn a_tensor_is_sent_once_per_destination() {
    let plan = two_device_plan();
    let names: Vec<&str> = plan.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d", "e", "f", "g", "a:0->1", "d:0->1", "e:0->0"]);
    // a:0 has two consumers on device 1 (b, c) and one transfer there.
    let transfers: Vec<(TaskKind, Vec<StreamId>, u64)> = plan.tasks[7..]
        .iter()
        .map(|t| (t.kind.clone(), t.streams.clone(), t.duration_us))
        .collect();
    let transfer = |buffer, from, to| TaskKind::Transfer { buffer: BufferId(buffer), from, to };
    assert_eq!(
        transfers,
        [
            (transfer(0, 0, 1), vec![StreamId(1), StreamId(5)], 100),
            (transfer(3, 0, 1), vec![StreamId(1), StreamId(5)], 400),
            (transfer(4, 1, 0), vec![StreamId(4), StreamId(2)], 500),
        ]
    );
    for (v, task) in plan.tasks[..7].iter().enumerate() {
        assert_eq!(task.kind, TaskKind::Compute { node: task.name.clone(), id: Some(v as u32) });
        assert_eq!(task.duration_us, 10 * (v as u64 + 1));
    }
}

#[test]
fn one_event_per_producing_task() {
    let plan = two_device_plan();
    let after: Vec<TaskId> = plan.events.iter().map(|e: &Event| e.after).collect();
    // a, c (control edge to g), d, e, then the three transfers.
    assert_eq!(after, ids(&[0, 2, 3, 4, 7, 8, 9]));
    let waits: Vec<Vec<EventId>> = plan.tasks.iter().map(|t| t.waits.clone()).collect();
    assert_eq!(
        waits,
        [
            events(&[]),     // a
            events(&[4]),    // b: a:0->1
            events(&[4]),    // c: a:0->1
            events(&[]),     // d: a:0 is local
            events(&[5]),    // e: d:0->1; b:0 and c:0 are local
            events(&[]),     // f
            events(&[1, 6]), // g: control edge from c, e:0->0
            events(&[0]),    // a:0->1 waits for a
            events(&[2]),    // d:0->1 waits for d
            events(&[3]),    // e:0->0 waits for e
        ]
    );
}

#[test]
fn buffers_cover_outputs_and_received_copies() {
    let plan = two_device_plan();
    let buffer = |name: &str, device, bytes, producer, readers: &[u32]| Buffer {
        name: name.into(),
        device,
        bytes,
        producer: TaskId(producer),
        readers: ids(readers),
        retained: false,
    };
    assert_eq!(
        plan.buffers,
        [
            buffer("a:0", 0, 100, 0, &[3, 7]),
            buffer("b:0", 1, 200, 1, &[4]),
            buffer("c:0", 1, 300, 2, &[4]),
            buffer("d:0", 0, 400, 3, &[5, 8]),
            buffer("e:0", 1, 500, 4, &[9]),
            buffer("f:unread", 0, 64, 5, &[]),
            buffer("a:0", 1, 100, 7, &[1, 2]),
            buffer("d:0", 1, 400, 8, &[4]),
            buffer("e:0", 0, 500, 9, &[6]),
        ]
    );
    assert_eq!(plan.persistent_bytes, [10 + 40 + 60 + 70, 20 + 30 + 50]);
}

#[test]
fn training_retains_outputs_and_charges_optimizer_state() {
    let mode = StepMode::Training { optimizer: Optimizer::Adam };
    let plan = build_plan(&two_device_problem(mode), &two_device_placement()).unwrap();
    assert!(plan.buffers.iter().all(|b| b.retained));
    assert_eq!(plan.persistent_bytes, [4 * 180, 4 * 100]);
    // The forward-only tasks, each compute task holding its upstream gradient (as large as its
    // outputs) as workspace.
    let mut expected = two_device_plan().tasks;
    for (task, outputs) in expected.iter_mut().zip([100, 200, 300, 400, 500, 64, 0]) {
        task.workspace_bytes = outputs;
    }
    assert_eq!(plan.tasks, expected);
}

#[test]
fn compute_tasks_hold_their_temporary_memory_as_workspace() {
    let mut graph = two_device_graph();
    for (i, node) in graph.nodes.iter_mut().enumerate() {
        node.temporary_memory = 1000 + i as u64;
    }
    let devices = Devices { memory: vec![u64::MAX / 4; 2], comm: BYTES_AS_US };
    let forward = PlaceProblem::new(&graph, devices.clone(), StepMode::ForwardOnly).unwrap();
    let plan = build_plan(&forward, &two_device_placement()).unwrap();
    let workspace: Vec<u64> = plan.tasks.iter().map(|t| t.workspace_bytes).collect();
    assert_eq!(workspace, [1000, 1001, 1002, 1003, 1004, 1005, 1006, 0, 0, 0]);
    let training = StepMode::Training { optimizer: Optimizer::Sgd };
    let plan =
        build_plan(&PlaceProblem::new(&graph, devices, training).unwrap(), &two_device_placement())
            .unwrap();
    let workspace: Vec<u64> = plan.tasks.iter().map(|t| t.workspace_bytes).collect();
    assert_eq!(workspace, [1100, 1201, 1302, 1403, 1504, 1069, 1006, 0, 0, 0]);
}

#[test]
fn compute_tasks_carry_their_occupancy_and_transfers_fill_their_link() {
    let mut graph = two_device_graph();
    for (i, node) in graph.nodes.iter_mut().enumerate() {
        node.occupancy = 0.125 * (i + 1) as f64;
    }
    let devices = Devices { memory: vec![u64::MAX / 4; 2], comm: BYTES_AS_US };
    let problem = PlaceProblem::new(&graph, devices, StepMode::ForwardOnly).unwrap();
    assert_eq!(problem.occupancy, [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875]);
    let plan = build_plan(&problem, &two_device_placement()).unwrap();
    let occupancy: Vec<f64> = plan.tasks.iter().map(|t| t.occupancy).collect();
    assert_eq!(occupancy, [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.0, 1.0]);
    // Written and read back; a plan file without occupancies reads them as 1.
    let text = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<ordo_sched::Plan>(&text).unwrap(), plan);
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    for task in value["tasks"].as_array_mut().unwrap() {
        task.as_object_mut().unwrap().remove("occupancy");
    }
    let old: ordo_sched::Plan = serde_json::from_value(value).unwrap();
    assert!(old.tasks.iter().all(|t| t.occupancy == 1.0));
}

#[test]
fn the_task_graph_has_stream_and_event_predecessors() {
    let preds = task_graph(&two_device_plan());
    let expected: [&[u32]; 10] = [
        &[],     // a
        &[7],    // b
        &[1, 7], // c: after b on its stream, and a:0->1
        &[0],    // d
        &[2, 8], // e
        &[3],    // f
        &[2, 5, 9],
        &[0],    // a:0->1
        &[3, 7], // d:0->1: after a:0->1 on tx and rx, and d
        &[4],    // e:0->0
    ];
    assert_eq!(preds, expected.map(ids));
}

#[test]
fn plans_are_deterministic_and_valid() {
    let plan = two_device_plan();
    validate(&plan).unwrap();
    assert_eq!(plan, two_device_plan());
}

#[test]
fn one_device_needs_no_transfers() {
    let p = two_device_problem(StepMode::ForwardOnly);
    let all: Vec<usize> = (0..7).collect();
    let plan = build_plan(&p, &placement(&[0; 7], &[&all, &[]])).unwrap();
    assert_eq!(plan.streams.len(), 2);
    assert!(plan.streams[1].tasks.is_empty());
    assert!(plan.events.is_empty());
    assert_eq!(plan.tasks.len(), 7);
    assert_eq!(plan.persistent_bytes, [280, 0]);
}

#[test]
fn mismatched_placements_are_refused() {
    let p = two_device_problem(StepMode::ForwardOnly);
    let cases = [
        (placement(&[0; 6], &[&[0, 1, 2, 3, 4, 5], &[]]), "device_of has 6 entries for 7 nodes"),
        (placement(&[0; 7], &[&[0, 1, 2, 3, 4, 5, 6]]), "order has 1 devices, the problem 2"),
        (placement(&[0, 1, 1, 0, 1, 0, 2], &[&[0, 3, 5], &[1, 2, 4]]), "node `g` is on device 2"),
        (
            placement(&[0, 1, 1, 0, 1, 0, 0], &[&[0, 3, 5], &[1, 2, 4]]),
            "`g` is on device 0 but in no",
        ),
        (placement(&[0, 1, 1, 0, 1, 0, 0], &[&[0, 3, 5, 6], &[1, 2, 4, 6]]), "`g` is on device 0"),
    ];
    for (placement, message) in cases {
        match build_plan(&p, &placement) {
            Err(e @ SchedError::Placement(_)) => assert!(e.to_string().contains(message), "{e}"),
            other => panic!("expected a placement error with {message:?}, got {other:?}"),
        }
    }
}

#[test]
fn an_order_against_a_local_edge_is_refused() {
    let p = two_device_problem(StepMode::ForwardOnly);
    let bad = placement(&[0, 1, 1, 0, 1, 0, 0], &[&[3, 0, 5, 6], &[1, 2, 4]]);
    let err = build_plan(&p, &bad).unwrap_err();
    assert!(matches!(&err, SchedError::OrderViolation { device: 0, .. }), "{err:?}");
    assert_eq!(err.to_string(), "device 0 runs `d` before `a`, which it depends on");
}

#[test]
fn orders_that_deadlock_across_devices_are_refused() {
    // The hand-made graph without d -> e, and with a control edge g -> d.
    let mut graph = common::two_device_graph();
    graph.links.retain(|l| !(l.source == 3 && l.target == 4));
    graph.links.push(CostLink::new(6, 3, Vec::new()));
    let devices = Devices { memory: vec![u64::MAX / 4; 2], comm: common::BYTES_AS_US };
    let p = PlaceProblem::new(&graph, devices, StepMode::ForwardOnly).unwrap();
    let fine = placement(&[0, 1, 1, 1, 1, 1, 0], &[&[0, 6], &[1, 2, 4, 3, 5]]);
    build_plan(&p, &fine).unwrap();
    // Device 1 runs d, which waits for g on device 0, before c, which g waits for.
    let deadlock = placement(&[0, 1, 1, 1, 1, 1, 0], &[&[0, 6], &[1, 3, 2, 4, 5]]);
    let err = build_plan(&p, &deadlock).unwrap_err();
    assert!(matches!(&err, SchedError::Cycle { tasks } if tasks == &["c", "g", "d"]), "{err:?}");
    assert_eq!(err.to_string(), "dependency cycle across streams: c -> g -> d -> c");
}

/// d and f on device 0's sub-stream: a and g stay on its compute stream, d waits for a through
/// an event, f follows d on the sub-stream without one.
#[test]
fn nodes_on_the_sub_stream_wait_for_the_main_stream_through_events() {
    let problem = two_device_problem(StepMode::ForwardOnly);
    let sub = [false, false, false, true, false, true, false];
    let plan = build_plan_on_streams(&problem, &two_device_placement(), &sub).unwrap();
    let stream = |device, kind, tasks: &[u32]| Stream { device, kind, tasks: ids(tasks) };
    assert_eq!(
        plan.streams[..2],
        [stream(0, StreamKind::Compute, &[0, 6]), stream(0, StreamKind::SubCompute, &[3, 5]),]
    );
    assert_eq!(plan.tasks[3].streams, [StreamId(1)]);
    let after = |t: usize| -> Vec<u32> {
        plan.tasks[t].waits.iter().map(|e| plan.events[e.0 as usize].after.0).collect()
    };
    assert_eq!(after(3), [0], "d waits for a on the other stream");
    assert!(after(5).is_empty(), "f follows d on the same stream");
    validate(&plan).unwrap();
    // Without the sub-stream, d needs no event.
    assert!(two_device_plan().tasks[3].waits.is_empty());

    let err = build_plan_on_streams(&problem, &two_device_placement(), &sub[..3]).unwrap_err();
    assert!(err.to_string().contains("3 stream choices for 7 nodes"), "{err}");
}
