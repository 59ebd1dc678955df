//! A start for the search on chain-like graphs under tight memory: the topological order cut
//! into contiguous runs that each fit a device, at the least total transfer time across the
//! cuts (the dynamic program of the memory bound), the runs spread over the devices.

use crate::algorithm::MemoryNeed;
use crate::bound::cheapest_runs;
use crate::sim::simulate;
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

use super::search::fits;

/// Shares of a device's memory the runs may fill, tried in turn: transfers received and the
/// order of the simulated step need room beyond the resident bytes.
const FILL: [f64; 6] = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5];

/// The placement, or `None` when the graph fits one device, or no fill gives runs that fit.
/// Two orders are cut, and the faster placement kept: Baechi's topological order, and the
/// order by latest start (a branch that joins late, such as a residual block's downsampling
/// path, comes just before its join, so a cut inside the block crosses the main path and the
/// block's input rather than the wide output of the side branch).
pub(super) fn memory_cuts(problem: &PlaceProblem) -> Vec<Placement> {
    let mut by_latest_start = problem.topo_order.clone();
    let tail = crate::bound::tails(problem);
    by_latest_start.sort_by_key(|&v| (std::cmp::Reverse(tail[v]), problem.topo_rank[v]));
    [&problem.topo_order, &by_latest_start]
        .into_iter()
        .filter_map(|order| cut_order(problem, order))
        .collect()
}

/// [`memory_cuts`] of one topological order.
fn cut_order(problem: &PlaceProblem, order: &[usize]) -> Option<Placement> {
    let n = order.len();
    let capacity = problem.devices.memory.iter().copied().min()?;
    let needs: Vec<MemoryNeed> = order.iter().map(|&v| MemoryNeed::of_node(problem, v)).collect();
    let bytes: Vec<u64> = needs.iter().map(|need| need.resident).collect();
    let run = needs.iter().map(|need| need.run).max().unwrap_or(0);
    if bytes.iter().sum::<u64>().saturating_add(run) <= capacity {
        return None;
    }
    // delays[i]: the transfers across the boundary after position i of the order, each tensor
    // once (from its producer to its last consumer).
    let mut position = vec![0; n];
    for (i, &v) in order.iter().enumerate() {
        position[v] = i;
    }
    let mut last_reader = vec![0; problem.tensors.len()];
    for edge in &problem.edges {
        for &t in &edge.tensors {
            last_reader[t] = last_reader[t].max(position[edge.target]);
        }
    }
    let mut change = vec![0i128; n + 1];
    for (t, tensor) in problem.tensors.iter().enumerate() {
        let from = position[tensor.producer];
        if last_reader[t] > from {
            change[from] += i128::from(tensor.comm_us);
            change[last_reader[t]] -= i128::from(tensor.comm_us);
        }
    }
    let mut delays = Vec::with_capacity(n.saturating_sub(1));
    let mut across = 0i128;
    for &c in &change[..n.saturating_sub(1)] {
        across += c;
        delays.push(u64::try_from(across).unwrap_or(0));
    }
    FILL.iter().find_map(|&fill| {
        let room = ((capacity as f64 * fill) as u64).checked_sub(run)?;
        let (_, starts) = cheapest_runs(&bytes, &delays, room)?;
        let device_of = spread(problem, order, &bytes, &starts, room)?;
        let schedule = simulate(problem, &device_of);
        fits(problem, &schedule.peak_memory_bytes)
            .then(|| schedule.into_placement("", device_of, 0.0))
    })
}

/// Runs (first positions `starts` of `order`) on devices: each on the least filled device
/// other than the previous run's that has room, then every colocation group where its first
/// node went. `None` when a run fits nowhere.
fn spread(
    problem: &PlaceProblem,
    order: &[usize],
    bytes: &[u64],
    starts: &[usize],
    room: u64,
) -> Option<Vec<usize>> {
    let m = problem.devices.count();
    let mut used = vec![0u64; m];
    let mut device_of = vec![0; problem.len()];
    let mut previous = usize::MAX;
    for (r, &start) in starts.iter().enumerate() {
        let end = starts.get(r + 1).copied().unwrap_or(bytes.len());
        let size: u64 = bytes[start..end].iter().sum();
        let device = (0..m)
            .filter(|&d| d != previous && used[d] + size <= room)
            .min_by_key(|&d| (used[d], d))?;
        used[device] += size;
        for &v in &order[start..end] {
            device_of[v] = device;
        }
        previous = device;
    }
    let mut group_device = vec![usize::MAX; problem.groups.len()];
    for &v in order {
        let g = problem.group_of[v];
        if group_device[g] == usize::MAX {
            group_device[g] = device_of[v];
        }
        device_of[v] = group_device[g];
    }
    Some(device_of)
}
