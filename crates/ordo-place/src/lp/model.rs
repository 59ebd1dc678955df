//! Building and solving the LP: the constraint matrix is assembled column by column (compressed
//! sparse columns) and handed to the clarabel interior-point solver.

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
/// the optimum), so start times and the makespan lie in `[0, 1]` like the `x_e`.
pub(super) fn solve(
    dag: &Dag,
    weights: &[f64],
    edges: &[(usize, usize, f64)],
    scale: f64,
) -> Result<Relaxation, LpError> {
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let p: Vec<f64> = weights.iter().map(|&p| p / scale).collect();

    // Columns: the `x_e` of edges in some degree row, then `s_v` per node, then `w`. An edge in
    // no degree row (the only out-edge of its source and the only in-edge of its target) has an
    // optimum at x = 0: lowering x only relaxes its precedence row.
    let mut x: Vec<Option<usize>> = Vec::with_capacity(edges.len());
    let mut xs = 0;
    for &(u, v, _) in edges {
        let in_no_row = dag.out_edges(u).len() == 1 && dag.in_edges(v).len() == 1;
        x.push((!in_no_row).then(|| {
            xs += 1;
            xs - 1
        }));
    }
    let s = |v: usize| xs + v;
    let w = xs + weights.len();
    let mut rows = Rows::new(w + 1);

    for &column in x.iter().flatten() {
        rows.push([(column, -1.0)], 0.0);
        rows.push([(column, 1.0)], 1.0);
    }
    // Only sources need `s >= 0`: every other start is after a predecessor's.
    for v in (0..weights.len()).filter(|&v| dag.in_edges(v).is_empty()) {
        rows.push([(s(v), -1.0)], 0.0);
    }
    for (e, &(u, v, c)) in edges.iter().enumerate() {
        let charge = x[e].map(|column| (column, c / scale));
        rows.push([(s(u), 1.0), (s(v), -1.0)].into_iter().chain(charge), -p[u]);
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
        if dag.out_edges(v).is_empty() {
            rows.push([(s(v), 1.0), (w, -1.0)], -p_v);
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
