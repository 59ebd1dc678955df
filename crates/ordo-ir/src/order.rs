//! Kahn's topological order: one implementation for every graph-shaped representation (the
//! IR graph, the placement problem, a plan's tasks, m-SCT's LP graph), each of which words its
//! own error for a cycle from what is left over.

use std::collections::VecDeque;

/// What Kahn's algorithm made of a graph: the nodes in the order it could take them, and how
/// many predecessors each node still waits for (all zero when the order is complete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KahnOrder {
    /// The nodes taken, in order: all of them unless the graph has a cycle.
    pub order: Vec<usize>,
    /// Per node, its predecessors not taken: non-zero only for nodes on or behind a cycle.
    pub waiting: Vec<usize>,
}

impl KahnOrder {
    /// The smallest node left over (on or behind a cycle), `None` when every node was taken.
    pub fn left_over(&self) -> Option<usize> {
        self.waiting.iter().position(|&w| w > 0)
    }
}

/// Kahn's order of nodes `0..n` whose successors `successors(v)` lists, once per edge (a
/// node listed twice waits for both): the nodes without predecessors in index order, then each
/// node's successors, in the order listed, as they become ready (first in, first out). So a
/// graph whose edges all point to higher indices comes back in index order. O(V + E).
pub fn kahn_order<I>(n: usize, successors: impl Fn(usize) -> I) -> KahnOrder
where
    I: IntoIterator<Item = usize>,
{
    let mut waiting = vec![0usize; n];
    for v in 0..n {
        for s in successors(v) {
            waiting[s] += 1;
        }
    }
    let mut ready: VecDeque<usize> = (0..n).filter(|&v| waiting[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_front() {
        order.push(v);
        for s in successors(v) {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push_back(s);
            }
        }
    }
    KahnOrder { order, waiting }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_first_in_first_out_and_cycles_are_left_over() {
        // 0 -> 2, 1 -> 2, 2 -> 3; 4 alone; 1 listed twice before 3 waits for both edges.
        let edges: Vec<Vec<usize>> = vec![vec![2], vec![2, 3, 3], vec![3], vec![], vec![]];
        let k = kahn_order(5, |v| edges[v].iter().copied());
        assert_eq!(k.order, vec![0, 1, 4, 2, 3]);
        assert_eq!(k.left_over(), None);
        let cycle: Vec<Vec<usize>> = vec![vec![1], vec![2], vec![1], vec![]];
        let k = kahn_order(4, |v| cycle[v].iter().copied());
        assert_eq!(k.order, vec![0, 3]);
        assert_eq!(k.left_over(), Some(1));
        assert_eq!(k.waiting, vec![0, 1, 1, 0]);
    }
}
