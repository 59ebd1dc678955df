//! Choosing and running a placer, and the memory rule every placer shares.

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use ordo_cost::{NodeMemory, StepMode};

use crate::baselines;
use crate::error::PlaceError;
use crate::reduce;
use crate::topo::{self, Capacity};
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

/// A placement algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Baechi's m-TOPO with its uniform per-device cap (`m-topo`).
    MTopo,
    /// m-TOPO filling each device up to its real memory (`m-topo-real`).
    MTopoReal,
    /// Memory-constrained Earliest Task First (`m-etf`).
    MEtf,
    /// Memory-constrained Small Communication Times (`m-sct`).
    MSct,
    /// Everything on device 0 (`single`).
    Single,
    /// Layer `i` on device `i mod n`, the GNMT expert placement (`round-robin`).
    RoundRobin,
    /// Contiguous stages of the topological order with equal compute (`balanced`).
    Balanced,
}

impl Algorithm {
    /// Every algorithm, in the order tables list them.
    pub fn all() -> &'static [Algorithm] {
        &[
            Algorithm::MTopo,
            Algorithm::MTopoReal,
            Algorithm::MEtf,
            Algorithm::MSct,
            Algorithm::Single,
            Algorithm::RoundRobin,
            Algorithm::Balanced,
        ]
    }

    /// The name used on the command line and in placement files, e.g. `m-etf`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::MTopo => "m-topo",
            Algorithm::MTopoReal => "m-topo-real",
            Algorithm::MEtf => "m-etf",
            Algorithm::MSct => "m-sct",
            Algorithm::Single => "single",
            Algorithm::RoundRobin => "round-robin",
            Algorithm::Balanced => "balanced",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = PlaceError;

    /// Parses a name as [`Algorithm::name`] gives it.
    fn from_str(name: &str) -> Result<Self, PlaceError> {
        Algorithm::all().iter().copied().find(|a| a.name() == name).ok_or_else(|| {
            PlaceError::UnknownAlgorithm {
                name: name.to_string(),
                known: Algorithm::all().iter().map(|a| a.name()).collect::<Vec<_>>().join(", "),
            }
        })
    }
}

/// Settings of [`place`].
#[derive(Clone, Debug, PartialEq)]
pub struct PlaceOptions {
    /// m-SCT: an edge is a favorite when its LP value is below this (Baechi's default 0.1).
    pub sct_threshold: f64,
    /// Place a reduced graph ([`reduce::reduce`]: Baechi's co-placement grouper, then fusion)
    /// and expand the result to the original nodes.
    pub reduce: bool,
    /// Give up at this instant: m-ETF and m-SCT (its LP and its scheduling loop) stop with
    /// [`PlaceError::OutOfTime`]; `balanced` returns the best split its search has found so
    /// far. The other placers take time linear in the graph and do not look at it. `auto`
    /// sets it from its budget; `None` (the default) lets every placer finish.
    pub deadline: Option<Instant>,
}

impl Default for PlaceOptions {
    fn default() -> Self {
        Self { sct_threshold: 0.1, reduce: false, deadline: None }
    }
}

/// The instant a placer gives up at, checked where it loops: [`Deadline::check`] gives an
/// error naming the placer and how long it ran.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    at: Option<Instant>,
    start: Instant,
}

impl Deadline {
    /// A deadline at `at` (none: never), counted from now.
    pub(crate) fn new(at: Option<Instant>) -> Self {
        Self { at, start: Instant::now() }
    }

    /// Whether the deadline has passed.
    pub(crate) fn is_over(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// Seconds left, if there is a deadline (0 once it has passed).
    pub(crate) fn seconds_left(&self) -> Option<f64> {
        self.at.map(|at| at.saturating_duration_since(Instant::now()).as_secs_f64())
    }

    /// [`PlaceError::OutOfTime`] for `algo` once the deadline has passed.
    pub(crate) fn check(&self, algo: &'static str) -> Result<(), PlaceError> {
        if self.is_over() {
            return Err(self.out_of_time(algo));
        }
        Ok(())
    }

    /// [`PlaceError::OutOfTime`] for `algo`, with the time it ran.
    pub(crate) fn out_of_time(&self, algo: &'static str) -> PlaceError {
        PlaceError::OutOfTime { algo, seconds: self.start.elapsed().as_secs_f64() }
    }
}

/// Places `problem` with `algo`.
///
/// Memory is checked up front ([`check_fits`]). For the algorithms that only choose devices
/// (all but m-ETF and m-SCT), and for every algorithm with `options.reduce`, the order on each
/// device, the makespan and the peak memory come from simulating the placement on the original
/// problem. `placement_seconds` is the time spent deciding devices (reduction included,
/// the final simulation not).
///
/// In training mode the result always fits: a placement whose simulated peak exceeds a
/// device's memory is an error, not a result.
///
/// # Errors
/// Those of the algorithm, [`PlaceError::NoDevices`] / [`PlaceError::NodeTooLarge`] from
/// [`check_fits`], and [`PlaceError::ExceedsMemory`] in training mode.
pub fn place(
    problem: &PlaceProblem,
    algo: Algorithm,
    options: &PlaceOptions,
) -> Result<Placement, PlaceError> {
    let start = Instant::now();
    check_fits(problem)?;
    let deadline = Deadline::new(options.deadline);
    let reduced = if options.reduce { Some(reduce::reduce(problem)?) } else { None };
    let target = reduced.as_ref().map_or(problem, |r| &r.problem);
    let device_of = match algo {
        Algorithm::MTopo => topo::m_topo(target, Capacity::Uniform)?,
        Algorithm::MTopoReal => topo::m_topo(target, Capacity::Real)?,
        Algorithm::Single => baselines::single(target)?,
        Algorithm::RoundRobin => baselines::round_robin(target)?,
        Algorithm::Balanced => baselines::balanced_until(target, deadline)?,
        Algorithm::MEtf | Algorithm::MSct => {
            let full = match algo {
                Algorithm::MEtf => crate::etf::m_etf_until(target, deadline)?,
                _ => crate::sct::m_sct_until(target, options.sct_threshold, deadline)?,
            };
            if reduced.is_none() {
                let placement_seconds = start.elapsed().as_secs_f64();
                return Ok(Placement { algo: algo.name().into(), placement_seconds, ..full });
            }
            full.device_of
        }
    };
    let device_of = match &reduced {
        Some(r) => reduce::expand(&device_of, &r.node_of),
        None => device_of,
    };
    let placement_seconds = start.elapsed().as_secs_f64();
    let schedule = crate::sim::simulate(problem, &device_of);
    if problem.mode != StepMode::ForwardOnly {
        let over =
            schedule.peak_memory_bytes.iter().zip(&problem.devices.memory).position(|(p, l)| p > l);
        if let Some(device) = over {
            return Err(PlaceError::ExceedsMemory {
                algo: algo.name(),
                device,
                peak: schedule.peak_memory_bytes[device],
                limit: problem.devices.memory[device],
            });
        }
    }
    Ok(schedule.into_placement(algo.name(), device_of, placement_seconds))
}

/// What a set of nodes needs on one device for the step: everything that stays resident plus
/// the largest allocation of a single running node ([`NodeMemory`]'s budget rule). In training
/// mode outputs are resident (kept for backward); in forward-only mode only persistent memory
/// is, and a node's outputs count while it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Sum of [`NodeMemory::resident_bytes`].
    pub resident: u64,
    /// Largest [`NodeMemory::run_bytes`].
    pub run: u64,
}

impl MemoryNeed {
    /// The need of one node.
    pub fn of(memory: &NodeMemory) -> Self {
        Self { resident: memory.resident_bytes(), run: memory.run_bytes() }
    }

    /// The need of node `v` of `problem`. For a training graph its outputs count as resident:
    /// an activation lives from the forward pass to its backward reader, so a budget cannot
    /// count it only while its node runs.
    pub fn of_node(problem: &PlaceProblem, v: usize) -> Self {
        let memory = &problem.memory[v];
        match problem.mode {
            StepMode::TrainingGraph => Self {
                resident: memory.persistent.saturating_add(memory.outputs),
                run: memory.temporary,
            },
            StepMode::ForwardOnly | StepMode::Training { .. } => Self::of(memory),
        }
    }

    /// The need of both sets together.
    #[must_use]
    pub fn with(self, other: Self) -> Self {
        Self {
            resident: self.resident.saturating_add(other.resident),
            run: self.run.max(other.run),
        }
    }

    /// Total bytes: `resident + run`, saturating.
    pub fn bytes(self) -> u64 {
        self.resident.saturating_add(self.run)
    }
}

/// The memory need of colocation group `g`. Time `O(|group|)`.
pub fn group_need(problem: &PlaceProblem, g: usize) -> MemoryNeed {
    problem.groups[g]
        .iter()
        .fold(MemoryNeed::default(), |need, &v| need.with(MemoryNeed::of_node(problem, v)))
}

/// The memory need of every device under `device_of`, in bytes. Time `O(|V|)`.
pub fn device_needs(problem: &PlaceProblem, device_of: &[usize]) -> Vec<u64> {
    let mut needs = vec![MemoryNeed::default(); problem.devices.count()];
    for (v, &d) in device_of.iter().enumerate() {
        needs[d] = needs[d].with(MemoryNeed::of_node(problem, v));
    }
    needs.into_iter().map(MemoryNeed::bytes).collect()
}

/// Checks that there is a device and that every colocation group fits on the largest device
/// on its own. Every placer calls it first. Time `O(|V|)`.
///
/// # Errors
/// [`PlaceError::NoDevices`]; [`PlaceError::NodeTooLarge`] for the first group (in node order)
/// that fits nowhere, naming its first node, its need, the largest device and the shortfall.
pub fn check_fits(problem: &PlaceProblem) -> Result<(), PlaceError> {
    let largest = problem.devices.memory.iter().copied().max().ok_or(PlaceError::NoDevices)?;
    for (g, members) in problem.groups.iter().enumerate() {
        let needed = group_need(problem, g).bytes();
        if needed > largest {
            return Err(PlaceError::NodeTooLarge {
                node: problem.names[members[0]].clone(),
                needed,
                available: largest,
                shortfall: needed - largest,
            });
        }
    }
    Ok(())
}
