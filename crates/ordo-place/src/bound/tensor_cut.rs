//! The cheapest set of tensors whose transfers separate two nodes of a segment.
//!
//! When a segment's ends `a` and `b` are on different devices, every path from `a` to `b`
//! leaves `a`'s device somewhere; where it first does, `a`'s device sends a tensor. Those
//! tensors cut every path, and in both execution models of [`crate::sim`] a device has one
//! channel that takes its sends and receives one at a time, each for its whole transfer time,
//! between the end of `a` (their producers run after it) and the start of `b` (their consumers
//! run before it). So the gap is at least the least total transfer time of a set of tensors
//! cutting every path: a minimum cut, where a tensor is paid once however many of its consumers
//! are cut off (the producer feeds a node per tensor at its transfer time, which feeds its
//! consumers at no cost). Edges without tensors cross for free; edges within a colocation group
//! cannot be cut.
//!
//! The same holds when `a` and `b` share a device and a node `v` runs elsewhere: the tensors
//! that first leave that device on the way to `v` cut every path from `a` to `v`, those that
//! come back on the way to `b` cut every path from `v` to `b`, and the device's one channel
//! sends the former and receives the latter one at a time.
//!
//! Unlike the other bounds, these rest on transfers queueing at a device's channel.
//!
//! The segment's network is [`super::sides::Sides`]'s ([`super::sides::Sides::separating`]);
//! this module holds the maximum flow that cuts it.

use std::collections::VecDeque;

/// An arc no cut may take.
pub(super) const UNLIMITED: u64 = u64::MAX / 4;

/// A flow network (Dinic's algorithm).
#[derive(Clone)]
pub(super) struct Flow {
    /// Per node, its arcs (indices into `to` and `left`).
    arcs: Vec<Vec<usize>>,
    to: Vec<usize>,
    left: Vec<u64>,
}

impl Flow {
    pub(super) fn new(nodes: usize) -> Self {
        Self { arcs: vec![Vec::new(); nodes], to: Vec::new(), left: Vec::new() }
    }

    /// An arc and its reverse (arc `k ^ 1`).
    pub(super) fn add(&mut self, from: usize, to: usize, capacity: u64) {
        for (u, v, c) in [(from, to, capacity), (to, from, 0)] {
            self.arcs[u].push(self.to.len());
            self.to.push(v);
            self.left.push(c);
        }
    }

    pub(super) fn max_flow(&mut self, source: usize, sink: usize) -> u64 {
        let mut total = 0u64;
        while let Some(level) = self.levels(source, sink) {
            let mut next = vec![0; self.arcs.len()];
            loop {
                let pushed = self.push(source, sink, UNLIMITED, &level, &mut next);
                if pushed == 0 {
                    break;
                }
                total = total.saturating_add(pushed);
                if total >= UNLIMITED {
                    return total;
                }
            }
        }
        total
    }

    /// The nodes `source` reaches over arcs with capacity left: after [`Flow::max_flow`], the
    /// source side of a minimum cut.
    pub(super) fn reachable(&self, source: usize) -> Vec<bool> {
        let mut near = vec![false; self.arcs.len()];
        near[source] = true;
        let mut stack = vec![source];
        while let Some(u) = stack.pop() {
            for &k in &self.arcs[u] {
                let v = self.to[k];
                if self.left[k] > 0 && !near[v] {
                    near[v] = true;
                    stack.push(v);
                }
            }
        }
        near
    }

    /// Breadth-first levels from `source` over arcs with capacity left; `None` when `sink` is
    /// out of reach.
    fn levels(&self, source: usize, sink: usize) -> Option<Vec<usize>> {
        let mut level = vec![usize::MAX; self.arcs.len()];
        level[source] = 0;
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for &k in &self.arcs[u] {
                let v = self.to[k];
                if self.left[k] > 0 && level[v] == usize::MAX {
                    level[v] = level[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        (level[sink] != usize::MAX).then_some(level)
    }

    /// One augmenting path along the levels, depth first; the flow it carried.
    fn push(
        &mut self,
        u: usize,
        sink: usize,
        limit: u64,
        level: &[usize],
        next: &mut [usize],
    ) -> u64 {
        if u == sink {
            return limit;
        }
        while next[u] < self.arcs[u].len() {
            let k = self.arcs[u][next[u]];
            let v = self.to[k];
            if self.left[k] > 0 && level[v] == level[u] + 1 {
                let pushed = self.push(v, sink, limit.min(self.left[k]), level, next);
                if pushed > 0 {
                    self.left[k] -= pushed;
                    self.left[k ^ 1] += pushed;
                    return pushed;
                }
            }
            next[u] += 1;
        }
        0
    }
}
