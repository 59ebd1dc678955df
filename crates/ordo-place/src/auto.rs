//! `auto`: the best of the fast placers, improved by a search that moves colocation groups and
//! chains along the critical path of the simulated step.
//!
//! Every fast placer ([`Algorithm::all`]) is run on all devices, and every one but `single` is
//! run again on the largest half, quarter, ... of the devices (down to two; m-SCT, whose LP
//! takes most of the fast placers' time, only on graphs of up to 2,000 nodes): when transfers
//! are expensive, a placement on fewer devices often wins. On graphs that do not fit one device,
//! two topological orders cut into runs that fit a device at the least transfer time across
//! the cuts (each tensor counted once, from its producer to its last reader; the memory bound's
//! dynamic program, [`crate::bound`]) are starts as well: Baechi's order, and the order by
//! latest start, which puts a side branch (a residual block's downsampling path) just before
//! its join, so that a run may end inside a block after sending only the block's narrow inner
//! tensor and its input (ResNet-50 at batch 8 on 8 devices with tight memory: 15.45 ms with
//! Baechi's order alone, 15.02 ms with both). The three fastest placements that fit are the
//! starts of the search (makespan: the simulated step of their plan).
//!
//! From each start, while its share of the evaluation budget lasts, the critical path of the
//! current placement's simulated step (Baechi's virtual scheduler, [`crate::sim::simulate`])
//! proposes moves of a node's colocation group, and of its chain (a maximal path of nodes that
//! are each other's only successor and predecessor, with their groups: an Inception branch):
//!
//! * for each transfer on the critical path (a node that waited for an input from another
//!   device), the consumer's group and chain to the producer's device, and the producer's to
//!   the consumer's device (merging along the critical path);
//! * for each node on the critical path that waited for its own device, its group and chain to
//!   each other device, least loaded first.
//!
//! The moves are simulated in that order; the first one that shortens the step and keeps every
//! device within its memory is applied, and the search goes on from there (first improvement:
//! on the zoo's Transformer, 8 devices, tight memory, it reached 13.68 ms where taking the best
//! of all moves, with as many simulations, reached none below m-SCT's 15.47 ms). At a local
//! optimum (no move helps), it restarts from the best placement found so far with two random
//! moves (iterated local search), until its budget is spent, the step reaches the lower bound,
//! or 1,000 simulations found nothing better; what a search leaves goes to the next start (the
//! memory cuts of the zoo's Transformer, 8 devices, tight memory, are a local optimum at 13.95
//! ms: while their search kept its half of the budget, the others found nothing better; with
//! what it leaves, m-SCT's start reaches 12.64 ms). The best placement of all searches wins. The search is
//! deterministic: the same problem, budget and seed give the same placement, and a larger
//! budget continues each search's sequence of moves and leaves the next ones at least as much,
//! so it is never worse.

mod cuts;
mod search;

use std::time::{Duration, Instant};

use crate::algorithm::{Algorithm, PlaceOptions, place};
use crate::error::PlaceError;
use crate::sim::simulate;
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;
use search::{Chains, Search, fits};

/// Graph elements (nodes plus edges) one second of search simulates, for a graph of
/// `elements`: the budget in seconds is turned into a number of simulations with this rate, so
/// that the result does not depend on the machine's speed or load. Baechi's virtual scheduler
/// simulates 7.7e6 to 8.7e6 elements per CPU second on the samples (650 to 3,100 elements) and
/// 5.9e6 on a 10,000-node training graph (`ordo synth`, 30,000 elements; release build). The
/// rate is set below those, to leave room for the search's own work (the critical path, the
/// moves) and a loaded machine: 7e6 up to 4,000 elements, falling linearly to 4e6 at 30,000.
fn elements_per_second(elements: f64) -> f64 {
    let large = ((elements - 4_000.0) / 26_000.0).clamp(0.0, 1.0);
    7.0e6 - 3.0e6 * large
}

/// Starting placements searched from: the best gets half the budget, the others share the
/// rest.
const STARTS: usize = 3;
/// Up to this many nodes m-SCT also places on fewer devices (beyond, its LP would add seconds
/// to the fast placers' time).
const SMALL_NODES: usize = 2_000;
/// The fast placers may use half the budget, but at least this many seconds: enough for all of
/// them on graphs of a few thousand nodes, so that a small budget still compares them all.
const PLACERS_SECONDS: f64 = 1.0;
/// The search stops at this many times the budget at the latest (its simulation count, set
/// from a conservative rate, ends it sooner on an idle machine), and at least this many times
/// half the budget after the placers' deadline.
const SEARCH_SLACK: f64 = 1.1;

/// Settings of [`place_auto`].
#[derive(Clone, Debug, PartialEq)]
pub struct AutoOptions {
    /// Time budget in seconds of all of `auto`, fast placers and search. The fast placers get
    /// half of it (at least one second): past that, a placer still running stops (m-ETF and
    /// m-SCT without a result, `balanced` with its best split so far) and the ones not started
    /// are skipped. The search gets a number of simulations from the budget (see the module
    /// documentation), so that its result does not depend on the machine's speed, and stops
    /// at 1.1 times the budget at the latest, which happens only on graphs of tens of
    /// thousands of nodes or on a loaded machine ([`AutoPlacement::search_cut`] says so).
    /// 0 keeps the best fast placer.
    pub budget_seconds: f64,
    /// Seed of the random moves that restart the search from a local optimum.
    pub seed: u64,
    /// Options of the fast placers (their deadline is set from the budget).
    pub place: PlaceOptions,
    /// Never stop for the clock: every fast placer runs to its end and the search makes its
    /// whole simulation count, so the same problem, budget and seed give the same placement on
    /// every machine and build, however long that takes (tests, fixtures, reproductions).
    pub reproducible: bool,
}

impl Default for AutoOptions {
    fn default() -> Self {
        Self { budget_seconds: 2.0, seed: 0, place: PlaceOptions::default(), reproducible: false }
    }
}

/// What [`place_auto`] found.
#[derive(Clone, Debug)]
pub struct AutoPlacement {
    /// The placement (`algo` is `auto`); its `placement_seconds` covers the fast placers and
    /// the search.
    pub placement: Placement,
    /// Where the winning search started: a fast placer's name (`m-etf`), with the devices it
    /// placed on when fewer than all (`m-etf on 2 of 4 devices`), or `memory cuts`.
    pub winner: String,
    /// Every fast placer's makespan in µs on all devices, or why it has none (an error, a
    /// placement that does not fit the memory limits, which forward-only placers can return,
    /// or the budget spent), in the order of [`Algorithm::all`].
    pub candidates: Vec<(Algorithm, Result<u64, String>)>,
    /// The fast placers run on fewer devices: algorithm, devices, makespan or why none.
    pub fewer_devices: Vec<(Algorithm, usize, Result<u64, String>)>,
    /// Moves applied by the searches.
    pub moves: usize,
    /// Placements the searches simulated.
    pub evaluations: usize,
    /// Wall time of the searches alone, in seconds.
    pub search_seconds: f64,
    /// Fast placer runs that the budget's deadline stopped (as [`AutoProgress::doing`] names
    /// them), with the seconds they ran.
    pub stopped: Vec<(String, f64)>,
    /// Fast placer runs not started because the deadline had passed.
    pub skipped: Vec<String>,
    /// When the deadline stopped the search before its simulation count: the simulations made
    /// and planned. The result then depends on the machine's speed.
    pub search_cut: Option<(usize, usize)>,
}

/// How far [`place_auto_reporting`] has got.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoProgress {
    /// What it is doing: a fast placer (`m-etf`, `m-etf on 2 of 4 devices`), `memory cuts`,
    /// or `search`.
    pub doing: String,
    /// Steps done in this phase: placer runs, or simulations.
    pub done: usize,
    /// Steps planned in this phase (the search may stop sooner: at the lower bound, or when
    /// it stops improving).
    pub total: usize,
    /// The fastest step found so far, in µs.
    pub best_us: Option<u64>,
}

/// A candidate start: what made it, the placement.
type Start = (String, Placement);

/// Places `problem` with every fast placer, keeps the fastest that fit, and improves them by
/// moving groups and chains along the critical path (see the [module documentation](self)).
///
/// # Errors
/// The error of the first fast placer (in [`Algorithm::all`]'s order) when none of them gives
/// a placement.
pub fn place_auto(
    problem: &PlaceProblem,
    options: &AutoOptions,
) -> Result<AutoPlacement, PlaceError> {
    place_auto_reporting(problem, options, &mut |_| {})
}

/// [`place_auto`], telling `report` what it is doing before each fast placer and after each
/// simulation of the search.
///
/// # Errors
/// As [`place_auto`].
pub fn place_auto_reporting(
    problem: &PlaceProblem,
    options: &AutoOptions,
    report: &mut dyn FnMut(&AutoProgress),
) -> Result<AutoPlacement, PlaceError> {
    let start = Instant::now();
    // A budget beyond 30 years is no budget; clamping it keeps every instant representable.
    let budget_seconds = match options.budget_seconds {
        b if b.is_finite() => b.clamp(0.0, 1e9),
        _ => 0.0,
    };
    // Reproducible: deadlines a year away, which nothing reaches.
    let after = |seconds: f64| match options.reproducible {
        false => start + Duration::from_secs_f64(seconds),
        true => start + Duration::from_secs(365 * 86_400),
    };
    let placers_until = after((budget_seconds / 2.0).max(PLACERS_SECONDS));
    let devices = problem.devices.count();
    let small = problem.len() <= SMALL_NODES;
    let levels = std::iter::successors(Some(devices / 2), |c| Some(c / 2)).take_while(|&c| c >= 2);
    let fewer_runs = levels.clone().count() * if small { 6 } else { 5 };
    let mut placers = Placers {
        until: placers_until,
        options: PlaceOptions { deadline: Some(placers_until), ..options.place.clone() },
        progress: AutoProgress {
            doing: String::new(),
            done: 0,
            total: Algorithm::all().len() + 1 + fewer_runs,
            best_us: None,
        },
        stopped: Vec::new(),
        skipped: Vec::new(),
        report,
    };
    // Cheapest first, so that when the deadline stops the run the cheap placers have their
    // results: the linear ones on all devices, m-ETF (whose work grows with the devices) on
    // two, four, ... devices up to all, the linear ones on fewer devices, m-SCT (whose LP
    // grows faster than the graph) last.
    let linear = [
        Algorithm::Single,
        Algorithm::MTopo,
        Algorithm::MTopoReal,
        Algorithm::RoundRobin,
        Algorithm::Balanced,
    ];
    let mut on_all = Vec::new();
    for algo in linear {
        on_all.push((algo, placers.run(problem, algo, algo.name().into())));
    }
    placers.announce("memory cuts".into());
    let cuts = if Instant::now() < placers_until {
        cuts::memory_cuts(problem)
    } else {
        placers.skipped.push("memory cuts".into());
        Vec::new()
    };
    let subproblems: Vec<(usize, PlaceProblem, Vec<usize>)> = levels
        .map(|count| {
            let (sub, chosen) = on_largest(problem, count);
            (count, sub, chosen)
        })
        .collect();
    let mut on_fewer = Vec::new();
    let mut run_on =
        |placers: &mut Placers,
         algo: Algorithm,
         (count, sub, chosen): &(usize, PlaceProblem, Vec<usize>)| {
            let label = format!("{algo} on {count} of {devices} devices");
            let result = placers.run(sub, algo, label).and_then(|p| embed(problem, &p, chosen));
            on_fewer.push((algo, *count, result));
        };
    for level in subproblems.iter().rev() {
        run_on(&mut placers, Algorithm::MEtf, level);
    }
    on_all.push((Algorithm::MEtf, placers.run(problem, Algorithm::MEtf, "m-etf".into())));
    for algo in linear.into_iter().filter(|&a| a != Algorithm::Single) {
        for level in &subproblems {
            run_on(&mut placers, algo, level);
        }
    }
    on_all.push((Algorithm::MSct, placers.run(problem, Algorithm::MSct, "m-sct".into())));
    if small {
        for level in &subproblems {
            run_on(&mut placers, Algorithm::MSct, level);
        }
    }

    // Starts in a fixed order whatever the run order: all devices in the order of
    // `Algorithm::all`, the memory cuts, then fewer devices (most first). At equal makespans,
    // this order decides.
    let rank = |algo: Algorithm| Algorithm::all().iter().position(|&a| a == algo);
    on_all.sort_by_key(|&(algo, _)| rank(algo));
    on_fewer.sort_by_key(|&(algo, count, _)| (std::cmp::Reverse(count), rank(algo)));
    let mut starts: Vec<Start> = Vec::new();
    let mut candidates = Vec::new();
    let mut first_error = None;
    for (algo, result) in on_all {
        let result = match result {
            Ok(placement) => keep(&mut starts, algo, devices, Ok(placement)),
            Err(err) => {
                let text = err.to_string();
                first_error.get_or_insert(err);
                Err(text)
            }
        };
        candidates.push((algo, result));
    }
    for (placement, order) in cuts.into_iter().zip(["", " by latest start"]) {
        starts.push((format!("memory cuts{order}"), placement));
    }
    let fewer_devices: Vec<_> = on_fewer
        .into_iter()
        .map(|(algo, count, result)| (algo, count, keep(&mut starts, algo, count, result)))
        .collect();
    // Stable: at equal makespans, the order above (all devices first) decides.
    starts.sort_by_key(|(_, p)| p.makespan_us);
    starts.dedup_by(|b, a| a.1.device_of == b.1.device_of);
    starts.truncate(STARTS);
    let Some((winner, first)) = starts.first().cloned() else {
        return Err(first_error.unwrap_or(PlaceError::NoDevices));
    };
    let Placers { stopped, skipped, report, .. } = placers;
    let mut search_cut = None;
    let search_start = Instant::now();
    let elements = (problem.len() + problem.edges.len()).max(1) as f64;
    let rate = elements_per_second(elements);
    let budget = (budget_seconds * rate / elements) as usize;
    // At least 1.1 times the search's own half of the budget after the placers' deadline: a
    // small budget (below the placers' floor of 1 s) must not be spent before the search
    // starts, or its result would depend on the machine.
    let search_until = after(budget_seconds * SEARCH_SLACK)
        .max(placers_until + Duration::from_secs_f64(budget_seconds * SEARCH_SLACK / 2.0));
    let chains = Chains::new(problem);
    let bound = crate::bound::lower_bounds(problem).best_us();
    let (mut best, mut from) = (first, winner);
    let (mut moves, mut evaluations, mut left) = (0, 0, 0);
    let mut search_progress = AutoProgress {
        doing: "search".into(),
        done: 0,
        total: budget,
        best_us: Some(best.makespan_us),
    };
    for (i, (label, placement)) in starts.iter().enumerate() {
        let share = match (i, starts.len()) {
            (_, 1) => budget,
            (0, _) => budget / 2,
            _ => budget / 2 / (starts.len() - 1),
        };
        // What an earlier search left when it stopped improving goes to this one.
        let share = share + left;
        let so_far = evaluations;
        let best_so_far = best.makespan_us;
        let mut tell = |done: usize, best_us: u64| {
            search_progress.done = so_far + done;
            search_progress.best_us = Some(best_us.min(best_so_far));
            report(&search_progress);
        };
        let mut search = Search {
            problem,
            chains: &chains,
            bound,
            evaluations: 0,
            budget: share,
            moves: 0,
            deadline: search_until,
            out_of_time: false,
            report: &mut tell,
        };
        let seed = options.seed.wrapping_add(i as u64);
        let found = search.run(placement, seed).unwrap_or_else(|| placement.clone());
        left = share.saturating_sub(search.evaluations);
        if search.out_of_time {
            search_cut.get_or_insert((evaluations, budget)).0 += search.evaluations;
        }
        (moves, evaluations) = (moves + search.moves, evaluations + search.evaluations);
        if found.makespan_us < best.makespan_us {
            (best, from) = (found, label.clone());
        }
    }
    let search_seconds = search_start.elapsed().as_secs_f64();
    best.algo = "auto".into();
    best.placement_seconds = start.elapsed().as_secs_f64();
    Ok(AutoPlacement {
        placement: best,
        winner: from,
        candidates,
        fewer_devices,
        moves,
        evaluations,
        search_seconds,
        stopped,
        skipped,
        search_cut,
    })
}

/// The fast placers' part of `auto`: their deadline and options, and what they report.
struct Placers<'r> {
    until: Instant,
    options: PlaceOptions,
    progress: AutoProgress,
    stopped: Vec<(String, f64)>,
    skipped: Vec<String>,
    report: &'r mut dyn FnMut(&AutoProgress),
}

impl Placers<'_> {
    /// Reports that `doing` starts.
    fn announce(&mut self, doing: String) {
        self.progress.doing = doing;
        (self.report)(&self.progress);
        self.progress.done += 1;
    }

    /// `algo`'s placement of `problem` (see [`candidate`]) unless the deadline has passed,
    /// reported as `label`; a placer stopped or skipped by the deadline is noted.
    fn run(
        &mut self,
        problem: &PlaceProblem,
        algo: Algorithm,
        label: String,
    ) -> Result<Placement, PlaceError> {
        self.announce(label.clone());
        let result = if Instant::now() >= self.until {
            Err(PlaceError::OutOfTime { algo: algo.name(), seconds: 0.0 })
        } else {
            candidate(problem, algo, &self.options)
        };
        match &result {
            Err(PlaceError::OutOfTime { seconds, .. }) if *seconds > 0.0 => {
                self.stopped.push((label, *seconds));
            }
            Err(PlaceError::OutOfTime { .. }) => self.skipped.push(label),
            Err(_) => {}
            Ok(placement) => {
                let best = self.progress.best_us.get_or_insert(placement.makespan_us);
                *best = (*best).min(placement.makespan_us);
            }
        }
        result
    }
}

/// `algo`'s placement of `problem`, or an error when it fails or does not fit.
fn candidate(
    problem: &PlaceProblem,
    algo: Algorithm,
    options: &PlaceOptions,
) -> Result<Placement, PlaceError> {
    let placement = place(problem, algo, options)?;
    if !fits(problem, &placement.peak_memory_bytes) {
        return Err(PlaceError::Invalid(format!(
            "peak memory {:?} exceeds the limits {:?}",
            placement.peak_memory_bytes, problem.devices.memory
        )));
    }
    Ok(placement)
}

/// Adds a placement to the starts; its makespan, or the error as text.
fn keep(
    starts: &mut Vec<Start>,
    algo: Algorithm,
    devices: usize,
    result: Result<Placement, PlaceError>,
) -> Result<u64, String> {
    match result {
        Ok(placement) => {
            let makespan = placement.makespan_us;
            let label = if devices < placement.order.len() {
                format!("{algo} on {devices} of {} devices", placement.order.len())
            } else {
                algo.name().to_string()
            };
            starts.push((label, placement));
            Ok(makespan)
        }
        Err(err) => Err(err.to_string()),
    }
}

/// `problem` on its `count` largest devices (ties: lower index first), and their indices.
fn on_largest(problem: &PlaceProblem, count: usize) -> (PlaceProblem, Vec<usize>) {
    let memory = &problem.devices.memory;
    let mut chosen: Vec<usize> = (0..memory.len()).collect();
    chosen.sort_by_key(|&d| (std::cmp::Reverse(memory[d]), d));
    chosen.truncate(count);
    let mut sub = problem.clone();
    sub.devices.memory = chosen.iter().map(|&d| memory[d]).collect();
    (sub, chosen)
}

/// A placement on the devices `chosen` of `problem`, simulated there; an error when it does
/// not fit.
fn embed(
    problem: &PlaceProblem,
    placement: &Placement,
    chosen: &[usize],
) -> Result<Placement, PlaceError> {
    let device_of: Vec<usize> = placement.device_of.iter().map(|&d| chosen[d]).collect();
    let schedule = simulate(problem, &device_of);
    if !fits(problem, &schedule.peak_memory_bytes) {
        return Err(PlaceError::Invalid(format!(
            "peak memory {:?} exceeds the limits {:?}",
            schedule.peak_memory_bytes, problem.devices.memory
        )));
    }
    Ok(schedule.into_placement(&placement.algo, device_of, placement.placement_seconds))
}
