//! Size and work statistics per node and per graph.

use serde::Serialize;

use crate::graph::Graph;
use crate::op::Op;

/// What one node costs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Trainable parameter elements charged to this node. A parameter read by several nodes
    /// (tied weights) is charged to the first reader in id order.
    pub params: u64,
    /// Bytes of all parameters and buffers charged to this node.
    pub param_bytes: u64,
    /// Forward FLOPs.
    pub flops: u64,
    /// Bytes of the node's outputs.
    pub activation_bytes: u64,
}

/// Totals over a graph.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GraphStats {
    /// Number of nodes, inputs and parameter nodes included.
    pub nodes: usize,
    /// Trainable parameter elements.
    pub params: u64,
    /// Bytes of all parameters and buffers.
    pub param_bytes: u64,
    /// Forward FLOPs.
    pub flops: u64,
    /// Bytes of all node outputs.
    pub activation_bytes: u64,
}

/// Statistics of every node, indexed by node id. O(V + E + P).
pub fn node_stats(graph: &Graph) -> Vec<NodeStats> {
    let mut charged = vec![false; graph.params.len()];
    graph
        .nodes
        .iter()
        .map(|node| {
            let mut stats = NodeStats::default();
            for &p in &node.params {
                if !std::mem::replace(&mut charged[p.index()], true) {
                    let param = graph.param(p);
                    stats.param_bytes += param.fact.bytes();
                    if param.trainable {
                        stats.params += param.fact.numel();
                    }
                }
            }
            stats.activation_bytes = node.outputs.iter().map(|f| f.bytes()).sum();
            if !matches!(node.op, Op::Input | Op::Parameter)
                && let Some(inputs) = graph.input_facts(node)
            {
                stats.flops = node.op.flops(&inputs, &node.outputs);
            }
            stats
        })
        .collect()
}

/// Totals over the graph.
pub fn graph_stats(graph: &Graph) -> GraphStats {
    let per_node = node_stats(graph);
    let mut total = GraphStats { nodes: graph.nodes.len(), ..GraphStats::default() };
    for s in &per_node {
        total.params += s.params;
        total.param_bytes += s.param_bytes;
        total.flops += s.flops;
        total.activation_bytes += s.activation_bytes;
    }
    total
}
