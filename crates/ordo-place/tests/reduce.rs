//! Graph reductions: co-placement grouping, fusion, and expanding a placement back.

use std::collections::HashSet;

mod common;

use common::{baechi_problem, chain_links, dag_links, memory_graph as graph};
use ordo_cost::{CostGraph, Optimizer, StepMode};
use ordo_place::reduce::{coplace, fuse, reduce};
use ordo_place::{PlaceProblem, expand};
use proptest::prelude::*;

/// Two devices of unlimited memory, Baechi's default communication model.
fn problem(g: &CostGraph, mode: StepMode) -> PlaceProblem {
    baechi_problem(g, &[u64::MAX; 2], mode)
}

fn chain(n: usize) -> CostGraph {
    let names: Vec<String> = (0..n).map(|i| format!("op{i}")).collect();
    let nodes: Vec<_> = names.iter().map(|s| (s.as_str(), 10, 1, 100, 1000)).collect();
    graph(&nodes, &chain_links(n), &[])
}

#[test]
fn a_chain_collapses_to_one_group_then_one_node() {
    let p = problem(&chain(5), StepMode::ForwardOnly);
    assert_eq!(p.groups.len(), 5);
    let grouped = coplace(&p);
    assert_eq!(grouped.problem.groups.len(), 1);
    assert_eq!(grouped.problem.len(), 5);
    assert_eq!(grouped.node_of, [0, 1, 2, 3, 4]);
    let fused = reduce(&p).unwrap();
    assert_eq!(fused.problem.len(), 1);
    assert_eq!(fused.node_of, [0; 5]);
    let one = &fused.problem;
    assert_eq!(one.names, ["op0"]);
    assert_eq!(one.weights, [50]);
    assert_eq!(one.memory[0].persistent, 500);
    assert_eq!(one.memory[0].temporary, 1);
    // Forward only: outputs are the tensors still leaving the node: none.
    assert_eq!(one.memory[0].outputs, 0);
    assert!(one.edges.is_empty());
    // Training keeps every activation, so the fused node keeps all five outputs.
    let training = problem(&chain(5), StepMode::Training { optimizer: Optimizer::Sgd });
    assert_eq!(reduce(&training).unwrap().problem.memory[0].outputs, 5000);
}

#[test]
fn coplace_merges_only_single_consumer_ops() {
    // a -> b, a -> c, b -> d, c -> d: a has two consumers; b and c have one (d).
    let nodes = [("a", 1, 0, 0, 1), ("b", 1, 0, 0, 1), ("c", 1, 0, 0, 1), ("d", 1, 0, 0, 1)];
    let p = problem(&graph(&nodes, &[(0, 1), (0, 2), (1, 3), (2, 3)], &[]), StepMode::ForwardOnly);
    let grouped = coplace(&p).problem;
    assert_eq!(grouped.groups, [vec![0], vec![1, 2, 3]]);
    assert_eq!(grouped.group_of, [0, 1, 1, 1]);
}

#[test]
fn fusion_skips_an_edge_that_would_close_a_cycle() {
    // a -> b, a -> c, c -> b with a and b colocated: a has two consumers and b two
    // producers, so a -> b is not fused (fusing it would make a <-> c).
    let nodes = [("a", 1, 0, 0, 8), ("b", 2, 0, 0, 8), ("c", 4, 0, 0, 8)];
    let g = graph(&nodes, &[(0, 1), (0, 2), (2, 1)], &[(0, "ab"), (1, "ab")]);
    let fused = fuse(&problem(&g, StepMode::ForwardOnly)).unwrap();
    assert_eq!(fused.problem.len(), 3);
    // Without c -> b, a -> b is fused.
    let g = graph(&nodes, &[(0, 1), (0, 2)], &[(0, "ab"), (1, "ab")]);
    let fused = fuse(&problem(&g, StepMode::ForwardOnly)).unwrap();
    assert_eq!(fused.node_of, [0, 0, 1]);
    assert_eq!(fused.problem.weights, [3, 4]);
    // The fused node's outputs are the tensors on its out-edges: a's output to c.
    assert_eq!(fused.problem.memory[0].outputs, 8);
}

#[test]
fn a_diamond_in_one_group_fuses_completely() {
    let nodes = [("a", 1, 3, 1, 10), ("b", 1, 7, 1, 20), ("c", 1, 5, 1, 30), ("d", 1, 2, 1, 40)];
    let g = graph(
        &[nodes[0], nodes[1], nodes[2], nodes[3], ("e", 1, 0, 0, 1)],
        &[(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)],
        &[(0, "g"), (1, "g"), (2, "g"), (3, "g")],
    );
    let fused = fuse(&problem(&g, StepMode::ForwardOnly)).unwrap();
    assert_eq!(fused.node_of, [0, 0, 0, 0, 1]);
    let m = fused.problem.memory[0];
    assert_eq!((m.temporary, m.persistent, m.outputs), (7, 4, 40));
    assert_eq!(fused.problem.edges.len(), 1);
    assert_eq!(fused.problem.tensors[fused.problem.edges[0].tensors[0]].name, "d:0");
}

#[test]
fn problems_carry_occupancy_and_fusion_weights_it_by_time() {
    // a (10 µs at 0.5) -> b (30 µs at 1.0) -> c (0 µs at 0.25) -> d (0 µs at 0.125), all fused.
    let nodes = [("a", 10, 0, 0, 8), ("b", 30, 0, 0, 8), ("c", 0, 0, 0, 8), ("d", 0, 0, 0, 8)];
    let mut g = graph(&nodes, &chain_links(4), &[(0, "g"), (1, "g"), (2, "g"), (3, "g")]);
    for (node, occupancy) in g.nodes.iter_mut().zip([0.5, 1.0, 0.25, 0.125]) {
        node.occupancy = occupancy;
    }
    let p = problem(&g, StepMode::ForwardOnly);
    assert_eq!(p.occupancy, [0.5, 1.0, 0.25, 0.125]);
    assert_eq!(coplace(&p).problem.occupancy, p.occupancy);
    // (10 x 0.5 + 30 x 1) / 40 of the device while the fused node runs.
    let fused = fuse(&p).unwrap();
    assert_eq!(fused.node_of, [0; 4]);
    assert_eq!(fused.problem.occupancy, [35.0 / 40.0]);
    // Members that take no time use none of it; when all of them take none, the fused node has
    // the widest member's occupancy.
    let mut idle = p.clone();
    idle.weights = vec![0; 4];
    assert_eq!(fuse(&idle).unwrap().problem.occupancy, [1.0]);
    idle.occupancy[1] = 0.75;
    assert_eq!(fuse(&idle).unwrap().problem.occupancy, [0.75]);
}

fn kahn_is_acyclic(p: &PlaceProblem) -> bool {
    let mut indegree: Vec<usize> = p.in_edges.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..p.len()).filter(|&v| indegree[v] == 0).collect();
    let mut seen = 0;
    while let Some(v) = ready.pop() {
        seen += 1;
        for &e in &p.out_edges[v] {
            let t = p.edges[e].target;
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.push(t);
            }
        }
    }
    seen == p.len()
}

prop_compose! {
    fn random_graph()(n in 1usize..40)(
        edges in proptest::collection::vec((0..n, 0..n), 0..3 * n),
        groups in proptest::collection::vec(0usize..5, n),
        weights in proptest::collection::vec(1u64..100, n),
    ) -> CostGraph {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("n{i}")).collect();
        let nodes: Vec<_> = names.iter().zip(&weights).map(|(s, &w)| (s.as_str(), w, 1, 2, 3)).collect();
        let links = dag_links(edges);
        let group_names = ["g0", "g1", "g2", "g3", "g4"];
        let group_list: Vec<(usize, &str)> =
            groups.iter().enumerate().map(|(v, &g)| (v, group_names[g])).collect();
        graph(&nodes, &links, &group_list)
    }
}

proptest! {
    #[test]
    fn fusion_keeps_a_dag_and_expand_follows_the_fused_node(
        g in random_graph(),
        with_coplace in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let p = problem(&g, StepMode::ForwardOnly);
        let reduced = if with_coplace { reduce(&p).unwrap() } else { fuse(&p).unwrap() };
        let r = &reduced.problem;
        prop_assert!(kahn_is_acyclic(r));
        prop_assert_eq!(r.topo_order.len(), r.len());
        prop_assert_eq!(reduced.node_of.len(), p.len());
        prop_assert!(reduced.node_of.iter().all(|&x| x < r.len()));
        // Compute is conserved; each fused node holds nodes of one group only.
        let total: u64 = p.weights.iter().sum();
        prop_assert_eq!(r.weights.iter().sum::<u64>(), total);
        let grouped = if with_coplace { coplace(&p).problem } else { p.clone() };
        for x in 0..r.len() {
            let groups: HashSet<usize> = (0..p.len())
                .filter(|&v| reduced.node_of[v] == x).map(|v| grouped.group_of[v]).collect();
            prop_assert_eq!(groups.len(), 1);
        }
        // Every edge between different fused nodes is still there.
        let kept: HashSet<(usize, usize)> = r.edges.iter().map(|e| (e.source, e.target)).collect();
        for e in &p.edges {
            let (s, t) = (reduced.node_of[e.source], reduced.node_of[e.target]);
            prop_assert!(s == t || kept.contains(&(s, t)));
        }
        prop_assert!(r.edges.iter().all(|e| e.source != e.target));
        // Groups of the reduced problem are the groups of its members.
        for members in &r.groups {
            prop_assert!(members.iter().all(|&x| r.group_of[x] == r.group_of[members[0]]));
        }
        let mut rng = seed;
        let device_of_reduced: Vec<usize> = (0..r.len()).map(|_| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) as usize % 4
        }).collect();
        let device_of = expand(&device_of_reduced, &reduced.node_of);
        prop_assert_eq!(device_of.len(), p.len());
        for v in 0..p.len() {
            prop_assert_eq!(device_of[v], device_of_reduced[reduced.node_of[v]]);
        }
    }
}
