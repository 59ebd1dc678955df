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
    let (c0, c1, tx, rx) = b.linked_pair();
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

/// Sets the workspace of `task` in `b`'s plan.
fn workspace(b: &mut Builder, task: ordo_sched::TaskId, bytes: u64) {
    b.plan.tasks[task.0 as usize].workspace_bytes = bytes;
}

#[test]
fn workspace_is_held_while_its_task_runs() {
    let mut b = Builder::new(1);
    b.plan.persistent_bytes = vec![50];
    let c0 = b.stream(0, StreamKind::Compute);
    let a = b.compute("a", c0, 10);
    workspace(&mut b, a, 100);
    let report = simulate(&b.build(), &SimOptions::default()).unwrap();
    assert_eq!(report.memory_timeline[0], [(0.0, 50), (0.0, 150), (10.0, 50)]);
    assert_eq!(report.peak_memory_bytes, [150]);
}

/// a (10 µs, 100 B workspace) writes A (30 B), read by b (5 µs, 20 B workspace), which writes
/// B (7 B, unread). At 10 a's workspace is freed before b's is allocated; at 15 b's workspace,
/// then A, then B are freed.
#[test]
fn workspace_is_freed_before_the_next_task_allocates() {
    let mut b = Builder::new(1);
    b.plan.persistent_bytes = vec![50];
    let c0 = b.stream(0, StreamKind::Compute);
    let a = b.compute("a", c0, 10);
    let bt = b.compute("b", c0, 5);
    workspace(&mut b, a, 100);
    workspace(&mut b, bt, 20);
    let ba = b.buffer("A", 0, 30, a);
    b.read(ba, bt);
    b.buffer("B", 0, 7, bt);
    let report = simulate(&b.build(), &SimOptions::default()).unwrap();
    assert_eq!(
        report.memory_timeline[0],
        [
            (0.0, 50),
            (0.0, 150),
            (0.0, 180),
            (10.0, 80),
            (10.0, 100),
            (10.0, 107),
            (15.0, 87),
            (15.0, 57),
            (15.0, 50),
        ]
    );
    assert_eq!(report.peak_memory_bytes, [180]);
}

/// a (10 µs, 100 B) on the compute stream and b (20 µs, 40 B) on the sub-compute stream: one
/// after the other on an exclusive device, at once (a ends at 20, b at 30) when kernels share it.
#[test]
fn concurrent_kernels_hold_their_workspaces_together() {
    let mut b = Builder::new(1);
    let c0 = b.stream(0, StreamKind::Compute);
    let s0 = b.stream(0, StreamKind::SubCompute);
    let a = b.compute("a", c0, 10);
    let bt = b.compute("b", s0, 20);
    workspace(&mut b, a, 100);
    workspace(&mut b, bt, 40);
    let plan = b.build();
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    assert_eq!(report.memory_timeline[0], [(0.0, 0), (0.0, 100), (10.0, 0), (10.0, 40), (30.0, 0)]);
    assert_eq!(report.peak_memory_bytes, [100]);
    let shared = SimOptions { concurrent_kernels: true, ..SimOptions::default() };
    let report = simulate(&plan, &shared).unwrap();
    assert_eq!(
        report.memory_timeline[0],
        [(0.0, 0), (0.0, 100), (0.0, 140), (20.0, 40), (30.0, 0)]
    );
    assert_eq!(report.peak_memory_bytes, [140]);
}

/// A transfer's workspace is 0 by the plan's rules; the 100 B workspace of c (5 µs) on device 1
/// is charged to device 1 only, from the transfer's end at 15 to 20.
#[test]
fn workspace_is_charged_to_the_task_device() {
    let mut p = plan(false);
    p.tasks[3].workspace_bytes = 100;
    let report = simulate(&p, &SimOptions::default()).unwrap();
    assert_eq!(
        report.memory_timeline[0],
        [(0.0, 1000), (0.0, 1100), (10.0, 1150), (20.0, 1050), (20.0, 1000)]
    );
    assert_eq!(
        report.memory_timeline[1],
        [(0.0, 2000), (10.0, 2100), (15.0, 2200), (20.0, 2100), (20.0, 2000)]
    );
    assert_eq!(report.peak_memory_bytes, [1150, 2200]);
}
