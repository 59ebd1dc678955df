//! The placers' own estimates against the simulator on the plans built from their placements,
//! both under Baechi's TensorFlow channel model.

use std::path::PathBuf;

use ordo_place::{Algorithm, Devices, PlaceOptions, PlaceProblem, Placement};
use ordo_sched::{Plan, StreamKind, TaskKind, build_plan};
use ordo_sim::{Channel, SimOptions, simulate};

const SAMPLES: [&str; 5] = ["resnet50", "inception_v3", "transformer", "gnmt", "synth_1k"];

/// Baechi's sample `name` on 4 devices without memory limits, forward only.
fn sample(name: &str) -> PlaceProblem {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ordo-cost/tests/fixtures")
        .join(format!("{name}.json"));
    let graph = ordo_cost::read_costgraph(&path).unwrap();
    forward(&graph, 4)
}

fn forward(graph: &ordo_cost::CostGraph, devices: usize) -> PlaceProblem {
    let devices = Devices::uniform(devices, 1_000_000_000_000_000);
    PlaceProblem::new(graph, devices, ordo_cost::StepMode::ForwardOnly).unwrap()
}

fn place(problem: &PlaceProblem, algo: Algorithm) -> Placement {
    ordo_place::place(problem, algo, &PlaceOptions::default()).unwrap()
}

/// The step time of the plan of `placement`, Baechi-TF channels.
fn step_us(problem: &PlaceProblem, placement: &Placement) -> (Plan, f64) {
    let plan = build_plan(problem, placement).unwrap();
    let options = SimOptions { channel: Channel::BaechiTf, ..SimOptions::default() };
    let step = simulate(&plan, &options).unwrap().step_time_us;
    (plan, step)
}

fn assert_agrees(what: &str, problem: &PlaceProblem, placement: &Placement) {
    let (_, step) = step_us(problem, placement);
    let estimate = placement.makespan_us as f64;
    assert_eq!(step, estimate, "{what} ({}): simulated vs placer's estimate", placement.algo);
}

/// Every placer's estimate is the simulated step of its plan: m-ETF and m-SCT's own schedule
/// (transfers booked when consumers start), the others' from Baechi's `VirtualScheduler`
/// (booked when producers are taken); the plan carries the booking order.
#[test]
fn every_estimate_is_the_simulated_step_on_the_samples() {
    for name in SAMPLES {
        let problem = sample(name);
        for &algo in Algorithm::all() {
            assert_agrees(name, &problem, &place(&problem, algo));
        }
    }
}

/// `auto`'s search moves groups and re-simulates with Baechi's `VirtualScheduler`: its
/// estimate is the simulated step too, and it is at most every fast placer's.
#[test]
fn auto_estimate_is_the_simulated_step_and_the_best() {
    let options =
        ordo_place::AutoOptions { budget_seconds: 0.05, reproducible: true, ..Default::default() };
    for name in SAMPLES {
        let problem = sample(name);
        let auto = ordo_place::place_auto(&problem, &options).unwrap();
        assert_agrees(name, &problem, &auto.placement);
        for &algo in Algorithm::all() {
            let (_, step) = step_us(&problem, &place(&problem, algo));
            assert!(auto.placement.makespan_us as f64 <= step, "{name}: auto vs {algo}");
        }
    }
}

#[test]
fn every_estimate_is_the_simulated_step_on_random_graphs() {
    for (n, seed) in [(10, 0), (30, 1), (100, 2), (300, 3), (1000, 4)] {
        for devices in 2..=4 {
            let problem = forward(&ordo_cost::synth(n, seed), devices);
            let what = format!("synth({n}, {seed}) on {devices} devices");
            for &algo in Algorithm::all() {
                assert_agrees(&what, &problem, &place(&problem, algo));
            }
        }
    }
}

/// Every tx and rx queue of the plan of an m-ETF placement lists its transfers in the order in
/// which m-ETF booked them.
#[test]
fn plan_queues_follow_m_etfs_transfer_order() {
    let mut graphs: Vec<(String, PlaceProblem)> =
        SAMPLES.iter().map(|name| (name.to_string(), sample(name))).collect();
    for seed in 0..8 {
        let problem = forward(&ordo_cost::synth(200, seed), 2 + seed as usize % 3);
        graphs.push((format!("synth(200, {seed})"), problem));
    }
    for (name, problem) in &graphs {
        let placement = place(problem, Algorithm::MEtf);
        let transfers = placement.transfers.as_ref().expect("m-ETF lists its transfers");
        let (plan, _) = step_us(problem, &placement);
        let issued: std::collections::HashMap<(String, usize), usize> = transfers
            .iter()
            .enumerate()
            .map(|(k, &(t, to))| ((problem.tensors[t].name.clone(), to), k))
            .collect();
        let mut count = 0;
        for stream in &plan.streams {
            if !matches!(stream.kind, StreamKind::Tx { .. } | StreamKind::Rx { .. }) {
                continue;
            }
            let ranks: Vec<usize> = stream
                .tasks
                .iter()
                .map(|t| {
                    let task = &plan.tasks[t.0 as usize];
                    let TaskKind::Transfer { buffer, to, .. } = task.kind else {
                        panic!("{name}: compute task {} on a link stream", task.name)
                    };
                    let tensor = plan.buffers[buffer.0 as usize].name.clone();
                    issued[&(tensor, to)]
                })
                .collect();
            assert!(ranks.is_sorted(), "{name}: {:?} queue out of m-ETF's order", stream.kind);
            count += ranks.len();
        }
        assert_eq!(count, 2 * transfers.len(), "{name}: every transfer is queued twice");
    }
}

/// In training, under memory limits tight enough that placements must spread out: whatever a
/// placer accepts fits on every device by the simulator's count (received copies included),
/// its peaks are the simulated peaks, and its makespan the simulated step.
#[test]
fn accepted_training_placements_fit_in_simulation() {
    let training = ordo_cost::StepMode::Training { optimizer: ordo_cost::Optimizer::Adam };
    let mut accepted = 0;
    for seed in 0..12u64 {
        let graph = ordo_cost::synth(200, seed);
        let unlimited =
            PlaceProblem::new(&graph, Devices::uniform(3, u64::MAX / 4), training).unwrap();
        let total = ordo_place::device_needs(&unlimited, &vec![0; unlimited.len()])[0];
        for share in [0.45, 0.6] {
            let limit = (total as f64 * share) as u64;
            let problem = PlaceProblem::new(&graph, Devices::uniform(3, limit), training).unwrap();
            for &algo in Algorithm::all() {
                let Ok(placement) = ordo_place::place(&problem, algo, &PlaceOptions::default())
                else {
                    continue;
                };
                accepted += 1;
                let what = format!("synth(200, {seed}), {share} of the memory, {}", algo.name());
                let plan = build_plan(&problem, &placement).unwrap();
                let report = simulate(&plan, &SimOptions::default()).unwrap();
                assert_eq!(report.peak_memory_bytes, placement.peak_memory_bytes, "{what}");
                assert!(report.peak_memory_bytes.iter().all(|&p| p <= limit), "{what}");
                assert_eq!(report.step_time_us, placement.makespan_us as f64, "{what}");
            }
        }
    }
    println!("{accepted} placements accepted");
    assert!(accepted >= 50, "only {accepted} placements accepted");
}
