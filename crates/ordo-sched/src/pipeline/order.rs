//! The per-device order of a pipeline schedule, found by list-scheduling its operations (the
//! forward or backward work of one micro-batch on one chunk of layers) at their predicted
//! costs, so that every schedule, with contiguous or modulo allocation, yields orders that
//! some execution keeps (they cannot deadlock).

use std::collections::{HashMap, HashSet};

use ordo_ir::Role;

use super::PipelineSchedule;
use super::microbatch::MicroBatched;
use crate::error::SchedError;

/// What an operation computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Forward,
    /// dX and dW of a chunk together (GPipe, 1F1B).
    Backward,
    /// dX of a chunk (fast-forward).
    InputGrad,
    /// dW of a chunk (fast-forward).
    WeightGrad,
}

/// Micro-batches whose dX is done on a device but whose dW is not that may wait there while a
/// new micro-batch starts: fast-forwarding lets a dW lag one micro-batch behind.
const MAX_LAGGING_DW: usize = 1;

/// One operation: `kind` of micro-batch `batch` on chunk `chunk`, its nodes in order.
pub(super) struct Op {
    pub kind: Kind,
    pub batch: usize,
    pub chunk: usize,
    pub device: usize,
    pub nodes: Vec<usize>,
    pub cost: u64,
}

/// Per device its operations in order, when each operation starts (µs), and when each device
/// is free at the end.
type ScheduledOrder = (Vec<Vec<usize>>, Vec<u64>, Vec<u64>);

/// Each device's nodes in the order it runs them, and each node's predicted finish time (µs).
pub(super) struct DeviceOrders {
    /// Per device, its nodes in order.
    pub order: Vec<Vec<usize>>,
    /// Per node, when the list schedule finishes it.
    pub finish_us: Vec<u64>,
}

/// Per device, the nodes of `split` in the order `schedule` runs them; nodes that run once
/// per step (updates) come last on their device. `chunk_of` gives each node's chunk (a run of
/// consecutive units on one device, in pipeline order), `device_of_chunk` its device, `rank`
/// each node's position in build order (the order inside an operation).
pub(super) fn device_orders(
    split: &MicroBatched,
    chunk_of: &[usize],
    device_of_chunk: &[usize],
    schedule: PipelineSchedule,
    rank: &[usize],
) -> Result<DeviceOrders, SchedError> {
    let problem = &split.problem;
    let devices = problem.devices.count();
    let kind_of = |v: usize| match (problem.roles[v], schedule) {
        (Role::Forward, _) => Kind::Forward,
        (_, PipelineSchedule::Gpipe | PipelineSchedule::OneFOneB) => Kind::Backward,
        (Role::Dx, _) => Kind::InputGrad,
        _ => Kind::WeightGrad,
    };
    let mut ops: Vec<Op> = Vec::new();
    let mut op_index: HashMap<(Kind, usize, usize), usize> = HashMap::new();
    let mut op_of = vec![usize::MAX; problem.len()];
    let mut once: Vec<Vec<usize>> = vec![Vec::new(); devices];
    let mut nodes: Vec<usize> = (0..problem.len()).collect();
    nodes.sort_by_key(|&v| (split.micro_batch(v), rank[split.original(v)]));
    for v in nodes {
        let (chunk, device) = (chunk_of[v], device_of_chunk[chunk_of[v]]);
        let Some(batch) = split.micro_batch(v) else {
            once[device].push(v);
            continue;
        };
        let kind = kind_of(v);
        let k = *op_index.entry((kind, batch, chunk)).or_insert_with(|| {
            ops.push(Op { kind, batch, chunk, device, nodes: Vec::new(), cost: 0 });
            ops.len() - 1
        });
        ops[k].nodes.push(v);
        ops[k].cost += problem.weights[v];
        op_of[v] = k;
    }

    // Dependencies between operations, each with the transfer time of the tensors it carries
    // between devices.
    let mut latency: HashMap<(usize, usize), u64> = HashMap::new();
    let mut counted: HashSet<(usize, usize)> = HashSet::new();
    for e in &problem.edges {
        let (a, b) = (op_of[e.source], op_of[e.target]);
        if a == usize::MAX || b == usize::MAX || a == b {
            continue;
        }
        let time = latency.entry((a, b)).or_insert(0);
        if ops[a].device != ops[b].device {
            for &x in &e.tensors {
                if counted.insert((x, b)) {
                    *time += problem.tensors[x].comm_us;
                }
            }
        }
    }
    let mut successors: Vec<Vec<(usize, u64)>> = vec![Vec::new(); ops.len()];
    let mut waiting = vec![0usize; ops.len()];
    for (&(a, b), &time) in &latency {
        successors[a].push((b, time));
        waiting[b] += 1;
    }

    let batches = split.scheduled_micro_batches();
    // Interleaved 1F1B takes Megatron's order where it applies; the rest is list-scheduled.
    let fixed = match schedule {
        PipelineSchedule::OneFOneB => {
            super::interleaved::megatron_order(&ops, device_of_chunk, devices, batches)
        }
        _ => None,
    };
    let (sequence, start_at, free_at) = match fixed {
        Some(order) => {
            let (start_at, free_at) =
                super::interleaved::run_in_order(&ops, &order, &successors, waiting)?;
            (order, start_at, free_at)
        }
        None => {
            list_schedule(&ops, &successors, waiting, device_of_chunk, schedule, devices, batches)?
        }
    };
    let mut finish_us = vec![0u64; problem.len()];
    let mut order = Vec::with_capacity(devices);
    for d in 0..devices {
        let mut device_order = Vec::new();
        for &k in &sequence[d] {
            let mut clock = start_at[k];
            for &v in &ops[k].nodes {
                clock += problem.weights[v];
                finish_us[v] = clock;
                device_order.push(v);
            }
        }
        let mut clock = free_at[d];
        for &v in &once[d] {
            clock += problem.weights[v];
            finish_us[v] = clock;
            device_order.push(v);
        }
        order.push(device_order);
    }
    Ok(DeviceOrders { order, finish_us })
}

/// Each device's operations in the order list scheduling runs them at their predicted costs
/// (`schedule`'s caps on micro-batches in flight and its priorities), when each starts, and
/// when each device is free at the end.
///
/// # Errors
/// [`SchedError::Pipeline`] when the operations depend on each other in a circle.
fn list_schedule(
    ops: &[Op],
    successors: &[Vec<(usize, u64)>],
    mut waiting: Vec<usize>,
    device_of_chunk: &[usize],
    schedule: PipelineSchedule,
    devices: usize,
    batches: usize,
) -> Result<ScheduledOrder, SchedError> {
    let chunks = device_of_chunk.len();
    let zero_bubble = matches!(schedule, PipelineSchedule::ZbH1 | PipelineSchedule::ZbH2);
    // Micro-batches a device may have in flight (from their first operation on it to their
    // last): what keeps it busy until the first backward comes back, as 1F1B's warm-up.
    let mut first_chunk = vec![usize::MAX; devices];
    let mut chunk_count = vec![0usize; devices];
    for (c, &d) in device_of_chunk.iter().enumerate() {
        first_chunk[d] = first_chunk[d].min(c);
        chunk_count[d] += 1;
    }
    let one_f_one_b: Vec<usize> = (0..devices)
        .map(|d| (chunks.saturating_sub(first_chunk[d])).div_ceil(chunk_count[d].max(1)).max(1))
        .collect();
    // Zero Bubble: ZB-H2 warms up with `2c - 1` micro-batches where 1F1B has `c`. Either lets
    // a device keep micro-batches alive (F done, W not) up to the pipeline's 1F1B peak (the
    // first stage's count), or ZB-H2's, so the Ws can wait for idle time.
    let warm_up = |c: usize| if schedule == PipelineSchedule::ZbH2 { 2 * c - 1 } else { c };
    let cap: Vec<usize> = one_f_one_b.iter().map(|&c| warm_up(c)).collect();
    let alive_cap = warm_up(one_f_one_b.iter().copied().max().unwrap_or(1));
    // Per device and micro-batch: operations left other than dW, and dW operations left.
    let mut left = vec![vec![0usize; batches]; devices];
    let mut dw_left = vec![vec![0usize; batches]; devices];
    let mut forwards_left = vec![0usize; devices];
    for op in ops {
        match op.kind {
            Kind::WeightGrad => dw_left[op.device][op.batch] += 1,
            _ => left[op.device][op.batch] += 1,
        }
        if op.kind == Kind::Forward {
            forwards_left[op.device] += 1;
        }
    }
    let mut started = vec![vec![false; batches]; devices];
    // Per device, kept as operations run: micro-batches in flight (started, with operations
    // other than dW left) and lagging (only dW left), which each step would otherwise count
    // over every micro-batch.
    let mut in_flight = vec![0usize; devices];
    let mut lagging = vec![0usize; devices];

    let mut ready_at = vec![0u64; ops.len()];
    let mut ready: Vec<Vec<usize>> = vec![Vec::new(); devices];
    for (k, op) in ops.iter().enumerate() {
        if waiting[k] == 0 {
            ready[op.device].push(k);
        }
    }
    let mut free_at = vec![0u64; devices];
    let mut sequence: Vec<Vec<usize>> = vec![Vec::new(); devices];
    let mut start_at = vec![0u64; ops.len()];
    let (mut now, mut done, mut relaxed) = (0u64, 0usize, false);
    while done < ops.len() {
        let mut progress = false;
        for d in 0..devices {
            if free_at[d] > now {
                continue;
            }
            let (in_flight_d, lagging_d) = (in_flight[d], lagging[d]);
            // Micro-batches whose activations a W still reads.
            let alive = in_flight_d + lagging_d;
            let allowed = |k: usize| {
                let op = &ops[k];
                ready_at[k] <= now
                    && match (schedule, op.kind) {
                        (PipelineSchedule::Gpipe, Kind::Forward) => true,
                        (PipelineSchedule::Gpipe, _) => forwards_left[d] == 0,
                        (_, Kind::Forward) if zero_bubble => {
                            started[d][op.batch]
                                || in_flight_d < cap[d] && alive < alive_cap
                                || relaxed
                        }
                        (_, Kind::Forward) => {
                            started[d][op.batch]
                                || in_flight_d < cap[d] && lagging_d <= MAX_LAGGING_DW
                                || relaxed
                        }
                        _ => true,
                    }
            };
            // Lower is more urgent: the schedule's kind priority, then the oldest micro-batch,
            // forwards the shallowest chunk first and backwards the deepest.
            let priority = |k: usize| {
                let op = &ops[k];
                let kind = match (schedule, op.kind) {
                    (PipelineSchedule::Gpipe, Kind::Forward) => 0,
                    (PipelineSchedule::Gpipe, _) => 1,
                    (_, Kind::Backward | Kind::InputGrad) => 0,
                    (_, Kind::Forward) => 1,
                    (_, Kind::WeightGrad) => 2,
                };
                let depth = if op.kind == Kind::Forward { op.chunk } else { chunks - op.chunk };
                (kind, op.batch, depth)
            };
            let Some(&k) = ready[d].iter().filter(|&&k| allowed(k)).min_by_key(|&&k| priority(k))
            else {
                continue;
            };
            ready[d].retain(|&r| r != k);
            let op = &ops[k];
            let finish = now + op.cost;
            free_at[d] = finish;
            let m = op.batch;
            let status = |started: bool, left: usize, dw_left: usize| {
                (usize::from(started && left > 0), usize::from(left == 0 && dw_left > 0))
            };
            let before = status(started[d][m], left[d][m], dw_left[d][m]);
            started[d][m] = true;
            match op.kind {
                Kind::WeightGrad => dw_left[d][m] -= 1,
                _ => left[d][m] -= 1,
            }
            let after = status(started[d][m], left[d][m], dw_left[d][m]);
            in_flight[d] = in_flight[d] + after.0 - before.0;
            lagging[d] = lagging[d] + after.1 - before.1;
            if op.kind == Kind::Forward {
                forwards_left[d] -= 1;
            }
            sequence[d].push(k);
            start_at[k] = now;
            for &(b, time) in &successors[k] {
                ready_at[b] = ready_at[b].max(finish + time);
                waiting[b] -= 1;
                if waiting[b] == 0 {
                    ready[ops[b].device].push(b);
                }
            }
            done += 1;
            progress = true;
            relaxed = false;
        }
        if progress {
            continue;
        }
        let pending = ready.iter().flatten().map(|&k| ready_at[k]).chain(free_at.iter().copied());
        match pending.filter(|&t| t > now).min() {
            Some(t) => now = t,
            None if !relaxed => relaxed = true,
            None => {
                return Err(SchedError::Pipeline(
                    "the pipeline's operations depend on each other in a circle".into(),
                ));
            }
        }
    }
    Ok((sequence, start_at, free_at))
}
