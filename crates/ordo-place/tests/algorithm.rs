//! The dispatcher: names, options, up-front checks, and m-TOPO's simulated makespans on the
//! sample graphs against Baechi's own.

mod common;

use common::{memory_graph, sample, sample_graph};
use ordo_cost::{CostGraph, StepMode};
use ordo_place::{Algorithm, Devices, PlaceError, PlaceOptions, PlaceProblem, place};

/// Baechi's m-TOPO makespans in ms with 4 devices of 1e15 bytes, forward only (Baechi's TF
/// placer and VirtualScheduler run on these sample graphs).
const BAECHI_M_TOPO_MS: [(&str, f64); 5] = [
    ("resnet50", 75.90),
    ("inception_v3", 51.69),
    ("transformer", 124.31),
    ("gnmt", 113.44),
    ("synth_1k", 401.95),
];

#[test]
fn m_topo_makespans_match_baechi_on_the_samples() {
    for (name, baechi_ms) in BAECHI_M_TOPO_MS {
        let p = sample(name);
        let placement = place(&p, Algorithm::MTopo, &PlaceOptions::default()).unwrap();
        let ms = placement.makespan_us as f64 / 1e3;
        assert!((ms - baechi_ms).abs() <= 0.01, "{name}: {ms} ms, Baechi {baechi_ms} ms");
    }
}

#[test]
fn names_parse_back() {
    assert_eq!(Algorithm::all().len(), 7);
    for &algo in Algorithm::all() {
        assert_eq!(algo.name().parse::<Algorithm>().unwrap(), algo);
        assert_eq!(algo.to_string(), algo.name());
    }
    let names: Vec<&str> = Algorithm::all().iter().map(|a| a.name()).collect();
    assert_eq!(
        names,
        ["m-topo", "m-topo-real", "m-etf", "m-sct", "single", "round-robin", "balanced"]
    );
}

#[test]
fn unknown_algorithm_lists_the_known_ones() {
    match "m-foo".parse::<Algorithm>() {
        Err(PlaceError::UnknownAlgorithm { name, known }) => {
            assert_eq!(name, "m-foo");
            for &algo in Algorithm::all() {
                assert!(known.contains(algo.name()), "{known}");
            }
        }
        other => panic!("expected UnknownAlgorithm, got {other:?}"),
    }
}

#[test]
fn default_options_are_baechis() {
    let options = PlaceOptions::default();
    assert_eq!(options.sct_threshold, 0.1);
    assert!(!options.reduce);
}

/// a -> b, both of weight 10 with 16 bytes of output; b holds `persistent` bytes.
fn two_nodes(persistent: u64) -> CostGraph {
    memory_graph(&[("a", 10, 0, 0, 16), ("b", 10, 0, persistent, 16)], &[(0, 1)], &[])
}

#[test]
fn memory_is_checked_up_front_for_every_algorithm() {
    let p = PlaceProblem::new(&two_nodes(1000), Devices::uniform(2, 500), StepMode::ForwardOnly)
        .unwrap();
    for &algo in Algorithm::all() {
        match place(&p, algo, &PlaceOptions::default()) {
            Err(PlaceError::NodeTooLarge { node, needed, available, shortfall }) => {
                assert_eq!((node.as_str(), needed, available, shortfall), ("b", 1016, 500, 516));
            }
            other => panic!("{algo}: expected NodeTooLarge, got {other:?}"),
        }
    }
}

#[test]
fn zero_devices_is_an_error_for_every_algorithm() {
    let mut p =
        PlaceProblem::new(&two_nodes(0), Devices::uniform(1, 500), StepMode::ForwardOnly).unwrap();
    p.devices.memory.clear();
    for &algo in Algorithm::all() {
        let result = place(&p, algo, &PlaceOptions::default());
        assert!(matches!(result, Err(PlaceError::NoDevices)), "{algo}: {result:?}");
    }
}

/// Checks what every placement must satisfy.
fn check(p: &PlaceProblem, placement: &ordo_place::Placement, algo: Algorithm) {
    let n = p.devices.count();
    assert_eq!(placement.algo, algo.name());
    assert_eq!(placement.device_of.len(), p.len(), "{algo}");
    assert!(placement.device_of.iter().all(|&d| d < n), "{algo}");
    for members in &p.groups {
        let d = placement.device_of[members[0]];
        assert!(members.iter().all(|&v| placement.device_of[v] == d), "{algo}: group split");
    }
    // The order lists every node once, on its own device.
    assert_eq!(placement.order.len(), n, "{algo}");
    let mut seen = vec![false; p.len()];
    for (d, order) in placement.order.iter().enumerate() {
        for &v in order {
            assert_eq!(placement.device_of[v], d, "{algo}");
            assert!(!std::mem::replace(&mut seen[v], true), "{algo}: node twice");
        }
    }
    assert!(seen.iter().all(|&s| s), "{algo}: node missing from the order");
    assert_eq!(placement.peak_memory_bytes.len(), n, "{algo}");
    assert!(placement.makespan_us >= ordo_place::lower_bounds(p).best_us(), "{algo}");
    assert!(placement.placement_seconds >= 0.0);
}

#[test]
fn every_algorithm_gives_a_complete_placement() {
    for name in ["gnmt", "inception_v3"] {
        let g = sample_graph(name);
        for mode in [StepMode::ForwardOnly, StepMode::default()] {
            let p = PlaceProblem::new(&g, Devices::uniform(4, u64::MAX), mode).unwrap();
            for &algo in Algorithm::all() {
                for reduce in [false, true] {
                    let options = PlaceOptions { reduce, ..PlaceOptions::default() };
                    match place(&p, algo, &options) {
                        Ok(placement) => check(&p, &placement, algo),
                        // Baechi's forward-only cap counts outputs, not parameters: on a fused
                        // graph whose nodes are mostly parameters it runs out of devices.
                        Err(PlaceError::OutOfMemory { .. })
                            if algo == Algorithm::MTopo
                                && reduce
                                && mode == StepMode::ForwardOnly => {}
                        Err(e) => panic!("{name} {algo} reduce={reduce}: {e}"),
                    }
                }
            }
        }
    }
}

#[test]
fn reduction_keeps_single_consumer_chains_together() {
    // The co-placement grouper merges every single-consumer chain, so a placement of the
    // reduced GNMT puts each node with its only consumer.
    let p = PlaceProblem::new(
        &sample_graph("gnmt"),
        Devices::uniform(4, u64::MAX),
        StepMode::default(),
    )
    .unwrap();
    let options = PlaceOptions { reduce: true, ..PlaceOptions::default() };
    let placement = place(&p, Algorithm::MTopo, &options).unwrap();
    for (v, out) in p.out_edges.iter().enumerate() {
        if let [e] = out[..] {
            let t = p.edges[e].target;
            assert_eq!(placement.device_of[v], placement.device_of[t], "{}", p.names[v]);
        }
    }
}

/// A deadline that has passed: m-ETF and m-SCT stop with an error that names them, `balanced`
/// returns a split that fits (the first one its search tries), the linear placers ignore it;
/// a deadline far ahead changes nothing.
#[test]
fn placers_honour_a_deadline() {
    let p = sample("inception_v3");
    let past =
        PlaceOptions { deadline: Some(std::time::Instant::now()), ..PlaceOptions::default() };
    let ahead = PlaceOptions {
        deadline: Some(std::time::Instant::now() + std::time::Duration::from_secs(3600)),
        ..PlaceOptions::default()
    };
    for algo in [Algorithm::MEtf, Algorithm::MSct] {
        match place(&p, algo, &past) {
            Err(err @ PlaceError::OutOfTime { .. }) => {
                assert!(err.to_string().starts_with(algo.name()), "{err}")
            }
            other => panic!("{algo}: {other:?}"),
        }
    }
    for &algo in Algorithm::all() {
        let free = place(&p, algo, &PlaceOptions::default()).unwrap();
        assert_eq!(place(&p, algo, &ahead).unwrap().device_of, free.device_of, "{algo}");
        if !matches!(algo, Algorithm::MEtf | Algorithm::MSct) {
            let hurried = place(&p, algo, &past).unwrap();
            assert_eq!(hurried.device_of.len(), p.len(), "{algo}");
            if algo != Algorithm::Balanced {
                assert_eq!(hurried.device_of, free.device_of, "{algo}");
            }
        }
    }
}
