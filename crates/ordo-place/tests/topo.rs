//! m-TOPO: hand-worked placements (forward only with Baechi's cap and with real capacities,
//! training, colocation), errors, and properties over random DAGs.

mod common;

use common::{FORWARD, baechi_problem as problem, dag_links, memory_graph};
use ordo_cost::{CostGraph, Optimizer, StepMode};
use ordo_place::{Capacity, Devices, PlaceError, PlaceProblem, m_topo};
use proptest::prelude::*;

/// A node: name, temporary, persistent, output bytes.
type Spec<'a> = (&'a str, u64, u64, u64);

/// A graph of `nodes` of weight 10 with links `(source, target)` carrying the source's output,
/// and colocation `groups` given as (node, group name).
fn graph(nodes: &[Spec], links: &[(usize, usize)], groups: &[(usize, &str)]) -> CostGraph {
    let nodes: Vec<_> = nodes
        .iter()
        .map(|&(name, temp, persistent, out)| (name, 10, temp, persistent, out))
        .collect();
    memory_graph(&nodes, links, groups)
}

const SGD: StepMode = StepMode::Training { optimizer: Optimizer::Sgd };
const CHAIN: [(usize, usize); 3] = [(0, 1), (1, 2), (2, 3)];

/// a (out 40), b (temp 10, persistent 5, out 20), c (persistent 20, out 10), d (out 20).
fn chain() -> CostGraph {
    graph(&[("a", 0, 0, 40), ("b", 10, 5, 20), ("c", 0, 20, 10), ("d", 0, 0, 20)], &CHAIN, &[])
}

#[test]
fn forward_uniform_cap_is_baechis_rule() {
    // mem = temp + out: 40, 30, 10, 20; sum 100 over 2 devices, cap = 50 + 40 = 90.
    // Device 0 counter: a 0 + 0 < 90 -> 40; b 40 + (10 + 5) < 90 -> 70;
    // c 70 + (0 + 20) = 90 is not < 90 -> device 1. (Adding c's own mem, 80 <= 90, would not.)
    let p = problem(&chain(), &[u64::MAX; 2], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Uniform).unwrap(), [0, 0, 1, 1]);
}

#[test]
fn forward_real_capacity() {
    // Counter + max(temp) + sum(persistent) <= limit: with 100 bytes, a 0, b 55, c 90, d 80.
    let p = problem(&chain(), &[100, 100], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Real).unwrap(), [0, 0, 0, 0]);
    // With 60 on device 0, c (70 + 20 > 60) starts device 1.
    let p = problem(&chain(), &[60, 100], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Real).unwrap(), [0, 0, 1, 1]);
    // Baechi's check would put a (40 bytes of output) on a 30-byte device; ordo does not.
    let p = problem(&chain(), &[30, 100], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Real).unwrap(), [1, 1, 1, 1]);
}

#[test]
fn colocation_group_is_placed_when_its_first_node_is_reached() {
    // a 30, b 10 (persistent 10), c 30, d 20, e 10 (persistent 10); b and e colocated.
    // sum 100 over 2 devices, cap = 50 + 30 = 80. Device 0: a -> 30; group {b, e}:
    // 30 + 0 + 20 < 80 -> 50; c 50 < 80 -> 80; d 80 < 80 fails -> device 1.
    let g = graph(
        &[("a", 0, 0, 30), ("b", 0, 10, 10), ("c", 0, 0, 30), ("d", 0, 0, 20), ("e", 0, 10, 10)],
        &[(0, 1), (1, 2), (2, 3), (3, 4)],
        &[(1, "shared"), (4, "shared")],
    );
    let p = problem(&g, &[u64::MAX; 2], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Uniform).unwrap(), [0, 0, 0, 1, 0]);
}

/// Three nodes of persistent 10 and output 20: in a training step with SGD each keeps 40
/// bytes (weights, gradients, activation) and needs 40 more while running (its scratch is the
/// upstream gradient).
fn training_chain() -> CostGraph {
    graph(&[("a", 0, 10, 20), ("b", 0, 10, 20), ("c", 0, 10, 20)], &[(0, 1), (1, 2)], &[])
}

#[test]
fn training_counts_the_whole_step() {
    // Forward only, all three fit in 100 bytes: counter 60, need 30 + 20.
    let p = problem(&training_chain(), &[100; 3], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Real).unwrap(), [0, 0, 0]);
    // Training: one node needs 40 + 40 = 80, two need 120 > 100.
    let p = problem(&training_chain(), &[100; 3], SGD);
    assert_eq!(m_topo(&p, Capacity::Real).unwrap(), [0, 1, 2]);
    // Training, uniform cap: 120 / 3 + 40 (run) + 40 (group) = 120 fits a and b together.
    let p = problem(&training_chain(), &[1000; 3], SGD);
    assert_eq!(m_topo(&p, Capacity::Uniform).unwrap(), [0, 0, 1]);
}

#[test]
fn out_of_memory_names_the_first_node_left_over() {
    let p = problem(&training_chain(), &[100; 2], SGD);
    match m_topo(&p, Capacity::Real) {
        Err(PlaceError::OutOfMemory { algo, unplaced, total, first }) => {
            assert_eq!((algo, unplaced, total, first.as_str()), ("m-topo-real", 1, 3, "c"));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn node_too_large_names_node_need_and_shortfall() {
    let g = graph(&[("small", 0, 0, 10), ("huge", 5, 100, 20)], &[(0, 1)], &[]);
    let p = problem(&g, &[50, 90], FORWARD);
    for capacity in [Capacity::Uniform, Capacity::Real] {
        match m_topo(&p, capacity) {
            Err(PlaceError::NodeTooLarge { node, needed, available, shortfall }) => {
                // persistent 100 + (temporary 5 + output 20)
                assert_eq!((node.as_str(), needed, available, shortfall), ("huge", 125, 90, 35));
            }
            other => panic!("expected NodeTooLarge, got {other:?}"),
        }
    }
    // A group needs its members' resident bytes plus its largest run: 80 + 30 forward.
    let g = graph(
        &[("x", 0, 40, 10), ("y", 0, 40, 30)],
        &[(0, 1)],
        &[(0, "together"), (1, "together")],
    );
    assert!(m_topo(&problem(&g, &[100, 110], FORWARD), Capacity::Real).is_ok());
    match m_topo(&problem(&g, &[100, 109], FORWARD), Capacity::Real) {
        Err(PlaceError::NodeTooLarge { node, needed, available, shortfall }) => {
            assert_eq!((node.as_str(), needed, available, shortfall), ("x", 110, 109, 1));
        }
        other => panic!("expected NodeTooLarge, got {other:?}"),
    }
    let p = problem(&g, &[100, 100], SGD);
    match m_topo(&p, Capacity::Real) {
        Err(PlaceError::NodeTooLarge { node, needed, available, shortfall }) => {
            // resident (80 + 10) + (80 + 30), run max(20, 60)
            assert_eq!((node.as_str(), needed, available, shortfall), ("x", 260, 100, 160));
        }
        other => panic!("expected NodeTooLarge, got {other:?}"),
    }
}

#[test]
fn zero_devices() {
    let g = chain();
    let devices = Devices::uniform(0, 100);
    assert!(matches!(
        PlaceProblem::new(&g, devices, FORWARD),
        Err(ordo_place::ProblemError::NoDevices)
    ));
    let mut p = problem(&g, &[100], FORWARD);
    p.devices.memory.clear();
    assert!(matches!(m_topo(&p, Capacity::Uniform), Err(PlaceError::NoDevices)));
}

#[test]
fn empty_graph() {
    let p = problem(&CostGraph::default(), &[100; 2], FORWARD);
    assert_eq!(m_topo(&p, Capacity::Uniform).unwrap(), Vec::<usize>::new());
}

/// Step need of every device, computed from the node memories directly.
fn needs(p: &PlaceProblem, device_of: &[usize]) -> Vec<u128> {
    let mut resident = vec![0u128; p.devices.count()];
    let mut run = vec![0u128; p.devices.count()];
    for (v, &d) in device_of.iter().enumerate() {
        let m = &p.memory[v];
        resident[d] +=
            u128::from(m.persistent) + if m.retain_outputs { u128::from(m.outputs) } else { 0 };
        run[d] = run[d].max(u128::from(m.temporary) + u128::from(m.outputs));
    }
    resident.iter().zip(&run).map(|(r, x)| r + x).collect()
}

prop_compose! {
    /// A random DAG (edges go from lower to higher index) with some shared colocation groups.
    fn random_graph()(n in 1usize..40)(
        edges in proptest::collection::vec((0..n, 0..n), 0..3 * n),
        memory in proptest::collection::vec((0u64..50, 0u64..200, 0u64..200), n),
        groups in proptest::collection::vec(proptest::option::weighted(0.3, 0usize..4), n),
    ) -> CostGraph {
        let names: Vec<String> = (0..memory.len()).map(|i| format!("n{i}")).collect();
        let specs: Vec<Spec> = names.iter().zip(&memory)
            .map(|(name, &(t, p, o))| (name.as_str(), t, p, o)).collect();
        let links = dag_links(edges);
        let names_of_groups = ["g0", "g1", "g2", "g3"];
        let group_list: Vec<(usize, &str)> = groups.iter().enumerate()
            .filter_map(|(v, g)| g.map(|g| (v, names_of_groups[g]))).collect();
        graph(&specs, &links, &group_list)
    }
}

proptest! {
    #[test]
    fn every_node_placed_groups_together_memory_within_limits(
        g in random_graph(),
        devices in 1usize..5,
        slack in 0.3f64..3.0,
        training in any::<bool>(),
        real in any::<bool>(),
    ) {
        let mode = if training { SGD } else { FORWARD };
        let capacity = if real { Capacity::Real } else { Capacity::Uniform };
        let unlimited = problem(&g, &vec![u64::MAX; devices], mode);
        let total = needs(&unlimited, &vec![0; unlimited.len()])[0];
        let limit = ((total as f64 * slack / devices as f64) as u64).max(1);
        for p in [unlimited, problem(&g, &vec![limit; devices], mode)] {
            match m_topo(&p, capacity) {
                Ok(device_of) => {
                    prop_assert_eq!(device_of.len(), p.len());
                    prop_assert!(device_of.iter().all(|&d| d < devices));
                    for members in &p.groups {
                        prop_assert!(members.iter().all(|&v| device_of[v] == device_of[members[0]]));
                    }
                    for (d, need) in needs(&p, &device_of).into_iter().enumerate() {
                        prop_assert!(need <= u128::from(p.devices.memory[d]));
                    }
                    // Devices are filled in order: the device never goes back.
                    let mut last = 0;
                    for &v in &p.topo_order {
                        if p.groups[p.group_of[v]][..].iter().any(|&u| p.topo_rank[u] < p.topo_rank[v]) {
                            continue;
                        }
                        prop_assert!(device_of[v] >= last);
                        last = device_of[v];
                    }
                }
                Err(PlaceError::OutOfMemory { .. } | PlaceError::NodeTooLarge { .. }) => {
                    // Only Baechi's forward-only cap can fail with unlimited memory.
                    prop_assert!(!(p.devices.memory[0] == u64::MAX && (training || real)));
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

/// m-TOPO on 100,000 nodes; run with `cargo test --release -p ordo-place --test topo --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn speed_100k() {
    let g = ordo_cost::synth(100_000, 1);
    let p = problem(&g, &[u64::MAX; 4], FORWARD);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        let device_of = m_topo(&p, Capacity::Uniform).unwrap();
        best = best.min(start.elapsed().as_secs_f64());
        assert_eq!(device_of.len(), 100_000);
    }
    println!("m-topo on 100,000 nodes: {:.2} ms (best of 5)", best * 1e3);
    if !cfg!(debug_assertions) {
        assert!(best < 0.1, "{best} s");
    }
}
