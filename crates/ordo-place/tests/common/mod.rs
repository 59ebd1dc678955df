//! Helpers shared by the integration tests: Baechi's sample graphs, small graph and problem
//! builders, and checks on placements.

// Every test file compiles its own copy of this module and uses only some of the helpers.
#![allow(dead_code)]

use std::path::PathBuf;

use ordo_cost::{
    ColocationGroup, CommModel, CostGraph, CostLink, CostNode, StepMode, TensorRef, read_costgraph,
};
use ordo_place::{Devices, PlaceProblem, Placement};
use proptest::prelude::*;

pub const FORWARD: StepMode = StepMode::ForwardOnly;

/// One µs per byte and no fixed cost, so a tensor's transfer time is its size.
pub const BYTES_AS_US: CommModel = CommModel { us_per_byte: 1.0, fixed_us: 0.0 };

/// The sample cost graph `name` from ordo-cost's test fixtures.
pub fn sample_graph(name: &str) -> CostGraph {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ordo-cost/tests/fixtures")
        .join(format!("{name}.json"));
    read_costgraph(&path).unwrap()
}

/// The sample graph `name` on 4 devices of 1e15 bytes, forward only.
pub fn sample(name: &str) -> PlaceProblem {
    PlaceProblem::new(
        &sample_graph(name),
        Devices::uniform(4, 1_000_000_000_000_000),
        StepMode::ForwardOnly,
    )
    .unwrap()
}

/// A link `(source, target, tensors)` with tensors `(port, bytes)` named `<source>:<port>`.
pub type Link<'a> = (usize, usize, &'a [(u32, u64)]);

/// Nodes `(name, weight)` and links, transfer times [`BYTES_AS_US`].
pub fn graph(nodes: &[(&str, u64)], links: &[Link]) -> CostGraph {
    let mut g = CostGraph::default();
    for (i, &(name, weight)) in nodes.iter().enumerate() {
        g.nodes.push(CostNode::new(i as u64, name, weight));
    }
    for &(s, t, tensors) in links {
        let tensors = tensors
            .iter()
            .map(|&(port, bytes)| {
                TensorRef::new(format!("{}:{port}", nodes[s].0), bytes, &BYTES_AS_US)
            })
            .collect();
        g.links.push(CostLink::new(s as u64, t as u64, tensors));
    }
    g
}

/// A node: name, weight, temporary, persistent, output bytes.
pub type MemoryNode<'a> = (&'a str, u64, u64, u64, u64);

/// A graph of `nodes` with links `(source, target)` carrying the source's output (Baechi's
/// default communication model), and colocation `groups` given as (node, group name).
pub fn memory_graph(
    nodes: &[MemoryNode],
    links: &[(usize, usize)],
    groups: &[(usize, &str)],
) -> CostGraph {
    let comm = CommModel::baechi_default();
    let mut g = CostGraph::default();
    for (i, &(name, weight, temp, persistent, out)) in nodes.iter().enumerate() {
        let mut node = CostNode::new(i as u64, name, weight);
        node.temporary_memory = temp;
        node.persistent_memory = persistent;
        node.output_memory = vec![out];
        g.nodes.push(node);
    }
    for &(node, group) in groups {
        g.nodes[node].colocation_group = ColocationGroup::Name(group.to_string());
    }
    for &(s, t) in links {
        let tensor = TensorRef::new(format!("{}:0", nodes[s].0), nodes[s].4, &comm);
        g.links.push(CostLink::new(s as u64, t as u64, vec![tensor]));
    }
    g
}

/// The links of a chain of `n` nodes.
pub fn chain_links(n: usize) -> Vec<(usize, usize)> {
    (1..n).map(|i| (i - 1, i)).collect()
}

/// Random node pairs as DAG links: self-loops dropped, each pair from the lower to the higher
/// index, sorted, without repeats.
pub fn dag_links(pairs: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut links: Vec<(usize, usize)> =
        pairs.into_iter().filter(|(a, b)| a != b).map(|(a, b)| (a.min(b), a.max(b))).collect();
    links.sort_unstable();
    links.dedup();
    links
}

/// Random links for a graph of nodes `n<i>` with two outputs each: every pair `i < j` is
/// linked with probability `density`, carrying output 0, 1 or both; then the links are
/// shuffled.
pub fn random_links(rng: &mut fastrand::Rng, g: &mut CostGraph, density: f64, comm: &CommModel) {
    let n = g.nodes.len();
    for j in 0..n {
        for i in 0..j {
            if rng.f64() < density {
                let ports = [vec![0], vec![1], vec![0, 1]][rng.usize(0..3)].clone();
                let tensors = ports
                    .into_iter()
                    .map(|k| TensorRef::new(format!("n{i}:{k}"), g.nodes[i].output_memory[k], comm))
                    .collect();
                g.links.push(CostLink::new(i as u64, j as u64, tensors));
            }
        }
    }
    rng.shuffle(&mut g.links);
}

/// Devices with the given memory and transfer times [`BYTES_AS_US`].
pub fn problem_with(g: &CostGraph, memory: &[u64], mode: StepMode) -> PlaceProblem {
    let devices = Devices { memory: memory.to_vec(), comm: BYTES_AS_US };
    PlaceProblem::new(g, devices, mode).unwrap()
}

/// `devices` devices of unlimited memory, transfer times [`BYTES_AS_US`], forward only.
pub fn problem(g: &CostGraph, devices: usize) -> PlaceProblem {
    problem_with(g, &vec![u64::MAX / 4; devices], StepMode::ForwardOnly)
}

/// Devices with the given memory and Baechi's default communication model.
pub fn baechi_problem(g: &CostGraph, memory: &[u64], mode: StepMode) -> PlaceProblem {
    let devices = Devices { memory: memory.to_vec(), comm: CommModel::baechi_default() };
    PlaceProblem::new(g, devices, mode).unwrap()
}

/// Checks that each device's order lists exactly the nodes placed on it, each node once.
pub fn check_order(p: &PlaceProblem, placement: &Placement) -> Result<(), TestCaseError> {
    let mut listed = vec![0; p.len()];
    for (d, order) in placement.order.iter().enumerate() {
        for &v in order {
            prop_assert_eq!(placement.device_of[v], d);
            listed[v] += 1;
        }
    }
    prop_assert!(listed.iter().all(|&count| count == 1));
    Ok(())
}
