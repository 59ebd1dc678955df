//! Baselines: single device, round-robin by layer, balanced stages.

mod common;

use common::{FORWARD, baechi_problem as problem, chain_links, memory_graph, sample_graph};
use ordo_cost::{ColocationGroup, CostGraph, Optimizer, StepMode};
use ordo_place::baselines::{balanced, layer_index, round_robin, single};
use ordo_place::{PlaceError, PlaceProblem};
use proptest::prelude::*;

/// A graph of named nodes `(name, weight, persistent, output)` with links carrying the
/// source's output.
fn graph(nodes: &[(&str, u64, u64, u64)], links: &[(usize, usize)]) -> CostGraph {
    let nodes: Vec<_> = nodes
        .iter()
        .map(|&(name, weight, persistent, out)| (name, weight, 0, persistent, out))
        .collect();
    memory_graph(&nodes, links, &[])
}

fn max_load(p: &PlaceProblem, device_of: &[usize]) -> u64 {
    let mut load = vec![0; p.devices.count()];
    for (v, &d) in device_of.iter().enumerate() {
        load[d] += p.weights[v];
    }
    load.into_iter().max().unwrap()
}

#[test]
fn single_puts_everything_on_device_zero_within_its_memory() {
    let g = graph(&[("a", 1, 10, 5), ("b", 1, 10, 20), ("c", 1, 10, 5)], &chain_links(3));
    // persistent 30 + largest output 20 = 50; with 49 the third node is the one too many.
    assert_eq!(single(&problem(&g, &[50, 1000], FORWARD)).unwrap(), [0, 0, 0]);
    match single(&problem(&g, &[49, 1000], FORWARD)) {
        Err(PlaceError::OutOfMemory { algo, unplaced, total, first }) => {
            assert_eq!((algo, unplaced, total, first.as_str()), ("single", 1, 3, "c"));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn layer_numbers_from_names() {
    for (name, layer) in [
        ("enc.3", Some(3)),
        ("/enc.3/LSTM", Some(3)),
        ("layer2.1.conv1", Some(1)),
        ("/layer2/layer2.1/conv1/Conv", Some(1)),
        ("encoder.layer.7.attention.self.query", Some(7)),
        ("encoder.rnn_layers.12", Some(12)),
        ("h.11.mlp", Some(11)),
        ("fc", None),
        ("/Mixed_5b/branch1x1/conv/Conv", None),
        ("L3/op7", None),
        ("0.weight", None),
    ] {
        assert_eq!(layer_index(name), layer, "{name}");
    }
}

fn gnmt_like() -> CostGraph {
    let mut names = vec!["/emb/Gather".to_string()];
    names.extend((0..4).map(|i| format!("/enc.{i}/LSTM")));
    names.extend((0..4).map(|i| format!("/dec.{i}/LSTM")));
    names.push("/proj/MatMul".to_string());
    let nodes: Vec<(&str, u64, u64, u64)> =
        names.iter().map(|n| (n.as_str(), 100, 1000, 100)).collect();
    graph(&nodes, &chain_links(nodes.len()))
}

#[test]
fn round_robin_puts_layer_i_on_device_i_mod_n() {
    let g = gnmt_like();
    let p = problem(&g, &[u64::MAX; 4], FORWARD);
    // emb follows enc.0; enc.i and dec.i on i; proj follows dec.3.
    assert_eq!(round_robin(&p).unwrap(), [0, 0, 1, 2, 3, 0, 1, 2, 3, 3]);
    let p = problem(&g, &[u64::MAX; 3], FORWARD);
    assert_eq!(round_robin(&p).unwrap(), [0, 0, 1, 2, 0, 0, 1, 2, 0, 0]);
}

#[test]
fn round_robin_moves_a_group_on_when_its_device_is_full() {
    let g = gnmt_like();
    // Each node: 1000 persistent, 100 output; enc.1 receives enc.0's 100-byte tensor. Device 1
    // holds one node only.
    let p = problem(&g, &[u64::MAX, 1200, u64::MAX, u64::MAX], FORWARD);
    let device_of = round_robin(&p).unwrap();
    assert_eq!(device_of[2], 1, "enc.1");
    assert_eq!(device_of[6], 2, "dec.1 moves on to device 2");
}

#[test]
fn round_robin_on_the_gnmt_sample() {
    let g = sample_graph("gnmt");
    let p = problem(&g, &[u64::MAX; 4], FORWARD);
    let device_of = round_robin(&p).unwrap();
    for (v, name) in p.names.iter().enumerate() {
        if let Some(i) = name.strip_prefix("/enc.").and_then(|r| r.split('/').next()) {
            assert_eq!(device_of[v], i.parse::<usize>().unwrap() % 4, "{name}");
        }
    }
    let on = |name: &str| device_of[p.names.iter().position(|n| n == name).unwrap()];
    assert_eq!(on("/enc.0/LSTM"), 0);
    assert_eq!(on("/enc.1/LSTM"), 1);
}

#[test]
fn round_robin_falls_back_to_chunks() {
    let names: Vec<String> = (0..8).map(|i| format!("op{i}")).collect();
    let nodes: Vec<(&str, u64, u64, u64)> = names.iter().map(|n| (n.as_str(), 1, 0, 1)).collect();
    let p = problem(&graph(&nodes, &chain_links(8)), &[u64::MAX; 4], FORWARD);
    assert_eq!(round_robin(&p).unwrap(), [0, 0, 1, 1, 2, 2, 3, 3]);
}

#[test]
fn balanced_beats_single_on_a_chain() {
    let weights = [5u64, 1, 1, 1, 1, 1, 1, 5, 3, 3, 2, 2];
    let names: Vec<String> = (0..weights.len()).map(|i| format!("op{i}")).collect();
    let nodes: Vec<(&str, u64, u64, u64)> =
        names.iter().zip(weights).map(|(n, w)| (n.as_str(), w, 0, 1)).collect();
    let p = problem(&graph(&nodes, &chain_links(nodes.len())), &[u64::MAX; 4], FORWARD);
    let one = max_load(&p, &single(&p).unwrap());
    let device_of = balanced(&p).unwrap();
    let stages = max_load(&p, &device_of);
    assert_eq!(one, 26);
    // The best contiguous split into 4 has bottleneck 8, e.g. 5 | 1 x 6 | 5 3 | 3 2 2.
    assert_eq!(stages, 8);
    assert!(device_of.windows(2).all(|w| w[0] <= w[1]), "contiguous stages in order");
}

#[test]
fn balanced_respects_memory() {
    let names: Vec<String> = (0..4).map(|i| format!("op{i}")).collect();
    let nodes: Vec<(&str, u64, u64, u64)> =
        names.iter().map(|n| (n.as_str(), 10, 100, 0)).collect();
    let g = graph(&nodes, &chain_links(4));
    // By compute alone two devices take two nodes each; device 0 holds only one node.
    assert_eq!(balanced(&problem(&g, &[1000, 1000], FORWARD)).unwrap(), [0, 0, 1, 1]);
    assert_eq!(balanced(&problem(&g, &[150, 1000], FORWARD)).unwrap(), [0, 1, 1, 1]);
    match balanced(&problem(&g, &[150, 250], FORWARD)) {
        Err(PlaceError::OutOfMemory { algo, unplaced, first, .. }) => {
            assert_eq!((algo, unplaced, first.as_str()), ("balanced", 1, "op3"));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

fn brute_force_bottleneck(weights: &[u64], devices: usize) -> u64 {
    // Every way to cut the sequence into at most `devices` contiguous parts.
    fn go(w: &[u64], parts: usize) -> u64 {
        if w.is_empty() {
            return 0;
        }
        if parts == 1 {
            return w.iter().sum();
        }
        (1..=w.len()).map(|k| w[..k].iter().sum::<u64>().max(go(&w[k..], parts - 1))).min().unwrap()
    }
    go(weights, devices)
}

proptest! {
    #[test]
    fn balanced_is_optimal_on_chains(
        weights in proptest::collection::vec(1u64..50, 1..10),
        devices in 1usize..5,
    ) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("op{i}")).collect();
        let nodes: Vec<(&str, u64, u64, u64)> =
            names.iter().zip(&weights).map(|(n, &w)| (n.as_str(), w, 0, 1)).collect();
        let p = problem(&graph(&nodes, &chain_links(nodes.len())), &vec![u64::MAX; devices], FORWARD);
        let device_of = balanced(&p).unwrap();
        prop_assert_eq!(max_load(&p, &device_of), brute_force_bottleneck(&weights, devices));
    }

    #[test]
    fn baselines_keep_groups_and_memory(
        n in 1usize..30,
        seed in any::<u64>(),
        devices in 1usize..5,
        slack in 0.5f64..3.0,
        training in any::<bool>(),
    ) {
        let mut g = ordo_cost::synth(n, seed);
        for (i, node) in g.nodes.iter_mut().enumerate() {
            if i % 3 == 0 {
                node.colocation_group = ColocationGroup::Name(format!("g{}", i % 2));
            }
        }
        let mode = if training {
            StepMode::Training { optimizer: Optimizer::Adam }
        } else {
            FORWARD
        };
        let whole = problem(&g, &[u64::MAX], mode);
        let total: u64 = whole.memory.iter().map(|m| m.resident_bytes()).sum::<u64>()
            + whole.memory.iter().map(|m| m.run_bytes()).max().unwrap_or(0);
        let limit = (total as f64 * slack / devices as f64) as u64;
        let p = problem(&g, &vec![limit; devices], mode);
        for (name, result) in [("single", single(&p)), ("round-robin", round_robin(&p)), ("balanced", balanced(&p))] {
            let device_of = match result {
                Ok(d) => d,
                Err(PlaceError::OutOfMemory { .. } | PlaceError::NodeTooLarge { .. }) => continue,
                Err(e) => return Err(TestCaseError::fail(format!("{name}: {e}"))),
            };
            prop_assert_eq!(device_of.len(), p.len());
            for members in &p.groups {
                prop_assert!(members.iter().all(|&v| device_of[v] == device_of[members[0]]), "{}", name);
            }
            let mut resident = vec![0u64; devices];
            let mut run = vec![0u64; devices];
            for (v, &d) in device_of.iter().enumerate() {
                let m = &p.memory[v];
                resident[d] += m.persistent + if m.retain_outputs { m.outputs } else { 0 };
                run[d] = run[d].max(m.temporary + m.outputs);
            }
            for d in 0..devices {
                prop_assert!(resident[d] + run[d] <= limit, "{}: device {}", name, d);
            }
        }
    }
}
