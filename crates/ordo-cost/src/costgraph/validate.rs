//! Checks of a typed cost graph: what JSON types cannot express.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::error::{CostGraphError, EdgeLabel, NodeLabel};
use super::fields::{role_name, share_problem};
use super::{ColocationGroup, CostGraph, CostLink, CostNode};
use ordo_ir::Role;
use rustc_hash::FxBuildHasher as FxBuild;

/// Node id -> position in the `nodes` list.
pub(crate) enum NodeIndex {
    /// Ids are 0..n-1 in order, as in every file ordo writes: no table needed.
    Dense(usize),
    /// Any other unique ids.
    Sparse(HashMap<u64, usize, FxBuild>),
}

impl NodeIndex {
    /// Position of the node with id `id`.
    pub(crate) fn get(&self, id: u64) -> Option<usize> {
        match self {
            NodeIndex::Dense(n) => usize::try_from(id).ok().filter(|&i| i < *n),
            NodeIndex::Sparse(map) => map.get(&id).copied(),
        }
    }
}

/// All checks of [`CostGraph::validate`].
pub(crate) fn validate(graph: &CostGraph, origin: &str) -> Result<(), CostGraphError> {
    let index = index_nodes(&graph.nodes, origin)?;
    validate_indexed(graph, &index, origin)
}

fn label(nodes: &[CostNode], position: usize) -> NodeLabel {
    let node = &nodes[position];
    NodeLabel { position, id: Some(node.id), name: Some(node.name.clone()) }
}

fn node_error(
    origin: &str,
    nodes: &[CostNode],
    position: usize,
    attribute: &str,
    problem: String,
) -> CostGraphError {
    CostGraphError::Node {
        origin: origin.to_string(),
        node: label(nodes, position),
        attribute: attribute.to_string(),
        problem,
    }
}

/// Maps every id to its position in `nodes`, checking that ids and names are unique.
pub(crate) fn index_nodes(nodes: &[CostNode], origin: &str) -> Result<NodeIndex, CostGraphError> {
    let index = if nodes.iter().enumerate().all(|(i, n)| n.id == i as u64) {
        NodeIndex::Dense(nodes.len())
    } else {
        let mut index = HashMap::with_capacity_and_hasher(nodes.len(), FxBuild);
        for (position, node) in nodes.iter().enumerate() {
            if let Some(&first) = index.get(&node.id) {
                let problem = format!("repeats the id of {}", label(nodes, first));
                return Err(node_error(origin, nodes, position, "id", problem));
            }
            index.insert(node.id, position);
        }
        NodeIndex::Sparse(index)
    };
    let mut names: HashMap<&str, usize, FxBuild> =
        HashMap::with_capacity_and_hasher(nodes.len(), FxBuild);
    for (position, node) in nodes.iter().enumerate() {
        if let Some(&first) = names.get(node.name.as_str()) {
            let problem = format!("repeats the name of node {}", nodes[first].id);
            return Err(node_error(origin, nodes, position, "name", problem));
        }
        names.insert(&node.name, position);
    }
    Ok(index)
}

/// The checks after [`index_nodes`].
pub(crate) fn validate_indexed(
    graph: &CostGraph,
    index: &NodeIndex,
    origin: &str,
) -> Result<(), CostGraphError> {
    check_nodes(&graph.nodes, origin)?;
    check_layers(&graph.nodes, index, origin)?;
    let ends = check_links(graph, index, origin)?;
    check_acyclic(&graph.nodes, &ends, origin)
}

fn check_nodes(nodes: &[CostNode], origin: &str) -> Result<(), CostGraphError> {
    for (position, node) in nodes.iter().enumerate() {
        if node.weight == 0 {
            let problem = "is 0; a compute time is at least 1 µs".to_string();
            return Err(node_error(origin, nodes, position, "weight", problem));
        }
        if node.weight > crate::MAX_TIME_US {
            let problem = crate::too_long(&node.weight.to_string(), "µs");
            return Err(node_error(origin, nodes, position, "weight", problem));
        }
        if let Some(problem) = share_problem(node.occupancy) {
            return Err(node_error(origin, nodes, position, "occupancy", problem));
        }
        if node.colocation_group == ColocationGroup::List(Vec::new()) {
            let problem = "is an empty list; give at least one group".to_string();
            return Err(node_error(origin, nodes, position, "colocation_group", problem));
        }
    }
    Ok(())
}

/// A `layer` only on a node that is not forward, naming a forward node of the graph.
fn check_layers(nodes: &[CostNode], index: &NodeIndex, origin: &str) -> Result<(), CostGraphError> {
    for (position, node) in nodes.iter().enumerate() {
        let Some(layer) = node.layer else { continue };
        let problem = if node.role == Role::Forward {
            format!(
                "is {layer} on a forward node; only nodes of another role (dx, dw, update, \
                 comm) belong to a forward layer"
            )
        } else {
            match index.get(layer) {
                None => format!("is {layer}, which is no node's id"),
                Some(target) if nodes[target].role != Role::Forward => format!(
                    "is {layer}, but {} has role {:?}; a layer is a forward node",
                    label(nodes, target),
                    role_name(nodes[target].role)
                ),
                Some(_) => continue,
            }
        };
        return Err(node_error(origin, nodes, position, "layer", problem));
    }
    Ok(())
}

fn edge_error(
    origin: &str,
    graph: &CostGraph,
    index: &NodeIndex,
    position: usize,
    attribute: &str,
    problem: String,
) -> CostGraphError {
    let link = &graph.links[position];
    let name_of = |id: u64| index.get(id).map(|i| graph.nodes[i].name.clone());
    CostGraphError::Edge {
        origin: origin.to_string(),
        edge: Box::new(EdgeLabel {
            position,
            source: Some(link.source),
            source_name: name_of(link.source),
            target: Some(link.target),
            target_name: name_of(link.target),
        }),
        attribute: attribute.to_string(),
        problem,
    }
}

/// Checks every link and returns its endpoints as positions in `nodes`.
fn check_links(
    graph: &CostGraph,
    index: &NodeIndex,
    origin: &str,
) -> Result<Vec<(usize, usize)>, CostGraphError> {
    let fail = |position: usize, attribute: &str, problem: String| {
        edge_error(origin, graph, index, position, attribute, problem)
    };
    let mut ends = Vec::with_capacity(graph.links.len());
    // Tensor name -> (producer id, bytes, link position).
    let mut tensors: HashMap<&str, (u64, u64, usize), FxBuild> =
        HashMap::with_capacity_and_hasher(graph.links.len(), FxBuild);
    for (position, link) in graph.links.iter().enumerate() {
        let Some(source) = index.get(link.source) else {
            let problem = format!("is {}, which is no node's id", link.source);
            return Err(fail(position, "source", problem));
        };
        let Some(target) = index.get(link.target) else {
            let problem = format!("is {}, which is no node's id", link.target);
            return Err(fail(position, "target", problem));
        };
        check_tensors(link, position, &mut tensors, &fail)?;
        ends.push((source, target));
    }
    if let Some((first, second)) = repeated_pair(&ends) {
        let problem = format!(
            "repeats the pair of the link at position {first}; a cost graph has at most one link \
             per ordered pair of nodes"
        );
        return Err(fail(second, "target", problem));
    }
    Ok(ends)
}

/// Positions of two links with the same endpoints, if any. Sorted links (as ordo writes them)
/// are checked in one pass; others are sorted first.
fn repeated_pair(ends: &[(usize, usize)]) -> Option<(usize, usize)> {
    if ends.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    let mut order: Vec<usize> = (0..ends.len()).collect();
    order.sort_unstable_by_key(|&i| (ends[i], i));
    order.windows(2).find(|w| ends[w[0]] == ends[w[1]]).map(|w| (w[0], w[1]))
}

fn check_tensors<'g>(
    link: &'g CostLink,
    position: usize,
    tensors: &mut HashMap<&'g str, (u64, u64, usize), FxBuild>,
    fail: &impl Fn(usize, &str, String) -> CostGraphError,
) -> Result<(), CostGraphError> {
    let mut sum = 0u64;
    for (i, tensor) in link.tensor.iter().enumerate() {
        if tensor.weight > crate::MAX_TIME_US {
            let problem = crate::too_long(&tensor.weight.to_string(), "µs");
            return Err(fail(position, &format!("tensor[{i}].weight"), problem));
        }
        sum = sum.saturating_add(tensor.weight);
        match tensors.entry(&tensor.name) {
            Entry::Vacant(slot) => {
                slot.insert((link.source, tensor.num_bytes, position));
            }
            Entry::Occupied(seen) => {
                let (producer, bytes, at) = *seen.get();
                if at == position {
                    let problem = format!("repeats tensor {:?} of the same link", tensor.name);
                    return Err(fail(position, &format!("tensor[{i}].name"), problem));
                }
                if producer != link.source {
                    let problem = format!(
                        "is {:?}, which the link at position {at} carries from node {producer}; \
                         a tensor has one producer",
                        tensor.name
                    );
                    return Err(fail(position, &format!("tensor[{i}].name"), problem));
                }
                if bytes != tensor.num_bytes {
                    let problem = format!(
                        "is {}, but tensor {:?} has {bytes} bytes on the link at position {at}",
                        tensor.num_bytes, tensor.name
                    );
                    return Err(fail(position, &format!("tensor[{i}].num_bytes"), problem));
                }
            }
        }
    }
    if sum != link.weight {
        let problem = format!("is {}, but the weights of its tensors sum to {sum}", link.weight);
        return Err(fail(position, "weight", problem));
    }
    Ok(())
}

/// Kahn's algorithm on positions; on failure names a node on a cycle and the cycle itself.
fn check_acyclic(
    nodes: &[CostNode],
    ends: &[(usize, usize)],
    origin: &str,
) -> Result<(), CostGraphError> {
    let n = nodes.len();
    let successors = Csr::new(n, ends.iter().copied());
    let mut indegree = vec![0usize; n];
    for &(_, target) in ends {
        indegree[target] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = 0;
    while let Some(node) = ready.pop() {
        done += 1;
        for &next in successors.row(node) {
            indegree[next] -= 1;
            if indegree[next] == 0 {
                ready.push(next);
            }
        }
    }
    if done == n {
        return Ok(());
    }
    // Every node left over has a left-over predecessor, so walking backwards over left-over
    // nodes must come back to a node already seen; that node lies on a cycle.
    let predecessors = Csr::new(n, ends.iter().map(|&(s, t)| (t, s)));
    let start = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
    let mut seen_at = vec![usize::MAX; n];
    let mut walk = Vec::new();
    let mut current = start;
    while seen_at[current] == usize::MAX {
        seen_at[current] = walk.len();
        walk.push(current);
        match predecessors.row(current).iter().find(|&&p| indegree[p] > 0) {
            Some(&p) => current = p,
            None => break,
        }
    }
    // `walk[seen_at[current]..]` runs backwards along the cycle from `current`.
    let back = &walk[seen_at[current].min(walk.len())..];
    let mut cycle: Vec<u64> = Vec::with_capacity(back.len() + 1);
    cycle.push(nodes[current].id);
    cycle.extend(back.iter().skip(1).rev().map(|&p| nodes[p].id));
    cycle.push(nodes[current].id);
    Err(CostGraphError::Cycle { origin: origin.to_string(), node: label(nodes, current), cycle })
}

/// Adjacency lists in one allocation.
struct Csr {
    offsets: Vec<usize>,
    targets: Vec<usize>,
}

impl Csr {
    fn new(n: usize, pairs: impl Iterator<Item = (usize, usize)> + Clone) -> Self {
        let mut offsets = vec![0usize; n + 1];
        for (from, _) in pairs.clone() {
            offsets[from + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0usize; offsets[n]];
        for (from, to) in pairs {
            targets[fill[from]] = to;
            fill[from] += 1;
        }
        Self { offsets, targets }
    }

    fn row(&self, i: usize) -> &[usize] {
        &self.targets[self.offsets[i]..self.offsets[i + 1]]
    }
}
