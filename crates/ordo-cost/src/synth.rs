//! Synthetic cost graphs: layered random DAGs of any size, for tests and for timing placers on
//! graphs larger than any model.

use serde_json::{Map, Value};

use crate::costgraph::{CostGraph, CostLink, CostNode, TensorRef};
use crate::model::CommModel;

/// Share of predecessors taken from the previous layer; the rest come from 2-4 layers back.
const PREVIOUS_LAYER: f64 = 0.8;
/// Compute time range in µs (log-uniform).
const WEIGHT_US: (f64, f64) = (5.0, 2000.0);
/// Output size range in bytes (log-uniform): 4 KiB to 64 MiB.
const OUTPUT_BYTES: (f64, f64) = (4096.0, 64.0 * 1024.0 * 1024.0);
/// Parameter size range in bytes (log-uniform): 1 KiB to 16 MiB.
const PERSISTENT_BYTES: (f64, f64) = (1024.0, 16.0 * 1024.0 * 1024.0);

/// A layered random DAG of exactly `nodes` nodes; the same `seed` gives the same graph.
///
/// * The target layer width is `w = round(sqrt(nodes) / 2)` (at least 1); each layer's width is
///   uniform in `[round(w/2), round(3w/2)]`, the last layer cut to fit.
/// * Every node after the first layer has 1-3 distinct predecessors, each from the previous
///   layer with probability 0.8, otherwise from 2-4 layers back (the first layer at the most).
/// * Compute time is log-uniform in [5, 2000] µs, the single output log-uniform in
///   [4 KiB, 64 MiB]; each node has persistent memory with probability 1/2, log-uniform in
///   [1 KiB, 16 MiB].
/// * A link carries the producer's output, named `<producer name>:0`, at
///   [`CommModel::baechi_default`] cost.
///
/// Nodes are named `L<layer>/op<id>` with ids 0..nodes-1 in layer order, which is a
/// topological order; links are sorted by (source, target).
pub fn synth(nodes: usize, seed: u64) -> CostGraph {
    let mut rng = fastrand::Rng::with_seed(seed);
    let comm = CommModel::baechi_default();
    let width = ((nodes as f64).sqrt() / 2.0).round().max(1.0);
    let (min_width, max_width) = ((width / 2.0).round().max(1.0), (1.5 * width).round());
    let (min_width, max_width) = (min_width as usize, (max_width as usize).max(min_width as usize));

    // Layer boundaries: layer l holds ids layers[l]..layers[l + 1].
    let mut layers = vec![0usize];
    while *layers.last().unwrap_or(&0) < nodes {
        let last = *layers.last().unwrap_or(&0);
        layers.push((last + rng.usize(min_width..=max_width)).min(nodes));
    }
    let num_layers = layers.len() - 1;

    let mut cost_nodes = Vec::with_capacity(nodes);
    let mut links = Vec::with_capacity(nodes * 2);
    for layer in 0..num_layers {
        for id in layers[layer]..layers[layer + 1] {
            let mut node = CostNode::new(id as u64, format!("L{layer}/op{id}"), 0);
            node.op_type = Some("Synthetic".to_string());
            node.weight = log_uniform(&mut rng, WEIGHT_US);
            node.output_memory = vec![log_uniform(&mut rng, OUTPUT_BYTES)];
            if rng.bool() {
                node.persistent_memory = log_uniform(&mut rng, PERSISTENT_BYTES);
            }
            cost_nodes.push(node);
            if layer > 0 {
                for pred in predecessors(&mut rng, &layers, layer) {
                    let producer: &CostNode = &cost_nodes[pred];
                    let tensor = TensorRef::new(
                        format!("{}:0", producer.name),
                        producer.output_memory[0],
                        &comm,
                    );
                    links.push(CostLink::new(pred as u64, id as u64, vec![tensor]));
                }
            }
        }
    }
    links.sort_by_key(|l| (l.source, l.target));

    let mut graph = Map::new();
    graph.insert("source".into(), Value::from("synthetic"));
    graph.insert("seed".into(), Value::from(seed));
    graph.insert("num_nodes".into(), Value::from(nodes));
    graph.insert("layers".into(), Value::from(num_layers));
    graph.insert("target_width".into(), Value::from(width as u64));
    graph.insert("cost_model".into(), Value::from(format!("synthetic times; {comm}")));
    CostGraph { graph, nodes: cost_nodes, links, extra: Map::new() }
}

/// 1-3 distinct predecessors (node ids) of a node in `layer` (> 0).
fn predecessors(rng: &mut fastrand::Rng, layers: &[usize], layer: usize) -> Vec<usize> {
    let count = rng.usize(1..=3);
    let mut chosen = Vec::with_capacity(count);
    // A few extra draws make up for collisions in narrow layers.
    for _ in 0..count * 4 {
        if chosen.len() == count {
            break;
        }
        let from = if layer >= 2 && rng.f64() >= PREVIOUS_LAYER {
            layer - rng.usize(2..=4).min(layer)
        } else {
            layer - 1
        };
        let pred = rng.usize(layers[from]..layers[from + 1]);
        if !chosen.contains(&pred) {
            chosen.push(pred);
        }
    }
    chosen
}

/// A log-uniform integer in `[lo, hi]`.
fn log_uniform(rng: &mut fastrand::Rng, (lo, hi): (f64, f64)) -> u64 {
    let x = (lo.ln() + rng.f64() * (hi.ln() - lo.ln())).exp().round();
    x.clamp(lo, hi) as u64
}
