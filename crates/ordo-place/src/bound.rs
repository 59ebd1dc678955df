//! Lower bounds on the makespan of every placement of a problem that fits its memory limits,
//! under both execution models of [`crate::sim`].
//!
//! Every bound rests on three facts that hold for every schedule either model produces:
//!
//! * a device runs one node at a time, and a node starts after each of its predecessors
//!   finished;
//! * a node whose predecessor is on another device starts at least the largest transfer time
//!   among the edge's tensors after that predecessor finished (a tensor is sent only once its
//!   producer finished, and takes its whole transfer time);
//! * every device's peak memory is at least the sum of what its nodes keep resident for the
//!   whole step (persistent memory, and outputs that are never freed), so a placement that fits
//!   puts at most the largest device's memory of resident bytes on any device.
//!
//! The bounds, all computed in `O((|V| + |E|) log |V|)`:
//!
//! * **critical path** and **work**: the longest path of compute, and the total compute over the
//!   devices (the classic `max(critical path, work / devices)`, [`LowerBounds::simple_us`]);
//! * **energy** (Fernandez and Bussell's bound on prefixes and suffixes of the schedule): with
//!   earliest starts and latest finishes from the critical path `C`, the work that must be done
//!   before time `b` (or after time `a`) cannot exceed what the devices can do there, so the
//!   makespan is at least `C + (R - devices · length) / devices` for each such interval; the
//!   interval `[0, C]` gives the work bound;
//! * **communication**: an earliest start of every node that accounts for transfers. A node's
//!   predecessors on its own device run one after another before it; each other one delays it
//!   by its transfer. The node starts no sooner than the best choice of which predecessors share
//!   its device (members of its colocation group always do), and symmetrically for the tail
//!   after a node; the makespan is at least earliest start plus tail of every node;
//! * **memory**: a run of consecutive nodes of the critical path whose resident bytes exceed the
//!   largest device cannot be on one device, so some edge inside it carries a transfer: the
//!   path's compute plus the cheapest set of its edges that leaves every run within a device
//!   (dynamic programming);
//! * **segments**: the critical path cut into segments, each charged the least time any
//!   placement can spend between its ends, whether it keeps the segment on one device or pays
//!   transfers to move part of it (`bound/segments.rs`);
//! * **channels**: the segment bound whose memory runs also count a fourth fact, true of both
//!   models as well: a device has one channel that sends and receives one tensor at a time, so
//!   the tensors a split sends out of a device queue there (`bound/tensor_cut.rs`).

mod cases;
mod segments;
mod sides;
mod tensor_cut;

use ordo_problem::PlaceProblem;

/// The lower bounds of a problem, in µs (see the [module documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerBounds {
    /// The longest path of compute.
    pub critical_path_us: u64,
    /// Total compute divided by the number of devices, rounded up.
    pub work_us: u64,
    /// Fernandez and Bussell's energy bound over prefix and suffix intervals.
    pub energy_us: u64,
    /// Earliest start plus tail with transfers between devices.
    pub communication_us: u64,
    /// The critical path cut by the memory limits.
    pub memory_us: u64,
    /// Per weakly connected component, the smaller of its work (all on one device) and the
    /// longest path through its cheapest-to-cut edge (some edge between devices).
    pub cut_us: u64,
    /// The critical path cut into segments, each at least what keeping it on one device or
    /// moving part of it away costs.
    pub segments_us: u64,
    /// The segment bound whose memory runs also charge the transfers that queue at a device's
    /// channel (a device sends and receives one tensor at a time, in both execution models):
    /// at least `segments_us`.
    pub channels_us: u64,
}

impl LowerBounds {
    /// `max(critical path, work / devices)`.
    pub fn simple_us(&self) -> u64 {
        self.critical_path_us.max(self.work_us)
    }

    /// The largest of all bounds.
    pub fn best_us(&self) -> u64 {
        self.simple_us()
            .max(self.energy_us)
            .max(self.communication_us)
            .max(self.memory_us)
            .max(self.cut_us)
            .max(self.segments_us)
            .max(self.channels_us)
    }
}

/// Computes every bound of `problem`.
pub fn lower_bounds(problem: &PlaceProblem) -> LowerBounds {
    let head = heads(problem);
    let tail = tails(problem);
    let critical_path_us = (0..problem.len()).map(|v| head[v] + tail[v]).max().unwrap_or(0);
    let devices = problem.devices.count().max(1) as u64;
    let (segments_us, channels_us) = segments::segments(problem, &head, &tail, critical_path_us);
    LowerBounds {
        critical_path_us,
        work_us: problem.total_work_us().div_ceil(devices),
        energy_us: energy(problem, &head, &tail, critical_path_us),
        communication_us: communication(problem),
        memory_us: memory(problem, &head, &tail, critical_path_us),
        cut_us: cut(problem, &head, &tail),
        segments_us,
        channels_us,
    }
}

/// Longest compute path ending just before each node (its earliest start).
fn heads(p: &PlaceProblem) -> Vec<u64> {
    let mut head = vec![0u64; p.len()];
    for &v in &p.topo_order {
        for &e in &p.out_edges[v] {
            let t = p.edges[e].target;
            head[t] = head[t].max(head[v] + p.weights[v]);
        }
    }
    head
}

/// Longest compute path starting with each node, its own weight included.
pub(crate) fn tails(p: &PlaceProblem) -> Vec<u64> {
    let mut tail = vec![0u64; p.len()];
    for &v in p.topo_order.iter().rev() {
        let after = p.out_edges[v].iter().map(|&e| tail[p.edges[e].target]).max().unwrap_or(0);
        tail[v] = after + p.weights[v];
    }
    tail
}

/// Fernandez-Bussell on intervals `[0, b]` and `[a, C]`.
fn energy(p: &PlaceProblem, head: &[u64], tail: &[u64], c: u64) -> u64 {
    let d = p.devices.count().max(1) as i128;
    // Work forced into [0, b]: node v contributes clamp(b - latest start, 0, weight), a ramp
    // from its latest start to its latest finish; into [a, C]: clamp(earliest finish - a, 0,
    // weight), by symmetry a ramp in C - a. Both are the same sweep over ramps.
    let prefix = (0..p.len()).map(|v| (c - tail[v], p.weights[v]));
    let suffix = (0..p.len()).map(|v| (c - head[v] - p.weights[v], p.weights[v]));
    let excess = max_excess(prefix.collect(), d).max(max_excess(suffix.collect(), d));
    let rounded = if excess <= 0 { 0 } else { (excess + d - 1) / d };
    c + u64::try_from(rounded).unwrap_or(0)
}

/// For ramps `(start, length)` (each contributes `clamp(x - start, 0, length)` at `x`), the
/// largest `R(x) - devices · x`, over every breakpoint `x`.
fn max_excess(ramps: Vec<(u64, u64)>, devices: i128) -> i128 {
    let mut events: Vec<(u64, i128)> = Vec::with_capacity(2 * ramps.len());
    for (start, length) in ramps {
        if length > 0 {
            events.push((start, 1));
            events.push((start + length, -1));
        }
    }
    events.sort_unstable();
    let (mut x, mut value, mut slope, mut best) = (0u64, 0i128, 0i128, 0i128);
    for (at, delta) in events {
        value += slope * i128::from(at - x);
        x = at;
        slope += delta;
        best = best.max(value - devices * i128::from(x));
    }
    best
}

/// The transfer time an edge adds at least when its ends are on different devices.
fn delay(p: &PlaceProblem, e: usize) -> u64 {
    p.edges[e].tensors.iter().map(|&t| p.tensors[t].comm_us).max().unwrap_or(0)
}

/// A neighbour of a node for [`best_split`]: `far` is the bound through it when it is on
/// another device, `near` when on the same one, `weight` its compute and `forced` whether it
/// must share the device (same colocation group).
struct Neighbour {
    far: u64,
    near: u64,
    weight: u64,
    forced: bool,
}

/// `min` over the sets `S` of neighbours sharing the node's device (forced ones always in) of
/// `max(largest far outside S, largest near in S, smallest (near - weight) in S + total weight
/// of S)`. Sharing the largest `far` first is optimal for the first term; the others only grow
/// with `S`.
fn best_split(mut list: Vec<Neighbour>) -> u64 {
    list.sort_unstable_by_key(|n| (n.forced, std::cmp::Reverse(n.far)));
    let (mut near, mut first, mut sum) = (0u64, u64::MAX, 0u64);
    let shared = |near: u64, first: u64, sum: u64| {
        if first == u64::MAX { 0 } else { near.max(first + sum) }
    };
    let forced_from = list.iter().position(|n| n.forced).unwrap_or(list.len());
    for n in &list[forced_from..] {
        (near, first, sum) = (near.max(n.near), first.min(n.near - n.weight), sum + n.weight);
    }
    let free = &list[..forced_from];
    let mut best = free.first().map_or(0, |n| n.far).max(shared(near, first, sum));
    for (k, n) in free.iter().enumerate() {
        (near, first, sum) = (near.max(n.near), first.min(n.near - n.weight), sum + n.weight);
        let outside = free.get(k + 1).map_or(0, |n| n.far);
        best = best.min(outside.max(shared(near, first, sum)));
    }
    best
}

/// Edges between the same two nodes as one neighbour: the largest delay of them.
fn merged(list: &mut Vec<(usize, u64)>) {
    list.sort_unstable();
    list.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.1 = a.1.max(b.1);
        }
        a.0 == b.0
    });
}

/// The communication bound: max over nodes of earliest start plus tail.
fn communication(p: &PlaceProblem) -> u64 {
    let n = p.len();
    let mut start = vec![0u64; n];
    for &v in &p.topo_order {
        let mut preds: Vec<(usize, u64)> =
            p.in_edges[v].iter().map(|&e| (p.edges[e].source, delay(p, e))).collect();
        merged(&mut preds);
        let list = preds
            .into_iter()
            .map(|(u, c)| {
                let finish = start[u] + p.weights[u];
                Neighbour {
                    far: finish + c,
                    near: finish,
                    weight: p.weights[u],
                    forced: p.group_of[u] == p.group_of[v],
                }
            })
            .collect();
        start[v] = best_split(list);
    }
    // The tail from a node's finish to the end: successors on its device run one after another
    // after it; each other one waits for its transfer.
    let mut after = vec![0u64; n];
    for &v in p.topo_order.iter().rev() {
        let mut succs: Vec<(usize, u64)> =
            p.out_edges[v].iter().map(|&e| (p.edges[e].target, delay(p, e))).collect();
        merged(&mut succs);
        let list = succs
            .into_iter()
            .map(|(w, c)| {
                let whole = p.weights[w] + after[w];
                Neighbour {
                    far: c + whole,
                    near: whole,
                    weight: p.weights[w],
                    forced: p.group_of[w] == p.group_of[v],
                }
            })
            .collect();
        after[v] = best_split(list);
    }
    (0..n).map(|v| start[v] + p.weights[v] + after[v]).max().unwrap_or(0)
}

/// What a node keeps on its device for the whole step: persistent memory, and outputs that are
/// retained or that nobody consumes.
fn resident(p: &PlaceProblem, v: usize) -> u64 {
    let m = &p.memory[v];
    m.persistent.saturating_add(if outputs_kept(p, v) { m.outputs } else { 0 })
}

/// What a node allocates when it starts beyond what it keeps resident: its temporary memory, and
/// its outputs unless they stay.
fn at_start(p: &PlaceProblem, v: usize) -> u64 {
    let m = &p.memory[v];
    m.temporary.saturating_add(if outputs_kept(p, v) { 0 } else { m.outputs })
}

/// Whether a node's outputs stay to the end of the step: retained, or read by nobody.
fn outputs_kept(p: &PlaceProblem, v: usize) -> bool {
    p.memory[v].retain_outputs || p.out_edges[v].is_empty()
}

/// The memory bound on one critical path: its compute plus the cheapest set of its edges that
/// cuts it into runs whose resident bytes each fit the largest device.
fn memory(p: &PlaceProblem, head: &[u64], tail: &[u64], c: u64) -> u64 {
    let capacity = p.devices.memory.iter().copied().max().unwrap_or(0);
    let Some(mut v) = (0..p.len()).find(|&v| head[v] == 0 && tail[v] == c) else { return c };
    let mut bytes = vec![resident(p, v)];
    let mut delays = Vec::new();
    loop {
        let on_path = |e: &&usize| tail[p.edges[**e].target] + p.weights[v] == tail[v];
        let Some(&e) = p.out_edges[v].iter().filter(on_path).min_by_key(|&&e| delay(p, e)) else {
            break;
        };
        let w = p.edges[e].target;
        let cut = p.out_edges[v].iter().filter(|&&f| p.edges[f].target == w).map(|&f| delay(p, f));
        delays.push(cut.max().unwrap_or(0));
        v = w;
        bytes.push(resident(p, v));
    }
    c.saturating_add(cheapest_cuts(&bytes, &delays, capacity).unwrap_or(0))
}

/// The cheapest total delay of a set of cuts (cut `i` separates node `i` from node `i + 1`)
/// that leaves every run of consecutive nodes within `capacity` bytes; `None` when a node alone
/// exceeds it. Dynamic programming with a sliding-window minimum, time `O(nodes)`.
fn cheapest_cuts(bytes: &[u64], delays: &[u64], capacity: u64) -> Option<u64> {
    cheapest_runs(bytes, delays, capacity).map(|(cost, _)| cost)
}

/// [`cheapest_cuts`] with the cuts: the cost and the first node of every run, in order.
pub(crate) fn cheapest_runs(
    bytes: &[u64],
    delays: &[u64],
    capacity: u64,
) -> Option<(u64, Vec<usize>)> {
    if bytes.is_empty() || bytes.iter().any(|&b| b > capacity) {
        return None;
    }
    // cost[k]: the cheapest cuts of nodes 0..k when a run starts at node k (k = 0: none), and
    // previous[k] the start of the run before. The run from node k to node i fits when
    // sum(bytes[k..=i]) <= capacity.
    let n = bytes.len();
    let mut cost = vec![u64::MAX; n];
    let mut previous = vec![0usize; n];
    cost[0] = 0;
    let mut window: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    window.push_back(0);
    let (mut first, mut sum) = (0usize, 0u64);
    for i in 0..n {
        sum = sum.saturating_add(bytes[i]);
        while sum > capacity {
            sum -= bytes[first];
            first += 1;
        }
        while window.front().is_some_and(|&k| k < first) {
            window.pop_front();
        }
        let start = *window.front()?;
        if i + 1 == n {
            let mut starts = vec![start];
            while let Some(&k) = starts.last().filter(|&&k| k > 0) {
                starts.push(previous[k]);
            }
            starts.reverse();
            return Some((cost[start], starts));
        }
        // Cutting after node i starts a run at node i + 1.
        cost[i + 1] = cost[start].saturating_add(delays[i]);
        previous[i + 1] = start;
        while window.back().is_some_and(|&k| cost[k] >= cost[i + 1]) {
            window.pop_back();
        }
        window.push_back(i + 1);
    }
    None
}

/// The cut bound: in each weakly connected component, either every node is on one device, which
/// then runs all of them, or some edge joins two devices and the longest path through it pays
/// its transfer.
fn cut(p: &PlaceProblem, head: &[u64], tail: &[u64]) -> u64 {
    let n = p.len();
    let mut component = vec![usize::MAX; n];
    let mut stack = Vec::new();
    let mut count = 0;
    for root in 0..n {
        if component[root] != usize::MAX {
            continue;
        }
        component[root] = count;
        stack.push(root);
        while let Some(v) = stack.pop() {
            let edges = p.in_edges[v].iter().chain(&p.out_edges[v]);
            for &e in edges {
                let edge = &p.edges[e];
                for w in [edge.source, edge.target] {
                    if component[w] == usize::MAX {
                        component[w] = count;
                        stack.push(w);
                    }
                }
            }
        }
        count += 1;
    }
    let mut work = vec![0u64; count];
    for v in 0..n {
        work[component[v]] += p.weights[v];
    }
    let mut through = vec![u64::MAX; count];
    for (e, edge) in p.edges.iter().enumerate() {
        if p.group_of[edge.source] == p.group_of[edge.target] {
            continue;
        }
        let k = component[edge.source];
        let length = head[edge.source] + p.weights[edge.source] + delay(p, e) + tail[edge.target];
        through[k] = through[k].min(length);
    }
    work.iter().zip(&through).map(|(&w, &t)| w.min(t)).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::cheapest_cuts;

    /// Every subset of cuts whose runs fit, by exhaustion.
    fn exhaustive(bytes: &[u64], delays: &[u64], capacity: u64) -> Option<u64> {
        (0u32..1 << delays.len())
            .filter(|mask| {
                let mut run = 0;
                bytes.iter().enumerate().all(|(i, &b)| {
                    if i > 0 && mask & (1 << (i - 1)) != 0 {
                        run = 0;
                    }
                    run += b;
                    run <= capacity
                })
            })
            .map(|mask| (0..delays.len()).filter(|i| mask & (1 << i) != 0).map(|i| delays[i]).sum())
            .min()
    }

    #[test]
    fn cheapest_cuts_match_exhaustive_search() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let n = rng.usize(1..10);
            let bytes: Vec<u64> = (0..n).map(|_| rng.u64(0..50)).collect();
            let delays: Vec<u64> = (1..n).map(|_| rng.u64(0..20)).collect();
            let capacity = rng.u64(0..120);
            let expected = exhaustive(&bytes, &delays, capacity);
            assert_eq!(cheapest_cuts(&bytes, &delays, capacity), expected, "{bytes:?} {delays:?}");
            if let Some((cost, starts)) = super::cheapest_runs(&bytes, &delays, capacity) {
                // The runs are the cuts the cost counts, and each fits.
                assert_eq!(starts[0], 0);
                let cut: u64 = starts[1..].iter().map(|&k| delays[k - 1]).sum();
                assert_eq!(cut, cost);
                for (i, &k) in starts.iter().enumerate() {
                    let end = starts.get(i + 1).copied().unwrap_or(n);
                    assert!(bytes[k..end].iter().sum::<u64>() <= capacity);
                }
            }
        }
    }
}
