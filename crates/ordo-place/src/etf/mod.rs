//! m-ETF (memory-constrained Earliest Task First), faithful to Baechi's `m_etf.py`.
//!
//! # The algorithm
//!
//! m-ETF places ops while it simulates them. At each event time `t`:
//!
//! 1. every device whose running op has finished makes that op's successors ready once all
//!    their predecessors have finished;
//! 2. every free device proposes, among the ready ops that may run on it, the one with the
//!    smallest `(schedule_ts, topological rank)`, if `schedule_ts <= t`, where
//!    `schedule_ts(o, d) = max(ready_ts(o, d), when d is free)`; the smallest proposal wins,
//!    ties going to the lowest device id; the op is placed there and started, and this repeats
//!    until no device proposes;
//! 3. `t` moves to the next event: the end of a running op, or the earliest `schedule_ts` on a
//!    free device.
//!
//! `ready_ts(o, d)` is when all of `o`'s inputs would be on `d`, through the shared-channel
//! model of [`crate::sim`], computed as Baechi's dry run does: each in-edge is costed alone
//! against the channels as they are, its unsent tensors merged into one transfer. When the op
//! is started, its tensors are really sent, one by one and edge after edge; two inputs from
//! other devices then queue on the receiving channel, so an op can start later than the
//! `schedule_ts` it was chosen with.
//!
//! Since a free device is free "now", every proposal at time `t` has `schedule_ts = t`: the
//! choice is the ready op of smallest topological rank whose inputs could be on some free
//! device by `t`, on the lowest such device. This implementation uses that.
//!
//! **Colocation and memory.** The first op of a colocation group to start pins the whole
//! group to its device. A device is a candidate for an unpinned group only if the group's
//! resident memory fits ([`NodeMemory::resident_bytes`](ordo_cost::NodeMemory): persistent
//! memory, which is Baechi's rule, plus the retained outputs in training mode, so that the
//! placement fits the whole step), and for an op only if its outputs and temporary memory fit
//! now. Memory is counted by the simulator's time-based rules ([`crate::sim`]), conservatively,
//! so that the peak of m-ETF's schedule never exceeds a device's limit. An op that does not fit
//! anywhere waits until memory is freed; if nothing runs and nothing fits, m-ETF stops with
//! [`PlaceError::OutOfMemory`].
//!
//! # Agreement with the simulators
//!
//! The makespan m-ETF reports is that of its own schedule (Baechi logs it as "ETF estimated
//! runtime"); [`crate::sim::simulate_with_order`] on m-ETF's placement and order reproduces
//! that schedule exactly. [`crate::sim::simulate`], Baechi's `VirtualScheduler`, gives the
//! makespans Baechi reports, and can differ on the same placement, for reasons that are
//! Baechi's:
//!
//! * **When tensors are sent.** m-ETF sends a tensor when its consumer starts, so channels are
//!   booked in the order consumers start, and a send waits behind every transfer booked before
//!   it on the sender's or the receiver's channel, even one whose data was ready later. The
//!   simulator books all of an op's outgoing transfers when the op is taken, in link order, so
//!   a large tensor for a consumer that runs much later can hold up a small one needed now (or
//!   the other way round).
//! * **Which op a device runs next.** The simulator runs each device's ops by `(ready time,
//!   topological rank)`, m-ETF by topological rank among the ops due when the device is free.
//!
//! Without transfers (one device, or no edge between devices) the two agree. On Baechi's
//! sample graphs they agree for resnet50, inception_v3 and transformer, and differ for gnmt
//! (m-ETF's estimate 101.73 ms, simulated 135.69 ms) and synth_1k (376.51 ms, 356.27 ms), as
//! they do in Baechi's Python code.
//!
//! [`Placement::transfers`] lists m-ETF's transfers in the order it booked them. A plan built
//! from the placement numbers its transfers in that order, and the simulator's Baechi-TF
//! channel model serves each device's channel in that order with m-ETF's booking rule, so the
//! simulated step of the plan is m-ETF's estimate exactly (tested on Baechi's samples and on
//! random graphs).
//!
//! # Speed
//!
//! Baechi recomputes `schedule_ts` of every ready op on every device at every step,
//! `O(m · |V|²)` in the worst case. Here each device keeps the ready ops that may run on it in
//! a set ordered by topological rank (ops due by now) and in heaps of ops not due yet.
//! `ready_ts(o, d)` is the largest of a fixed time and of channel free times plus fixed
//! transfer times; an op waits in the heap of the term that decides its time, keyed by the
//! term's fixed part, so as a channel's free time grows the keys of all ops waiting on it move
//! with it and none needs recomputing. Times only grow (a tensor's arrival on `d`, when it
//! replaces a dry-run transfer, is at least as late), so a heap's key plus its channel's free
//! time is a lower bound that is checked only when it reaches the top; an op is re-keyed when
//! the deciding term changes or one of its input tensors reaches `d`. Each check costs
//! `O(in-degree)`.

mod engine;
mod replay;

pub(crate) use engine::Engine;
pub(crate) use replay::replay;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::ops::Bound;
use std::time::Instant;

use crate::algorithm::{Deadline, check_fits};
use crate::error::PlaceError;
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

/// Places `problem` with m-ETF (see the [module documentation](self)).
///
/// Returns the device of every node, each device's order, m-ETF's own makespan and the peak
/// memory of each device in m-ETF's schedule.
///
/// Time `O((|V| + r) · m · (log |V| + d))`, where `d` is the in-degree of the ops looked at and
/// `r` the number of times an op's deciding term changes (a few per op in practice), for `m`
/// devices; memory `O(m · (|V| + |tensors|))`.
///
/// # Errors
/// [`PlaceError::NoDevices`] and [`PlaceError::NodeTooLarge`] (checked first, by
/// [`check_fits`]); [`PlaceError::OutOfMemory`] when the ops fit one by one but not all
/// together: no device can take any ready op and nothing is running.
pub fn m_etf(problem: &PlaceProblem) -> Result<Placement, PlaceError> {
    m_etf_until(problem, Deadline::new(None))
}

/// [`m_etf`], giving up with [`PlaceError::OutOfTime`] once `deadline` has passed.
pub(crate) fn m_etf_until(
    problem: &PlaceProblem,
    deadline: Deadline,
) -> Result<Placement, PlaceError> {
    let clock = Instant::now();
    check_fits(problem)?;
    let mut engine = Engine::new(problem);
    let mut queues = Queues::new(problem.len(), engine.m);
    for v in engine.sources() {
        queues.insert(&engine, v);
    }
    let mut now = 0;
    loop {
        deadline.check("m-etf")?;
        for v in engine.advance(now) {
            queues.insert(&engine, v);
        }
        loop {
            let mut best: Option<(usize, usize, usize)> = None;
            for d in 0..engine.m {
                if engine.is_free(d) {
                    queues.promote(&engine, d);
                    if let Some(v) = queues.candidate(&engine, d) {
                        let key = (problem.topo_rank[v], d, v);
                        best = Some(best.map_or(key, |b| b.min(key)));
                    }
                }
            }
            let Some((rank, d, v)) = best else { break };
            queues.due[d].remove(&(rank, v));
            for c in engine.start(v, d) {
                queues.insert(&engine, c);
            }
            for i in 0..engine.sent.len() {
                queues.arrived(&engine, engine.sent[i], d);
            }
        }
        let next = (0..engine.m)
            .filter_map(|d| {
                if engine.is_free(d) {
                    queues.earliest(&engine, d)
                } else {
                    Some(engine.device_free[d])
                }
            })
            .min();
        match next {
            Some(t) => {
                debug_assert!(t > now, "time must move forward");
                now = t.max(now + 1);
            }
            None => break,
        }
    }
    let mut placement = engine.into_placement("m-etf")?;
    placement.placement_seconds = clock.elapsed().as_secs_f64();
    Ok(placement)
}

/// Where an op is in a device's queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Out,
    Waiting,
    Due,
}

/// A waiting op: `(key, rank, op, version)`; stale versions are skipped.
type Entry = Reverse<(u64, usize, usize, u32)>;

/// Per device, the ready ops that may run there.
struct Queues {
    m: usize,
    /// `waiting[d][c]`: ops whose ready time on `d` is decided by device `c`'s channel (free
    /// time + key); `waiting[d][m]`: by a fixed time (the key).
    waiting: Vec<Vec<BinaryHeap<Entry>>>,
    /// Ops whose ready time was at most the time it was last checked: `(rank, op)`.
    due: Vec<BTreeSet<(usize, usize)>>,
    /// Per `op * m + device`: where the op is and the version of its waiting entry.
    slot: Vec<Slot>,
    version: Vec<u32>,
}

impl Queues {
    fn new(n: usize, m: usize) -> Self {
        Self {
            m,
            waiting: vec![vec![BinaryHeap::new(); m + 1]; m],
            due: vec![BTreeSet::new(); m],
            slot: vec![Slot::Out; n * m],
            version: vec![0; n * m],
        }
    }

    /// Adds the newly ready op `v` to every device it may run on.
    fn insert(&mut self, engine: &Engine, v: usize) {
        for d in 0..self.m {
            if !engine.excluded(v, d) {
                self.queue(engine, v, d);
            }
        }
    }

    /// Puts `v` in `d`'s due set or in the heap of the term that decides its ready time.
    fn queue(&mut self, engine: &Engine, v: usize, d: usize) {
        let rank = engine.problem.topo_rank[v];
        let due = engine.due(v, d);
        let i = v * self.m + d;
        if due.ready <= engine.now {
            self.due[d].insert((rank, v));
            self.slot[i] = Slot::Due;
        } else {
            self.version[i] = self.version[i].wrapping_add(1);
            let heap = due.channel.unwrap_or(self.m);
            self.waiting[d][heap].push(Reverse((due.key, rank, v, self.version[i])));
            self.slot[i] = Slot::Waiting;
        }
    }

    /// Tensor `t` has just reached device `d`: its waiting consumers there get new keys.
    fn arrived(&mut self, engine: &Engine, t: usize, d: usize) {
        let p = engine.problem;
        for &e in &p.out_edges[p.tensors[t].producer] {
            let c = p.edges[e].target;
            if p.edges[e].tensors.contains(&t)
                && self.slot[c * self.m + d] == Slot::Waiting
                && !engine.scheduled[c]
            {
                self.queue(engine, c, d);
            }
        }
    }

    /// The lower bound of the top of `d`'s heap `heap`, dropping stale entries first.
    fn top(&mut self, engine: &Engine, d: usize, heap: usize) -> Option<(u64, usize)> {
        while let Some(&Reverse((key, _, v, version))) = self.waiting[d][heap].peek() {
            let i = v * self.m + d;
            if version != self.version[i] || self.slot[i] != Slot::Waiting || engine.scheduled[v] {
                self.waiting[d][heap].pop();
            } else if engine.excluded(v, d) {
                self.waiting[d][heap].pop();
                self.slot[i] = Slot::Out;
            } else {
                let base = if heap == self.m { 0 } else { engine.channel_free(heap) };
                return Some((base.saturating_add(key), v));
            }
        }
        None
    }

    /// Moves the ops due by now from `d`'s heaps to its due set.
    fn promote(&mut self, engine: &Engine, d: usize) {
        for heap in 0..=self.m {
            while let Some((bound, v)) = self.top(engine, d, heap) {
                if bound > engine.now {
                    break;
                }
                self.waiting[d][heap].pop();
                self.queue(engine, v, d);
            }
        }
    }

    /// The op of smallest rank that can start on the free device `d` now, if any. Ops found
    /// started, pinned elsewhere or no longer due are moved out of the due set on the way; ops
    /// that do not fit in memory stay.
    fn candidate(&mut self, engine: &Engine, d: usize) -> Option<usize> {
        let mut after = Bound::Unbounded;
        while let Some(&(rank, v)) = self.due[d].range((after, Bound::Unbounded)).next() {
            if engine.scheduled[v] || engine.excluded(v, d) {
                self.due[d].remove(&(rank, v));
                self.slot[v * self.m + d] = Slot::Out;
            } else if !engine.fits(v, d) {
                after = Bound::Excluded((rank, v));
            } else if engine.ready_time(v, d) <= engine.now {
                return Some(v);
            } else {
                self.due[d].remove(&(rank, v));
                self.queue(engine, v, d);
            }
        }
        None
    }

    /// The earliest ready time on `d` of an op not due yet (its bound checked to be exact).
    fn earliest(&mut self, engine: &Engine, d: usize) -> Option<u64> {
        loop {
            let (heap, bound, v) = (0..=self.m)
                .filter_map(|heap| self.top(engine, d, heap).map(|(bound, v)| (heap, bound, v)))
                .min_by_key(|&(_, bound, _)| bound)?;
            let ready = engine.ready_time(v, d);
            debug_assert!(ready >= bound, "ready times never decrease");
            if ready == bound {
                return Some(bound);
            }
            self.waiting[d][heap].pop();
            self.queue(engine, v, d);
        }
    }
}
