//! Properties over random plans: random DAGs on random devices with transfers inserted.

mod common;

use ordo_sched::{Plan, StreamKind};
use ordo_sim::{Channel, Report, SimOptions, simulate};
use proptest::prelude::*;

fn options() -> impl Strategy<Value = SimOptions> {
    (
        any::<bool>(),
        prop_oneof![
            Just(Channel::BaechiTf),
            Just(Channel::BaechiPytorch),
            Just(Channel::Duplex),
            Just(Channel::Host)
        ],
    )
        .prop_map(|(concurrent_kernels, channel)| SimOptions { concurrent_kernels, channel })
}

/// Rounding slack for processor sharing.
fn slack(x: f64) -> f64 {
    1e-9 * (1.0 + x.abs())
}

fn check_dependencies(plan: &Plan, report: &Report, channel: Channel) {
    let at = |t: ordo_sched::TaskId| &report.tasks[t.0 as usize];
    for stream in &plan.streams {
        let link = matches!(stream.kind, StreamKind::Tx { .. } | StreamKind::Rx { .. });
        for w in stream.tasks.windows(2) {
            if link && channel == Channel::BaechiTf {
                // A transfer leaves its link's streams when its send starts.
                assert!(at(w[1]).start_us >= at(w[0]).start_us, "link order");
            } else {
                assert!(at(w[1]).start_us >= at(w[0]).finish_us, "stream order");
            }
        }
    }
    for (t, task) in plan.tasks.iter().enumerate() {
        let timing = &report.tasks[t];
        let took = timing.finish_us - timing.start_us;
        assert!(took >= task.duration_us as f64 - slack(timing.finish_us));
        for e in &task.waits {
            let after = plan.events[e.0 as usize].after;
            assert!(timing.start_us >= at(after).finish_us, "event");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn step_time_is_bounded(
        seed in any::<u64>(),
        nodes in 1usize..60,
        devices in 1usize..5,
        options in options(),
    ) {
        let plan = common::random_plan(seed, nodes, devices, 3, 10);
        let report = simulate(&plan, &options).unwrap();
        let step = report.step_time_us;
        prop_assert!(step >= report.lower_bound_us - slack(step), "{step} < {}", report.lower_bound_us);
        let serial: f64 = plan.tasks.iter().map(|t| t.duration_us as f64).sum();
        prop_assert!(step <= serial + slack(serial));
        check_dependencies(&plan, &report, options.channel);
        let last = report.tasks.iter().map(|t| t.finish_us).fold(0.0, f64::max);
        prop_assert_eq!(step, last);
        let links = report.busy_fraction.links.iter().map(|l| &l.fraction);
        for &f in report.busy_fraction.devices.iter().chain(links) {
            prop_assert!((0.0..=1.0 + 1e-9).contains(&f));
        }
        // The critical path ends with the last task and moves forward in time: each task's
        // last `duration` begins after its predecessor's first `duration` ends. (Both are the
        // whole task except for Baechi-TF transfers, whose send and receive can be apart, and
        // shared kernels, which take longer than their duration.)
        let path = &report.critical_path;
        prop_assert!(!path.is_empty());
        let by_name = |name: &str| {
            let t = report.tasks.iter().position(|t| t.name == name).unwrap();
            (&report.tasks[t], plan.tasks[t].duration_us as f64)
        };
        prop_assert_eq!(by_name(path.last().unwrap()).0.finish_us, step);
        for w in path.windows(2) {
            let ((before, first), (after, last)) = (by_name(&w[0]), by_name(&w[1]));
            prop_assert!(after.finish_us - last >= before.start_us + first - slack(step));
        }
        prop_assert_eq!(simulate(&plan, &options).unwrap(), report, "deterministic");
    }

    #[test]
    fn memory_stays_under_the_peak_and_returns_to_the_persistent_level(
        seed in any::<u64>(),
        nodes in 1usize..60,
        devices in 1usize..5,
        options in options(),
        retain in any::<bool>(),
    ) {
        let mut plan = common::random_plan(seed, nodes, devices, 3, 10);
        if !retain {
            for b in &mut plan.buffers {
                b.retained = false;
            }
        }
        let report = simulate(&plan, &options).unwrap();
        for d in 0..devices {
            let timeline = &report.memory_timeline[d];
            let persistent = plan.persistent_bytes[d];
            prop_assert_eq!(timeline[0], (0.0, persistent));
            prop_assert_eq!(timeline.last().unwrap(), &(report.step_time_us, persistent));
            prop_assert!(timeline.windows(2).all(|w| w[0].0 <= w[1].0));
            let highest = timeline.iter().map(|p| p.1).max().unwrap();
            prop_assert_eq!(highest, report.peak_memory_bytes[d]);
            // The retained buffers are freed last, at the end of the step.
            let retained: Vec<u64> = plan
                .buffers
                .iter()
                .filter(|b| b.retained && b.device == d && b.bytes > 0)
                .map(|b| b.bytes)
                .collect();
            if !retained.is_empty() {
                let before = timeline[timeline.len() - 1 - retained.len()];
                prop_assert_eq!(before.1, persistent + retained.iter().sum::<u64>());
            }
        }
    }
}
