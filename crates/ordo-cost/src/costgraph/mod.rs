//! The cost-graph interchange format: NetworkX node-link JSON with Baechi's attribute names.
//!
//! A file holds a directed graph whose nodes are ops with a compute time (`weight`, µs) and
//! memory sizes (bytes), and whose links carry tensors with a transfer time (`weight`, µs):
//!
//! ```json
//! {"directed": true, "multigraph": false, "graph": {"source": "ordo"},
//!  "nodes": [{"id": 0, "name": "a", "weight": 5, "temporary_memory": 0,
//!             "persistent_memory": 0, "output_memory": [4096], "occupancy": 0.25},
//!            {"id": 7, "name": "a.dw", "weight": 9, "temporary_memory": 0,
//!             "persistent_memory": 0, "output_memory": [4096], "role": "dw", "layer": 0}, ...],
//!  "links": [{"source": 0, "target": 1, "weight": 135,
//!             "tensor": [{"name": "a:0", "num_bytes": 4096, "weight": 135}]}, ...]}
//! ```
//!
//! [`parse_costgraph`] and [`read_costgraph`] check everything the format requires and keep
//! attributes they do not know, so read -> write -> read gives back an equal [`CostGraph`].
//! [`to_json_string`] and [`write_costgraph`] write edges under `"links"`, which every NetworkX
//! version reads with `networkx.node_link_graph(data, edges="links")`.

mod error;
mod fields;
mod raw;
mod read;
mod validate;
mod write;

use ordo_ir::Role;
use serde_json::{Map, Value};

use crate::model::CommModel;

pub use error::{CostGraphError, EdgeLabel, NodeLabel};
pub use read::{parse_costgraph, read_costgraph};
pub use write::{to_json_string, write_costgraph};

/// A cost graph: ops with compute times and memory sizes, links with transfer times.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostGraph {
    /// Free-form metadata (`source`, `model`, `cost_model`, `seed`, ...).
    pub graph: Map<String, Value>,
    /// The ops, in file order.
    pub nodes: Vec<CostNode>,
    /// The links, in file order; at most one per ordered pair of nodes.
    pub links: Vec<CostLink>,
    /// Top-level keys other than `directed`, `multigraph`, `graph`, `nodes`, `links` and
    /// `edges`, kept as they were.
    pub extra: Map<String, Value>,
}

/// One op.
#[derive(Clone, Debug, PartialEq)]
pub struct CostNode {
    /// Node key, unique in the graph (files written by ordo use 0..n-1).
    pub id: u64,
    /// Op name, unique in the graph.
    pub name: String,
    /// Compute time in µs, at least 1.
    pub weight: u64,
    /// Scratch bytes while the op runs.
    pub temporary_memory: u64,
    /// Bytes that stay resident on the op's device (parameters).
    pub persistent_memory: u64,
    /// Bytes of each output, in port order.
    pub output_memory: Vec<u64>,
    /// Colocation groups, in the form the file had.
    pub colocation_group: ColocationGroup,
    /// Op type (ONNX op type, ordo op name or `"Synthetic"`); informational.
    pub op_type: Option<String>,
    /// Estimated forward FLOPs; informational.
    pub flops: Option<u64>,
    /// Share of its device the op keeps busy while it runs, in `(0, 1]` (the `occupancy`
    /// attribute; 1 when the file has none, and then not written): a small kernel leaves
    /// room for kernels of other streams. See [`crate::Roofline::occupancy`].
    pub occupancy: f64,
    /// The op's part of a training step (the `role` attribute: `"forward"`, `"dx"`, `"dw"`,
    /// `"update"` or `"comm"`, the serde names of [`Role`]); [`Role::Forward`] when the file
    /// has none, and then not written.
    pub role: Role,
    /// For a node that is not [`Role::Forward`], the id of the forward node (layer) it belongs
    /// to (the `layer` attribute; written only when set). It must be the id of a forward node
    /// of the same graph, and a forward node has none.
    pub layer: Option<u64>,
    /// Attributes the format does not define, kept as they were.
    pub extra: Map<String, Value>,
}

/// The `colocation_group` attribute of a node, kept in the form it was written in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ColocationGroup {
    /// No attribute: the node is alone in a group named after it (`[name]`).
    #[default]
    Implicit,
    /// A single group name, written as a string.
    Name(String),
    /// Group names, written as a list (TensorFlow style); Baechi merges all groups that share
    /// a node into one.
    List(Vec<String>),
}

/// One link: the tensors flowing from `source` to `target`.
#[derive(Clone, Debug, PartialEq)]
pub struct CostLink {
    /// Id of the producing node.
    pub source: u64,
    /// Id of the consuming node.
    pub target: u64,
    /// Transfer time in µs when the endpoints are on different devices: the sum of the
    /// tensors' weights.
    pub weight: u64,
    /// The distinct tensors carried.
    pub tensor: Vec<TensorRef>,
    /// Attributes the format does not define, kept as they were.
    pub extra: Map<String, Value>,
}

/// A tensor carried by a link. The name identifies it across the graph: a device that has
/// received it once keeps it for every later consumer.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRef {
    /// Global tensor name (ordo writes `<producer name>:<output port>`).
    pub name: String,
    /// Size in bytes.
    pub num_bytes: u64,
    /// Transfer time in µs.
    pub weight: u64,
    /// Attributes the format does not define, kept as they were.
    pub extra: Map<String, Value>,
}

impl CostGraph {
    /// Index into [`CostGraph::nodes`] of the node whose id is `id`; linear search.
    pub fn position(&self, id: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// Checks what the format requires of a graph built in memory: unique ids and names,
    /// `weight >= 1`, `occupancy` in `(0, 1]`, non-empty colocation groups, a `layer` only on
    /// nodes that are not forward and naming a forward node of the graph, links between known
    /// nodes, at most one link per pair, link weights equal to the sum of their tensors',
    /// consistent tensor names and no cycle. `origin` names the graph in errors.
    ///
    /// # Errors
    /// The first problem found, as a [`CostGraphError`] naming the node or link.
    pub fn validate(&self, origin: &str) -> Result<(), CostGraphError> {
        validate::validate(self, origin)
    }
}

impl CostNode {
    /// A forward node (no layer) with the given compute time, no memory, occupancy 1 and the
    /// explicit colocation group `[name]`, as ordo writes it.
    pub fn new(id: u64, name: impl Into<String>, weight: u64) -> Self {
        let name = name.into();
        Self {
            id,
            colocation_group: ColocationGroup::List(vec![name.clone()]),
            name,
            weight,
            temporary_memory: 0,
            persistent_memory: 0,
            output_memory: Vec::new(),
            op_type: None,
            flops: None,
            occupancy: 1.0,
            role: Role::Forward,
            layer: None,
            extra: Map::new(),
        }
    }

    /// The node's colocation group names; `[name]` when the attribute is absent.
    pub fn colocation_groups(&self) -> Vec<&str> {
        match &self.colocation_group {
            ColocationGroup::Implicit => vec![self.name.as_str()],
            ColocationGroup::Name(group) => vec![group.as_str()],
            ColocationGroup::List(groups) => groups.iter().map(String::as_str).collect(),
        }
    }

    /// Bytes of all outputs, saturating.
    pub fn total_output_memory(&self) -> u64 {
        self.output_memory.iter().fold(0u64, |sum, &b| sum.saturating_add(b))
    }

    /// The memory Baechi charges for running the op: `temporary_memory + sum(output_memory)`.
    pub fn memory(&self) -> u64 {
        self.temporary_memory.saturating_add(self.total_output_memory())
    }
}

impl CostLink {
    /// A link carrying `tensor`, its weight the sum of the tensors' weights.
    pub fn new(source: u64, target: u64, tensor: Vec<TensorRef>) -> Self {
        let weight = tensor.iter().fold(0u64, |sum, t| sum.saturating_add(t.weight));
        Self { source, target, weight, tensor, extra: Map::new() }
    }
}

impl TensorRef {
    /// A tensor of `num_bytes` bytes, its weight from `comm`.
    pub fn new(name: impl Into<String>, num_bytes: u64, comm: &CommModel) -> Self {
        Self { name: name.into(), num_bytes, weight: comm.time_us(num_bytes), extra: Map::new() }
    }
}
