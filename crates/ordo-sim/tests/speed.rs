//! Simulation speed on a large plan: `cargo test --release -p ordo-sim --test speed -- --ignored
//! --nocapture`.

mod common;

use std::time::Instant;

use ordo_sim::{Channel, SimOptions, simulate};

#[test]
#[ignore = "timing; run in release"]
fn hundred_thousand_tasks_in_under_a_second() {
    let plan = common::random_plan(42, 70_000, 8, 3, 50);
    assert!(plan.tasks.len() >= 100_000, "{} tasks", plan.tasks.len());
    for concurrent_kernels in [false, true] {
        for channel in [Channel::BaechiTf, Channel::BaechiPytorch, Channel::Duplex, Channel::Host] {
            let options = SimOptions { concurrent_kernels, channel };
            let start = Instant::now();
            let report = simulate(&plan, &options).unwrap();
            let seconds = start.elapsed().as_secs_f64();
            println!(
                "{} tasks, {} streams, {options:?}: {seconds:.3} s, step {:.0} µs, bound {:.0} µs",
                plan.tasks.len(),
                plan.streams.len(),
                report.step_time_us,
                report.lower_bound_us
            );
            if !cfg!(debug_assertions) {
                assert!(seconds < 1.0, "{seconds} s");
            }
        }
    }
}
