//! Building and solving the LP.

use std::panic::{AssertUnwindSafe, catch_unwind};

use good_lp::{Expression, ProblemVariables, Solution, SolverModel, Variable, clarabel, variable};

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

/// The solved relaxation.
pub(super) struct Relaxation {
    /// `x_e` per edge: 0 for a favorite, 1 for a charged edge.
    pub(super) x: Vec<f64>,
    /// The optimum `w`, in the input's unit.
    pub(super) makespan: f64,
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

    let mut vars = ProblemVariables::new();
    // An edge in no degree row (the only out-edge of its source and the only in-edge of its
    // target) has an optimum at x = 0: lowering x only relaxes its precedence row.
    let x: Vec<Option<Variable>> = edges
        .iter()
        .map(|&(u, v, _)| {
            let in_no_row = dag.out_edges(u).len() == 1 && dag.in_edges(v).len() == 1;
            (!in_no_row).then(|| vars.add(variable().bounds(0.0..=1.0)))
        })
        .collect();
    // Only sources need `s >= 0`: every other start is after a predecessor's.
    let s: Vec<Variable> = (0..weights.len())
        .map(|v| {
            let start = variable();
            vars.add(if dag.in_edges(v).is_empty() { start.min(0.0) } else { start })
        })
        .collect();
    let w = vars.add_variable();

    let mut lp = vars.minimise(w).using(clarabel);
    lp.settings()
        .verbose(false)
        .max_iter(500)
        .tol_gap_abs(GAP_TOLERANCE)
        .tol_gap_rel(GAP_TOLERANCE)
        .tol_feas(FEASIBILITY_TOLERANCE)
        .iterative_refinement_enable(ITERATIVE_REFINEMENT);

    for (e, &(u, v, c)) in edges.iter().enumerate() {
        let mut row = Expression::with_capacity(3);
        row.add_mul(1.0, s[u]);
        row.add_mul(-1.0, s[v]);
        if let Some(x) = x[e] {
            row.add_mul(c / scale, x);
        }
        lp.add_constraint(row.leq(-p[u]));
    }
    for v in 0..weights.len() {
        // Rows with one edge (`x >= 0`) are already bounds.
        for incident in [dag.out_edges(v), dag.in_edges(v)] {
            if incident.len() >= 2 {
                let mut row = Expression::with_capacity(incident.len());
                for x in incident.iter().filter_map(|&e| x[e]) {
                    row.add_mul(1.0, x);
                }
                lp.add_constraint(row.geq((incident.len() - 1) as f64));
            }
        }
        // Only sinks need `s + p <= w`: every other node finishes before a successor starts.
        if dag.out_edges(v).is_empty() {
            let mut row = Expression::with_capacity(2);
            row.add_mul(1.0, s[v]);
            row.add_mul(-1.0, w);
            lp.add_constraint(row.leq(-p[v]));
        }
    }

    // The solver is third-party code: whatever happens inside it must come back as an error.
    let solution = catch_unwind(AssertUnwindSafe(|| lp.solve()))
        .map_err(|_| LpError::Solver { message: "the solver panicked".into() })?
        .map_err(|err| LpError::Solver { message: err.to_string() })?;
    let xs: Vec<f64> = x.iter().map(|x| x.map_or(0.0, |x| solution.value(x))).collect();
    let makespan = solution.value(w) * scale;
    if !makespan.is_finite() || xs.iter().any(|x| !x.is_finite()) {
        return Err(LpError::Solver { message: "the solver returned a non-finite value".into() });
    }
    Ok(Relaxation { x: xs, makespan })
}
