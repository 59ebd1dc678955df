//! Building and solving the LP: the constraint matrix is assembled column by column (compressed
//! sparse columns) and handed to the clarabel interior-point solver.
//!
//! Why not a simplex solver, which would return a vertex like Baechi's GLPK: the pure-Rust
//! `microlp` (0.2, the maintained fork of minilp) on this same LP, with `x` and `s` as bounds,
//! took as long as clarabel on gnmt, 2x its time on resnet50 and inception_v3, 4x on
//! transformer and 14x on synth_1k (0.80 s against 0.056 s); m-SCT on a 2,000-node synthetic
//! graph took 4.2 s with it against 0.19 s, so 10,000 nodes would be far past their 5 s
//! budget. Nor does a vertex reproduce Baechi's placements: microlp's vertices (one per way of
//! writing the same LP) gave m-SCT makespans of 91.40, 93.28 and 95.16 ms on gnmt, where
//! GLPK's vertex and this solver's point both give Baechi's 150.71 ms, and 339.46 to 355.08 ms
//! on synth_1k against GLPK's 344.89 ms.

use std::panic::{AssertUnwindSafe, catch_unwind};

use clarabel::algebra::CscMatrix;
use clarabel::solver::{
    DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus,
};

use super::LpError;
use super::graph::Dag;

/// Duality-gap tolerance (absolute and relative) on the scaled problem, where `w <= 1`. The
/// solver's default (1e-8) costs about 15% more iterations on large graphs and changes
/// neither the makespan beyond its sixth digit nor more than a few percent of the favorites.
const GAP_TOLERANCE: f64 = 1e-6;
/// Primal and dual feasibility tolerance on the scaled problem.
const FEASIBILITY_TOLERANCE: f64 = 1e-7;
/// Iterative refinement of the linear solves: the solver's default costs 15-20% of the time
/// on large graphs and changes neither the iteration count nor the result, since the solver
/// checks convergence on exact residuals.
const ITERATIVE_REFINEMENT: bool = false;
/// Ruiz equilibration of the constraint matrix: the scaled problem is already balanced (every
/// coefficient is 1 or a scaled time at most 1); equilibrating costs a quarter of the solve on
/// the small graphs of real models and changes no favorite on the sample graphs.
const EQUILIBRATE: bool = false;

/// The solved relaxation.
pub(super) struct Relaxation {
    /// `x_e` per edge: 0 for a favorite, 1 for a charged edge.
    pub(super) x: Vec<f64>,
    /// The optimum `w`, in the input's unit.
    pub(super) makespan: f64,
}

/// The LP in the solver's form: minimise `w` subject to `A z <= b`, `z = (x, s, w)`.
struct Rows {
    /// Per column, its `(row, value)` entries in increasing row order.
    columns: Vec<Vec<(usize, f64)>>,
    b: Vec<f64>,
}

impl Rows {
    fn new(columns: usize) -> Self {
        Self { columns: vec![Vec::new(); columns], b: Vec::new() }
    }

    /// Adds the row `sum of value * z[column] <= rhs`.
    fn push(&mut self, entries: impl IntoIterator<Item = (usize, f64)>, rhs: f64) {
        let row = self.b.len();
        for (column, value) in entries {
            self.columns[column].push((row, value));
        }
        self.b.push(rhs);
    }

    fn matrix(&self) -> CscMatrix<f64> {
        let mut colptr = Vec::with_capacity(self.columns.len() + 1);
        colptr.push(0);
        let nnz = self.columns.iter().map(Vec::len).sum();
        let (mut rowval, mut nzval) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        for column in &self.columns {
            for &(row, value) in column {
                rowval.push(row);
                nzval.push(value);
            }
            colptr.push(rowval.len());
        }
        CscMatrix::new(self.b.len(), self.columns.len(), colptr, rowval, nzval)
    }
}

/// Solves the LP documented on `favorite_children` for a graph with at least one edge.
///
/// Times are divided by `scale` (the longest path with every edge charged, an upper bound on
/// the optimum), so start times and the makespan lie in `[0, 1]` like the `x_e`. With
/// `eliminate_chains` (always, except in tests that compare the two forms), the start time of
/// a node with one in-edge and one out-edge is no variable (see below).
pub(super) fn solve(
    dag: &Dag,
    weights: &[f64],
    edges: &[(usize, usize, f64)],
    scale: f64,
    eliminate_chains: bool,
    seconds: Option<f64>,
) -> Result<Relaxation, LpError> {
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let p: Vec<f64> = weights.iter().map(|&p| p / scale).collect();

    // Columns: the `x_e` of edges in some degree row, then `s_v` per node that is not in the
    // middle of a chain, then `w`. An edge in no degree row (the only out-edge of its source
    // and the only in-edge of its target) has an optimum at x = 0: lowering x only relaxes its
    // precedence row.
    let mut x: Vec<Option<usize>> = Vec::with_capacity(edges.len());
    let mut xs = 0;
    for &(u, v, _) in edges {
        let in_no_row = dag.out_edges(u).len() == 1 && dag.in_edges(v).len() == 1;
        x.push((!in_no_row).then(|| {
            xs += 1;
            xs - 1
        }));
    }
    // A node with one in-edge and one out-edge has its start time in exactly two precedence
    // rows, one bounding it below and one above: eliminating it (adding the two rows) leaves
    // the same optimum over the other variables. Whole chains collapse into one row. On the
    // model graphs, most of whose nodes are such, this cuts the LP's time by 25-65%; Baechi's
    // sample models keep their number of favorites and their m-SCT makespans. (Eliminating every node with one in-edge, copying
    // the path into each out-edge's row, made the layered synthetic graphs no faster.)
    let inner =
        |v: usize| eliminate_chains && dag.in_edges(v).len() == 1 && dag.out_edges(v).len() == 1;
    let mut s: Vec<Option<usize>> = vec![None; weights.len()];
    let mut columns = xs;
    for (v, column) in s.iter_mut().enumerate() {
        if !inner(v) {
            *column = Some(columns);
            columns += 1;
        }
    }
    let w = columns;
    let mut rows = Rows::new(w + 1);

    for &column in x.iter().flatten() {
        rows.push([(column, -1.0)], 0.0);
        rows.push([(column, 1.0)], 1.0);
    }
    // Only sources need `s >= 0`: every other start is after a predecessor's.
    for column in (0..weights.len()).filter(|&v| dag.in_edges(v).is_empty()).filter_map(|v| s[v]) {
        rows.push([(column, -1.0)], 0.0);
    }
    // One precedence row per path from a kept node `u` through inner nodes to a kept node `t`:
    // `s_u + p_u + sum of (c_e x_e) + sum of p over the inner nodes <= s_t`, in the order of the
    // paths' first edges. (The fill of the solver's factorisation depends on the row order:
    // rows by source node made the 20,000-node synthetic graph about 8% slower.)
    let mut entries = Vec::new();
    for (first, &(u, _, _)) in edges.iter().enumerate() {
        let Some(start) = s[u] else { continue };
        entries.clear();
        entries.push((start, 1.0));
        let mut rhs = -p[u];
        let mut e = first;
        let end = loop {
            let (_, v, c) = edges[e];
            if let Some(column) = x[e] {
                entries.push((column, c / scale));
            }
            match s[v] {
                Some(end) => break end,
                None => {
                    rhs -= p[v];
                    e = dag.out_edges(v)[0];
                }
            }
        };
        entries.push((end, -1.0));
        rows.push(entries.iter().copied(), rhs);
    }
    for (v, &p_v) in p.iter().enumerate() {
        // Rows with one edge (`x >= 0`) are already bounds.
        for incident in [dag.out_edges(v), dag.in_edges(v)] {
            if incident.len() >= 2 {
                let entries = incident.iter().filter_map(|&e| x[e]).map(|column| (column, -1.0));
                rows.push(entries, 1.0 - incident.len() as f64);
            }
        }
        // Only sinks need `s + p <= w`: every other node finishes before a successor starts.
        if let (true, Some(column)) = (dag.out_edges(v).is_empty(), s[v]) {
            rows.push([(column, 1.0), (w, -1.0)], -p_v);
        }
    }

    let mut q = vec![0.0; w + 1];
    q[w] = 1.0;
    let settings = DefaultSettingsBuilder::default()
        .verbose(false)
        .max_iter(500)
        .tol_gap_abs(GAP_TOLERANCE)
        .tol_gap_rel(GAP_TOLERANCE)
        .tol_feas(FEASIBILITY_TOLERANCE)
        .iterative_refinement_enable(ITERATIVE_REFINEMENT)
        .equilibrate_enable(EQUILIBRATE)
        .time_limit(seconds.unwrap_or(f64::INFINITY))
        .build()
        .map_err(|err| LpError::Solver { message: err.to_string() })?;
    let a = rows.matrix();
    let cones = [NonnegativeConeT(rows.b.len())];
    let zero = CscMatrix::zeros((w + 1, w + 1));

    // The solver is third-party code: whatever happens inside it must come back as an error.
    let solution = catch_unwind(AssertUnwindSafe(|| {
        let mut solver = DefaultSolver::new(&zero, &q, &a, &rows.b, &cones, settings)
            .map_err(|err| LpError::Solver { message: err.to_string() })?;
        solver.solve();
        match solver.solution.status {
            SolverStatus::Solved | SolverStatus::AlmostSolved => Ok(solver.solution.x),
            SolverStatus::MaxTime => Err(LpError::OutOfTime),
            status => Err(LpError::Solver { message: format!("the solver stopped: {status:?}") }),
        }
    }))
    .map_err(|_| LpError::Solver { message: "the solver panicked".into() })??;
    let xs: Vec<f64> = x.iter().map(|x| x.map_or(0.0, |column| solution[column])).collect();
    let makespan = solution[w] * scale;
    if !makespan.is_finite() || xs.iter().any(|x| !x.is_finite()) {
        return Err(LpError::Solver { message: "the solver returned a non-finite value".into() });
    }
    Ok(Relaxation { x: xs, makespan })
}
