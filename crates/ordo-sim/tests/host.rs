//! Devices of one host slow each other down: the simulator charges the profile's slowdown for
//! the time two devices' work overlaps, and nothing where it does not.

mod common;

use ordo_sched::StreamKind;
use ordo_sim::{Channel, SimOptions, simulate, simulate_on_host};

const HOST: SimOptions = SimOptions { concurrent_kernels: false, channel: Channel::Host };

/// Two devices, each one kernel of `a` and `b` µs, the second starting after `wait` (a kernel
/// on its own device).
fn two_devices(a: u64, b: u64, wait: u64) -> ordo_sched::Plan {
    let mut builder = common::Builder::new(2);
    let first = builder.stream(0, StreamKind::Compute);
    let second = builder.stream(1, StreamKind::Compute);
    builder.compute("a", first, a);
    if wait > 0 {
        builder.compute("idle", second, wait);
    }
    builder.compute("b", second, b);
    builder.build()
}

#[test]
fn overlapping_work_is_slowed_and_the_rest_is_not() {
    // Fully overlapping: both kernels take 1.5 times as long.
    let plan = two_devices(1000, 1000, 0);
    let alone = simulate(&plan, &HOST).unwrap();
    assert_eq!(alone.step_time_us, 1000.0);
    let shared = simulate_on_host(&plan, &HOST, 1.5).unwrap();
    assert_eq!(shared.step_time_us, 1500.0);
    // A slowdown of 1 changes nothing.
    assert_eq!(simulate_on_host(&plan, &HOST, 1.0).unwrap(), alone);
    // Half overlapping: `a` (0-1000) is slowed for the half that `idle` and `b` overlap it.
    let staggered = two_devices(1000, 1000, 1000);
    let report = simulate_on_host(&staggered, &HOST, 2.0).unwrap();
    // `a` overlaps `idle` for all its time: 2000 µs. `idle` overlaps `a` fully: 2000 µs; then
    // `b` alone: 1000 µs.
    assert_eq!(report.step_time_us, 3000.0);
}

#[test]
fn one_device_is_not_slowed_and_bad_factors_are_ignored() {
    let mut builder = common::Builder::new(1);
    let stream = builder.stream(0, StreamKind::Compute);
    builder.compute("a", stream, 500);
    let plan = builder.build();
    let alone = simulate(&plan, &HOST).unwrap();
    assert_eq!(simulate_on_host(&plan, &HOST, 3.0).unwrap(), alone);
    let two = two_devices(1000, 1000, 0);
    let base = simulate(&two, &HOST).unwrap();
    for bad in [f64::NAN, f64::INFINITY, 0.5, -1.0] {
        assert_eq!(simulate_on_host(&two, &HOST, bad).unwrap(), base, "{bad}");
    }
}
