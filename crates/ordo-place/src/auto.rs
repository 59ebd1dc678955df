//! `auto`: the best of the fast placers, improved by a search that moves colocation groups
//! along the critical path of the simulated step.
//!
//! Every fast placer ([`Algorithm::all`]) is run; the fastest placement that fits wins (its
//! makespan is the simulated step of its plan). Then, while the evaluation budget lasts, the
//! critical path of the current placement's simulated step (Baechi's virtual scheduler,
//! [`crate::sim::simulate`]) proposes moves:
//!
//! * for each transfer on the critical path (a node that waited for an input from another
//!   device), move the consumer's group to the producer's device, and the producer's group to
//!   the consumer's device (merging along the critical path);
//! * for each node on the critical path that waited for its own device, move its group to each
//!   other device, least loaded first.
//!
//! Each move is simulated; the best one that shortens the step and keeps every device within
//! its memory is applied, and the search goes on from there. At a local optimum (no move
//! helps), it restarts from the best placement found so far with two random group moves
//! (iterated local search), until the budget is spent. The search is deterministic: the same
//! problem, budget and seed give the same placement, and a larger budget continues the same
//! sequence of moves, so it is never worse.

use std::time::Instant;

use crate::algorithm::{Algorithm, PlaceOptions, place};
use crate::error::PlaceError;
use crate::placement::Placement;
use crate::problem::PlaceProblem;
use crate::sim::{Schedule, simulate};

/// Graph elements (nodes plus edges) one second of search simulates: the budget in seconds is
/// turned into a number of simulations with this rate, measured for Baechi's virtual scheduler
/// on synthetic graphs in release builds, so that the result does not depend on the machine's
/// speed or load.
const ELEMENTS_PER_SECOND: f64 = 7.0e6;
/// Random group moves that restart the search from a local optimum.
const KICK_MOVES: usize = 2;

/// Settings of [`place_auto`].
#[derive(Clone, Debug, PartialEq)]
pub struct AutoOptions {
    /// Search budget in seconds (converted to a number of simulations, see the module
    /// documentation); 0 keeps the best fast placer.
    pub budget_seconds: f64,
    /// Seed of the random moves that restart the search from a local optimum.
    pub seed: u64,
    /// Options of the fast placers.
    pub place: PlaceOptions,
}

impl Default for AutoOptions {
    fn default() -> Self {
        Self { budget_seconds: 2.0, seed: 0, place: PlaceOptions::default() }
    }
}

/// What [`place_auto`] found.
#[derive(Clone, Debug)]
pub struct AutoPlacement {
    /// The placement (`algo` is `auto`); its `placement_seconds` covers the fast placers and
    /// the search.
    pub placement: Placement,
    /// The fast placer whose placement the search started from.
    pub winner: Algorithm,
    /// Every fast placer's makespan in µs, or why it has none (an error, or a placement that
    /// does not fit the memory limits, which forward-only placers can return).
    pub candidates: Vec<(Algorithm, Result<u64, String>)>,
    /// Moves applied by the search.
    pub moves: usize,
    /// Placements the search simulated.
    pub evaluations: usize,
    /// Wall time of the search alone, in seconds.
    pub search_seconds: f64,
}

/// Places `problem` with every fast placer, keeps the fastest that fits, and improves it by
/// moving groups along the critical path (see the [module documentation](self)).
///
/// # Errors
/// The error of the first fast placer when none of them gives a placement.
pub fn place_auto(
    problem: &PlaceProblem,
    options: &AutoOptions,
) -> Result<AutoPlacement, PlaceError> {
    let start = Instant::now();
    let mut best: Option<(Algorithm, Placement)> = None;
    let mut candidates = Vec::new();
    let mut first_error = None;
    for &algo in Algorithm::all() {
        match place(problem, algo, &options.place) {
            Ok(placement) if !fits(problem, &placement.peak_memory_bytes) => {
                let why = format!(
                    "peak memory {:?} exceeds the limits {:?}",
                    placement.peak_memory_bytes, problem.devices.memory
                );
                candidates.push((algo, Err(why)));
            }
            Ok(placement) => {
                candidates.push((algo, Ok(placement.makespan_us)));
                let better =
                    best.as_ref().is_none_or(|(_, b)| placement.makespan_us < b.makespan_us);
                if better {
                    best = Some((algo, placement));
                }
            }
            Err(err) => {
                candidates.push((algo, Err(err.to_string())));
                first_error.get_or_insert(err);
            }
        }
    }
    let Some((winner, mut placement)) = best else {
        return Err(first_error.unwrap_or(PlaceError::NoDevices));
    };
    let search_start = Instant::now();
    let elements = (problem.len() + problem.edges.len()).max(1) as f64;
    let budget = (options.budget_seconds.max(0.0) * ELEMENTS_PER_SECOND / elements) as usize;
    let mut search = Search { problem, evaluations: 0, budget, moves: 0 };
    if let Some(improved) = search.run(&placement, options.seed) {
        placement = improved;
    }
    let search_seconds = search_start.elapsed().as_secs_f64();
    placement.algo = "auto".into();
    placement.placement_seconds = start.elapsed().as_secs_f64();
    Ok(AutoPlacement {
        placement,
        winner,
        candidates,
        moves: search.moves,
        evaluations: search.evaluations,
        search_seconds,
    })
}

/// `device_of` with `group` moved to `device`.
fn moved(problem: &PlaceProblem, device_of: &[usize], group: usize, device: usize) -> Vec<usize> {
    let mut out = device_of.to_vec();
    for &v in &problem.groups[group] {
        out[v] = device;
    }
    out
}

/// Whether `peaks` fit the problem's devices.
fn fits(problem: &PlaceProblem, peaks: &[u64]) -> bool {
    peaks.iter().zip(&problem.devices.memory).all(|(peak, limit)| peak <= limit)
}

struct Search<'a> {
    problem: &'a PlaceProblem,
    evaluations: usize,
    budget: usize,
    moves: usize,
}

impl Search<'_> {
    /// The improved placement, or `None` when nothing beat `start`.
    fn run(&mut self, start: &Placement, seed: u64) -> Option<Placement> {
        let problem = self.problem;
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut best: Option<(Vec<usize>, Schedule)> = None;
        let mut best_us = start.makespan_us;
        let mut device_of = start.device_of.clone();
        let mut schedule = simulate(problem, &device_of);
        let bound = problem.lower_bound_us();
        while self.evaluations < self.budget && best_us > bound {
            let mut step: Option<(Vec<usize>, Schedule)> = None;
            for (group, device) in self.proposals(&device_of, &schedule) {
                if self.evaluations >= self.budget {
                    break;
                }
                let moved = moved(problem, &device_of, group, device);
                self.evaluations += 1;
                let trial = simulate(problem, &moved);
                let target = step.as_ref().map_or(schedule.makespan_us, |s| s.1.makespan_us);
                if trial.makespan_us < target && fits(problem, &trial.peak_memory_bytes) {
                    step = Some((moved, trial));
                }
            }
            if let Some((moved, trial)) = step {
                (device_of, schedule) = (moved, trial);
                self.moves += 1;
                if schedule.makespan_us < best_us {
                    best_us = schedule.makespan_us;
                    best = Some((device_of.clone(), schedule.clone()));
                }
                continue;
            }
            // A local optimum: go on from the best placement so far, shaken by random moves.
            device_of = best.as_ref().map_or(&start.device_of, |b| &b.0).clone();
            for _ in 0..KICK_MOVES {
                let group = rng.usize(..problem.groups.len());
                let device = rng.usize(..problem.devices.count());
                device_of = moved(problem, &device_of, group, device);
            }
            self.evaluations += 1;
            schedule = simulate(problem, &device_of);
        }
        best.map(|(device_of, schedule)| Placement {
            algo: String::new(),
            device_of,
            order: schedule.order,
            makespan_us: schedule.makespan_us,
            peak_memory_bytes: schedule.peak_memory_bytes,
            transfers: Some(schedule.transfers),
            placement_seconds: 0.0,
        })
    }

    /// Moves `(group, device)` suggested by the critical path of `schedule`, without repeats,
    /// in the order the path meets them (from its end).
    fn proposals(&self, device_of: &[usize], schedule: &Schedule) -> Vec<(usize, usize)> {
        let problem = self.problem;
        let devices = problem.devices.count();
        let mut work = vec![0u64; devices];
        for (v, &d) in device_of.iter().enumerate() {
            work[d] += problem.weights[v];
        }
        let mut by_work: Vec<usize> = (0..devices).collect();
        by_work.sort_by_key(|&d| (work[d], d));
        let mut out: Vec<(usize, usize)> = Vec::new();
        let push = |group: usize, device: usize, out: &mut Vec<(usize, usize)>| {
            let here = device_of[problem.groups[group][0]];
            if device != here && !out.contains(&(group, device)) {
                out.push((group, device));
            }
        };
        for step in critical_path(problem, device_of, schedule) {
            match step {
                Binding::Transfer { from, to } => {
                    push(problem.group_of[to], device_of[from], &mut out);
                    push(problem.group_of[from], device_of[to], &mut out);
                }
                Binding::Device(v) => {
                    for &device in &by_work {
                        push(problem.group_of[v], device, &mut out);
                    }
                }
            }
        }
        out
    }
}

/// Why a node on the critical path started when it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    /// It waited for an input from another device.
    Transfer { from: usize, to: usize },
    /// It waited for its device (the node before it there).
    Device(usize),
}

/// The critical path of `schedule`, from the last node to finish backwards: at each node, the
/// input whose producer (plus transfer, if on another device) arrived last, or the device's
/// previous node when that finished later.
fn critical_path(problem: &PlaceProblem, device_of: &[usize], schedule: &Schedule) -> Vec<Binding> {
    let n = problem.len();
    let mut previous = vec![None; n];
    for order in &schedule.order {
        for pair in order.windows(2) {
            previous[pair[1]] = Some(pair[0]);
        }
    }
    let Some(mut v) = (0..n).max_by_key(|&v| (schedule.finish_us[v], std::cmp::Reverse(v))) else {
        return Vec::new();
    };
    let mut path = Vec::new();
    for _ in 0..n {
        let mut latest: Option<(u64, usize, bool)> =
            previous[v].map(|p| (schedule.finish_us[p], p, false));
        for &e in &problem.in_edges[v] {
            let u = problem.edges[e].source;
            let remote = device_of[u] != device_of[v];
            let arrival = schedule.finish_us[u] + if remote { problem.edges[e].comm_us } else { 0 };
            if latest.is_none_or(|(t, _, _)| arrival > t) {
                latest = Some((arrival, u, remote));
            }
        }
        let Some((_, u, remote)) = latest else { break };
        if remote {
            path.push(Binding::Transfer { from: u, to: v });
        } else if previous[v] == Some(u)
            && !problem.in_edges[v].iter().any(|&e| problem.edges[e].source == u)
        {
            path.push(Binding::Device(v));
        }
        v = u;
    }
    path
}
