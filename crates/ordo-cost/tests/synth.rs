//! Synthetic graphs: exact size, deterministic, acyclic, statistics as specified.

use ordo_cost::{CommModel, CostGraph, synth};

fn layer_of(name: &str) -> usize {
    let layer = name.split('/').next().and_then(|l| l.strip_prefix('L'));
    layer.and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("bad name {name}"))
}

#[test]
fn node_count_is_exact() {
    for n in [0, 1, 2, 3, 10, 99, 1000, 4321] {
        let graph = synth(n, 5);
        assert_eq!(graph.nodes.len(), n);
        assert_eq!(graph.graph["num_nodes"], n);
        assert!(graph.nodes.iter().enumerate().all(|(i, node)| node.id == i as u64));
        graph.validate("synth").unwrap();
    }
}

#[test]
fn deterministic_per_seed() {
    assert_eq!(synth(800, 3), synth(800, 3));
    assert_ne!(synth(800, 3), synth(800, 4));
    assert_eq!(synth(800, 3).graph["seed"], 3);
}

#[test]
fn acyclic_with_links_going_forward() {
    for seed in 0..5 {
        let graph = synth(2000, seed);
        graph.validate("synth").unwrap();
        for link in &graph.links {
            assert!(link.source < link.target);
            let (from, to) =
                (&graph.nodes[link.source as usize], &graph.nodes[link.target as usize]);
            assert!(layer_of(&from.name) < layer_of(&to.name));
        }
    }
}

#[test]
fn statistics_are_in_range() {
    let graph: CostGraph = synth(5000, 1);
    let n = graph.nodes.len();
    // Width round(sqrt(5000) / 2) = 35, so layers of 18..=53 nodes (the last may be cut short).
    assert_eq!(graph.graph["target_width"], 35);
    let layers = graph.graph["layers"].as_u64().unwrap() as usize;
    let mut widths = vec![0usize; layers];
    for node in &graph.nodes {
        widths[layer_of(&node.name)] += 1;
    }
    let (last, full) = widths.split_last().unwrap();
    assert!(full.iter().all(|w| (18..=53).contains(w)), "{widths:?}");
    assert!((1..=53).contains(last));

    let mut weights: Vec<u64> = graph.nodes.iter().map(|n| n.weight).collect();
    weights.sort_unstable();
    assert!(weights[0] >= 5 && weights[n - 1] <= 2000);
    // Log-uniform: the median is near the geometric mean sqrt(5 * 2000) = 100.
    assert!((70..=140).contains(&weights[n / 2]), "median {}", weights[n / 2]);

    for node in &graph.nodes {
        assert_eq!(node.output_memory.len(), 1);
        assert!((4096..=64 << 20).contains(&node.output_memory[0]));
        let p = node.persistent_memory;
        assert!(p == 0 || (1024..=16 << 20).contains(&p));
        assert_eq!(node.temporary_memory, 0);
        assert_eq!(node.op_type.as_deref(), Some("Synthetic"));
    }
    let with_params = graph.nodes.iter().filter(|n| n.persistent_memory > 0).count();
    assert!((0.45..=0.55).contains(&(with_params as f64 / n as f64)), "{with_params}");

    let mut indegree = vec![0usize; n];
    let mut previous_layer = 0usize;
    let comm = CommModel::baechi_default();
    for link in &graph.links {
        indegree[link.target as usize] += 1;
        let source = &graph.nodes[link.source as usize];
        let span = layer_of(&graph.nodes[link.target as usize].name) - layer_of(&source.name);
        assert!((1..=4).contains(&span));
        previous_layer += usize::from(span == 1);
        assert_eq!(link.tensor.len(), 1);
        let tensor = &link.tensor[0];
        assert_eq!(tensor.name, format!("{}:0", source.name));
        assert_eq!(tensor.num_bytes, source.output_memory[0]);
        assert_eq!(tensor.weight, comm.time_us(tensor.num_bytes));
        assert_eq!(link.weight, tensor.weight);
    }
    for node in &graph.nodes {
        let expected = if layer_of(&node.name) == 0 { 0..=0 } else { 1..=3 };
        assert!(expected.contains(&indegree[node.id as usize]), "{}", node.name);
    }
    // 80 % from the previous layer (all of them in layer 1).
    let share = previous_layer as f64 / graph.links.len() as f64;
    assert!((0.75..=0.88).contains(&share), "{share}");
}
