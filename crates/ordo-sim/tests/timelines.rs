//! Hand-made plans whose timelines are worked out by hand.

mod common;

use common::Builder;
use ordo_sched::{Plan, StreamKind};
use ordo_sim::{Channel, Report, SimOptions, simulate};

fn run(plan: &Plan, channel: Channel) -> Report {
    simulate(plan, &SimOptions { channel, concurrent_kernels: false }).unwrap()
}

fn spans(report: &Report) -> Vec<(f64, f64)> {
    report.tasks.iter().map(|t| (t.start_us, t.finish_us)).collect()
}

#[test]
fn one_device_runs_everything_back_to_back() {
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    let x = b.compute("x", c, 5);
    b.compute("y", c, 7);
    let w = b.compute("w", s, 11);
    b.compute("z", s, 3);
    b.wait(w, x);
    let z2 = b.compute("z2", c, 2);
    b.wait(z2, w);
    let report = run(&b.build(), Channel::BaechiTf);
    assert_eq!(report.step_time_us, 5.0 + 7.0 + 11.0 + 3.0 + 2.0);
    // x; at 5 y and w are both ready and y has the lower id; at 23 z and z2 are.
    assert_eq!(spans(&report), [(0.0, 5.0), (5.0, 12.0), (12.0, 23.0), (23.0, 26.0), (26.0, 28.0)]);
    assert_eq!(report.busy_fraction.devices, [1.0]);
    assert_eq!(report.critical_path, ["x", "y", "w", "z", "z2"]);
}

/// Devices 0 and 1 each compute 10 µs, then send their result (5 µs) to device `to[0]` and
/// `to[1]` respectively, on a plan of `devices` devices.
fn two_sends(devices: usize, to: [usize; 2]) -> Plan {
    let mut b = Builder::new(devices);
    let c0 = b.stream(0, StreamKind::Compute);
    let c1 = b.stream(1, StreamKind::Compute);
    let tx0 = b.stream(0, StreamKind::Tx { peer: to[0] });
    let tx1 = b.stream(1, StreamKind::Tx { peer: to[1] });
    let rx0 = b.stream(to[0], StreamKind::Rx { peer: 0 });
    let rx1 = b.stream(to[1], StreamKind::Rx { peer: 1 });
    let a = b.compute("a", c0, 10);
    let c = b.compute("b", c1, 10);
    let ba = b.buffer("a", 0, 8, a);
    let bb = b.buffer("b", 1, 8, c);
    let ta = b.transfer(&format!("a->{}", to[0]), ba, tx0, rx0, 5);
    let tb = b.transfer(&format!("b->{}", to[1]), bb, tx1, rx1, 5);
    b.wait(ta, a);
    b.wait(tb, c);
    b.build()
}

/// Devices 0 and 1 each compute 10 µs, then send 5 µs to device 2.
fn two_into_one() -> Plan {
    two_sends(3, [2, 2])
}

#[test]
fn two_transfers_into_one_device() {
    let plan = two_into_one();
    let links = |report: &Report| -> Vec<(usize, usize, f64)> {
        report.busy_fraction.links.iter().map(|l| (l.from, l.to, l.fraction)).collect()
    };
    let report = run(&plan, Channel::Duplex);
    assert_eq!(spans(&report)[2..], [(10.0, 15.0), (15.0, 20.0)]);
    assert_eq!(report.step_time_us, 20.0);
    // The second waited for the receiver, held by the first.
    assert_eq!(report.critical_path, ["a", "a->2", "b->2"]);
    assert_eq!(links(&report), [(0, 2, 0.25), (1, 2, 0.25)]);
    // Baechi-TF: b->2's send starts at 10 on device 1's free channel; its receive waits for
    // device 2's channel, booked by a->2 (first in task order) until 15.
    let report = run(&plan, Channel::BaechiTf);
    assert_eq!(spans(&report)[2..], [(10.0, 15.0), (10.0, 20.0)]);
    assert_eq!(report.step_time_us, 20.0);
    assert_eq!(report.critical_path, ["a", "a->2", "b->2"]);
    assert_eq!(links(&report), [(0, 2, 0.25), (1, 2, 0.5)]);
    let report = run(&plan, Channel::BaechiPytorch);
    assert_eq!(spans(&report)[2..], [(10.0, 15.0), (10.0, 15.0)]);
    assert_eq!(report.step_time_us, 15.0);
    assert_eq!(report.critical_path, ["a", "a->2"]);
}

/// Device 0 sends to 1 while 1 sends to 0.
fn crossing() -> Plan {
    two_sends(2, [1, 0])
}

#[test]
fn send_and_receive_on_one_device() {
    let plan = crossing();
    let report = run(&plan, Channel::BaechiTf);
    assert_eq!(spans(&report)[2..], [(10.0, 15.0), (15.0, 20.0)]);
    for channel in [Channel::Duplex, Channel::BaechiPytorch] {
        let report = run(&plan, channel);
        assert_eq!(spans(&report)[2..], [(10.0, 15.0), (10.0, 15.0)], "{channel:?}");
        assert_eq!(report.step_time_us, 15.0);
    }
}

/// Baechi-TF serves a device's channel in task order across peers, and frees the sender's
/// channel when its send ends even while the receive waits.
///
/// Device 0 runs `slow` (0–9) then sends it to device 1 (`slow->1`, 3 µs), and sends `fast`
/// (ready at 1) to device 2 (`fast->2`, 2 µs); `slow->1` comes first in task order. Device 1
/// is receiving `busy` from device 2 (`busy->1`, 0–20, task 0 of the transfers).
///
/// * `busy->1`: send and receive 0–20 (device 2's and device 1's channels).
/// * `slow->1`: send at max(9, free 0) = 9, device 0 free at 12; receive at max(9, 20) = 20,
///   ends 23.
/// * `fast->2`: ready at 1, but behind `slow->1` on device 0: send at 12; receive at
///   max(12, device 2 free at 20) = 20, ends 22.
#[test]
fn baechi_tf_books_each_channel_in_task_order() {
    let mut b = Builder::new(3);
    let c0 = b.stream(0, StreamKind::Compute);
    let c2 = b.stream(2, StreamKind::Compute);
    let tx01 = b.stream(0, StreamKind::Tx { peer: 1 });
    let tx02 = b.stream(0, StreamKind::Tx { peer: 2 });
    let tx21 = b.stream(2, StreamKind::Tx { peer: 1 });
    let rx01 = b.stream(1, StreamKind::Rx { peer: 0 });
    let rx02 = b.stream(2, StreamKind::Rx { peer: 0 });
    let rx21 = b.stream(1, StreamKind::Rx { peer: 2 });
    let fast = b.compute("fast", c0, 1);
    let slow = b.compute("slow", c0, 8);
    let busy = b.compute("busy", c2, 0);
    let fast_buffer = b.buffer("fast", 0, 8, fast);
    let slow_buffer = b.buffer("slow", 0, 8, slow);
    let busy_buffer = b.buffer("busy", 2, 8, busy);
    let busy_sent = b.transfer("busy->1", busy_buffer, tx21, rx21, 20);
    let slow_sent = b.transfer("slow->1", slow_buffer, tx01, rx01, 3);
    let fast_sent = b.transfer("fast->2", fast_buffer, tx02, rx02, 2);
    b.wait(busy_sent, busy);
    b.wait(slow_sent, slow);
    b.wait(fast_sent, fast);
    let plan = b.build();
    let report = run(&plan, Channel::BaechiTf);
    assert_eq!(
        spans(&report),
        [(0.0, 1.0), (1.0, 9.0), (0.0, 0.0), (0.0, 20.0), (9.0, 23.0), (12.0, 22.0)]
    );
    assert_eq!(report.critical_path, ["busy", "busy->1", "slow->1"]);
    // Without the booking order `fast->2` goes first, at 1.
    let report = run(&plan, Channel::Duplex);
    assert_eq!(spans(&report)[5], (1.0, 3.0));
}

#[test]
fn two_sends_from_one_device() {
    let mut b = Builder::new(3);
    let c0 = b.stream(0, StreamKind::Compute);
    let tx1 = b.stream(0, StreamKind::Tx { peer: 1 });
    let tx2 = b.stream(0, StreamKind::Tx { peer: 2 });
    let rx1 = b.stream(1, StreamKind::Rx { peer: 0 });
    let rx2 = b.stream(2, StreamKind::Rx { peer: 0 });
    let a = b.compute("a", c0, 4);
    let ba = b.buffer("a", 0, 8, a);
    let t1 = b.transfer("a->1", ba, tx1, rx1, 6);
    let t2 = b.transfer("a->2", ba, tx2, rx2, 6);
    b.wait(t1, a);
    b.wait(t2, a);
    let plan = b.build();
    assert_eq!(spans(&run(&plan, Channel::BaechiTf))[1..], [(4.0, 10.0), (10.0, 16.0)]);
    assert_eq!(spans(&run(&plan, Channel::Duplex))[1..], [(4.0, 10.0), (4.0, 10.0)]);
    assert_eq!(spans(&run(&plan, Channel::BaechiPytorch))[1..], [(4.0, 10.0), (4.0, 10.0)]);
}

#[test]
fn events_and_streams_chain_across_devices() {
    let mut b = Builder::new(2);
    let (c0, c1, tx, rx) = b.linked_pair();
    let a = b.compute("a", c0, 10);
    b.compute("x", c1, 3);
    let ba = b.buffer("a", 0, 8, a);
    let t = b.transfer("a->1", ba, tx, rx, 4);
    b.wait(t, a);
    let c = b.compute("c", c1, 6);
    b.wait(c, t);
    let report = run(&b.build(), Channel::BaechiTf);
    assert_eq!(spans(&report), [(0.0, 10.0), (0.0, 3.0), (10.0, 14.0), (14.0, 20.0)]);
    assert_eq!(report.step_time_us, 20.0);
    assert_eq!(report.lower_bound_us, 20.0);
    assert_eq!(report.critical_path, ["a", "a->1", "c"]);
    assert_eq!(report.busy_fraction.devices, [0.5, 9.0 / 20.0]);
}

#[test]
fn a_stream_is_in_order_even_when_a_later_task_is_ready() {
    // y waits for an event after z on the other stream; w behind y on the same stream must
    // not overtake it, although it waits for nothing.
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    let z = b.compute("z", s, 8);
    let y = b.compute("y", c, 1);
    b.compute("w", c, 1);
    b.wait(y, z);
    let report = run(&b.build(), Channel::BaechiTf);
    assert_eq!(spans(&report), [(0.0, 8.0), (8.0, 9.0), (9.0, 10.0)]);
}

#[test]
fn concurrent_kernels_share_the_device() {
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    b.compute("a", c, 10);
    b.compute("b", s, 10);
    let plan = b.build();
    let shared = simulate(&plan, &SimOptions { concurrent_kernels: true, ..Default::default() });
    let shared = shared.unwrap();
    assert_eq!(spans(&shared), [(0.0, 20.0), (0.0, 20.0)]);
    assert_eq!(shared.busy_fraction.devices, [1.0]);
    let exclusive = run(&plan, Channel::BaechiTf);
    assert_eq!(spans(&exclusive), [(0.0, 10.0), (10.0, 20.0)]);
    assert_eq!(exclusive.critical_path, ["a", "b"]);
}

#[test]
fn processor_sharing_speeds_up_when_a_kernel_leaves() {
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    b.compute("a", c, 10);
    b.compute("x", s, 5);
    b.compute("b", s, 10);
    let plan = b.build();
    let report =
        simulate(&plan, &SimOptions { concurrent_kernels: true, ..Default::default() }).unwrap();
    // a and x share from 0 to 10 (x needs 5 at half speed), then a has 5 left and b 10:
    // both at half speed, a ends at 20; b has 5 left alone and ends at 25.
    assert_eq!(spans(&report), [(0.0, 20.0), (0.0, 10.0), (10.0, 25.0)]);
    assert_eq!(report.step_time_us, 25.0);
    assert_eq!(report.lower_bound_us, 25.0);
}

/// Runs `plan` with concurrent kernels.
fn concurrent(plan: &Plan) -> Report {
    simulate(plan, &SimOptions { concurrent_kernels: true, ..Default::default() }).unwrap()
}

/// `actual` equals `expected` to within rounding.
fn assert_spans(actual: &[(f64, f64)], expected: &[(f64, f64)]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?}");
    for (a, e) in actual.iter().zip(expected) {
        let near = |x: f64, y: f64| (x - y).abs() <= 1e-9 * (1.0 + y.abs());
        assert!(near(a.0, e.0) && near(a.1, e.1), "{actual:?} is not {expected:?}");
    }
}

/// One device with `occupancies.len()` compute streams, a 10 µs kernel on each.
fn side_by_side(occupancies: &[f64]) -> Plan {
    let mut b = Builder::new(1);
    for (i, &occupancy) in occupancies.iter().enumerate() {
        let kind = if i == 0 { StreamKind::Compute } else { StreamKind::SubCompute };
        let stream = b.stream(0, kind);
        b.kernel(&format!("k{i}"), stream, 10, occupancy);
    }
    b.build()
}

#[test]
fn two_half_kernels_run_side_by_side_at_full_speed() {
    let plan = side_by_side(&[0.5, 0.5]);
    let report = concurrent(&plan);
    assert_eq!(spans(&report), [(0.0, 10.0), (0.0, 10.0)]);
    assert_eq!(report.step_time_us, 10.0);
    // Work: 10 x 0.5 twice = 10 µs of the device; the chain is 10 µs too.
    assert_eq!(report.lower_bound_us, 10.0);
    assert_eq!(report.busy_fraction.devices, [1.0]);
    // Without concurrent kernels occupancy changes nothing: one after the other.
    assert_eq!(spans(&run(&plan, Channel::BaechiTf)), [(0.0, 10.0), (10.0, 20.0)]);
}

#[test]
fn three_half_kernels_overfill_the_device_and_slow_down_alike() {
    // Load 1.5: each works at 1 / 1.5 of full speed and needs 15 µs.
    let report = concurrent(&side_by_side(&[0.5, 0.5, 0.5]));
    assert_eq!(spans(&report), [(0.0, 15.0), (0.0, 15.0), (0.0, 15.0)]);
    // 15 µs of device time on one device: the bound is reached.
    assert_eq!(report.lower_bound_us, 15.0);
}

#[test]
fn a_half_kernel_and_a_full_one_share_by_occupancy() {
    // Load 1.5 again: both at 2/3 speed, both end at 15; equal sharing would end both at 20.
    let report = concurrent(&side_by_side(&[0.5, 1.0]));
    assert_spans(&spans(&report), &[(0.0, 15.0), (0.0, 15.0)]);
    assert_eq!(report.lower_bound_us, 15.0);
    // Two full kernels share equally, as processor sharing does.
    let report = concurrent(&side_by_side(&[1.0, 1.0]));
    assert_eq!(spans(&report), [(0.0, 20.0), (0.0, 20.0)]);
    // Small kernels: any number that fits runs at full speed.
    let report = concurrent(&side_by_side(&[0.125; 8]));
    assert_eq!(spans(&report), [(0.0, 10.0); 8]);
    assert_eq!(report.lower_bound_us, 10.0);
}

#[test]
fn a_kernel_joining_midway_slows_the_running_one_from_then_on() {
    // a (20 µs, 0.75) runs beside x (4 µs, 0.25): load 1, full speed. At 4, x ends and b
    // (10 µs, 0.5) joins: load 1.25, rate 0.8. b needs 10 / 0.8 = 12.5 µs and ends at 16.5;
    // a has done 4 + 10 = 14 µs of its 20 by then and ends alone at 22.5.
    let mut b = Builder::new(1);
    let c = b.stream(0, StreamKind::Compute);
    let s = b.stream(0, StreamKind::SubCompute);
    b.kernel("a", c, 20, 0.75);
    b.kernel("x", s, 4, 0.25);
    b.kernel("b", s, 10, 0.5);
    let report = concurrent(&b.build());
    assert_spans(&spans(&report), &[(0.0, 22.5), (0.0, 4.0), (4.0, 16.5)]);
    // Work 15 + 1 + 5 = 21 µs; the chain a is 20 µs.
    assert_eq!(report.lower_bound_us, 21.0);
    assert!(report.step_time_us >= report.lower_bound_us);
}

#[test]
fn host_transfers_hold_their_sender() {
    // Device 0 computes `a` (10 µs), sends it to device 1 (5 µs) and computes `c` (4 µs),
    // ready with the send; device 1 computes `d` on what it received (3 µs).
    let mut b = Builder::new(2);
    let (c0, c1, tx, rx) = b.linked_pair();
    let a = b.compute("a", c0, 10);
    let buffer = b.buffer("a", 0, 8, a);
    let send = b.transfer("a->1", buffer, tx, rx, 5);
    b.wait(send, a);
    b.compute("c", c0, 4);
    let d = b.compute("d", c1, 3);
    b.wait(d, send);
    let plan = b.build();
    // With a link of its own the copy runs beside `c`.
    let report = run(&plan, Channel::BaechiPytorch);
    assert_eq!(spans(&report), [(0.0, 10.0), (10.0, 15.0), (10.0, 14.0), (15.0, 18.0)]);
    // A host copy takes device 0 as a kernel does: `c` (the higher id of the two ready at 10)
    // waits for it.
    let report = run(&plan, Channel::Host);
    assert_eq!(spans(&report), [(0.0, 10.0), (10.0, 15.0), (15.0, 19.0), (15.0, 18.0)]);
    assert_eq!(report.step_time_us, 19.0);
    assert_eq!(report.busy_fraction.devices[0], 1.0);
    assert!(report.busy_fraction.links.is_empty());
    // With concurrent kernels the copy and `c` share the device by occupancy (1 each here,
    // so both run at half speed from 10 on: `c` ends at 18, the copy at 19).
    let shared = SimOptions { channel: Channel::Host, concurrent_kernels: true };
    let report = simulate(&plan, &shared).unwrap();
    assert_eq!(spans(&report), [(0.0, 10.0), (10.0, 19.0), (10.0, 18.0), (19.0, 22.0)]);
}
