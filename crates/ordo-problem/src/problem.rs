//! The placement problem: a cost graph in the dense, index-based form the placers work on.

use std::collections::HashMap;

use ordo_cost::{CommModel, CostGraph, NodeMemory, StepMode, node_memory};
use ordo_ir::Role;

use crate::error::ProblemError;

/// The devices to place on. All pairs of devices are linked alike (Baechi's model).
#[derive(Clone, Debug, PartialEq)]
pub struct Devices {
    /// Memory limit of each device in bytes (`u64::MAX` for unlimited).
    pub memory: Vec<u64>,
    /// Transfer time of a tensor between any two devices.
    pub comm: CommModel,
}

impl Devices {
    /// `n` devices with the same memory limit and Baechi's default communication model.
    pub fn uniform(n: usize, memory: u64) -> Self {
        Self { memory: vec![memory; n], comm: CommModel::baechi_default() }
    }

    /// Number of devices.
    pub fn count(&self) -> usize {
        self.memory.len()
    }
}

/// A distinct tensor: produced once, sent at most once to each other device.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Name from the cost graph (unique).
    pub name: String,
    /// Producing node.
    pub producer: usize,
    /// Size in bytes.
    pub bytes: u64,
    /// Transfer time in µs between two devices.
    pub comm_us: u64,
}

/// A dependency from `source` to `target`, carrying tensors (possibly none: a control edge).
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// Producer node.
    pub source: usize,
    /// Consumer node.
    pub target: usize,
    /// Transfer time in µs if the ends are on different devices: the sum over its tensors.
    pub comm_us: u64,
    /// Indices into [`PlaceProblem::tensors`].
    pub tensors: Vec<usize>,
}

/// A cost graph ready for placement: nodes are indices `0..n` in cost-graph order.
#[derive(Clone, Debug)]
pub struct PlaceProblem {
    /// Node names.
    pub names: Vec<String>,
    /// Compute time of each node in µs.
    pub weights: Vec<u64>,
    /// Share of its device each node keeps busy while it runs, in `(0, 1]`: the cost graph's
    /// [`ordo_cost::CostNode::occupancy`]. The placers do not use it (they run one node at a
    /// time per device); plans carry it to the simulator, where kernels that leave a device
    /// partly idle can run side by side.
    pub occupancy: Vec<f64>,
    /// Each node's part of a training step: the cost graph's [`ordo_cost::CostNode::role`]
    /// ([`Role::Forward`] for every node of a forward-only graph). Schedulers use it to tell
    /// forward, dX, dW and update work apart.
    pub roles: Vec<Role>,
    /// For each node that is not forward, the index of the forward node (layer) it belongs
    /// to: the cost graph's [`ordo_cost::CostNode::layer`] as a node index. `None` for forward
    /// nodes and for nodes without a layer; when `Some`, that node's role is [`Role::Forward`].
    pub layer_of: Vec<Option<usize>>,
    /// Memory of each node under [`PlaceProblem::mode`].
    pub memory: Vec<NodeMemory>,
    /// All edges, in cost-graph link order.
    pub edges: Vec<Edge>,
    /// Per node, indices into `edges` of its out-edges, in link order.
    pub out_edges: Vec<Vec<usize>>,
    /// Per node, indices into `edges` of its in-edges, in link order.
    pub in_edges: Vec<Vec<usize>>,
    /// Distinct tensors.
    pub tensors: Vec<Tensor>,
    /// Colocation group of each node (index into `groups`).
    pub group_of: Vec<usize>,
    /// Members of each colocation group, in node order.
    pub groups: Vec<Vec<usize>>,
    /// Baechi's topological order (see [`baechi_topo_order`]).
    pub topo_order: Vec<usize>,
    /// Position of each node in `topo_order`: the tie-breaker of m-ETF and m-SCT.
    pub topo_rank: Vec<usize>,
    /// The devices.
    pub devices: Devices,
    /// What the placement must fit: one forward pass or a whole training step.
    pub mode: StepMode,
}

impl PlaceProblem {
    /// Builds the problem from a (validated) cost graph. Colocation groups are merged as
    /// Baechi's TF grouper does: a node listing several groups joins them all (union-find).
    /// Edge transfer times are recomputed from tensor bytes with `devices.comm`, so a cluster's
    /// link model replaces the file's times; with Baechi's default model they are equal.
    ///
    /// # Errors
    /// [`ProblemError::NoDevices`], [`ProblemError::TooManyDevices`], [`ProblemError::Cycle`], or
    /// [`ProblemError::Invalid`] for a link to a missing node or a `layer` that
    /// [`CostGraph::validate`] refuses (on a forward node, naming a missing node or one that
    /// is not forward).
    pub fn new(graph: &CostGraph, devices: Devices, mode: StepMode) -> Result<Self, ProblemError> {
        if devices.count() == 0 {
            return Err(ProblemError::NoDevices);
        }
        if devices.count() > ordo_cost::MAX_DEVICES {
            return Err(ProblemError::TooManyDevices {
                count: devices.count(),
                max: ordo_cost::MAX_DEVICES,
            });
        }
        let n = graph.nodes.len();
        let index: HashMap<u64, usize> =
            graph.nodes.iter().enumerate().map(|(i, node)| (node.id, i)).collect();
        let mut tensors: Vec<Tensor> = Vec::new();
        let mut tensor_index: HashMap<&str, usize> = HashMap::new();
        let mut edges = Vec::with_capacity(graph.links.len());
        let mut out_edges = vec![Vec::new(); n];
        let mut in_edges = vec![Vec::new(); n];
        for link in &graph.links {
            let endpoint = |id: u64| {
                index.get(&id).copied().ok_or_else(|| {
                    ProblemError::Invalid(format!(
                        "link {} -> {} names node {id}, which does not exist",
                        link.source, link.target
                    ))
                })
            };
            let (source, target) = (endpoint(link.source)?, endpoint(link.target)?);
            let mut ids = Vec::with_capacity(link.tensor.len());
            for t in &link.tensor {
                let id = *tensor_index.entry(t.name.as_str()).or_insert_with(|| {
                    tensors.push(Tensor {
                        name: t.name.clone(),
                        producer: source,
                        bytes: t.num_bytes,
                        comm_us: devices.comm.time_us(t.num_bytes),
                    });
                    tensors.len() - 1
                });
                ids.push(id);
            }
            let comm_us = ids.iter().map(|&t| tensors[t].comm_us).sum();
            out_edges[source].push(edges.len());
            in_edges[target].push(edges.len());
            edges.push(Edge { source, target, comm_us, tensors: ids });
        }
        let layer_of = layers(graph, &index)?;
        let (group_of, groups) = colocation_groups(graph);
        let mut problem = Self {
            names: graph.nodes.iter().map(|node| node.name.clone()).collect(),
            weights: graph.nodes.iter().map(|node| node.weight).collect(),
            occupancy: graph.nodes.iter().map(|node| node.occupancy).collect(),
            roles: graph.nodes.iter().map(|node| node.role).collect(),
            layer_of,
            memory: graph.nodes.iter().map(|node| node_memory(node, mode)).collect(),
            edges,
            out_edges,
            in_edges,
            tensors,
            group_of,
            groups,
            topo_order: Vec::new(),
            topo_rank: Vec::new(),
            devices,
            mode,
        };
        problem.set_topo_order()?;
        Ok(problem)
    }

    /// Fills `topo_order` with Baechi's topological order and `topo_rank` with its inverse:
    /// for a problem derived from another by rewriting its nodes and edges.
    ///
    /// # Errors
    /// [`ProblemError::Cycle`], as [`baechi_topo_order`].
    pub fn set_topo_order(&mut self) -> Result<(), ProblemError> {
        self.topo_order = baechi_topo_order(self)?;
        self.topo_rank = vec![0; self.len()];
        for (rank, &node) in self.topo_order.iter().enumerate() {
            self.topo_rank[node] = rank;
        }
        Ok(())
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Sum of all compute times in µs.
    pub fn total_work_us(&self) -> u64 {
        self.weights.iter().fold(0, |sum, &w| sum.saturating_add(w))
    }

    /// Longest path through the graph counting compute only (every edge free), in µs.
    pub fn critical_path_us(&self) -> u64 {
        let mut finish = vec![0u64; self.len()];
        for &v in &self.topo_order {
            let start =
                self.in_edges[v].iter().map(|&e| finish[self.edges[e].source]).max().unwrap_or(0);
            finish[v] = start + self.weights[v];
        }
        finish.into_iter().max().unwrap_or(0)
    }

    /// `max(critical path, total work / devices)`: no placement can finish sooner (the tighter
    /// bounds that account for transfers and memory are `ordo_place::lower_bounds`).
    pub fn simple_lower_bound_us(&self) -> u64 {
        let per_device = self.total_work_us().div_ceil(self.devices.count() as u64);
        self.critical_path_us().max(per_device)
    }
}

/// Baechi's `assign_topo_order`: Kahn's algorithm with a FIFO queue that starts with the
/// in-degree-0 nodes in node order; out-edges are walked in link order and a successor joins
/// the back of the queue when its last in-edge is seen. m-TOPO places in this order and m-ETF /
/// m-SCT break ties by it, so it must be exactly this order.
///
/// # Errors
/// [`ProblemError::Cycle`] naming a node left over.
pub fn baechi_topo_order(problem: &PlaceProblem) -> Result<Vec<usize>, ProblemError> {
    let successors = |v: usize| problem.out_edges[v].iter().map(|&e| problem.edges[e].target);
    let kahn = ordo_ir::kahn_order(problem.len(), successors);
    if let Some(stuck) = kahn.left_over() {
        return Err(ProblemError::Cycle { node: problem.names[stuck].clone() });
    }
    Ok(kahn.order)
}

/// Each node's layer as a node index, with the checks of [`CostGraph::validate`].
fn layers(
    graph: &CostGraph,
    index: &HashMap<u64, usize>,
) -> Result<Vec<Option<usize>>, ProblemError> {
    graph
        .nodes
        .iter()
        .map(|node| {
            let Some(layer) = node.layer else { return Ok(None) };
            let fail = |problem: String| {
                ProblemError::Invalid(format!(
                    "node {} ({:?}): attribute \"layer\" {problem}",
                    node.id, node.name
                ))
            };
            if node.role == Role::Forward {
                return Err(fail(format!("is {layer} on a forward node")));
            }
            match index.get(&layer) {
                None => Err(fail(format!("is {layer}, which is no node's id"))),
                Some(&i) if graph.nodes[i].role != Role::Forward => Err(fail(format!(
                    "is {layer}, but node {layer} ({:?}) is not a forward node",
                    graph.nodes[i].name
                ))),
                Some(&i) => Ok(Some(i)),
            }
        })
        .collect()
}

/// Union-find over colocation group names: nodes sharing any group name end up together.
fn colocation_groups(graph: &CostGraph) -> (Vec<usize>, Vec<Vec<usize>>) {
    let n = graph.nodes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut first_with_name: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for name in node.colocation_groups() {
            let other = *first_with_name.entry(name).or_insert(i);
            let (a, b) = (find(&mut parent, i), find(&mut parent, other));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut group_index: HashMap<usize, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of = vec![0; n];
    for (i, slot) in group_of.iter_mut().enumerate() {
        let root = find(&mut parent, i);
        let g = *group_index.entry(root).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
        *slot = g;
    }
    (group_of, groups)
}
