//! The transfers a plan makes and their order: a tensor consumed on another device is sent
//! once to each such device, in the order of the placement's transfer schedule when it lists
//! every transfer, else by the producer's position in one topological order of the device
//! orders and the edges together (then receiver and tensor name).

use std::collections::{BTreeSet, HashMap};

use ordo_problem::{PlaceProblem, Placement};

/// A transfer to make: tensor `tensor` from device `from` to device `to`, at `rank` in the
/// plan's transfer order. Field order is the sort order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Send<'a> {
    pub rank: usize,
    pub to: usize,
    pub name: &'a str,
    pub tensor: usize,
    pub from: usize,
}

/// The transfers of `placement`, in transfer order (task `n + k` is the `k`-th).
pub(super) fn transfers<'a>(problem: &'a PlaceProblem, placement: &Placement) -> Vec<Send<'a>> {
    let (device, tensors) = (&placement.device_of, &problem.tensors);
    let mut issued: HashMap<(usize, usize), usize> = HashMap::new();
    for (k, &key) in placement.transfers.iter().flatten().enumerate() {
        issued.entry(key).or_insert(k);
    }
    let mut needed: BTreeSet<(usize, usize, usize)> = BTreeSet::new();
    for edge in &problem.edges {
        for &x in &edge.tensors {
            let (from, to) = (device[tensors[x].producer], device[edge.target]);
            if from != to {
                needed.insert((x, from, to));
            }
        }
    }
    let listed = needed.iter().all(|&(x, _, to)| issued.contains_key(&(x, to)));
    let position = (!listed).then(|| joint_topological_position(problem, placement));
    let rank = |x: usize, to: usize| match &position {
        None => issued[&(x, to)],
        Some(position) => position[tensors[x].producer],
    };
    let mut sends = BTreeSet::new();
    for &(x, from, to) in &needed {
        let name = tensors[x].name.as_str();
        sends.insert(Send { rank: rank(x, to), to, name, tensor: x, from });
    }
    sends.into_iter().collect()
}

/// Each node's position in a topological order of the graph whose edges are the problem's
/// edges (producer to consumer) and each device's order (one node to the next); the smallest
/// node index goes first among those available. Nodes on a cycle get `usize::MAX` (the plan's
/// validation reports the cycle).
fn joint_topological_position(problem: &PlaceProblem, placement: &Placement) -> Vec<usize> {
    let n = problem.len();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    for edge in &problem.edges {
        successors[edge.source].push(edge.target);
        for &x in &edge.tensors {
            successors[problem.tensors[x].producer].push(edge.target);
        }
    }
    for order in &placement.order {
        for pair in order.windows(2) {
            successors[pair[0]].push(pair[1]);
        }
    }
    let mut indegree = vec![0usize; n];
    for list in &mut successors {
        list.sort_unstable();
        list.dedup();
        for &c in list.iter() {
            indegree[c] += 1;
        }
    }
    let mut available: std::collections::BinaryHeap<std::cmp::Reverse<usize>> =
        (0..n).filter(|&v| indegree[v] == 0).map(std::cmp::Reverse).collect();
    let mut position = vec![usize::MAX; n];
    let mut count = 0;
    while let Some(std::cmp::Reverse(v)) = available.pop() {
        position[v] = count;
        count += 1;
        for &c in &successors[v] {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                available.push(std::cmp::Reverse(c));
            }
        }
    }
    position
}
