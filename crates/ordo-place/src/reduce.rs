//! Graph reductions from Baechi's placer: fewer, larger units to place, and the way back to
//! the original nodes.
//!
//! * [`coplace`] is Baechi's co-placement grouper: colocation groups absorb single-consumer
//!   chains.
//! * [`fuse`] is Baechi's fused-op placer: directly connected nodes of one group become one node
//!   when that cannot create a cycle.
//! * [`reduce`] does both, as Baechi's README example does (`--grouper coplace --placer_type
//!   fusion`), and [`expand`] maps a placement of the reduced graph back.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use ordo_cost::{NodeMemory, StepMode};
use ordo_ir::Role;

use crate::error::PlaceError;
use ordo_problem::{Edge, PlaceProblem, Tensor};

/// A reduced problem and, for every node of the original, the node that stands for it.
#[derive(Clone, Debug)]
pub struct Reduced {
    /// The reduced problem (same devices and step mode).
    pub problem: PlaceProblem,
    /// Original node -> node of [`Reduced::problem`].
    pub node_of: Vec<usize>,
}

/// Baechi's co-placement grouper (`grouper.CoplacementGrouper`): start from the colocation
/// groups and, until nothing changes, merge the group of every node that has exactly one
/// out-edge with the group of its consumer. Merging never changes the edges, so the fixed point
/// is one union-find pass over those edges. Nodes stay as they are; only groups change.
///
/// Time `O(|V| + |E|)` (inverse Ackermann aside), plus copying the problem.
pub fn coplace(problem: &PlaceProblem) -> Reduced {
    let (group_of, groups) = coplace_groups(problem);
    let reduced = PlaceProblem { group_of, groups, ..problem.clone() };
    Reduced { problem: reduced, node_of: (0..problem.len()).collect() }
}

/// Baechi's op fusion (`FusedOpPlacer`): within each colocation group, take the edges between
/// members in order and fuse the consumer `b` into the producer `a` unless `outdeg(a) > 1` and
/// `indeg(b) > 1`. When either degree is 1 the edge is the only path from `a` to `b`, so
/// contracting it cannot close a cycle. Edges that fusion moves onto `a` and that join two
/// members are queued in turn.
///
/// The fused node keeps `a`'s name and group, sums compute time and persistent memory, has as
/// occupancy the members' occupancies weighted by their compute times (the device time they
/// use over the time they take, since they run one after another), takes
/// the largest temporary memory, and has as outputs the distinct tensors on its out-edges
/// (Baechi's rule; in training mode, where every output is kept for backward, the sum of the
/// members' outputs instead). Parallel edges merge, keeping each tensor once. The fused node's
/// role is [`Role::Forward`] if any member is forward (a forward node fused with its backward
/// work still has forward work on the critical path), and otherwise the role of its heaviest
/// member by compute time (the first in node order on a tie). Its layer is `None` when it is
/// forward; otherwise the reduced node that its members' layers all fall into, or `None` when
/// they fall into different nodes or no member has one. So a layer is always a forward node of
/// the reduced problem, never the node itself. The reduced graph gets a fresh Baechi
/// topological order.
///
/// Time `O(|V| + |E|)` when every edge moves a bounded number of times; an edge is moved to
/// `a` each time its end is fused away, and merging parallel edges compares their tensor lists.
///
/// # Errors
/// [`ProblemError::Cycle`](ordo_problem::ProblemError::Cycle) (as [`PlaceError::Problem`]) only if `problem` itself has one.
pub fn fuse(problem: &PlaceProblem) -> Result<Reduced, PlaceError> {
    fuse_groups(problem, &problem.group_of, &problem.groups)
}

/// [`coplace`], then [`fuse`]: the reduced problem and where each original node went.
///
/// # Errors
/// As [`fuse`].
pub fn reduce(problem: &PlaceProblem) -> Result<Reduced, PlaceError> {
    let (group_of, groups) = coplace_groups(problem);
    fuse_groups(problem, &group_of, &groups)
}

/// The device of every original node, given the device of every reduced node.
///
/// Time `O(|V|)`.
pub fn expand(device_of_reduced: &[usize], node_of: &[usize]) -> Vec<usize> {
    node_of.iter().map(|&r| device_of_reduced[r]).collect()
}

fn coplace_groups(problem: &PlaceProblem) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut parent: Vec<usize> = (0..problem.groups.len()).collect();
    for (v, out) in problem.out_edges.iter().enumerate() {
        if let [e] = out[..] {
            let a = find(&mut parent, problem.group_of[v]);
            let b = find(&mut parent, problem.group_of[problem.edges[e].target]);
            parent[a.max(b)] = a.min(b);
        }
    }
    let roots: Vec<usize> = problem.group_of.iter().map(|&g| find(&mut parent, g)).collect();
    relabel_groups(&roots)
}

fn fuse_groups(
    problem: &PlaceProblem,
    group_of: &[usize],
    groups: &[Vec<usize>],
) -> Result<Reduced, PlaceError> {
    let mut graph = Fusion::new(problem);
    let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
    for members in groups.iter().filter(|m| m.len() > 1) {
        let group = group_of[members[0]];
        let member = |v: usize| group_of[v] == group;
        for &a in members {
            let internal = graph.out[a].iter().filter(|&&(b, _)| member(b));
            queue.extend(internal.map(|&(b, _)| (a, b)));
        }
        while let Some((a, b)) = queue.pop_front() {
            if !graph.index.contains_key(&(a, b)) {
                continue;
            }
            if graph.out_degree[a] > 1 && graph.in_degree[b] > 1 {
                continue;
            }
            graph.fuse(a, b, member, &mut queue);
        }
    }
    graph.finish(group_of)
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Dense group ids from small labels, numbered by first member; members in node order.
fn relabel_groups(labels: &[usize]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut index = vec![usize::MAX; labels.iter().max().map_or(0, |&m| m + 1)];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of = Vec::with_capacity(labels.len());
    for (v, &label) in labels.iter().enumerate() {
        if index[label] == usize::MAX {
            index[label] = groups.len();
            groups.push(Vec::new());
        }
        groups[index[label]].push(v);
        group_of.push(index[label]);
    }
    (group_of, groups)
}

/// A multiplicative hash for the `(source, target)` keys of the edge index.
#[derive(Default)]
struct PairHasher(u64);

impl Hasher for PairHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The tensors of an edge: those of an edge of the original problem until a merge adds more.
#[derive(Clone)]
enum Carried {
    Original(usize),
    Merged(Vec<usize>),
}

/// The graph being fused, over the original node ids. Adjacency lists keep insertion order, as
/// NetworkX does, so the fusion order is Baechi's; removed edges stay in the lists, marked dead.
struct Fusion<'a> {
    problem: &'a PlaceProblem,
    /// Per node, `(target, edge slot)`.
    out: Vec<Vec<(usize, usize)>>,
    /// Per node, `(source, edge slot)`.
    inp: Vec<Vec<(usize, usize)>>,
    out_degree: Vec<usize>,
    in_degree: Vec<usize>,
    /// `(source, target)` -> edge slot, for live edges.
    index: HashMap<(usize, usize), usize, BuildHasherDefault<PairHasher>>,
    live: Vec<bool>,
    carried: Vec<Carried>,
    weight: Vec<u64>,
    /// Per node, compute time x occupancy: the device time it uses.
    busy: Vec<f64>,
    /// Per node, the largest occupancy among its members: its occupancy when it takes no time.
    widest: Vec<f64>,
    memory: Vec<NodeMemory>,
    /// `(b, a)` for every fusion of `b` into `a`, in order.
    log: Vec<(usize, usize)>,
}

impl<'a> Fusion<'a> {
    fn new(problem: &'a PlaceProblem) -> Self {
        let n = problem.len();
        let mut index = HashMap::default();
        index.reserve(problem.edges.len());
        let mut graph = Self {
            problem,
            out: vec![Vec::new(); n],
            inp: vec![Vec::new(); n],
            out_degree: problem.out_edges.iter().map(Vec::len).collect(),
            in_degree: problem.in_edges.iter().map(Vec::len).collect(),
            index,
            live: vec![true; problem.edges.len()],
            carried: (0..problem.edges.len()).map(Carried::Original).collect(),
            weight: problem.weights.clone(),
            busy: problem
                .weights
                .iter()
                .zip(&problem.occupancy)
                .map(|(&w, &o)| w as f64 * o)
                .collect(),
            widest: problem.occupancy.clone(),
            memory: problem.memory.clone(),
            log: Vec::new(),
        };
        for (slot, e) in problem.edges.iter().enumerate() {
            graph.out[e.source].push((e.target, slot));
            graph.inp[e.target].push((e.source, slot));
            graph.index.insert((e.source, e.target), slot);
        }
        graph
    }

    fn tensors(&self, slot: usize) -> &[usize] {
        match &self.carried[slot] {
            Carried::Original(e) => &self.problem.edges[*e].tensors,
            Carried::Merged(list) => list,
        }
    }

    /// Occupancy of the (possibly fused) node `v`: the device time its members use over the
    /// time they take, or the widest member's when they take none.
    fn occupancy(&self, v: usize) -> f64 {
        let busy = self.busy[v] / self.weight[v] as f64;
        if busy > 0.0 { busy.min(1.0) } else { self.widest[v] }
    }

    /// Fuses `b` into `a`, queueing new edges between members (`member`).
    fn fuse(
        &mut self,
        a: usize,
        b: usize,
        member: impl Fn(usize) -> bool,
        queue: &mut VecDeque<(usize, usize)>,
    ) {
        self.weight[a] = self.weight[a].saturating_add(self.weight[b]);
        self.busy[a] += self.busy[b];
        self.widest[a] = self.widest[a].max(self.widest[b]);
        let (ma, mb) = (self.memory[a], self.memory[b]);
        self.memory[a] = NodeMemory {
            temporary: ma.temporary.max(mb.temporary),
            persistent: ma.persistent.saturating_add(mb.persistent),
            outputs: ma.outputs.saturating_add(mb.outputs),
            retain_outputs: ma.retain_outputs,
        };
        let (inputs, outputs) =
            (std::mem::take(&mut self.inp[b]), std::mem::take(&mut self.out[b]));
        for &(p, slot) in &inputs {
            if self.live[slot] && p != a && self.add_edge(p, a, slot) && member(p) {
                queue.push_back((p, a));
            }
        }
        for &(s, slot) in &outputs {
            if self.live[slot] && s != a && self.add_edge(a, s, slot) && member(s) {
                queue.push_back((a, s));
            }
        }
        for (p, slot) in inputs {
            if std::mem::replace(&mut self.live[slot], false) {
                self.out_degree[p] -= 1;
                self.index.remove(&(p, b));
            }
        }
        for (s, slot) in outputs {
            if std::mem::replace(&mut self.live[slot], false) {
                self.in_degree[s] -= 1;
                self.index.remove(&(b, s));
            }
        }
        self.log.push((b, a));
    }

    /// Adds edge `u -> v` carrying the tensors of `slot`, or merges those tensors into an
    /// existing `u -> v`. Returns whether the edge is new.
    fn add_edge(&mut self, u: usize, v: usize, slot: usize) -> bool {
        if let Some(&existing) = self.index.get(&(u, v)) {
            let missing: Vec<usize> = self
                .tensors(slot)
                .iter()
                .filter(|t| !self.tensors(existing).contains(t))
                .copied()
                .collect();
            if !missing.is_empty() {
                let mut list = self.tensors(existing).to_vec();
                list.extend(missing);
                self.carried[existing] = Carried::Merged(list);
            }
            return false;
        }
        let new = self.carried.len();
        self.carried.push(self.carried[slot].clone());
        self.live.push(true);
        self.out[u].push((v, new));
        self.inp[v].push((u, new));
        self.out_degree[u] += 1;
        self.in_degree[v] += 1;
        self.index.insert((u, v), new);
        true
    }

    /// The reduced problem over the surviving nodes, in original node order.
    fn finish(self, group_of: &[usize]) -> Result<Reduced, PlaceError> {
        let problem = self.problem;
        let n = problem.len();
        // Walking the log backwards, a node's absorber has already found its final node.
        let mut root: Vec<usize> = (0..n).collect();
        for &(b, a) in self.log.iter().rev() {
            root[b] = root[a];
        }
        let alive: Vec<usize> = (0..n).filter(|&v| root[v] == v).collect();
        let mut new_id = vec![usize::MAX; n];
        for (i, &v) in alive.iter().enumerate() {
            new_id[v] = i;
        }
        let node_of: Vec<usize> = root.iter().map(|&r| new_id[r]).collect();
        let mut tensors: Vec<Tensor> = Vec::new();
        let mut tensor_id = vec![usize::MAX; problem.tensors.len()];
        let mut edges = Vec::with_capacity(self.index.len());
        let mut out_edges = vec![Vec::new(); alive.len()];
        let mut in_edges = vec![Vec::new(); alive.len()];
        for &v in &alive {
            for &(t, slot) in self.out[v].iter().filter(|&&(_, slot)| self.live[slot]) {
                let ids: Vec<usize> = self
                    .tensors(slot)
                    .iter()
                    .map(|&old| {
                        if tensor_id[old] == usize::MAX {
                            tensor_id[old] = tensors.len();
                            let orig = &problem.tensors[old];
                            tensors
                                .push(Tensor { producer: node_of[orig.producer], ..orig.clone() });
                        }
                        tensor_id[old]
                    })
                    .collect();
                let (source, target) = (new_id[v], new_id[t]);
                out_edges[source].push(edges.len());
                in_edges[target].push(edges.len());
                let comm_us = ids.iter().fold(0u64, |s, &i| s.saturating_add(tensors[i].comm_us));
                edges.push(Edge { source, target, comm_us, tensors: ids });
            }
        }
        let forward = matches!(problem.mode, StepMode::ForwardOnly);
        let mut grew = vec![false; n];
        for &(_, a) in &self.log {
            grew[a] = true;
        }
        let memory = alive
            .iter()
            .map(|&v| {
                let mut m = self.memory[v];
                if forward && grew[v] {
                    m.outputs = distinct_output_bytes(&edges, &out_edges[new_id[v]], &tensors);
                }
                m
            })
            .collect();
        let (roles, layer_of) = merged_roles(problem, &node_of, alive.len());
        let labels: Vec<usize> = alive.iter().map(|&v| group_of[v]).collect();
        let (group_of, groups) = relabel_groups(&labels);
        let mut reduced = PlaceProblem {
            names: alive.iter().map(|&v| problem.names[v].clone()).collect(),
            weights: alive.iter().map(|&v| self.weight[v]).collect(),
            occupancy: alive.iter().map(|&v| self.occupancy(v)).collect(),
            roles,
            layer_of,
            memory,
            edges,
            out_edges,
            in_edges,
            tensors,
            group_of,
            groups,
            topo_order: Vec::new(),
            topo_rank: Vec::new(),
            devices: problem.devices.clone(),
            mode: problem.mode,
        };
        reduced.set_topo_order()?;
        Ok(Reduced { problem: reduced, node_of })
    }
}

/// The role and layer of each of the `count` reduced nodes, by the rules of [`fuse`], given the
/// reduced node of every original node.
fn merged_roles(
    problem: &PlaceProblem,
    node_of: &[usize],
    count: usize,
) -> (Vec<Role>, Vec<Option<usize>>) {
    /// What the members' layers agree on so far.
    #[derive(Clone, Copy, PartialEq)]
    enum Layer {
        Unset,
        One(usize),
        Mixed,
    }
    let mut forward = vec![false; count];
    let mut heaviest: Vec<Option<(u64, Role)>> = vec![None; count];
    let mut layer = vec![Layer::Unset; count];
    for (v, &r) in node_of.iter().enumerate() {
        let role = problem.roles[v];
        forward[r] |= role == Role::Forward;
        if heaviest[r].is_none_or(|(weight, _)| problem.weights[v] > weight) {
            heaviest[r] = Some((problem.weights[v], role));
        }
        if let Some(l) = problem.layer_of[v] {
            layer[r] = match layer[r] {
                Layer::Unset => Layer::One(node_of[l]),
                Layer::One(x) if x == node_of[l] => Layer::One(x),
                _ => Layer::Mixed,
            };
        }
    }
    (0..count)
        .map(|r| match heaviest[r] {
            Some((_, role)) if !forward[r] => {
                let layer = match layer[r] {
                    Layer::One(x) => Some(x),
                    Layer::Unset | Layer::Mixed => None,
                };
                (role, layer)
            }
            _ => (Role::Forward, None),
        })
        .unzip()
}

/// Bytes of the distinct tensors on the given out-edges.
fn distinct_output_bytes(edges: &[Edge], out: &[usize], tensors: &[Tensor]) -> u64 {
    let mut ids: Vec<usize> = out.iter().flat_map(|&e| edges[e].tensors.iter().copied()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.iter().fold(0u64, |s, &t| s.saturating_add(tensors[t].bytes))
}
