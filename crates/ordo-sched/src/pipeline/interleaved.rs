//! Interleaved 1F1B in Megatron's order (Narayanan et al., SC 2021; PyTorch's
//! `ScheduleInterleaved1F1B`): under modulo allocation a device runs several chunks, and the
//! order in which it takes their forwards and backwards decides how long its neighbours wait.
//! List scheduling with 1F1B's priorities (backward first) ran a device's backwards back to
//! back while the next device waited for a forward: 11% slower on PyTorch's runtime than
//! this order, measured on the same stages. Megatron's order is a formula, so it is built
//! as one and then timed.

use std::collections::HashMap;

use super::order::{Kind, Op};
use crate::error::SchedError;

/// Each device's operations in Megatron's interleaved 1F1B order (none on the devices past the
/// pipeline's `S` stages), or `None` where it does not apply: every stage's device must run
/// the same number `v > 1` of chunks, chunk `c` on device `c % S`, and the micro-batches come
/// in whole rounds of `S`.
///
/// On device `r` the `k`-th forward is micro-batch `(k / Sv) S + k % S` on its local chunk
/// `(k / S) % v`; the `k`-th backward the same micro-batch on the local chunk counted from
/// the last. The device runs `min(2 (S - r - 1) + (v - 1) S, Mv)` forwards to warm up, then a
/// forward and a backward in turn, then the backwards left.
pub(super) fn megatron_order(
    ops: &[Op],
    device_of_chunk: &[usize],
    devices: usize,
    batches: usize,
) -> Option<Vec<Vec<usize>>> {
    // The pipeline's stages: the target may have more devices than it uses.
    let stages = device_of_chunk.iter().max().map_or(0, |&d| d + 1);
    let chunks = device_of_chunk.len();
    if stages < 2
        || stages > devices
        || chunks <= stages
        || !chunks.is_multiple_of(stages)
        || !batches.is_multiple_of(stages)
    {
        return None;
    }
    if device_of_chunk.iter().enumerate().any(|(c, &d)| d != c % stages) {
        return None;
    }
    let v = chunks / stages;
    // Every operation must be a forward or a whole backward (1F1B's kinds).
    if ops.iter().any(|op| !matches!(op.kind, Kind::Forward | Kind::Backward)) {
        return None;
    }
    let index: HashMap<(Kind, usize, usize), usize> =
        ops.iter().enumerate().map(|(k, op)| ((op.kind, op.batch, op.chunk), k)).collect();
    let total = batches * v;
    let mut orders = vec![Vec::new(); devices];
    for (r, orders) in orders.iter_mut().enumerate().take(stages) {
        let nth = |k: usize, kind: Kind| {
            let local = (k / stages) % v;
            let local = if kind == Kind::Forward { local } else { v - 1 - local };
            let batch = k / (stages * v) * stages + k % stages;
            index.get(&(kind, batch, local * stages + r)).copied()
        };
        let warm_up = (2 * (stages - r - 1) + (v - 1) * stages).min(total);
        let mut order = Vec::with_capacity(2 * total);
        for k in 0..warm_up {
            order.push(nth(k, Kind::Forward));
        }
        for k in 0..total - warm_up {
            order.push(nth(warm_up + k, Kind::Forward));
            order.push(nth(k, Kind::Backward));
        }
        for k in total - warm_up..total {
            order.push(nth(k, Kind::Backward));
        }
        // A chunk that has no operation of some kind (a micro-batch without a backward on
        // it) leaves the formula: list scheduling handles it.
        *orders = order.into_iter().collect::<Option<Vec<usize>>>()?;
    }
    let listed: usize = orders.iter().map(Vec::len).sum();
    (listed == ops.len()).then_some(orders)
}

/// When each operation starts and when each device is free at the end, running each device's
/// operations in the `order` given, each as soon as its device is free and its inputs have
/// arrived (`successors`: each operation's dependents with the transfer time between them;
/// `waiting`: each operation's count of predecessors).
///
/// # Errors
/// [`SchedError::Pipeline`] when the orders wait on each other in a circle.
pub(super) fn run_in_order(
    ops: &[Op],
    order: &[Vec<usize>],
    successors: &[Vec<(usize, u64)>],
    mut waiting: Vec<usize>,
) -> Result<(Vec<u64>, Vec<u64>), SchedError> {
    let mut start_at = vec![0u64; ops.len()];
    let mut ready_at = vec![0u64; ops.len()];
    let mut free_at = vec![0u64; order.len()];
    let mut next = vec![0usize; order.len()];
    let mut done = 0;
    while done < ops.len() {
        let mut progress = false;
        for (d, sequence) in order.iter().enumerate() {
            while let Some(&k) = sequence.get(next[d]).filter(|&&k| waiting[k] == 0) {
                let start = free_at[d].max(ready_at[k]);
                start_at[k] = start;
                free_at[d] = start + ops[k].cost;
                for &(b, time) in &successors[k] {
                    ready_at[b] = ready_at[b].max(free_at[d] + time);
                    waiting[b] -= 1;
                }
                next[d] += 1;
                done += 1;
                progress = true;
            }
        }
        if !progress {
            return Err(SchedError::Pipeline(
                "the interleaved 1F1B order waits on itself in a circle".into(),
            ));
        }
    }
    Ok((start_at, free_at))
}
