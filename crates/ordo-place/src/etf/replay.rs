//! m-ETF's execution model applied to a given placement and device order.

use crate::error::PlaceError;
use crate::etf::Engine;
use ordo_problem::PlaceProblem;

/// Runs m-ETF's event loop with every choice made already: each device runs the ops of
/// `order[d]` in that order, and at each event the free devices whose next op is due (its
/// inputs could be there by now) and fits in memory start it, smallest topological rank
/// first. Tensors are sent when their consumer starts, as in m-ETF.
///
/// On m-ETF's own placement and order this makes exactly m-ETF's decisions at the same times:
/// a device's next op is m-ETF's next choice for it, and whenever m-ETF chooses an op it is
/// the due op of smallest rank on a free device, so it is also the smallest among the due
/// next ops. Time `O(s · m · d)` for `s` events, `m` devices and in-degree `d`.
///
/// The caller has checked that `device_of` and `order` fit the problem.
///
/// # Errors
/// [`PlaceError::Invalid`] if the orders contradict the edges (a device waits for an input
/// that comes after it in some device's order); [`PlaceError::OutOfMemory`] if the next op of
/// every idle device can never fit.
pub(crate) fn replay<'a>(
    problem: &'a PlaceProblem,
    device_of: &[usize],
    order: &[Vec<usize>],
) -> Result<Engine<'a>, PlaceError> {
    let mut engine = Engine::with_placement(problem, device_of);
    let m = engine.m;
    let mut next = vec![0usize; m];
    let mut now = 0;
    loop {
        engine.advance(now);
        loop {
            let mut best: Option<(usize, usize)> = None;
            for d in 0..m {
                let Some(&v) = order[d].get(next[d]) else { continue };
                if engine.is_free(d)
                    && engine.is_ready(v)
                    && engine.feasible(v, d)
                    && engine.ready_time(v, d) <= engine.now
                {
                    let key = (problem.topo_rank[v], d);
                    best = Some(best.map_or(key, |b| b.min(key)));
                }
            }
            let Some((_, d)) = best else { break };
            engine.start(order[d][next[d]], d);
            next[d] += 1;
        }
        let due = |d: usize| {
            let &v = order[d].get(next[d])?;
            if !engine.is_free(d) {
                return Some(engine.device_free[d]);
            }
            (engine.is_ready(v) && engine.feasible(v, d)).then(|| engine.ready_time(v, d))
        };
        let busy = (0..m).filter(|&d| !engine.is_free(d)).map(|d| engine.device_free[d]);
        match (0..m).filter_map(due).chain(busy).min() {
            Some(t) => now = t.max(now + 1),
            None => break,
        }
    }
    if engine.count == problem.len() {
        return Ok(engine);
    }
    if (0..m).any(|d| order[d].get(next[d]).is_some_and(|&v| engine.is_ready(v))) {
        return Err(engine.out_of_memory("replay"));
    }
    let waiting = (0..m).find_map(|d| order[d].get(next[d])).expect("an op is left");
    Err(PlaceError::Invalid(format!(
        "the device order deadlocks: `{}` waits for an input that its devices' orders never \
         produce",
        problem.names[*waiting]
    )))
}
