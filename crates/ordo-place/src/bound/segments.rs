//! The segment bound: the critical path cut into segments, each charged the least any
//! placement can spend between its two ends.
//!
//! Take two nodes `a` and `b` of the critical path, `a` before `b`. Every node that is a
//! descendant of `a` and an ancestor of `b` (the segment's *inner* nodes) runs between the end of
//! `a` and the start of `b`. Whatever the placement, one of three cases holds:
//!
//! 1. `a`, `b` and every inner node share a device: that device runs all inner nodes in between,
//!    so the gap is at least their total work (impossible when their resident bytes exceed the
//!    largest device);
//! 2. `a` and `b` share a device `d` and a set `S` of inner nodes is elsewhere: `d` runs the rest,
//!    and every path from `a` through a node `v` of `S` to `b` leaves `d` before `v` and comes
//!    back after it, so the gap is at least `max(work - work(S), max over v in S of (longest
//!    path through v + cheapest transfer on a path into v + cheapest on a path out of v))`;
//! 3. `a` and `b` are on different devices: every path from `a` to `b` crosses, the critical
//!    path's stretch between them included, so the gap is at least that stretch plus its
//!    cheapest edge's transfer.
//!
//! The gap is at least the smallest of the three, and the makespan at least the largest sum of
//! gaps and compute over a chain of such segments, chosen by dynamic programming over the
//! critical path. Where moving a branch away costs more than the branch (the modules of
//! Inception under Baechi's communication model), this proves one device optimal for it, which
//! neither the critical path nor the work bound can see.

use ordo_problem::PlaceProblem;

use super::cases::{Segment, memory_runs};
use super::sides::Sides;
use super::{at_start, delay, resident};

/// How many critical-path nodes ahead a segment may end.
const MAX_SPAN: usize = 32;
/// The most nodes a segment may hold; longer windows are not tried from that start.
const MAX_REGION: usize = 512;
/// Segments with fewer inner nodes than this count what each side of a split keeps
/// ([`super::sides`]).
const SIDES_NODES: usize = 64;

/// The segment bound of `p` (see the [module documentation](self)), given the longest compute
/// path ending just before (`head`) and starting with (`tail`) each node: the best chain of
/// segments with each segment's least gap, and the memory runs over the path's waists; then
/// the same with the memory runs charging the transfers that queue at a device's channel
/// ([`super::tensor_cut`]), which only the second number may count on.
pub(super) fn segments(p: &PlaceProblem, head: &[u64], tail: &[u64], c: u64) -> (u64, u64) {
    let path = critical_path(p, head, tail, c);
    if path.is_empty() {
        return (0, 0);
    }
    let (devices, cap) = (p.devices.count(), p.devices.memory.iter().copied().max().unwrap_or(0));
    let mut scratch = Scratch::new(p.len());
    // finish[j]: a lower bound on when path[j] finishes.
    let mut finish: Vec<u64> = path.iter().map(|&v| head[v] + p.weights[v]).collect();
    for i in 0..path.len() {
        let ends = scratch.window(p, &path, i);
        for j in i + 1..=ends {
            let gap = scratch.segment(p, &path, i, j).least_gap(devices, cap);
            let through = finish[i].saturating_add(gap).saturating_add(p.weights[path[j]]);
            finish[j] = finish[j].max(through);
        }
    }
    let last = path.len() - 1;
    let after = tail[path[last]] - p.weights[path[last]];
    let chain = finish[last].saturating_add(after);
    let Some(WaistChain { nodes, mut segments, inners }) = waist_chain(p, &path, &mut scratch)
    else {
        return (chain, chain);
    };
    // The chain's own compute and what lies before and after it, around the gaps.
    let around = |gaps: u64| {
        if gaps == 0 {
            return 0;
        }
        let compute: u64 = nodes.iter().map(|&k| p.weights[path[k]]).sum();
        head[path[0]].saturating_add(compute).saturating_add(gaps).saturating_add(after)
    };
    let node_bytes: Vec<(u64, u64)> =
        nodes.iter().map(|&k| (resident(p, path[k]), at_start(p, path[k]))).collect();
    let plain = chain.max(around(memory_runs(&segments, &node_bytes, devices, cap)));
    for ((segment, inner), ends) in segments.iter_mut().zip(&inners).zip(nodes.windows(2)) {
        queue_at_channels(p, segment, (path[ends[0]], path[ends[1]]), inner, devices);
    }
    let queued = around(memory_runs(&segments, &node_bytes, devices, cap));
    (plain, plain.max(queued))
}

/// What [`waist_chain`] finds.
struct WaistChain {
    /// Positions on the critical path, first and last included.
    nodes: Vec<usize>,
    /// The segment between each two consecutive nodes.
    segments: Vec<Segment>,
    /// Each segment's inner nodes.
    inners: Vec<Vec<usize>>,
}

/// The chain for [`memory_runs`]: the critical path's waists, its nodes that no edge jumps over
/// in topological order (the ends of residual blocks and Inception modules), where splitting
/// the path means sending everything that crosses there; waists too far apart get
/// critical-path nodes in between; `None` when memory never forces a split (everything fits
/// one device) or a window is too large.
fn waist_chain(p: &PlaceProblem, path: &[usize], scratch: &mut Scratch) -> Option<WaistChain> {
    let cap = p.devices.memory.iter().copied().max().unwrap_or(0);
    let total = (0..p.len()).map(|v| resident(p, v)).fold(0u64, u64::saturating_add);
    if total <= cap {
        return None;
    }
    // jumps[r]: how many edges jump over topological rank r, leaving out the edges of sources
    // other than the path's (labels that only the loss reads jump over everything).
    let mut jumps = vec![0i64; p.len() + 1];
    let jumping = |e: &&ordo_problem::Edge| e.source == path[0] || !p.in_edges[e.source].is_empty();
    for edge in p.edges.iter().filter(jumping) {
        let (from, to) = (p.topo_rank[edge.source], p.topo_rank[edge.target]);
        if to > from + 1 {
            jumps[from + 1] += 1;
            jumps[to] -= 1;
        }
    }
    for r in 1..jumps.len() {
        jumps[r] += jumps[r - 1];
    }
    let last = path.len() - 1;
    let waist = |k: usize| k == last || jumps[p.topo_rank[path[k]]] == 0;
    let (mut chain, mut segments, mut inners) = (vec![0], Vec::new(), Vec::new());
    while let Some(&start) = chain.last().filter(|&&k| k < last) {
        let next = (start + 1..=last).find(|&k| waist(k) || k - start >= MAX_SPAN / 2);
        let reach = scratch.window(p, path, start);
        if reach == start {
            return None;
        }
        let end = next.unwrap_or(last).min(reach);
        segments.push(scratch.segment(p, path, start, end));
        // The members less the end, which sorts last.
        inners.push(scratch.members[..scratch.members.len() - 1].to_vec());
        chain.push(end);
    }
    Some(WaistChain { nodes: chain, segments, inners })
}

/// Charges `segment` (from `a` to `b` around `inner`) the transfers that queue at a device's
/// channel ([`super::tensor_cut`]): a split pays a minimum cut between its ends and keeps on
/// each side what [`super::sides`] proves it must, and a node moved off the ends' device pays
/// the cuts into and out of it.
fn queue_at_channels(
    p: &PlaceProblem,
    segment: &mut Segment,
    (a, b): (usize, usize),
    inner: &[usize],
    devices: usize,
) {
    let sides = Sides::new(p, a, inner, b);
    segment.first_sends = sides.separating(a, b);
    for entry in &mut segment.movable {
        let channel = sides.separating(a, entry.3).saturating_add(sides.separating(entry.3, b));
        entry.0 = entry.0.max(channel);
    }
    segment.movable.sort_unstable();
    let least = segment.gaps(devices, u64::MAX).split;
    // The sides take a few dozen minimum cuts: blocks and modules get them, the large windows
    // of unstructured graphs do not (their splits then keep nothing on either side).
    if least != u64::MAX && inner.len() < SIDES_NODES {
        segment.split_menu = sides.menu(least, segment.transfer);
    }
}

/// One longest path of compute, from a source to a sink.
fn critical_path(p: &PlaceProblem, head: &[u64], tail: &[u64], c: u64) -> Vec<usize> {
    let Some(mut v) = (0..p.len()).find(|&v| head[v] == 0 && tail[v] == c) else {
        return Vec::new();
    };
    let mut path = vec![v];
    while let Some(&e) =
        p.out_edges[v].iter().find(|&&e| tail[p.edges[e].target] + p.weights[v] == tail[v])
    {
        v = p.edges[e].target;
        path.push(v);
    }
    path
}

/// Marks and buffers reused across segments.
struct Scratch {
    /// `reach[v] == stamp`: `v` is a descendant of the segment's start within the window.
    reach: Vec<u32>,
    /// `inside[v] == stamp`: `v` is an inner node (or the segment's end).
    inside: Vec<u32>,
    stamp: u32,
    /// The nodes marked `inside`, in no particular order.
    members: Vec<usize>,
    /// Longest inner path from the start's end to each node's end, and from each node's start
    /// to the end's start.
    from_start: Vec<u64>,
    to_end: Vec<u64>,
    /// The cheapest transfer on any path from the start to each node, and from each node to
    /// the end (`u64::MAX` where no edge may cross).
    cheapest_in: Vec<u64>,
    cheapest_out: Vec<u64>,
    stack: Vec<usize>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Self {
            reach: vec![0; n],
            inside: vec![0; n],
            stamp: 0,
            members: Vec::new(),
            from_start: vec![0; n],
            to_end: vec![0; n],
            cheapest_in: vec![u64::MAX; n],
            cheapest_out: vec![u64::MAX; n],
            stack: Vec::new(),
        }
    }

    /// Marks the descendants of `path[i]` up to the furthest end it will try, and returns that
    /// end (`i` when even the next node's window is too large).
    fn window(&mut self, p: &PlaceProblem, path: &[usize], i: usize) -> usize {
        let mut last = (i + MAX_SPAN).min(path.len() - 1);
        while last > i {
            self.stamp += 1;
            self.members.clear();
            if self.mark_descendants(p, path[i], p.topo_rank[path[last]]) {
                return last;
            }
            last = i + (last - i) / 2;
        }
        i
    }

    /// Marks descendants of `start` ranked at most `limit`; false when they exceed the region.
    fn mark_descendants(&mut self, p: &PlaceProblem, start: usize, limit: usize) -> bool {
        let mut count = 0;
        self.stack.clear();
        self.stack.push(start);
        while let Some(v) = self.stack.pop() {
            for &e in &p.out_edges[v] {
                let t = p.edges[e].target;
                if self.reach[t] != self.stamp && p.topo_rank[t] <= limit {
                    self.reach[t] = self.stamp;
                    count += 1;
                    if count > MAX_REGION {
                        return false;
                    }
                    self.stack.push(t);
                }
            }
        }
        true
    }

    /// Adds the ancestors of `end` among the marked descendants to the segment's members.
    fn add_ancestors(&mut self, p: &PlaceProblem, end: usize) {
        if self.inside[end] == self.stamp {
            return;
        }
        self.inside[end] = self.stamp;
        self.members.push(end);
        self.stack.clear();
        self.stack.push(end);
        while let Some(v) = self.stack.pop() {
            for &e in &p.in_edges[v] {
                let s = p.edges[e].source;
                if self.reach[s] == self.stamp && self.inside[s] != self.stamp {
                    self.inside[s] = self.stamp;
                    self.members.push(s);
                    self.stack.push(s);
                }
            }
        }
    }

    /// The segment from `path[i]` to `path[j]`. Call with `j` increasing from `i + 1` after
    /// [`Scratch::window`].
    fn segment(&mut self, p: &PlaceProblem, path: &[usize], i: usize, j: usize) -> Segment {
        self.add_ancestors(p, path[j]);
        let mut members = std::mem::take(&mut self.members);
        members.sort_unstable_by_key(|&v| p.topo_rank[v]);
        let segment = self.segment_of(p, path, (i, j), &members[..members.len() - 1]);
        self.members = members;
        segment
    }

    /// [`Scratch::segment`] once the segment's `inner` nodes are known, in topological order.
    fn segment_of(
        &mut self,
        p: &PlaceProblem,
        path: &[usize],
        (i, j): (usize, usize),
        inner: &[usize],
    ) -> Segment {
        let (a, b) = (path[i], path[j]);
        let (inside, stamp) = (&self.inside, self.stamp);
        let is_inner = |v: usize| inside[v] == stamp && v != b;
        let crossable = |e: usize| {
            let edge = &p.edges[e];
            if p.group_of[edge.source] == p.group_of[edge.target] { u64::MAX } else { delay(p, e) }
        };
        let mut smallest_transfer = u64::MAX;
        for &v in inner {
            let (mut best, mut cheapest) = (0, u64::MAX);
            for &e in &p.in_edges[v] {
                let s = p.edges[e].source;
                if is_inner(s) {
                    best = best.max(self.from_start[s]);
                    cheapest = cheapest.min(self.cheapest_in[s]);
                }
                if s == a || is_inner(s) {
                    smallest_transfer = smallest_transfer.min(crossable(e));
                    cheapest = cheapest.min(crossable(e));
                }
            }
            self.from_start[v] = best + p.weights[v];
            self.cheapest_in[v] = cheapest;
        }
        for &e in &p.in_edges[b] {
            let s = p.edges[e].source;
            if s == a || is_inner(s) {
                smallest_transfer = smallest_transfer.min(crossable(e));
            }
        }
        for &v in inner.iter().rev() {
            let (mut after, mut cheapest) = (0, u64::MAX);
            for &e in &p.out_edges[v] {
                let t = p.edges[e].target;
                if is_inner(t) {
                    after = after.max(self.to_end[t]);
                    cheapest = cheapest.min(self.cheapest_out[t]);
                }
                if t == b || is_inner(t) {
                    cheapest = cheapest.min(crossable(e));
                }
            }
            self.to_end[v] = after + p.weights[v];
            self.cheapest_out[v] = cheapest;
        }
        // A node away from the ends' device lies on a path from `a` to `b` that leaves that
        // device before it and comes back after it.
        let mut movable: Vec<(u64, u64, u64, usize)> = inner
            .iter()
            .filter(|&&v| p.group_of[v] != p.group_of[a] && p.group_of[v] != p.group_of[b])
            .map(|&v| {
                let through = self.from_start[v] + self.to_end[v] - p.weights[v];
                let away = through
                    .saturating_add(self.cheapest_in[v])
                    .saturating_add(self.cheapest_out[v]);
                (away, p.weights[v], resident(p, v), v)
            })
            .collect();
        movable.sort_unstable();
        let stretch: u64 = path[i + 1..j].iter().map(|&v| p.weights[v]).sum();
        let crossing = if p.group_of[a] == p.group_of[b] {
            u64::MAX
        } else {
            // Paths that must cross: the critical path's stretch, edges straight from `a` to
            // `b`, and paths through one inner node.
            let on_path = (i..j).filter_map(|k| edge_delay(p, path[k], path[k + 1])).min();
            let mut crossing = stretch.saturating_add(on_path.unwrap_or(0));
            crossing = crossing.max(edge_delay(p, a, b).unwrap_or(0));
            for &v in inner {
                if let (Some(into), Some(out)) = (edge_delay(p, a, v), edge_delay(p, v, b)) {
                    crossing = crossing.max(p.weights[v].saturating_add(into.min(out)));
                }
            }
            crossing
        };
        Segment {
            work: inner.iter().map(|&v| p.weights[v]).sum(),
            inner_bytes: inner.iter().map(|&v| resident(p, v)).fold(0u64, u64::saturating_add),
            end_bytes: resident(p, a).saturating_add(resident(p, b)),
            stretch,
            crossing,
            transfer: smallest_transfer,
            first_sends: 0,
            split_menu: Vec::new(),
            movable,
        }
    }
}

/// What crossing from `u` to `v` costs at least: the largest transfer over the edges between
/// them, `u64::MAX` when they must share a device, `None` when no edge joins them.
fn edge_delay(p: &PlaceProblem, u: usize, v: usize) -> Option<u64> {
    let delays = p.out_edges[u].iter().filter(|&&e| p.edges[e].target == v);
    let largest = delays.map(|&e| delay(p, e)).max()?;
    Some(if p.group_of[u] == p.group_of[v] { u64::MAX } else { largest })
}
