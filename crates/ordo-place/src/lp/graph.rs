//! Adjacency lists and a topological order of the LP's graph.

use super::LpError;

/// A validated acyclic graph: edges indexed by node in compressed (CSR) form.
pub(super) struct Dag {
    /// `out_edges[out_start[u]..out_start[u + 1]]` are the indices of `u`'s out-edges, in order.
    out_start: Vec<usize>,
    out_edges: Vec<usize>,
    /// The same for in-edges.
    in_start: Vec<usize>,
    in_edges: Vec<usize>,
    /// Every node, each after all its predecessors.
    topo: Vec<usize>,
}

impl Dag {
    /// Builds the adjacency lists of edges already checked to be in range, and orders the nodes.
    pub(super) fn new(nodes: usize, edges: &[(usize, usize, f64)]) -> Result<Self, LpError> {
        let (out_start, out_edges) = csr(nodes, edges.iter().map(|&(u, _, _)| u));
        let (in_start, in_edges) = csr(nodes, edges.iter().map(|&(_, v, _)| v));
        let mut dag = Dag { out_start, out_edges, in_start, in_edges, topo: Vec::new() };
        dag.topo = dag.kahn(edges)?;
        Ok(dag)
    }

    /// Edge indices leaving `u`, in input order.
    pub(super) fn out_edges(&self, u: usize) -> &[usize] {
        &self.out_edges[self.out_start[u]..self.out_start[u + 1]]
    }

    /// Edge indices entering `v`, in input order.
    pub(super) fn in_edges(&self, v: usize) -> &[usize] {
        &self.in_edges[self.in_start[v]..self.in_start[v + 1]]
    }

    /// The longest path, where node `i` takes `weights[i]` and edge `e` takes
    /// `edges[e].2 * charge(e)`.
    pub(super) fn longest_path(
        &self,
        weights: &[f64],
        edges: &[(usize, usize, f64)],
        charge: impl Fn(usize) -> f64,
    ) -> f64 {
        let mut finish = vec![0.0_f64; weights.len()];
        let mut longest = 0.0_f64;
        for &v in &self.topo {
            let start = self
                .in_edges(v)
                .iter()
                .map(|&e| finish[edges[e].0] + edges[e].2 * charge(e))
                .fold(0.0, f64::max);
            finish[v] = start + weights[v];
            longest = longest.max(finish[v]);
        }
        longest
    }

    fn kahn(&self, edges: &[(usize, usize, f64)]) -> Result<Vec<usize>, LpError> {
        let nodes = self.out_start.len() - 1;
        let kahn = ordo_ir::kahn_order(nodes, |u| self.out_edges(u).iter().map(|&e| edges[e].1));
        let Some(start) = kahn.left_over() else { return Ok(kahn.order) };
        let missing = kahn.waiting;
        // Every node left over has a predecessor left over; walking back along such
        // predecessors must revisit a node, and the first node revisited is on a cycle.
        let mut seen = vec![false; nodes];
        let mut v = start;
        while !seen[v] {
            seen[v] = true;
            match self.in_edges(v).iter().map(|&e| edges[e].0).find(|&u| missing[u] > 0) {
                Some(u) => v = u,
                None => break,
            }
        }
        Err(LpError::Cycle { node: v })
    }
}

/// Groups edge indices by `key` (the source or the target), keeping input order within a group.
fn csr(nodes: usize, keys: impl Iterator<Item = usize> + Clone) -> (Vec<usize>, Vec<usize>) {
    let mut start = vec![0; nodes + 1];
    for k in keys.clone() {
        start[k + 1] += 1;
    }
    for i in 0..nodes {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut items = vec![0; start[nodes]];
    for (e, k) in keys.enumerate() {
        items[fill[k]] = e;
        fill[k] += 1;
    }
    (start, items)
}
