//! The local search of `auto`: moves of colocation groups and chains along the critical path of
//! the simulated step, with random restarts.

use std::time::Instant;

use crate::sim::{Schedule, simulate};
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

/// Random moves that restart the search from a local optimum.
const KICK_MOVES: usize = 2;
/// Simulations without a better placement after which a search stops and leaves the rest of
/// its budget to the next one (a start that is already a deep local optimum, such as the
/// memory cuts on the zoo's Transformer, would otherwise spend half the budget for nothing).
const STALL: usize = 1_000;

/// What a move carries to another device: a colocation group, or a chain (a maximal path whose
/// inner links are each node's only successor and the next one's only predecessor, such as a
/// branch of an Inception block) together with the groups of its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Unit {
    Group(usize),
    Chain(usize),
}

/// The chains of a problem.
pub(super) struct Chains {
    chain_of: Vec<usize>,
    chains: Vec<Vec<usize>>,
}

impl Chains {
    /// Chains of `problem`, in time `O(|V| + |E|)`.
    pub(super) fn new(problem: &PlaceProblem) -> Self {
        let n = problem.len();
        let only = |edges: &[usize], end: &dyn Fn(usize) -> usize| {
            let mut ends = edges.iter().map(|&e| end(e));
            let first = ends.next()?;
            ends.all(|x| x == first).then_some(first)
        };
        let source = |e: usize| problem.edges[e].source;
        let target = |e: usize| problem.edges[e].target;
        // `next[v]`: the node after `v` in its chain.
        let next: Vec<Option<usize>> = (0..n)
            .map(|v| {
                only(&problem.out_edges[v], &target)
                    .filter(|&w| only(&problem.in_edges[w], &source) == Some(v))
            })
            .collect();
        let mut has_previous = vec![false; n];
        for w in next.iter().flatten() {
            has_previous[*w] = true;
        }
        let mut chain_of = vec![0; n];
        let mut chains = Vec::new();
        for &v in &problem.topo_order {
            if has_previous[v] {
                continue;
            }
            let mut chain = vec![v];
            let mut at = v;
            while let Some(w) = next[at] {
                chain.push(w);
                at = w;
            }
            for &u in &chain {
                chain_of[u] = chains.len();
            }
            chains.push(chain);
        }
        Self { chain_of, chains }
    }
}

/// `device_of` with `unit` moved to `device`.
fn moved(
    problem: &PlaceProblem,
    chains: &Chains,
    device_of: &[usize],
    unit: Unit,
    device: usize,
) -> Vec<usize> {
    let mut out = device_of.to_vec();
    let mut move_group = |g: usize| {
        for &v in &problem.groups[g] {
            out[v] = device;
        }
    };
    match unit {
        Unit::Group(g) => move_group(g),
        Unit::Chain(c) => {
            for &v in &chains.chains[c] {
                move_group(problem.group_of[v]);
            }
        }
    }
    out
}

/// Whether `peaks` fit the problem's devices.
pub(super) fn fits(problem: &PlaceProblem, peaks: &[u64]) -> bool {
    peaks.iter().zip(&problem.devices.memory).all(|(peak, limit)| peak <= limit)
}

/// One search from one starting placement.
pub(super) struct Search<'a> {
    pub(super) problem: &'a PlaceProblem,
    pub(super) chains: &'a Chains,
    pub(super) bound: u64,
    pub(super) evaluations: usize,
    pub(super) budget: usize,
    pub(super) moves: usize,
    /// The wall-clock end of the search: past it no simulation starts, whatever the budget
    /// left (`auto`'s time budget on a graph too large for its simulation count).
    pub(super) deadline: Instant,
    /// Whether the deadline, not the budget, stopped the search.
    pub(super) out_of_time: bool,
    /// Told the number of simulations of this search and the best makespan after each one.
    pub(super) report: &'a mut dyn FnMut(usize, u64),
}

impl Search<'_> {
    /// Whether another simulation may start: budget left and the deadline not passed.
    fn may_simulate(&mut self) -> bool {
        if self.evaluations >= self.budget {
            return false;
        }
        if Instant::now() >= self.deadline {
            self.out_of_time = true;
            return false;
        }
        true
    }

    /// The best placement found within the budget, or `None` when nothing beat `start`. The
    /// sequence of simulations depends only on the problem, `start` and `seed`: a larger
    /// budget continues it.
    pub(super) fn run(&mut self, start: &Placement, seed: u64) -> Option<Placement> {
        let problem = self.problem;
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut best: Option<(Vec<usize>, Schedule)> = None;
        let mut best_us = start.makespan_us;
        let mut device_of = start.device_of.clone();
        if Instant::now() >= self.deadline {
            self.out_of_time = true;
            return None;
        }
        self.evaluations += 1;
        let mut schedule = simulate(problem, &device_of);
        if schedule.makespan_us < best_us && fits(problem, &schedule.peak_memory_bytes) {
            best_us = schedule.makespan_us;
            best = Some((device_of.clone(), schedule.clone()));
        }
        let (mut stalled_at, mut since) = (best_us, self.evaluations);
        while best_us > self.bound && self.may_simulate() {
            let mut step: Option<(Vec<usize>, Schedule)> = None;
            for (unit, device) in self.proposals(&device_of, &schedule) {
                if !self.may_simulate() {
                    break;
                }
                let moved = moved(problem, self.chains, &device_of, unit, device);
                if moved == device_of {
                    continue;
                }
                self.evaluations += 1;
                let trial = simulate(problem, &moved);
                (self.report)(self.evaluations, best_us);
                if trial.makespan_us < schedule.makespan_us
                    && fits(problem, &trial.peak_memory_bytes)
                {
                    step = Some((moved, trial));
                    break;
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
            // A local optimum: go on from the best placement so far, shaken by random moves,
            // unless that has not helped for a while.
            if best_us < stalled_at {
                (stalled_at, since) = (best_us, self.evaluations);
            }
            if self.evaluations - since > STALL {
                break;
            }
            device_of = best.as_ref().map_or(&start.device_of, |b| &b.0).clone();
            for _ in 0..KICK_MOVES {
                let unit = if rng.bool() {
                    Unit::Group(rng.usize(..problem.groups.len()))
                } else {
                    Unit::Chain(rng.usize(..self.chains.chains.len()))
                };
                let device = rng.usize(..problem.devices.count());
                device_of = moved(problem, self.chains, &device_of, unit, device);
            }
            self.evaluations += 1;
            schedule = simulate(problem, &device_of);
        }
        best.map(|(device_of, schedule)| schedule.into_placement("", device_of, 0.0))
    }

    /// Moves `(unit, device)` suggested by the critical path of `schedule`, without repeats,
    /// in the order the path meets them (from its end).
    fn proposals(&self, device_of: &[usize], schedule: &Schedule) -> Vec<(Unit, usize)> {
        let problem = self.problem;
        let devices = problem.devices.count();
        let mut work = vec![0u64; devices];
        for (v, &d) in device_of.iter().enumerate() {
            work[d] += problem.weights[v];
        }
        let mut by_work: Vec<usize> = (0..devices).collect();
        by_work.sort_by_key(|&d| (work[d], d));
        let mut out: Vec<(Unit, usize)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut push = |v: usize, device: usize| {
            if device == device_of[v] {
                return;
            }
            let chain = self.chains.chain_of[v];
            let units = [Unit::Group(problem.group_of[v]), Unit::Chain(chain)];
            // A chain of one node moves no more than its group.
            let count = if self.chains.chains[chain].len() > 1 { 2 } else { 1 };
            for &unit in &units[..count] {
                if seen.insert((unit, device)) {
                    out.push((unit, device));
                }
            }
        };
        for step in critical_path(problem, device_of, schedule) {
            match step {
                Binding::Transfer { from, to } => {
                    push(to, device_of[from]);
                    push(from, device_of[to]);
                }
                Binding::Device(v) => {
                    for &device in &by_work {
                        push(v, device);
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
