//! The favorite-child LP of m-SCT.
//!
//! SCT (Hanen and Munier's scheduling for small communication times) gives every node at most
//! one *favorite child*: the successor it would like to share a device with, so that their edge
//! costs no communication. Baechi picks the favorites by solving a linear relaxation on
//! unboundedly many devices and rounding it; [`favorite_children`] does the same.

mod graph;
mod model;
#[cfg(test)]
mod tests;

use graph::Dag;

/// The favorites chosen by [`favorite_children`].
#[derive(Debug, Clone, PartialEq)]
pub struct FavoriteChildren {
    /// The favorite child of each node (an index into `weights`), `None` if it has none.
    pub child: Vec<Option<usize>>,
    /// The LP optimum `w` in µs: the relaxed makespan on unboundedly many devices, to within
    /// about 1e-5 of the longest path with every communication charged.
    ///
    /// It lies between the critical path with every communication free and the critical path
    /// with every communication charged. When every communication time is at most every compute
    /// time (SCT's setting), it is a lower bound on the makespan of any schedule with these
    /// costs; with larger communication times it is only an estimate, since a device can then
    /// run two children of a node one after the other sooner than a transfer would arrive.
    pub relaxed_makespan: f64,
    /// How many favorites conflict resolution dropped (Baechi logs these as "favorite changes").
    pub conflicts_resolved: usize,
}

/// Why [`favorite_children`] could not choose favorites.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LpError {
    /// A compute time is NaN, negative or infinite.
    #[error("node {node}: compute time {value} µs is not a finite non-negative number")]
    InvalidWeight {
        /// The node's index.
        node: usize,
        /// The offending value.
        value: f64,
    },
    /// A communication time is NaN, negative or infinite.
    #[error(
        "edge {edge} ({from} -> {to}): communication time {value} µs is not a finite non-negative number"
    )]
    InvalidCost {
        /// The edge's index.
        edge: usize,
        /// Its source node.
        from: usize,
        /// Its target node.
        to: usize,
        /// The offending value.
        value: f64,
    },
    /// An edge names a node that does not exist.
    #[error("edge {edge} ({from} -> {to}) names a node out of range: there are {nodes} nodes")]
    EdgeOutOfRange {
        /// The edge's index.
        edge: usize,
        /// Its source node.
        from: usize,
        /// Its target node.
        to: usize,
        /// The number of nodes.
        nodes: usize,
    },
    /// An edge goes from a node to itself.
    #[error("edge {edge} is a self-loop on node {node}")]
    SelfLoop {
        /// The edge's index.
        edge: usize,
        /// The node.
        node: usize,
    },
    /// The edges form a cycle, so there is no schedule.
    #[error("the graph has a cycle through node {node}")]
    Cycle {
        /// A node on the cycle.
        node: usize,
    },
    /// The rounding threshold is NaN.
    #[error("the rounding threshold is NaN")]
    InvalidThreshold,
    /// Compute and communication times along some path add up to more than `f64` holds.
    #[error("compute and communication times along a path add up to more than f64 can hold")]
    Overflow,
    /// The solver ran out of the time it was given.
    #[error("the favorite-child LP ran out of time")]
    OutOfTime,
    /// The LP solver failed.
    #[error("the favorite-child LP failed: {message}")]
    Solver {
        /// The solver's message.
        message: String,
    },
}

/// Chooses each node's favorite child with Baechi's LP relaxation of SCT.
///
/// `weights[i]` is node `i`'s compute time `p_i` and `edges` lists `(u, v, c_uv)`: an edge from
/// node `u` to node `v` whose communication time is `c_uv`, all in µs. The graph must be acyclic;
/// parallel edges are allowed.
///
/// # The LP
///
/// One variable `x_e` in `[0, 1]` per edge (1: the communication is charged; 0: the edge is a
/// favorite, its ends share a device), a start time `s_v` per node and the makespan `w`:
///
/// ```text
/// minimise w  subject to
///     s_v >= 0                                   for every node v
///     s_u + p_u + c_uv * x_uv <= s_v             for every edge u -> v
///     sum of x_uv over the out-edges of u >= outdeg(u) - 1    (at most one favorite child)
///     sum of x_uv over the in-edges of v  >= indeg(v) - 1     (at most one favorite parent)
///     s_v + p_v <= w                             for every node v
/// ```
///
/// Rows implied by the others (`s_v >= 0` for a node with a predecessor, `s_v + p_v <= w` for a
/// node with a successor, the degree rows of nodes with one edge) are left out, and the start
/// time of a node with one in-edge and one out-edge is eliminated (its two precedence rows are
/// added into one, so a chain of such nodes gives one row); the optimum is the same. An edge
/// that is the only out-edge of its source and the only in-edge of its target is in no degree
/// row, so lowering its `x` never hurts: it is fixed at `x = 0`. Times are scaled so that the
/// longest path with every edge charged is 1, and the LP is solved by an interior-point method
/// to a duality gap of about 1e-6 of that. Its values are therefore near but not on their
/// bounds, and where the optimum is not unique they lie inside the face of optimal solutions
/// rather than at a vertex: an edge whose `x` does not matter to the makespan gets a middling
/// value and is no favorite.
///
/// A simplex solver (Baechi's GLPK) returns a vertex of that face instead, but which vertex
/// depends on the solver's pivoting rules and on how the LP is written. On Baechi's
/// `synth_1k`, GLPK's vertex has 342 favorites and m-SCT's makespan is 344.89 ms. The
/// `microlp` crate's simplex, given this LP with chains eliminated or not, returns vertices
/// with 525 and 516 favorites (makespans 346.88 and 355.08 ms), and with the bounds written
/// as rows yet another (339.46 ms); this interior point gives 186 favorites and 358.80 ms. A
/// vertex alone therefore does not reproduce Baechi's placement.
///
/// # Rounding
///
/// Edge `e` is a *candidate* favorite iff `x_e < threshold`, strictly (Baechi's placer uses
/// 0.1; a threshold of 2 makes every edge a candidate). For a threshold at most 0.5 the
/// degree rows leave no node with two candidate out-edges or two candidate in-edges (two
/// values below 0.5 sum to less than 1), up to the solver's tolerance; larger thresholds
/// create conflicts.
///
/// # Conflicts
///
/// Candidates are visited in the order of `edges`. For a candidate `u -> v`:
///
/// 1. if `v` already is `u`'s favorite child (a parallel edge), nothing changes;
/// 2. otherwise, if `u` has a favorite child, it is replaced: the earlier favorite is dropped;
/// 3. if `v` has a favorite parent `p`, `p` loses its favorite child `v`: that favorite is dropped;
/// 4. `v` becomes `u`'s favorite child and `u` becomes `v`'s favorite parent.
///
/// Every drop in steps 2 and 3 counts in [`FavoriteChildren::conflicts_resolved`]. In the end
/// every node has at most one favorite child and is the favorite child of at most one node. The
/// result is Baechi's whenever no node has two candidate out-edges (always, for thresholds
/// below 0.5). Otherwise Baechi differs: it keeps a stale parent link when step 2 replaces a
/// favorite, so a later candidate into the old child resets the parent's new favorite, and it
/// treats a parallel edge as a conflict that resets the favorite.
///
/// # Errors
///
/// Bad input (a NaN, negative or infinite time, an edge out of range, a self-loop, a cycle, a
/// NaN threshold, times whose sum along a path overflows) and solver failures give an
/// [`LpError`]; this function does not panic. A graph without edges needs no LP: it has no
/// favorites and its relaxed makespan is the largest weight (0 for no nodes).
pub fn favorite_children(
    weights: &[f64],
    edges: &[(usize, usize, f64)],
    threshold: f64,
) -> Result<FavoriteChildren, LpError> {
    favorite_children_within(weights, edges, threshold, None)
}

/// [`favorite_children`] with the solver given at most `seconds` (none: no limit); past it,
/// [`LpError::OutOfTime`].
///
/// # Errors
/// Those of [`favorite_children`], and [`LpError::OutOfTime`].
pub fn favorite_children_within(
    weights: &[f64],
    edges: &[(usize, usize, f64)],
    threshold: f64,
    seconds: Option<f64>,
) -> Result<FavoriteChildren, LpError> {
    if seconds.is_some_and(|s| s <= 0.0) {
        return Err(LpError::OutOfTime);
    }
    if threshold.is_nan() {
        return Err(LpError::InvalidThreshold);
    }
    validate(weights, edges)?;
    let dag = Dag::new(weights.len(), edges)?;
    let charged = dag.longest_path(weights, edges, |_| 1.0);
    if !charged.is_finite() {
        return Err(LpError::Overflow);
    }
    if edges.is_empty() {
        return Ok(FavoriteChildren {
            child: vec![None; weights.len()],
            relaxed_makespan: charged,
            conflicts_resolved: 0,
        });
    }
    let relaxation = model::solve(&dag, weights, edges, charged, true, seconds)?;
    let candidates = edges
        .iter()
        .zip(&relaxation.x)
        .filter(|&(_, &x)| x < threshold)
        .map(|(&(u, v, _), _)| (u, v));
    let (child, conflicts_resolved) = resolve_conflicts(weights.len(), candidates);
    Ok(FavoriteChildren { child, relaxed_makespan: relaxation.makespan, conflicts_resolved })
}

fn validate(weights: &[f64], edges: &[(usize, usize, f64)]) -> Result<(), LpError> {
    let good = |t: f64| t.is_finite() && t >= 0.0;
    if let Some((node, &value)) = weights.iter().enumerate().find(|&(_, &p)| !good(p)) {
        return Err(LpError::InvalidWeight { node, value });
    }
    let nodes = weights.len();
    for (edge, &(from, to, value)) in edges.iter().enumerate() {
        if from >= nodes || to >= nodes {
            return Err(LpError::EdgeOutOfRange { edge, from, to, nodes });
        }
        if from == to {
            return Err(LpError::SelfLoop { edge, node: from });
        }
        if !good(value) {
            return Err(LpError::InvalidCost { edge, from, to, value });
        }
    }
    Ok(())
}

/// Applies the conflict rules documented on [`favorite_children`] to the candidate edges, in
/// order. Returns each node's favorite child and the number of favorites dropped.
fn resolve_conflicts(
    nodes: usize,
    candidates: impl IntoIterator<Item = (usize, usize)>,
) -> (Vec<Option<usize>>, usize) {
    let mut child: Vec<Option<usize>> = vec![None; nodes];
    let mut parent: Vec<Option<usize>> = vec![None; nodes];
    let mut dropped = 0;
    for (u, v) in candidates {
        if child[u] == Some(v) {
            continue;
        }
        if let Some(old) = child[u].take() {
            parent[old] = None;
            dropped += 1;
        }
        if let Some(p) = parent[v].take() {
            child[p] = None;
            dropped += 1;
        }
        child[u] = Some(v);
        parent[v] = Some(u);
    }
    (child, dropped)
}
