//! `auto`: never worse than any fast placer, never above the memory limits, never below the
//! lower bound, and never worse with more budget.

mod common;

use ordo_cost::{CostGraph, StepMode};
use ordo_ir::op::Optimizer;
use ordo_place::{AutoOptions, Devices, PlaceProblem, place_auto};

use common::sample_graph;

const TRAINING: StepMode = StepMode::Training { optimizer: Optimizer::SgdMomentum };

/// The graphs `auto` is checked on: Baechi's samples (forward only, as Baechi places them) and
/// every zoo model at batch 8 (the whole training step).
fn graphs() -> Vec<(String, CostGraph, StepMode)> {
    let mut out = Vec::new();
    for name in ["resnet50", "inception_v3", "transformer", "gnmt", "synth_1k"] {
        out.push((name.to_string(), sample_graph(name), StepMode::ForwardOnly));
    }
    for spec in ordo_models::zoo() {
        let graph = ordo_models::build(spec.name, Some(8), None).unwrap();
        out.push((spec.name.to_string(), ordo_cost::costgraph_from_graph(&graph), TRAINING));
    }
    out
}

/// `devices` devices with no limit, or with a tight one: 1.5 times an even share of the
/// graph's memory, at least the largest node's need.
fn problems(graph: &CostGraph, mode: StepMode, devices: usize) -> Vec<PlaceProblem> {
    let unlimited = PlaceProblem::new(graph, Devices::uniform(devices, u64::MAX), mode).unwrap();
    let needs: Vec<u64> =
        unlimited.memory.iter().map(|m| m.persistent + m.outputs + m.temporary).collect();
    let total: u64 = needs.iter().sum();
    let largest = needs.iter().copied().max().unwrap_or(0);
    let tight = (total / devices as u64 * 3 / 2).max(largest);
    let limited = PlaceProblem::new(graph, Devices::uniform(devices, tight), mode).unwrap();
    vec![unlimited, limited]
}

#[test]
fn auto_is_never_worse_than_a_fast_placer_fits_and_respects_the_bound() {
    let options =
        AutoOptions { budget_seconds: 0.02, reproducible: true, ..AutoOptions::default() };
    for (name, graph, mode) in graphs() {
        for devices in [2, 4, 8] {
            for problem in problems(&graph, mode, devices) {
                let Ok(auto) = place_auto(&problem, &options) else { continue };
                let best = auto.candidates.iter().filter_map(|(_, r)| r.as_ref().ok()).min();
                let placement = &auto.placement;
                assert!(placement.makespan_us <= *best.unwrap(), "{name} x{devices}");
                // The bound holds for every placement that fits, the fast placers' included.
                let bound = ordo_place::lower_bounds(&problem).best_us();
                assert!(bound >= problem.simple_lower_bound_us());
                for (algo, makespan) in &auto.candidates {
                    if let Ok(makespan) = makespan {
                        assert!(*makespan >= bound, "{name} x{devices} {algo}");
                    }
                }
                assert!(placement.makespan_us >= bound, "{name} x{devices}");
                let over = placement
                    .peak_memory_bytes
                    .iter()
                    .zip(&problem.devices.memory)
                    .any(|(peak, limit)| peak > limit);
                assert!(!over, "{name} x{devices}: {:?}", placement.peak_memory_bytes);
                assert_eq!(placement.device_of.len(), problem.len());
            }
        }
    }
}

#[test]
fn twice_the_budget_is_never_worse_and_the_search_is_deterministic() {
    for name in ["inception_v3", "gnmt"] {
        let graph = sample_graph(name);
        for problem in problems(&graph, StepMode::ForwardOnly, 4) {
            let run = |budget_seconds| {
                place_auto(
                    &problem,
                    &AutoOptions { budget_seconds, reproducible: true, ..AutoOptions::default() },
                )
                .unwrap()
            };
            let (once, again, twice) = (run(0.01), run(0.01), run(0.02));
            assert_eq!(once.placement.device_of, again.placement.device_of, "{name}");
            assert!(twice.placement.makespan_us <= once.placement.makespan_us, "{name}");
            assert!(twice.evaluations >= once.evaluations);
        }
    }
}

/// The table of the closing note: per graph and device count, the best Baechi algorithm, the
/// best fast placer, `auto` with the default budget, its gain over the best fast placer, the
/// search time, both lower bounds and the gap to the tighter one. Markdown rows.
/// `cargo test --release -p ordo-place --test auto -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn auto_against_the_fast_placers() {
    let options = AutoOptions::default();
    println!(
        "| graph | devices | memory | best Baechi (ms) | best fast placer (ms) | auto (ms) | gain | \
         auto from | search s | max(CP, work/d) (ms) | lower bound (ms) | gap |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, graph, mode) in graphs() {
        let source = if mode == StepMode::ForwardOnly { "sample" } else { "zoo" };
        for devices in [2, 4, 8] {
            for (memory, problem) in
                ["unlimited", "tight"].iter().zip(problems(&graph, mode, devices))
            {
                let Ok(auto) = place_auto(&problem, &options) else {
                    println!("| {name} ({source}) | {devices} | {memory} | no placement |");
                    continue;
                };
                let baechi = auto
                    .candidates
                    .iter()
                    .filter(|(a, _)| matches!(a.name(), "m-topo" | "m-etf" | "m-sct"))
                    .filter_map(|(a, r)| r.as_ref().ok().map(|m| (*m, a.name())))
                    .min();
                let fast = auto
                    .candidates
                    .iter()
                    .filter_map(|(a, r)| r.as_ref().ok().map(|m| (*m, a.name())))
                    .min();
                let (simple, bound) =
                    (problem.simple_lower_bound_us(), ordo_place::lower_bounds(&problem).best_us());
                let ms = |us: u64| us as f64 / 1e3;
                let step = auto.placement.makespan_us;
                let gain = fast.map_or(0.0, |(m, _)| (1.0 - step as f64 / m as f64) * 100.0);
                let from = &auto.winner;
                println!(
                    "| {name} ({source}) | {devices} | {memory} | {} | {} | {:.2} | {gain:.1}% | \
                     {from} | {:.2} | {:.2} | {:.2} | {:.1}% |",
                    baechi.map_or("-".into(), |(m, a)| format!("{a} {:.2}", ms(m))),
                    fast.map_or("-".into(), |(m, a)| format!("{a} {:.2}", ms(m))),
                    ms(step),
                    auto.search_seconds,
                    ms(simple),
                    ms(bound),
                    (step as f64 / bound.max(1) as f64 - 1.0) * 100.0
                );
            }
        }
    }
}

/// CPU seconds this process has used (user + system), from `/proc/self/stat`; `None` where
/// that is unavailable.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// `auto` with the default budget on `ordo synth` graphs of up to 100,000 nodes and 256
/// devices: the time of the fast placers (and the other starts) alone (budget 0: they get their
/// floor of 1 s), and of all of `auto`, wall and CPU, which must stay near its 2 s budget.
/// `cargo test --release -p ordo-place --test auto -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn auto_time_on_large_graphs() {
    for (nodes, device_counts) in [(1_000, &[4, 8][..]), (10_000, &[4, 8, 256]), (100_000, &[4])] {
        let graph = ordo_cost::synth(nodes, 1);
        for &devices in device_counts {
            let problem =
                PlaceProblem::new(&graph, Devices::uniform(devices, u64::MAX), TRAINING).unwrap();
            let timed = |budget_seconds| {
                let (wall, cpu) = (std::time::Instant::now(), cpu_seconds());
                let options = AutoOptions { budget_seconds, ..AutoOptions::default() };
                let auto = place_auto(&problem, &options).unwrap();
                let cpu = cpu_seconds().zip(cpu).map_or(f64::NAN, |(b, a)| b - a);
                (auto, wall.elapsed().as_secs_f64(), cpu)
            };
            let (_, fast_wall, fast_cpu) = timed(0.0);
            let (auto, wall, cpu) = timed(AutoOptions::default().budget_seconds);
            println!(
                "synth {nodes} x{devices}: fast placers and starts {fast_wall:.2} s wall \
                 ({fast_cpu:.2} s CPU); auto {wall:.2} s wall ({cpu:.2} s CPU), {} simulations; \
                 {:.2} ms from {}; {} runs stopped, {} not started, search cut {:?}",
                auto.evaluations,
                auto.placement.makespan_us as f64 / 1e3,
                auto.winner,
                auto.stopped.len(),
                auto.skipped.len(),
                auto.search_cut
            );
        }
    }
}
