//! m-TOPO: Baechi's topological-order placer.
//!
//! Nodes are taken in [`PlaceProblem::topo_order`] and devices are filled one after another in
//! id order: the next node goes on the current device while it fits, and once it does not, the
//! placer moves on to the next device and never comes back. With colocation groups (Baechi
//! always passes `colocation=True`), a group is placed whole when its first node in the order
//! is reached, and its later members are skipped.
//!
//! What "fits" means depends on the step mode and on the [`Capacity`]:
//!
//! * **Forward only** reproduces Baechi's `m_topo.py` exactly. A device's counter grows by
//!   `temporary + sum(outputs)` for every node put on it, and a group is accepted when the
//!   counter plus the group's `max(temporary) + sum(persistent)` is strictly below Baechi's
//!   uniform cap `floor(sum(mem) / n) + max(mem)` (mem = temporary + sum(outputs)), or at most
//!   the device's real memory with [`Capacity::Real`].
//! * **Training** fills devices by the step's memory need ([`MemoryNeed`]): the resident bytes
//!   of everything on the device (the copies it receives of tensors produced on other devices
//!   included: backward reads them) plus its largest run-time allocation. The uniform cap is
//!   `floor(sum(resident) / n) + max(run) + max(group resident)`, Baechi's "average plus the
//!   largest item" rule for this measure, so every device left behind holds more than the
//!   average; the last device is filled up to its memory (the cap leaves out the copies).
//!
//! Two safety rules are ordo's own, and change Baechi's result only where Baechi's placement
//! would not run or where Baechi gives up: a device never takes more than its real memory under
//! the step's memory need, even with the uniform cap (Baechi's code assumes every device is
//! larger than the cap); and an empty device always accepts a group under the uniform cap
//! (Baechi would pass such a group on to equally empty devices and fail).

use ordo_cost::StepMode;

use crate::algorithm::{MemoryNeed, check_fits, group_need};
use crate::error::PlaceError;
use crate::received::Received;
use ordo_problem::PlaceProblem;

/// Which limit m-TOPO fills each device up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capacity {
    /// Baechi's default `m_topo`: every device is capped at the same share of the total
    /// memory plus the largest item, which spreads the graph over all devices.
    Uniform,
    /// Baechi's `m_topo_nonuniform`: each device is filled up to its real memory, which uses
    /// as few devices as memory allows.
    Real,
}

impl Capacity {
    fn algo(self) -> &'static str {
        match self {
            Capacity::Uniform => "m-topo",
            Capacity::Real => "m-topo-real",
        }
    }
}

/// Places `problem` with m-TOPO and returns the device of every node.
///
/// Time `O(|V|)` on top of the precomputed topological order (`O(|V| + |E|)` with it): every
/// node and group is looked at a constant number of times. Memory `O(|V|)`.
///
/// # Errors
/// [`PlaceError::NoDevices`]; [`PlaceError::NodeTooLarge`] when a node or colocation group
/// exceeds every device ([`check_fits`]); [`PlaceError::OutOfMemory`] naming the first node
/// that is left over once the last device is full.
pub fn m_topo(problem: &PlaceProblem, capacity: Capacity) -> Result<Vec<usize>, PlaceError> {
    check_fits(problem)?;
    let groups: Vec<GroupMemory> =
        (0..problem.groups.len()).map(|g| GroupMemory::new(problem, g)).collect();
    let rule = Rule::new(problem, capacity, &groups);
    let devices = problem.devices.count();
    let mut device_of = vec![usize::MAX; problem.len()];
    let mut placed = 0;
    let mut device = 0;
    let mut load = Load::default();
    let mut received = Received::default();
    for &v in &problem.topo_order {
        if device_of[v] != usize::MAX {
            continue;
        }
        let g = problem.group_of[v];
        let copies = |device: usize, device_of: &[usize]| match problem.mode {
            StepMode::ForwardOnly => 0,
            StepMode::Training { .. } | StepMode::TrainingGraph => {
                received.incoming(problem, g, device, device_of)
            }
        };
        while !rule.fits(device, &load, &groups[g], copies(device, &device_of)) {
            device += 1;
            if device == devices {
                return Err(PlaceError::OutOfMemory {
                    algo: capacity.algo(),
                    unplaced: problem.len() - placed,
                    total: problem.len(),
                    first: problem.names[v].clone(),
                });
            }
            load = Load::default();
        }
        load.add(&groups[g], copies(device, &device_of));
        received.receive(problem, g, device, &device_of);
        for &u in &problem.groups[g] {
            device_of[u] = device;
        }
        placed += problem.groups[g].len();
    }
    Ok(device_of)
}

/// What one colocation group weighs under each accounting.
struct GroupMemory {
    need: MemoryNeed,
    /// Baechi's feasibility term: `max(temporary) + sum(persistent)`.
    baechi_check: u128,
    /// What Baechi adds to the device's counter: `sum(temporary + sum(outputs))`.
    baechi_add: u128,
}

impl GroupMemory {
    fn new(problem: &PlaceProblem, g: usize) -> Self {
        let members = &problem.groups[g];
        let memory = |v: &usize| &problem.memory[*v];
        let temp_max = members.iter().map(|v| memory(v).temporary).max().unwrap_or(0);
        let persistent: u128 = members.iter().map(|v| u128::from(memory(v).persistent)).sum();
        Self {
            need: group_need(problem, g),
            baechi_check: u128::from(temp_max) + persistent,
            baechi_add: members.iter().map(|v| u128::from(memory(v).run_bytes())).sum(),
        }
    }
}

/// The device being filled.
#[derive(Default)]
struct Load {
    need: MemoryNeed,
    /// Baechi's `used_memory` counter.
    used: u128,
    occupied: bool,
}

impl Load {
    /// Adds `group` and `copies` bytes of tensors it receives.
    fn add(&mut self, group: &GroupMemory, copies: u64) {
        self.need = self.need.with(group.need);
        self.need.resident = self.need.resident.saturating_add(copies);
        self.used += group.baechi_add;
        self.occupied = true;
    }
}

enum Cap {
    /// Forward only, Baechi's `TopoUniformWithColocation`.
    BaechiUniform(u128),
    /// Forward only, Baechi's `TopoWithColocation`.
    BaechiReal,
    /// Training, uniform cap on the step's memory need.
    StepUniform(u64),
    /// Training, real capacities only.
    StepReal,
}

struct Rule<'a> {
    cap: Cap,
    limits: &'a [u64],
}

impl<'a> Rule<'a> {
    fn new(problem: &'a PlaceProblem, capacity: Capacity, groups: &[GroupMemory]) -> Self {
        let n = problem.devices.count() as u128;
        let cap = match (problem.mode, capacity) {
            (StepMode::ForwardOnly, Capacity::Uniform) => {
                let mem = problem.memory.iter().map(|m| u128::from(m.run_bytes()));
                let (sum, max) = mem.fold((0, 0), |(s, m), x| (s + x, m.max(x)));
                Cap::BaechiUniform(sum / n + max)
            }
            (StepMode::ForwardOnly, Capacity::Real) => Cap::BaechiReal,
            (StepMode::Training { .. } | StepMode::TrainingGraph, Capacity::Uniform) => {
                let resident: u128 =
                    problem.memory.iter().map(|m| u128::from(m.resident_bytes())).sum();
                let run = problem.memory.iter().map(|m| m.run_bytes()).max().unwrap_or(0);
                let group = groups.iter().map(|g| g.need.resident).max().unwrap_or(0);
                let cap = resident / n + u128::from(run) + u128::from(group);
                Cap::StepUniform(u64::try_from(cap).unwrap_or(u64::MAX))
            }
            (StepMode::Training { .. } | StepMode::TrainingGraph, Capacity::Real) => Cap::StepReal,
        };
        Self { cap, limits: &problem.devices.memory }
    }

    /// Whether `group`, receiving `copies` bytes of tensors, fits on `device` beside `load`.
    fn fits(&self, device: usize, load: &Load, group: &GroupMemory, copies: u64) -> bool {
        let limit = self.limits[device];
        let need = load.need.with(group.need).bytes().saturating_add(copies);
        if need > limit {
            return false;
        }
        match self.cap {
            Cap::BaechiUniform(cap) => !load.occupied || load.used + group.baechi_check < cap,
            Cap::BaechiReal => load.used + group.baechi_check <= u128::from(limit),
            // The copies a device receives are not in the cap, so the last device takes
            // whatever fits in its memory.
            Cap::StepUniform(cap) => need <= cap || device + 1 == self.limits.len(),
            Cap::StepReal => true,
        }
    }
}
