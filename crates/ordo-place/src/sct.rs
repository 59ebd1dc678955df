//! m-SCT (memory-constrained Small Communication Times), faithful to Baechi's `m_sct.py`.
//!
//! SCT (Hanen and Munier's list scheduling for small communication delays) is m-ETF plus
//! *favorite children*: each op has at most one successor it would like to share a device
//! with, chosen by an LP relaxation ([`crate::lp::favorite_children`]). Devices are BUSY while
//! they run an op and otherwise FREE, except that a device whose last op has a favorite child
//! that is ready, not placed, and can start on this device no later than anywhere else is
//! AWAKE. An AWAKE device runs, in this order of preference:
//!
//! 1. an *urgent* op, one whose `urgent_ts` has come: the largest `schedule_ts` over the
//!    devices it may run on (by then it could start anywhere), smallest `(urgent_ts,
//!    topological rank)` first;
//! 2. the favorite child, once its `schedule_ts` on this device has come;
//!
//! and otherwise waits for one of them, even if other ops could run. FREE devices behave as in
//! m-ETF ([`crate::etf`]), and the proposals of all devices are compared as in m-ETF:
//! smallest `(schedule_ts, topological rank)`, ties to the lowest device id. Memory,
//! colocation and communication are m-ETF's.
//!
//! One corner differs from Baechi, where Baechi fails: an AWAKE device only considers urgent
//! ops that may run on it (Baechi also looks at ops whose colocation group cannot go there, and
//! then compares a missing `schedule_ts`, which raises an error).
//!
//! Baechi reports the makespan of m-SCT's own schedule. ordo reports that of running m-SCT's
//! device orders in m-ETF's execution model ([`crate::sim::simulate_with_order`]), without the
//! waits of AWAKE devices, which a device order cannot record: that is the schedule a plan of
//! the placement runs (it is usually no longer, since nothing waits on purpose). Baechi's
//! simulator ([`crate::sim::simulate`]) gives the makespans Baechi reports for the placement.
//!
//! This implementation recomputes every ready op's `schedule_ts` on every device at every
//! step, as Baechi does; only m-ETF has the incremental version.

use std::time::Instant;

use crate::algorithm::{Deadline, check_fits};
use crate::error::PlaceError;
use crate::etf::Engine;
use crate::lp;
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

/// Places `problem` with m-SCT (see the [module documentation](self)). An edge is a favorite
/// when its LP value is below `threshold`; Baechi's placer uses 0.1. A threshold of 0 or less
/// makes no favorites without solving the LP (every LP value is at least 0), and then m-SCT
/// places exactly as m-ETF does.
///
/// Time: the LP, plus `O(s · r · m · d)` for `s` steps, `r` ready ops, `m` devices and in-degree
/// `d`; memory `O(m · (|V| + |tensors|))`.
///
/// # Errors
/// [`PlaceError::NoDevices`] and [`PlaceError::NodeTooLarge`] (checked first);
/// [`PlaceError::Lp`] with the LP's message if it fails (including a NaN threshold);
/// [`PlaceError::OutOfMemory`] when the ops fit one by one but not all together.
pub fn m_sct(problem: &PlaceProblem, threshold: f64) -> Result<Placement, PlaceError> {
    m_sct_until(problem, threshold, Deadline::new(None))
}

/// [`m_sct`], giving up with [`PlaceError::OutOfTime`] once `deadline` has passed (the LP
/// solver is given the time left).
pub(crate) fn m_sct_until(
    problem: &PlaceProblem,
    threshold: f64,
    deadline: Deadline,
) -> Result<Placement, PlaceError> {
    let clock = Instant::now();
    check_fits(problem)?;
    let favorite = if threshold <= 0.0 {
        vec![None; problem.len()]
    } else {
        let weights: Vec<f64> = problem.weights.iter().map(|&w| w as f64).collect();
        let edges: Vec<(usize, usize, f64)> =
            problem.edges.iter().map(|e| (e.source, e.target, e.comm_us as f64)).collect();
        match lp::favorite_children_within(&weights, &edges, threshold, deadline.seconds_left()) {
            Ok(favorites) => favorites.child,
            Err(lp::LpError::OutOfTime) => return Err(deadline.out_of_time("m-sct")),
            Err(e) => return Err(PlaceError::Lp(e.to_string())),
        }
    };
    let engine = schedule(problem, &favorite, deadline)?;
    let mut placement = without_waits(problem, engine)?;
    placement.placement_seconds = clock.elapsed().as_secs_f64();
    Ok(placement)
}

/// m-SCT with the favorite children given instead of chosen by the LP: `favorite[v]` is the
/// favorite child of node `v`, if any. Use it to bring favorites from another LP solver (a
/// simplex solver such as Baechi's GLPK picks a vertex of the LP's optimal face, where
/// [`crate::lp::favorite_children`]'s interior-point solver may pick a point inside it, and the
/// favorites can differ when the optimum is not unique).
///
/// Time `O(s · r · m · d)` as for [`m_sct`], without the LP.
///
/// # Errors
/// [`PlaceError::Invalid`] if `favorite` does not have one entry per node or names a node that
/// is not a successor; otherwise those of [`m_sct`] except [`PlaceError::Lp`].
pub fn m_sct_with_favorites(
    problem: &PlaceProblem,
    favorite: &[Option<usize>],
) -> Result<Placement, PlaceError> {
    let clock = Instant::now();
    check_fits(problem)?;
    if favorite.len() != problem.len() {
        return Err(PlaceError::Invalid(format!(
            "{} favorite children given for {} nodes",
            favorite.len(),
            problem.len()
        )));
    }
    for (v, &child) in favorite.iter().enumerate() {
        if let Some(c) = child
            && !problem.out_edges[v].iter().any(|&e| problem.edges[e].target == c)
        {
            return Err(PlaceError::Invalid(format!(
                "the favorite child {c} of `{}` is not one of its successors",
                problem.names[v]
            )));
        }
    }
    let engine = schedule(problem, favorite, Deadline::new(None))?;
    let mut placement = without_waits(problem, engine)?;
    placement.placement_seconds = clock.elapsed().as_secs_f64();
    Ok(placement)
}

/// The placement of m-SCT's finished `engine`, with the schedule of running its device orders
/// without the waits of AWAKE devices ([`crate::etf::replay`]): the schedule that a plan of the
/// placement runs, so that the makespan reported is the one the plan achieves. If that replay
/// runs out of memory (an op started earlier than in m-SCT's schedule can leave another
/// without room), m-SCT's own schedule is kept.
fn without_waits(problem: &PlaceProblem, engine: Engine) -> Result<Placement, PlaceError> {
    let own = engine.into_placement("m-sct")?;
    match crate::etf::replay(problem, &own.device_of, &own.order) {
        Ok(replayed) => replayed.into_placement("m-sct"),
        Err(_) => Ok(own),
    }
}

/// What a device does at the current step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Busy,
    Free,
    /// Waiting for its last op's favorite child, the ready op at this index.
    Awake(usize),
}

/// Runs the m-SCT event loop (m-ETF's when no op has a favorite) and returns the finished
/// engine, with every op started unless memory ran out; [`PlaceError::OutOfTime`] once
/// `deadline` has passed.
fn schedule<'a>(
    problem: &'a PlaceProblem,
    favorite: &[Option<usize>],
    deadline: Deadline,
) -> Result<Engine<'a>, PlaceError> {
    let m = problem.devices.count();
    let mut engine = Engine::new(problem);
    let mut ready: Vec<usize> = Vec::new();
    let mut slot = vec![usize::MAX; problem.len()];
    let add = |ready: &mut Vec<usize>, slot: &mut Vec<usize>, ops: Vec<usize>| {
        for v in ops {
            slot[v] = ready.len();
            ready.push(v);
        }
    };
    add(&mut ready, &mut slot, engine.sources());
    let mut now = 0;
    loop {
        deadline.check("m-sct")?;
        let newly = engine.advance(now);
        add(&mut ready, &mut slot, newly);
        let mut table;
        let mut states: Vec<State>;
        loop {
            table = Table::new(&engine, &ready);
            states = (0..m).map(|d| state(&engine, &table, &ready, &slot, favorite, d)).collect();
            let mut best: Option<(u64, usize, usize)> = None;
            for (d, &state) in states.iter().enumerate() {
                if let Some(i) = proposal(&engine, &table, &ready, state, d) {
                    let key = (table.ts(i, d).expect("proposed where it may run"), i, d);
                    let rank = |k: (u64, usize, usize)| (k.0, problem.topo_rank[ready[k.1]]);
                    if best.is_none_or(|b| rank(key) < rank(b)) {
                        best = Some(key);
                    }
                }
            }
            let Some((_, i, d)) = best else { break };
            let v = ready.swap_remove(i);
            slot[v] = usize::MAX;
            if let Some(&moved) = ready.get(i) {
                slot[moved] = i;
            }
            let newly = engine.start(v, d);
            add(&mut ready, &mut slot, newly);
        }
        let next = (0..m).filter_map(|d| next_time(&engine, &table, &ready, states[d], d)).min();
        match next {
            Some(t) => {
                debug_assert!(t > now, "time must move forward");
                now = t.max(now + 1);
            }
            None => break,
        }
    }
    Ok(engine)
}

/// `schedule_ts` of every ready op on every device where it may run.
struct Table {
    m: usize,
    ts: Vec<Option<u64>>,
}

impl Table {
    fn new(engine: &Engine, ready: &[usize]) -> Self {
        let m = engine.m;
        let mut ts = Vec::with_capacity(ready.len() * m);
        for &v in ready {
            for d in 0..m {
                let ok = engine.feasible(v, d);
                ts.push(ok.then(|| engine.ready_time(v, d).max(engine.device_free[d])));
            }
        }
        Self { m, ts }
    }

    fn ts(&self, i: usize, d: usize) -> Option<u64> {
        self.ts[i * self.m + d]
    }

    fn row(&self, i: usize) -> impl Iterator<Item = u64> + '_ {
        self.ts[i * self.m..(i + 1) * self.m].iter().flatten().copied()
    }

    /// When ready op `i` could start on every device it may run on.
    fn urgent_ts(&self, i: usize) -> Option<u64> {
        self.row(i).max()
    }
}

fn state(
    engine: &Engine,
    table: &Table,
    ready: &[usize],
    slot: &[usize],
    favorite: &[Option<usize>],
    d: usize,
) -> State {
    if !engine.is_free(d) {
        return State::Busy;
    }
    let Some(fc) = engine.last_op[d].and_then(|last| favorite[last]) else { return State::Free };
    let i = slot[fc];
    if i == usize::MAX || engine.device_of[fc] != usize::MAX {
        return State::Free;
    }
    debug_assert_eq!(ready[i], fc);
    match table.ts(i, d) {
        Some(here) if table.row(i).min() == Some(here) => State::Awake(i),
        _ => State::Free,
    }
}

/// The ready op of smallest `(key, rank)` among those `key` gives a time for.
fn earliest_by(
    engine: &Engine,
    ready: &[usize],
    key: impl Fn(usize) -> Option<u64>,
) -> Option<(u64, usize)> {
    (0..ready.len())
        .filter_map(|i| key(i).map(|k| (k, i)))
        .min_by_key(|&(k, i)| (k, engine.problem.topo_rank[ready[i]]))
}

/// The op device `d` proposes now, as an index into `ready`.
fn proposal(
    engine: &Engine,
    table: &Table,
    ready: &[usize],
    state: State,
    d: usize,
) -> Option<usize> {
    let now = engine.now;
    match state {
        State::Busy => None,
        State::Free => earliest_by(engine, ready, |i| table.ts(i, d))
            .and_then(|(ts, i)| (ts <= now).then_some(i)),
        State::Awake(fc) => {
            let urgent = urgent_op(engine, table, ready, d);
            if let Some((urgent_ts, i)) = urgent
                && urgent_ts <= now
            {
                return Some(i);
            }
            table.ts(fc, d).is_some_and(|ts| ts <= now).then_some(fc)
        }
    }
}

/// The ready op that may run on `d` with the smallest `(urgent_ts, rank)`.
fn urgent_op(engine: &Engine, table: &Table, ready: &[usize], d: usize) -> Option<(u64, usize)> {
    earliest_by(engine, ready, |i| table.ts(i, d).and(table.urgent_ts(i)))
}

/// When device `d` may next act (Baechi's `get_next_ts`), given the state it ended the step in.
fn next_time(
    engine: &Engine,
    table: &Table,
    ready: &[usize],
    state: State,
    d: usize,
) -> Option<u64> {
    match state {
        State::Busy => Some(engine.device_free[d]),
        State::Free => earliest_by(engine, ready, |i| table.ts(i, d)).map(|(ts, _)| ts),
        State::Awake(fc) => {
            let urgent = urgent_op(engine, table, ready, d).map(|(ts, _)| ts);
            table.ts(fc, d).into_iter().chain(urgent).min()
        }
    }
}
