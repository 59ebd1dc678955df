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

use std::time::Instant;

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
    /// Where the winning search started: a fast placer's name (`m-etf`), with the devices it
    /// placed on when fewer than all (`m-etf on 2 of 4 devices`), or `memory cuts`.
    pub winner: String,
    /// Every fast placer's makespan in µs on all devices, or why it has none (an error, or a
    /// placement that does not fit the memory limits, which forward-only placers can return).
    pub candidates: Vec<(Algorithm, Result<u64, String>)>,
    /// The fast placers run on fewer devices: algorithm, devices, makespan or why none.
    pub fewer_devices: Vec<(Algorithm, usize, Result<u64, String>)>,
    /// Moves applied by the searches.
    pub moves: usize,
    /// Placements the searches simulated.
    pub evaluations: usize,
    /// Wall time of the searches alone, in seconds.
    pub search_seconds: f64,
}

/// A candidate start: what made it, the placement.
type Start = (String, Placement);

/// Places `problem` with every fast placer, keeps the fastest that fit, and improves them by
/// moving groups and chains along the critical path (see the [module documentation](self)).
///
/// # Errors
/// The error of the first fast placer when none of them gives a placement.
pub fn place_auto(
    problem: &PlaceProblem,
    options: &AutoOptions,
) -> Result<AutoPlacement, PlaceError> {
    let start = Instant::now();
    let devices = problem.devices.count();
    let mut starts: Vec<Start> = Vec::new();
    let mut candidates = Vec::new();
    let mut first_error = None;
    for &algo in Algorithm::all() {
        let result = match candidate(problem, algo, &options.place) {
            Ok(placement) => keep(&mut starts, algo, devices, Ok(placement)),
            Err(err) => {
                let text = err.to_string();
                first_error.get_or_insert(err);
                Err(text)
            }
        };
        candidates.push((algo, result));
    }
    for (placement, order) in cuts::memory_cuts(problem).into_iter().zip(["", " by latest start"]) {
        starts.push((format!("memory cuts{order}"), placement));
    }
    let mut fewer_devices = Vec::new();
    let mut count = devices / 2;
    while count >= 2 {
        let (sub, chosen) = on_largest(problem, count);
        let small = problem.len() <= SMALL_NODES;
        let cheap = |a: &&Algorithm| match a {
            Algorithm::Single => false,
            Algorithm::MSct => small,
            _ => true,
        };
        for &algo in Algorithm::all().iter().filter(cheap) {
            let result =
                candidate(&sub, algo, &options.place).and_then(|p| embed(problem, &p, &chosen));
            fewer_devices.push((algo, count, keep(&mut starts, algo, count, result)));
        }
        count /= 2;
    }
    // Stable: at equal makespans, the order above (all devices first) decides.
    starts.sort_by_key(|(_, p)| p.makespan_us);
    starts.dedup_by(|b, a| a.1.device_of == b.1.device_of);
    starts.truncate(STARTS);
    let Some((winner, first)) = starts.first().cloned() else {
        return Err(first_error.unwrap_or(PlaceError::NoDevices));
    };
    let search_start = Instant::now();
    let elements = (problem.len() + problem.edges.len()).max(1) as f64;
    let rate = elements_per_second(elements);
    let budget = (options.budget_seconds.max(0.0) * rate / elements) as usize;
    let chains = Chains::new(problem);
    let bound = crate::bound::lower_bounds(problem).best_us();
    let (mut best, mut from) = (first, winner);
    let (mut moves, mut evaluations, mut left) = (0, 0, 0);
    for (i, (label, placement)) in starts.iter().enumerate() {
        let share = match (i, starts.len()) {
            (_, 1) => budget,
            (0, _) => budget / 2,
            _ => budget / 2 / (starts.len() - 1),
        };
        // What an earlier search left when it stopped improving goes to this one.
        let share = share + left;
        let mut search =
            Search { problem, chains: &chains, bound, evaluations: 0, budget: share, moves: 0 };
        let seed = options.seed.wrapping_add(i as u64);
        let found = search.run(placement, seed).unwrap_or_else(|| placement.clone());
        left = share.saturating_sub(search.evaluations);
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
    })
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
