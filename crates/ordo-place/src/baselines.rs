//! Baseline placers to compare Baechi's algorithms against: everything on one device, the
//! round-robin expert placement by layer, and compute-balanced contiguous stages.
//!
//! All three keep colocation groups together and respect each device's memory under the step's
//! memory need ([`MemoryNeed`]: resident bytes plus the largest run-time allocation), counting
//! the copies a device receives of tensors produced elsewhere as resident.

use crate::algorithm::{Deadline, MemoryNeed, check_fits, group_need};
use crate::error::PlaceError;
use crate::received::Received;
use ordo_problem::PlaceProblem;

/// Everything on device 0.
///
/// Time `O(|V|)`.
///
/// # Errors
/// [`PlaceError::NoDevices`], [`PlaceError::NodeTooLarge`], or [`PlaceError::OutOfMemory`]
/// naming the first node (in topological order) that no longer fits on device 0.
pub fn single(problem: &PlaceProblem) -> Result<Vec<usize>, PlaceError> {
    check_fits(problem)?;
    let limit = problem.devices.memory[0];
    let mut need = MemoryNeed::default();
    for (placed, &v) in problem.topo_order.iter().enumerate() {
        need = need.with(MemoryNeed::of_node(problem, v));
        if need.bytes() > limit {
            return Err(out_of_memory(problem, "single", placed, v));
        }
    }
    Ok(vec![0; problem.len()])
}

/// The layer number in a node name: the first path component that is all digits and follows
/// a named component, splitting on `/` and `.`. `enc.3`, `/enc.3/LSTM`, `layer2.1.conv1`,
/// `/layer2/layer2.1/conv1/Conv` and `encoder.layer.7.attention` are layers 3, 3, 1, 1 and 7;
/// `fc`, `Mixed_5b` and `L3/op7` have none.
pub fn layer_index(name: &str) -> Option<u64> {
    let mut named = false;
    for part in name.split(['/', '.']).filter(|p| !p.is_empty()) {
        if part.bytes().all(|b| b.is_ascii_digit()) {
            if named {
                return part.parse().ok();
            }
        } else {
            named = true;
        }
    }
    None
}

/// Baechi's GNMT expert placement (TF-NMT's `get_device_str`): layer `i` on device `i mod n`.
///
/// A node's layer is [`layer_index`] of its name; a node without one goes where the node
/// before it in topological order went (device 0 at the start), so embeddings join the first
/// layer and heads the last. When the names give fewer than two distinct layers, the
/// topological order is cut into `n` contiguous chunks of equal node count instead. A
/// colocation group goes where its first node (in topological order) would; when that device is
/// full, to the next one with room, wrapping around.
///
/// Time `O(|V| · n)` in the worst case (`O(|V|)` when devices have room).
///
/// # Errors
/// [`PlaceError::NoDevices`], [`PlaceError::NodeTooLarge`], or [`PlaceError::OutOfMemory`]
/// naming the first node of the first group that fits on no device.
pub fn round_robin(problem: &PlaceProblem) -> Result<Vec<usize>, PlaceError> {
    check_fits(problem)?;
    let n = problem.devices.count();
    let layers: Vec<Option<u64>> = problem.names.iter().map(|name| layer_index(name)).collect();
    let mut distinct: Vec<u64> = layers.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let by_chunks = distinct.len() < 2;
    let mut preferred = vec![0; problem.len()];
    let mut previous = 0;
    for (position, &v) in problem.topo_order.iter().enumerate() {
        preferred[v] = if by_chunks {
            position * n / problem.len()
        } else {
            layers[v].map_or(previous, |i| (i % n as u64) as usize)
        };
        previous = preferred[v];
    }
    let mut loads = vec![MemoryNeed::default(); n];
    let mut device_of = vec![usize::MAX; problem.len()];
    let mut received = Received::default();
    let mut placed = 0;
    for &v in &problem.topo_order {
        if device_of[v] != usize::MAX {
            continue;
        }
        let g = problem.group_of[v];
        let need =
            |d: usize| with_copies(problem, group_need(problem, g), &received, (g, d), &device_of);
        let device = (0..n)
            .map(|k| (preferred[v] + k) % n)
            .find(|&d| loads[d].with(need(d)).bytes() <= problem.devices.memory[d])
            .ok_or_else(|| out_of_memory(problem, "round-robin", placed, v))?;
        loads[device] = loads[device].with(need(device));
        received.receive(problem, g, device, &device_of);
        for &u in &problem.groups[g] {
            device_of[u] = device;
        }
        placed += problem.groups[g].len();
    }
    Ok(device_of)
}

/// Contiguous stages of the topological order, one per device in id order, that minimise the
/// largest stage's compute time subject to every device's memory.
///
/// The units are the colocation groups, in the order their first node appears. For a bound `B`
/// a greedy pass gives each device the longest run of units whose compute stays within `B` and
/// whose memory need fits the device; without tensors crossing stages that pass is optimal for
/// contiguous stages, so a binary search over `B` finds the smallest feasible bottleneck. The
/// copies a stage receives (counted as resident) make memory depend on the split, and the
/// search then returns a feasible bound that may not be the smallest.
///
/// Time `O(|V| + U · log W)` for `U` groups and total compute `W`.
///
/// # Errors
/// [`PlaceError::NoDevices`], [`PlaceError::NodeTooLarge`], or [`PlaceError::OutOfMemory`]
/// when no contiguous split fits in memory, naming the first node left over.
pub fn balanced(problem: &PlaceProblem) -> Result<Vec<usize>, PlaceError> {
    balanced_until(problem, Deadline::new(None))
}

/// [`balanced`], whose search for the smallest bottleneck stops at `deadline` with the best
/// split found so far (every split it keeps fits in memory).
pub(crate) fn balanced_until(
    problem: &PlaceProblem,
    deadline: Deadline,
) -> Result<Vec<usize>, PlaceError> {
    check_fits(problem)?;
    let mut seen = vec![false; problem.groups.len()];
    let units: Vec<usize> = problem
        .topo_order
        .iter()
        .map(|&v| problem.group_of[v])
        .filter(|&g| !std::mem::replace(&mut seen[g], true))
        .collect();
    let weights: Vec<u64> = units
        .iter()
        .map(|&g| problem.groups[g].iter().fold(0u64, |s, &v| s.saturating_add(problem.weights[v])))
        .collect();
    let needs: Vec<MemoryNeed> = units.iter().map(|&g| group_need(problem, g)).collect();
    let total = weights.iter().fold(0u64, |s, &w| s.saturating_add(w));
    let stages = |bound: u64| split(problem, &units, &weights, &needs, bound);
    let mut best = stages(total).map_err(|unit| {
        let first = problem.groups[units[unit]][0];
        let placed = units[..unit].iter().map(|&g| problem.groups[g].len()).sum();
        out_of_memory(problem, "balanced", placed, first)
    })?;
    let n = problem.devices.count() as u64;
    let heaviest = weights.iter().copied().max().unwrap_or(0);
    // `best` always holds the stages for `hi`, the smallest bound known to be feasible.
    let (mut lo, mut hi) = (heaviest.max(total.div_ceil(n)), total);
    while lo < hi && !deadline.is_over() {
        let mid = lo + (hi - lo) / 2;
        match stages(mid) {
            Ok(found) => {
                best = found;
                hi = mid;
            }
            Err(_) => lo = mid + 1,
        }
    }
    let mut device_of = vec![0; problem.len()];
    for (&g, &d) in units.iter().zip(&best) {
        for &v in &problem.groups[g] {
            device_of[v] = d;
        }
    }
    Ok(device_of)
}

/// The greedy pass of [`balanced`]: the device of every unit, or the index of the first unit
/// that fits nowhere.
fn split(
    problem: &PlaceProblem,
    units: &[usize],
    weights: &[u64],
    needs: &[MemoryNeed],
    bound: u64,
) -> Result<Vec<usize>, usize> {
    let limits = &problem.devices.memory;
    // Without a memory limit the copies received cannot matter: not counting them makes the
    // pass several times faster (100,000 nodes: 1.6 s -> 0.1 s for the whole search).
    let unlimited = limits.iter().all(|&limit| limit == u64::MAX);
    let mut device_of = vec![usize::MAX; problem.len()];
    let mut received = Received::default();
    let mut device = 0;
    let mut load = 0u64;
    let mut need = MemoryNeed::default();
    let mut stages = Vec::with_capacity(weights.len());
    for (unit, (&w, &unit_need)) in weights.iter().zip(needs).enumerate() {
        let g = units[unit];
        let with = |d: usize| match unlimited {
            true => unit_need,
            false => with_copies(problem, unit_need, &received, (g, d), &device_of),
        };
        while load.saturating_add(w) > bound || need.with(with(device)).bytes() > limits[device] {
            device += 1;
            if device == limits.len() {
                return Err(unit);
            }
            load = 0;
            need = MemoryNeed::default();
        }
        load += w;
        need = need.with(with(device));
        if !unlimited {
            received.receive(problem, g, device, &device_of);
        }
        for &v in &problem.groups[g] {
            device_of[v] = device;
        }
        stages.push(device);
    }
    Ok(stages)
}

/// `need` of group `g` on `device` with the copies of tensors it would receive there counted
/// as resident ([`Received`]).
fn with_copies(
    problem: &PlaceProblem,
    need: MemoryNeed,
    received: &Received,
    (g, device): (usize, usize),
    device_of: &[usize],
) -> MemoryNeed {
    let copies = received.incoming(problem, g, device, device_of);
    MemoryNeed { resident: need.resident.saturating_add(copies), run: need.run }
}

fn out_of_memory(
    problem: &PlaceProblem,
    algo: &'static str,
    placed: usize,
    first: usize,
) -> PlaceError {
    PlaceError::OutOfMemory {
        algo,
        unplaced: problem.len() - placed,
        total: problem.len(),
        first: problem.names[first].clone(),
    }
}
