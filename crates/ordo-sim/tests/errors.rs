//! Deadlocks and malformed plans are errors, never hangs or panics.

mod common;

use common::Builder;
use ordo_sched::{EventId, StreamId, StreamKind, TaskId};
use ordo_sim::{SimError, SimOptions, simulate};

#[test]
fn streams_waiting_for_each_other_deadlock() {
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    let a = b.compute("a", c, 1);
    let bt = b.compute("b", c, 1);
    let x = b.compute("x", s, 1);
    let y = b.compute("y", s, 1);
    b.wait(a, y);
    b.wait(x, bt);
    let other = b.stream(0, StreamKind::Compute);
    b.compute("free", other, 1);
    for concurrent_kernels in [false, true] {
        let options = SimOptions { concurrent_kernels, ..Default::default() };
        let err = simulate(&b.plan, &options).unwrap_err();
        assert_eq!(err, SimError::Deadlock { stuck: vec!["a".into(), "x".into()], unfinished: 4 });
        assert!(err.to_string().contains("a, x"), "{err}");
    }
}

#[test]
fn a_transfer_queued_in_different_orders_deadlocks() {
    let mut b = Builder::new(2);
    let c0 = b.stream(0, StreamKind::Compute);
    let tx = b.stream(0, StreamKind::Tx { peer: 1 });
    let rx = b.stream(1, StreamKind::Rx { peer: 0 });
    let a = b.compute("a", c0, 1);
    let buf = b.buffer("a", 0, 1, a);
    let t1 = b.transfer("t1", buf, tx, rx, 1);
    let t2 = b.transfer("t2", buf, tx, rx, 1);
    b.plan.streams[rx.0 as usize].tasks = vec![t2, t1];
    let err = simulate(&b.plan, &SimOptions::default()).unwrap_err();
    assert_eq!(err, SimError::Deadlock { stuck: vec!["t1".into(), "t2".into()], unfinished: 2 });
}

fn invalid(result: Result<ordo_sim::Report, SimError>) -> String {
    match result {
        Err(SimError::InvalidPlan(msg)) => msg,
        other => panic!("expected an invalid plan, got {other:?}"),
    }
}

#[test]
fn unknown_ids_are_reported() {
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let a = b.compute("a", c, 1);
    let options = SimOptions::default();

    let mut p = b.plan.clone();
    p.streams[0].tasks.push(TaskId(7));
    assert!(invalid(simulate(&p, &options)).contains("unknown task 7"));

    let mut p = b.plan.clone();
    p.tasks[0].waits.push(EventId(3));
    assert!(invalid(simulate(&p, &options)).contains("unknown event 3"));

    let mut p = b.plan.clone();
    p.tasks[0].streams.push(StreamId(9));
    assert!(invalid(simulate(&p, &options)).contains("task 0"));

    let mut p = b.plan.clone();
    p.streams[0].device = 4;
    assert!(invalid(simulate(&p, &options)).contains("device 4"));

    let mut p = b.plan.clone();
    p.persistent_bytes.clear();
    invalid(simulate(&p, &options));

    let mut p = b.plan.clone();
    b.buffer("x", 0, 1, a);
    p.buffers = b.plan.buffers.clone();
    p.buffers[0].readers.push(TaskId(5));
    assert!(invalid(simulate(&p, &options)).contains("unknown task 5"));

    let mut p = b.plan.clone();
    p.streams[0].tasks.push(a);
    invalid(simulate(&p, &options));
}

#[test]
fn an_empty_plan_takes_no_time() {
    let b = Builder::new(2);
    let report = simulate(&b.plan, &SimOptions::default()).unwrap();
    assert_eq!(report.step_time_us, 0.0);
    assert_eq!(report.busy_fraction.devices, [0.0, 0.0]);
    assert!(report.critical_path.is_empty());
}

#[test]
fn an_occupancy_outside_the_device_is_reported() {
    for bad in [0.0, -1.0, 1.25, f64::NAN] {
        let mut b = Builder::new(1);
        let c = b.stream(0, StreamKind::Compute);
        b.kernel("k", c, 1, bad);
        for concurrent_kernels in [false, true] {
            let options = SimOptions { concurrent_kernels, ..Default::default() };
            let msg = invalid(simulate(&b.plan, &options));
            assert!(msg.contains("task 0 (k) has occupancy"), "{msg}");
        }
    }
}
