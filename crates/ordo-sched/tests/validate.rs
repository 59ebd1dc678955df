//! Plans that break a rule, one rule each, starting from the valid hand-made plan.

mod common;

use common::two_device_plan;
use ordo_sched::{
    BufferId, EventId, Plan, SchedError, StreamId, StreamKind, TaskId, TaskKind, validate,
};

/// The error of `validate` on the hand-made plan after `change`.
fn broken(change: impl FnOnce(&mut Plan)) -> SchedError {
    let mut plan = two_device_plan();
    change(&mut plan);
    validate(&plan).expect_err("the plan should not validate")
}

fn assert_message(err: &SchedError, expected: &str) {
    assert_eq!(err.to_string(), expected, "{err:?}");
}

#[test]
fn format_and_persistent_bytes() {
    let err = broken(|p| p.format = "ordo.plan/0".into());
    assert_message(&err, r#"plan format is "ordo.plan/0", expected "ordo.plan/1""#);
    let err = broken(|p| p.persistent_bytes.push(0));
    assert_message(&err, "persistent_bytes has 3 entries for 2 devices");
}

#[test]
fn unknown_ids() {
    let err = broken(|p| p.tasks[0].streams[0] = StreamId(6));
    assert_message(&err, "task `a` names stream 6, but the plan has only 6");
    let err = broken(|p| p.streams[3].tasks.push(TaskId(10)));
    assert_message(&err, "stream 3 (device 1 compute) names task 10, but the plan has only 10");
    let err = broken(|p| p.tasks[1].waits.push(EventId(7)));
    assert_message(&err, "task `b` names event 7, but the plan has only 7");
    let err = broken(|p| p.events[2].after = TaskId(12));
    assert_message(&err, "event 2 names task 12, but the plan has only 10");
    let err = broken(|p| {
        if let TaskKind::Transfer { buffer, .. } = &mut p.tasks[8].kind {
            *buffer = BufferId(9);
        }
    });
    assert_message(&err, "transfer `d:0->1` names buffer 9, but the plan has only 9");
}

#[test]
fn buffer_readers_and_producers_must_exist() {
    let err = broken(|p| p.buffers[0].readers.push(TaskId(20)));
    assert_message(&err, "buffer `a:0` on device 0 names task 20, but the plan has only 10");
    let err = broken(|p| p.buffers[5].producer = TaskId(10));
    assert_message(&err, "buffer `f:unread` on device 0 names task 10, but the plan has only 10");
}

#[test]
fn buffers_must_be_on_their_tasks_devices() {
    let err = broken(|p| p.buffers[1].device = 2);
    assert_message(&err, "buffer `b:0` on device 2: the plan has only 2 devices");
    let err = broken(|p| p.buffers[1].readers.push(TaskId(5)));
    assert_message(&err, "buffer `b:0` on device 1: its reader `f` does not read it");
    let err = broken(|p| p.buffers[1].producer = TaskId(0));
    assert_message(&err, "buffer `b:0` on device 1: its producer `a` writes on device 0");
    let err = broken(|p| p.buffers[0].readers.retain(|&r| r != TaskId(7)));
    assert_message(
        &err,
        "buffer `a:0` on device 0: transfer `a:0->1` sends it but is not among its readers",
    );
}

#[test]
fn streams_must_be_on_known_devices_with_a_real_peer() {
    let err = broken(|p| p.streams[3].device = 2);
    assert_message(&err, "stream 3 (device 2 compute): the plan has only 2 devices");
    let err = broken(|p| p.streams[1].kind = StreamKind::Tx { peer: 0 });
    assert_message(&err, "stream 1 (device 0 tx->0): peer 0 must be another of the 2 devices");
    let err = broken(|p| p.streams[2].kind = StreamKind::Tx { peer: 1 });
    assert_message(&err, "stream 2 (device 0 tx->1): duplicates stream 1 (device 0 tx->1)");
}

#[test]
fn a_compute_task_is_on_exactly_one_compute_stream() {
    let err = broken(|p| {
        p.tasks[0].streams.push(StreamId(3));
        p.streams[3].tasks.insert(0, TaskId(0));
    });
    assert_message(
        &err,
        "compute task `a`: is on 2 streams; it must be on exactly one compute stream of its device",
    );
    let err = broken(|p| p.tasks[5].streams = vec![StreamId(2)]);
    assert_message(
        &err,
        "compute task `f`: is on stream 2 (device 0 rx<-1), which is not a compute stream",
    );
    // A sub-compute stream is a compute stream too.
    let mut plan = two_device_plan();
    plan.streams[0].kind = StreamKind::SubCompute;
    validate(&plan).unwrap();
}

#[test]
fn an_occupancy_is_a_share_of_the_device() {
    for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let err = broken(|p| p.tasks[2].occupancy = bad);
        assert!(matches!(err, SchedError::Occupancy { .. }), "{err:?}");
        assert_message(
            &err,
            &format!(
                "task `c`: occupancy is {bad}; it must be a share of the device, more than 0 and \
                 at most 1"
            ),
        );
    }
    // Transfers too.
    let err = broken(|p| p.tasks[8].occupancy = 0.0);
    assert!(err.to_string().starts_with("task `d:0->1`: occupancy is 0"), "{err}");
    let mut plan = two_device_plan();
    plan.tasks[2].occupancy = 1e-9;
    plan.tasks[3].occupancy = 1.0;
    validate(&plan).unwrap();
}

#[test]
fn transfers_must_use_the_pair_streams() {
    // Device 1 loses its rx stream from device 0.
    let err = broken(|p| p.streams[5].kind = StreamKind::SubCompute);
    assert_message(
        &err,
        "transfer `a:0->1`: needs the rx<-0 stream of device 1, but the plan has none",
    );
    // A transfer to a third device that has no rx stream for it.
    let err = broken(|p| {
        p.devices = 3;
        p.persistent_bytes.push(0);
        p.tasks[7].kind = TaskKind::Transfer { buffer: BufferId(0), from: 0, to: 2 };
    });
    assert_message(
        &err,
        "transfer `a:0->1`: needs the tx->2 stream of device 0, but the plan has none",
    );
    let err = broken(|p| p.tasks[7].streams.reverse());
    assert_message(
        &err,
        "transfer `a:0->1`: its first stream must be the tx->1 stream of device 0, \
         not stream 5 (device 1 rx<-0)",
    );
    let err = broken(|p| p.tasks[7].streams.truncate(1));
    assert_message(&err, "transfer `a:0->1`: is not on the rx<-0 stream of device 1");
    let err =
        broken(|p| p.tasks[7].kind = TaskKind::Transfer { buffer: BufferId(0), from: 1, to: 1 });
    assert_message(
        &err,
        "transfer `a:0->1`: goes from device 1 to device 1; both must be distinct devices of the 2",
    );
    let err =
        broken(|p| p.tasks[7].kind = TaskKind::Transfer { buffer: BufferId(1), from: 0, to: 1 });
    assert_message(&err, "transfer `a:0->1`: sends buffer `b:0` of device 1 from device 0");
}

#[test]
fn streams_and_tasks_must_name_each_other() {
    let err = broken(|p| p.streams[0].tasks.retain(|&t| t != TaskId(5)));
    assert_message(
        &err,
        "task `f` and stream 0 (device 0 compute) disagree: \
         the task names the stream, which does not list it",
    );
    let err = broken(|p| p.streams[3].tasks.push(TaskId(0)));
    assert_message(
        &err,
        "task `a` and stream 3 (device 1 compute) disagree: \
         the stream lists the task, which does not name it",
    );
    let err = broken(|p| p.streams[0].tasks.push(TaskId(0)));
    assert_message(
        &err,
        "task `a` and stream 0 (device 0 compute) disagree: the stream lists the task twice",
    );
}

#[test]
fn a_cross_stream_cycle_lists_its_tasks() {
    // a waits for e:0->0, which needs e, which needs c and d:0->1, ... which need a.
    let err = broken(|p| p.tasks[0].waits.push(EventId(6)));
    match &err {
        SchedError::Cycle { tasks } => {
            assert_eq!(tasks, &["a", "a:0->1", "b", "c", "e", "e:0->0"]);
        }
        other => panic!("expected a cycle, got {other:?}"),
    }
    assert_message(
        &err,
        "dependency cycle across streams: a -> a:0->1 -> b -> c -> e -> e:0->0 -> a",
    );
}

#[test]
fn tx_and_rx_queues_in_different_orders_deadlock() {
    let err = broken(|p| p.streams[5].tasks.reverse());
    assert_message(&err, "dependency cycle across streams: a:0->1 -> d:0->1 -> a:0->1");
}

#[test]
fn waiting_for_ones_own_event_is_a_cycle() {
    let err = broken(|p| p.tasks[0].waits.push(EventId(0)));
    assert_message(&err, "dependency cycle across streams: a -> a");
}

mod arbitrary {
    use ordo_sched::{
        Buffer, BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId,
        TaskKind, task_graph, task_order, validate,
    };
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = StreamKind> {
        prop_oneof![
            Just(StreamKind::Compute),
            Just(StreamKind::SubCompute),
            (0usize..4).prop_map(|peer| StreamKind::Tx { peer }),
            (0usize..4).prop_map(|peer| StreamKind::Rx { peer }),
        ]
    }

    fn task() -> impl Strategy<Value = Task> {
        let kind = prop_oneof![
            Just(TaskKind::Compute { node: "n".into(), id: None }),
            (0u32..6, 0usize..4, 0usize..4).prop_map(|(b, from, to)| TaskKind::Transfer {
                buffer: BufferId(b),
                from,
                to
            }),
        ];
        let ids = |max| prop::collection::vec(0u32..max, 0..3);
        let occupancy = prop_oneof![Just(1.0), Just(0.0), Just(f64::NAN), 0.0f64..2.0];
        (kind, ids(6), ids(6), occupancy).prop_map(|(kind, streams, waits, occupancy)| Task {
            name: "t".into(),
            kind,
            streams: streams.into_iter().map(StreamId).collect(),
            waits: waits.into_iter().map(EventId).collect(),
            duration_us: 1,
            workspace_bytes: 0,
            occupancy,
        })
    }

    fn plan() -> impl Strategy<Value = Plan> {
        let stream = (0usize..4, kind(), prop::collection::vec(0u32..8, 0..5)).prop_map(
            |(device, kind, tasks)| Stream {
                device,
                kind,
                tasks: tasks.into_iter().map(TaskId).collect(),
            },
        );
        let buffer = (0usize..4, 0u32..8, prop::collection::vec(0u32..8, 0..4)).prop_map(
            |(device, producer, readers)| Buffer {
                name: "b".into(),
                device,
                bytes: 1,
                producer: TaskId(producer),
                readers: readers.into_iter().map(TaskId).collect(),
                retained: false,
            },
        );
        (
            1usize..4,
            prop::collection::vec(stream, 0..6),
            prop::collection::vec(task(), 0..7),
            prop::collection::vec((0u32..8).prop_map(|t| Event { after: TaskId(t) }), 0..6),
            prop::collection::vec(buffer, 0..6),
        )
            .prop_map(|(devices, streams, tasks, events, buffers)| Plan {
                format: Plan::FORMAT.into(),
                devices,
                persistent_bytes: vec![0; devices],
                streams,
                tasks,
                events,
                buffers,
            })
    }

    proptest! {
        /// Whatever the ids, checking a plan ends without panicking, and a plan that passes has
        /// an order for all its tasks.
        #[test]
        fn checking_any_plan_never_panics(plan in plan()) {
            let graph = task_graph(&plan);
            prop_assert_eq!(graph.len(), plan.tasks.len());
            let order = task_order(&plan);
            if validate(&plan).is_ok() {
                prop_assert_eq!(order.unwrap().len(), plan.tasks.len());
            }
        }
    }
}
