//! Buffer lifetimes and the memory timeline.

mod common;

use common::Builder;
use ordo_sched::{Plan, StreamKind};
use ordo_sim::{SimOptions, simulate};

/// Device 0: a (10) writes A (100 B), read by b (10, writes B, 50 B, unread) and by a 5 µs
/// transfer to device 1, whose copy (100 B) c (5) reads.
fn plan(retain_a: bool) -> Plan {
    let mut b = Builder::new(2);
    b.plan.persistent_bytes = vec![1000, 2000];
    let c0 = b.stream(0, StreamKind::Compute);
    let c1 = b.stream(1, StreamKind::Compute);
    let tx = b.stream(0, StreamKind::Tx { peer: 1 });
    let rx = b.stream(1, StreamKind::Rx { peer: 0 });
    let a = b.compute("a", c0, 10);
    let bt = b.compute("b", c0, 10);
    let ba = b.buffer("A", 0, 100, a);
    b.buffer("B", 0, 50, bt);
    b.read(ba, bt);
    let t = b.transfer("A->1", ba, tx, rx, 5);
    b.read(ba, t);
    b.wait(t, a);
    let copy = b.buffer("A", 1, 100, t);
    let c = b.compute("c", c1, 5);
    b.wait(c, t);
    b.read(copy, c);
    b.plan.buffers[ba.0 as usize].retained = retain_a;
    b.build()
}

#[test]
fn buffers_live_from_producer_start_to_last_reader_end() {
    let report = simulate(&plan(false), &SimOptions::default()).unwrap();
    assert_eq!(report.step_time_us, 20.0);
    assert_eq!(
        report.memory_timeline[0],
        [(0.0, 1000), (0.0, 1100), (10.0, 1150), (20.0, 1050), (20.0, 1000)]
    );
    assert_eq!(report.memory_timeline[1], [(0.0, 2000), (10.0, 2100), (20.0, 2000)]);
    assert_eq!(report.peak_memory_bytes, [1150, 2100]);
}

#[test]
fn retained_buffers_stay_until_the_end_of_the_step() {
    let report = simulate(&plan(true), &SimOptions::default()).unwrap();
    assert_eq!(
        report.memory_timeline[0],
        [(0.0, 1000), (0.0, 1100), (10.0, 1150), (20.0, 1100), (20.0, 1000)]
    );
}

#[test]
fn an_idle_device_has_a_flat_timeline_over_the_step() {
    let mut b = Builder::new(2);
    b.plan.persistent_bytes = vec![7, 9];
    let c0 = b.stream(0, StreamKind::Compute);
    b.compute("a", c0, 3);
    let report = simulate(&b.build(), &SimOptions::default()).unwrap();
    assert_eq!(report.memory_timeline[1], [(0.0, 9), (3.0, 9)]);
    assert_eq!(report.peak_memory_bytes, [7, 9]);
}
