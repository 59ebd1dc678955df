use proptest::prelude::*;

use super::*;

/// Relative tolerance for comparing LP optima with exact values.
const TOL: f64 = 1e-4;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOL * a.abs().max(b.abs()).max(1.0)
}

/// The longest path when edge `e` costs `edges[e].2 * charge(e)`; nodes must be topologically
/// numbered (every edge goes from a lower to a higher index).
fn critical_path(
    weights: &[f64],
    edges: &[(usize, usize, f64)],
    charge: impl Fn(usize) -> f64,
) -> f64 {
    let mut finish = weights.to_vec();
    for v in 0..weights.len() {
        let start = edges
            .iter()
            .enumerate()
            .filter(|&(_, &(_, to, _))| to == v)
            .map(|(e, &(from, _, c))| finish[from] + c * charge(e))
            .fold(0.0, f64::max);
        finish[v] = start + weights[v];
    }
    finish.into_iter().fold(0.0, f64::max)
}

/// The best makespan over every 0/1 choice of favorite edges with at most one favorite child and
/// one favorite parent per node (the LP with integral `x`).
fn integral_optimum(weights: &[f64], edges: &[(usize, usize, f64)]) -> f64 {
    let mut best = f64::INFINITY;
    'sets: for set in 0u32..1 << edges.len() {
        let favorite = |e: usize| set >> e & 1 == 1;
        let (mut children, mut parents) = (vec![0; weights.len()], vec![0; weights.len()]);
        for (e, &(u, v, _)) in edges.iter().enumerate() {
            if favorite(e) {
                children[u] += 1;
                parents[v] += 1;
                if children[u] > 1 || parents[v] > 1 {
                    continue 'sets;
                }
            }
        }
        best = best.min(critical_path(weights, edges, |e| if favorite(e) { 0.0 } else { 1.0 }));
    }
    best
}

/// Checks that `child` names only successors and that no node is the favorite of two nodes.
fn assert_consistent(n: usize, edges: &[(usize, usize, f64)], child: &[Option<usize>]) {
    assert_eq!(child.len(), n);
    let mut parents = vec![0; n];
    for (u, &c) in child.iter().enumerate() {
        if let Some(v) = c {
            assert!(edges.iter().any(|&(a, b, _)| (a, b) == (u, v)), "{u} -> {v} is no edge");
            parents[v] += 1;
            assert!(parents[v] <= 1, "node {v} is the favorite child of two nodes");
        }
    }
}

#[test]
fn empty_graph() {
    let r = favorite_children(&[], &[], 0.1).unwrap();
    assert_eq!(r, FavoriteChildren { child: vec![], relaxed_makespan: 0.0, conflicts_resolved: 0 });
}

#[test]
fn nodes_without_edges() {
    let r = favorite_children(&[3.0, 9.0, 4.0], &[], 0.1).unwrap();
    assert_eq!(r.child, vec![None; 3]);
    assert_eq!(r.relaxed_makespan, 9.0);
}

#[test]
fn chain_every_edge_is_a_favorite() {
    let weights = [3.0, 5.0, 7.0, 2.0];
    let edges = [(0, 1, 50.0), (1, 2, 80.0), (2, 3, 10.0)];
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert_eq!(r.child, vec![Some(1), Some(2), Some(3), None]);
    assert!(close(r.relaxed_makespan, 17.0), "{}", r.relaxed_makespan);
    assert_eq!(r.conflicts_resolved, 0);
}

#[test]
fn chain_edge_off_the_critical_path_is_a_favorite() {
    // Node 2 alone sets the makespan; the chain 0 -> 1 has slack but costs nothing to favor.
    let r = favorite_children(&[1.0, 1.0, 1000.0], &[(0, 1, 10.0)], 0.1).unwrap();
    assert_eq!(r.child, vec![Some(1), None, None]);
    assert!(close(r.relaxed_makespan, 1000.0));
}

#[test]
fn fork_heavy_child_is_the_favorite() {
    // 0 -> 1 (heavy) and 0 -> 2: x_01 + x_02 >= 1. Charging the heavy child costs
    // 10 + 20 + 100 = 130; charging the light one 10 + 20 + 5 = 35 < 10 + 100, so w = 110
    // with x_01 = 0 and x_02 = 1, the only optimum.
    let weights = [10.0, 100.0, 5.0];
    let edges = [(0, 1, 20.0), (0, 2, 20.0)];
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert_eq!(r.child, vec![Some(1), None, None]);
    assert!(close(r.relaxed_makespan, 110.0), "{}", r.relaxed_makespan);
}

#[test]
fn join_heavy_parent_is_the_favorite() {
    // 0 -> 2 and 1 (heavy) -> 2: x_02 + x_12 >= 1. With x_12 = 0 node 2 starts at
    // max(10 + 30, 100) = 100, so w = 105; any x_12 > 0 delays it.
    let weights = [10.0, 100.0, 5.0];
    let edges = [(0, 2, 30.0), (1, 2, 30.0)];
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert_eq!(r.child, vec![None, Some(2), None]);
    assert!(close(r.relaxed_makespan, 105.0), "{}", r.relaxed_makespan);
}

#[test]
fn join_keeps_one_favorite_parent() {
    // A threshold of 2 makes every edge a candidate: the last parent wins, two are dropped.
    let weights = [1.0, 1.0, 1.0, 1.0];
    let edges = [(0, 3, 5.0), (1, 3, 5.0), (2, 3, 5.0)];
    let r = favorite_children(&weights, &edges, 2.0).unwrap();
    assert_eq!(r.child, vec![None, None, Some(3), None]);
    assert_eq!(r.conflicts_resolved, 2);
    // Symmetric parents: the LP spreads x = 2/3 over them, and no edge is below 0.1.
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert_eq!(r.child, vec![None; 4]);
    assert!(close(r.relaxed_makespan, 1.0 + 5.0 * 2.0 / 3.0 + 1.0), "{}", r.relaxed_makespan);
}

#[test]
fn fork_keeps_one_favorite_child() {
    let weights = [1.0, 1.0, 1.0, 1.0];
    let edges = [(0, 1, 5.0), (0, 2, 5.0), (0, 3, 5.0)];
    let r = favorite_children(&weights, &edges, 2.0).unwrap();
    assert_eq!(r.child, vec![Some(3), None, None, None]);
    assert_eq!(r.conflicts_resolved, 2);
}

/// a = 0 (10 µs), b = 1 (50), c = 2 (30), d = 3 (10); a -> b (20), a -> c (40), b -> d (30),
/// c -> d (10).
fn diamond() -> ([f64; 4], [(usize, usize, f64); 4]) {
    ([10.0, 50.0, 30.0, 10.0], [(0, 1, 20.0), (0, 2, 40.0), (1, 3, 30.0), (2, 3, 10.0)])
}

#[test]
fn diamond_by_hand() {
    // With the degree rows tight (x_ab = 1 - t, x_ac = t, x_bd = 1 - u, x_cd = u), d starts at
    // max(110 - 20t - 30u, 40 + 40t + 10u). u = 1 lowers the first by 30 for 10 on the second,
    // t trades 20 for 40; so u = 1, and t = 1/2 evens them at 70: w = 80, uniquely, with
    // x = (1/2, 1/2, 0, 1). Only b -> d is below 0.1. The best integral choice (a -> c and
    // b -> d) gives 90.
    let (weights, edges) = diamond();
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert!(close(r.relaxed_makespan, 80.0), "{}", r.relaxed_makespan);
    assert_eq!(r.child, vec![None, Some(3), None, None]);
    assert_eq!(r.conflicts_resolved, 0);
    assert!(close(integral_optimum(&weights, &edges), 90.0));
}

#[test]
fn diamond_conflict_replaces_the_earlier_favorite() {
    // At 0.6 both a -> b and a -> c (x = 1/2) are candidates: a -> c, later, replaces a -> b.
    let (weights, edges) = diamond();
    let r = favorite_children(&weights, &edges, 0.6).unwrap();
    assert_eq!(r.child, vec![Some(2), Some(3), None, None]);
    assert_eq!(r.conflicts_resolved, 1);
}

#[test]
fn conflict_rules() {
    // Replacing a favorite clears the old child's parent: the later 3 -> 1 takes node 1
    // without touching 0's new favorite 2.
    let (child, dropped) = resolve_conflicts(4, [(0, 1), (0, 2), (3, 1)]);
    assert_eq!(child, vec![Some(2), None, None, Some(1)]);
    assert_eq!(dropped, 1);
    // A child with a favorite parent moves to the new parent.
    let (child, dropped) = resolve_conflicts(3, [(0, 2), (1, 2)]);
    assert_eq!(child, vec![None, Some(2), None]);
    assert_eq!(dropped, 1);
    // Parallel edges are one favorite.
    let (child, dropped) = resolve_conflicts(2, [(0, 1), (0, 1)]);
    assert_eq!(child, vec![Some(1), None]);
    assert_eq!(dropped, 0);
}

#[test]
fn parallel_edges() {
    // x_1 + x_2 >= 1 (both degree rows): the LP evens 5 x_1 = 7 x_2 at x_1 = 7/12, so node 1
    // starts at 1 + 35/12 and neither edge is a favorite.
    let r = favorite_children(&[1.0, 1.0], &[(0, 1, 5.0), (0, 1, 7.0)], 0.1).unwrap();
    assert!(close(r.relaxed_makespan, 2.0 + 35.0 / 12.0), "{}", r.relaxed_makespan);
    assert_eq!(r.child, vec![None, None]);
    // With both as candidates, the second is the same favorite again.
    let r = favorite_children(&[1.0, 1.0], &[(0, 1, 5.0), (0, 1, 7.0)], 2.0).unwrap();
    assert_eq!(r.child, vec![Some(1), None]);
    assert_eq!(r.conflicts_resolved, 0);
}

#[test]
fn bad_input() {
    let e = favorite_children(&[1.0, f64::NAN], &[], 0.1).unwrap_err();
    assert!(matches!(e, LpError::InvalidWeight { node: 1, .. }), "{e:?}");
    let e = favorite_children(&[-1.0], &[], 0.1).unwrap_err();
    assert!(matches!(e, LpError::InvalidWeight { node: 0, .. }), "{e:?}");
    let e = favorite_children(&[1.0, 1.0], &[(0, 1, 1.0), (0, 2, 1.0)], 0.1).unwrap_err();
    assert!(matches!(e, LpError::EdgeOutOfRange { edge: 1, from: 0, to: 2, nodes: 2 }), "{e:?}");
    let e = favorite_children(&[1.0, 1.0], &[(0, 1, f64::INFINITY)], 0.1).unwrap_err();
    assert!(matches!(e, LpError::InvalidCost { edge: 0, .. }), "{e:?}");
    let e = favorite_children(&[1.0, 1.0], &[(0, 1, -2.0)], 0.1).unwrap_err();
    assert!(matches!(e, LpError::InvalidCost { edge: 0, .. }), "{e:?}");
    let e = favorite_children(&[1.0, 1.0], &[(0, 1, 1.0), (1, 1, 1.0)], 0.1).unwrap_err();
    assert!(matches!(e, LpError::SelfLoop { edge: 1, node: 1 }), "{e:?}");
    let e = favorite_children(&[1.0], &[], f64::NAN).unwrap_err();
    assert!(matches!(e, LpError::InvalidThreshold), "{e:?}");
    let big = f64::MAX / 2.0;
    let e = favorite_children(&[big, big, big], &[(0, 1, 0.0), (1, 2, 0.0)], 0.1).unwrap_err();
    assert!(matches!(e, LpError::Overflow), "{e:?}");
}

#[test]
fn cycle_names_a_node_on_it() {
    // 0 -> 1 -> 2 -> 3 -> 1: node 0 is before the cycle, 1, 2 and 3 are on it.
    let edges = [(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 1, 1.0)];
    match favorite_children(&[1.0; 4], &edges, 0.1) {
        Err(LpError::Cycle { node }) => assert!((1..=3).contains(&node), "{node}"),
        other => panic!("expected a cycle, got {other:?}"),
    }
}

#[test]
fn error_messages_name_the_culprit() {
    let e = favorite_children(&[1.0, 1.0], &[(0, 5, 1.0)], 0.1).unwrap_err();
    assert_eq!(e.to_string(), "edge 0 (0 -> 5) names a node out of range: there are 2 nodes");
    let e = favorite_children(&[1.0, f64::NAN], &[], 0.1).unwrap_err();
    assert_eq!(e.to_string(), "node 1: compute time NaN µs is not a finite non-negative number");
}

/// A random DAG: `n` nodes numbered topologically and edges from lower to higher indices.
fn dag(
    max_nodes: usize,
    max_edges: usize,
) -> impl Strategy<Value = (Vec<f64>, Vec<(usize, usize, f64)>)> {
    (2..=max_nodes).prop_flat_map(move |n| {
        let weights = prop::collection::vec(0.0..100.0, n);
        let edge = (0..n, 0..n, 0.0..150.0)
            .prop_filter_map("self-loop", |(a, b, c)| (a != b).then(|| (a.min(b), a.max(b), c)));
        (weights, prop::collection::vec(edge, 0..=max_edges))
    })
}

/// A random DAG whose edges run through chains of 0 to 3 new nodes: nodes with one in-edge and
/// one out-edge, whose start times the LP eliminates.
fn chained_dag() -> impl Strategy<Value = (Vec<f64>, Vec<(usize, usize, f64)>)> {
    let chain = (0usize..4, 0.0..100.0, 0.0..150.0);
    (dag(8, 12), prop::collection::vec(chain, 12)).prop_map(|((mut weights, edges), chains)| {
        let mut chained = Vec::new();
        for (&(u, v, c), &(length, p, inner_cost)) in edges.iter().zip(&chains) {
            let (mut from, mut cost) = (u, c);
            for _ in 0..length {
                weights.push(p);
                chained.push((from, weights.len() - 1, cost));
                (from, cost) = (weights.len() - 1, inner_cost);
            }
            chained.push((from, v, cost));
        }
        (weights, chained)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn rounded_result_is_consistent_and_bounded((weights, edges) in dag(12, 24), threshold in 0.0..2.0) {
        let r = favorite_children(&weights, &edges, threshold).unwrap();
        assert_consistent(weights.len(), &edges, &r.child);
        let free = critical_path(&weights, &edges, |_| 0.0);
        let charged = critical_path(&weights, &edges, |_| 1.0);
        // The solver's tolerances are relative to the all-charged critical path.
        let slack = 1e-5 * charged.max(1.0);
        prop_assert!(r.relaxed_makespan >= free - slack, "{} < {free}", r.relaxed_makespan);
        prop_assert!(r.relaxed_makespan <= charged + slack, "{} > {charged}", r.relaxed_makespan);
        if threshold <= 0.4 {
            prop_assert_eq!(r.conflicts_resolved, 0);
        }
    }

    #[test]
    fn relaxation_is_below_the_integral_optimum((weights, edges) in dag(7, 6)) {
        let r = favorite_children(&weights, &edges, 0.1).unwrap();
        let integral = integral_optimum(&weights, &edges);
        prop_assert!(r.relaxed_makespan <= integral * (1.0 + TOL) + TOL, "{} > {integral}", r.relaxed_makespan);
    }

    #[test]
    fn relaxation_is_exact_on_chains(weights in prop::collection::vec(0.0..100.0, 1..8), costs in prop::collection::vec(0.0..150.0, 7)) {
        let edges: Vec<_> = (1..weights.len()).map(|v| (v - 1, v, costs[v - 1])).collect();
        let r = favorite_children(&weights, &edges, 0.1).unwrap();
        let integral = integral_optimum(&weights, &edges);
        prop_assert!(close(r.relaxed_makespan, integral), "{} != {integral}", r.relaxed_makespan);
        prop_assert!(close(integral, weights.iter().sum()));
        prop_assert!(r.child[..weights.len() - 1].iter().enumerate().all(|(u, &c)| c == Some(u + 1)));
    }

    /// A star out of node 0 (or into the last node) where one leaf outweighs every other leaf
    /// with its communication: the integral optimum is tight, and the heavy leaf is the favorite.
    #[test]
    fn relaxation_is_exact_on_dominated_stars(light in prop::collection::vec((0.0..100.0, 0.0..150.0), 1..5), heavy in 250.0..400.0, hub in 0.0..50.0, inward in any::<bool>()) {
        let k = light.len() + 1;
        let mut weights = vec![hub];
        weights.push(heavy);
        weights.extend(light.iter().map(|&(p, _)| p));
        let mut edges = vec![(0, 1, 60.0)];
        edges.extend(light.iter().enumerate().map(|(i, &(_, c))| (0, i + 2, c)));
        if inward {
            // Mirror: the leaves feed the hub, which becomes the last node.
            let last = k;
            let flip = |v: usize| last - v;
            edges = edges.iter().map(|&(u, v, c)| (flip(v), flip(u), c)).collect();
            weights.reverse();
        }
        let r = favorite_children(&weights, &edges, 0.1).unwrap();
        let integral = integral_optimum(&weights, &edges);
        prop_assert!(close(r.relaxed_makespan, integral), "{} != {integral}", r.relaxed_makespan);
        if inward {
            prop_assert_eq!(r.child[k - 1], Some(k));
        } else {
            prop_assert_eq!(r.child[0], Some(1));
        }
    }

    /// The LP with chain nodes eliminated has the optimum of the LP with every start time.
    #[test]
    fn eliminating_chains_keeps_the_optimum((weights, edges) in chained_dag()) {
        prop_assume!(!edges.is_empty());
        let dag = graph::Dag::new(weights.len(), &edges).unwrap();
        let scale = dag.longest_path(&weights, &edges, |_| 1.0);
        let reduced = model::solve(&dag, &weights, &edges, scale, true, None).unwrap();
        let full = model::solve(&dag, &weights, &edges, scale, false, None).unwrap();
        prop_assert!(close(reduced.makespan, full.makespan), "{} != {}", reduced.makespan, full.makespan);
    }

    /// Valid graphs with times from 1e-300 to 1e300 µs solve or fail cleanly.
    #[test]
    fn extreme_magnitudes((weights, edges) in dag(8, 12), exponents in prop::collection::vec(-300i32..=300, 20)) {
        let scaled = |i: usize, t: f64| t * 10f64.powi(exponents[i % exponents.len()]);
        let weights: Vec<f64> = weights.iter().enumerate().map(|(i, &p)| scaled(i, p)).collect();
        let edges: Vec<_> = edges.iter().enumerate().map(|(e, &(u, v, c))| (u, v, scaled(e + 7, c))).collect();
        match favorite_children(&weights, &edges, 0.1) {
            Ok(r) => assert_consistent(weights.len(), &edges, &r.child),
            Err(LpError::Overflow | LpError::Solver { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected {e:?}"),
        }
    }

    /// Arbitrary input, valid or not, gives a result or an error.
    #[test]
    fn never_panics(
        weights in prop::collection::vec(prop_oneof![any::<f64>(), 0.0..1e300, Just(0.0)], 0..8),
        edges in prop::collection::vec((0usize..9, 0usize..9, prop_oneof![any::<f64>(), 0.0..1e300, Just(0.0)]), 0..12),
        threshold in any::<f64>(),
    ) {
        let _ = favorite_children(&weights, &edges, threshold);
    }
}

/// A layered random DAG like the cost graphs m-SCT places: layers about `sqrt(n) / 2` wide,
/// 1 to 3 predecessors in the previous layer, compute times log-uniform in [5, 2000] µs and
/// transfers of log-uniform 4 KiB to 64 MiB under Baechi's default cost model.
fn layered_dag(n: usize, seed: u64) -> (Vec<f64>, Vec<(usize, usize, f64)>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let log_uniform =
        |rng: &mut fastrand::Rng, lo: f64, hi: f64| (lo.ln() + rng.f64() * (hi / lo).ln()).exp();
    let width = ((n as f64).sqrt() / 2.0).ceil().max(1.0) as usize;
    let weights: Vec<f64> = (0..n).map(|_| log_uniform(&mut rng, 5.0, 2000.0)).collect();
    let mut edges = Vec::new();
    let (mut previous, mut start) = (0..0, 0);
    while start < n {
        let layer = start..(start + rng.usize(width / 2 + 1..=width + width / 2)).min(n);
        if !previous.is_empty() {
            for v in layer.clone() {
                let count = rng.usize(1..=3).min(previous.len());
                let mut preds: Vec<usize> = Vec::with_capacity(count);
                while preds.len() < count {
                    let u = rng.usize(previous.clone());
                    if !preds.contains(&u) {
                        preds.push(u);
                    }
                }
                for u in preds {
                    let bytes = log_uniform(&mut rng, 4096.0, 64.0 * 1024.0 * 1024.0);
                    edges.push((u, v, 134.0 + bytes * 0.0001754));
                }
            }
        }
        start = layer.end;
        previous = layer;
    }
    (weights, edges)
}

#[test]
fn layered_dag_is_valid_and_solves() {
    let (weights, edges) = layered_dag(300, 1);
    let r = favorite_children(&weights, &edges, 0.1).unwrap();
    assert_consistent(weights.len(), &edges, &r.child);
    let free = critical_path(&weights, &edges, |_| 0.0);
    let charged = critical_path(&weights, &edges, |_| 1.0);
    let slack = 1e-5 * charged;
    assert!(free - slack <= r.relaxed_makespan && r.relaxed_makespan <= charged + slack);
}

/// Timing of the LP on large graphs. Run with
/// `cargo test --release -p ordo-place --lib lp::tests::lp_timing -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn lp_timing() {
    for n in [1_000, 10_000] {
        // The synth graph as `crate::sct::m_sct` hands it to the LP (4 devices).
        let problem = ordo_problem::PlaceProblem::new(
            &ordo_cost::synth(n, 1),
            ordo_problem::Devices::uniform(4, u64::MAX),
            ordo_cost::StepMode::ForwardOnly,
        )
        .unwrap();
        let synth = (
            problem.weights.iter().map(|&w| w as f64).collect(),
            problem.edges.iter().map(|e| (e.source, e.target, e.comm_us as f64)).collect(),
        );
        let graphs = [("layered", layered_dag(n, 7)), ("synth", synth)];
        for (name, (weights, edges)) in graphs {
            let clock = std::time::Instant::now();
            let r = favorite_children(&weights, &edges, 0.1).unwrap();
            eprintln!(
                "{name} {n} nodes, {} edges: {:.3} s; relaxed makespan {:.0} µs, {} favorites, {} conflicts",
                edges.len(),
                clock.elapsed().as_secs_f64(),
                r.relaxed_makespan,
                r.child.iter().flatten().count(),
                r.conflicts_resolved
            );
        }
    }
}
