//! Data-parallel training: every device runs a replica of the training step on its share of the
//! batch, and the parameter gradients are summed across devices by all-reduces before the
//! updates, as ParallelExecutor and PyTorch's DDP do; with reverse first-k scheduling from
//! out-of-order backprop.

use std::collections::HashMap;

use ordo_cost::CommModel;
use ordo_ir::Role;
use ordo_problem::{PlaceProblem, Placement};

use crate::build::build_plan_on_streams;
use crate::error::SchedError;
use crate::one_device::{
    OneDeviceSchedule, deferral, deferred_nodes, deferred_order, layers_with_weights,
};
use crate::plan::{
    BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};
use crate::steady::unroll;
use crate::validate::validate;

/// How a data-parallel step runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataParallel {
    /// Number of devices, each running one replica.
    pub replicas: usize,
    /// The link between replicas that an all-reduce's ring uses (latency and bandwidth).
    pub network: CommModel,
    /// Gradients are all-reduced in buckets of at least this many bytes (the last bucket of a
    /// group may be smaller); 0 all-reduces each gradient on its own.
    pub bucket_bytes: u64,
    /// Reverse first-k: the weight-gradient work of the first `k` layers with weights (in
    /// forward order) runs after the whole dX chain, in forward order, and their updates are
    /// applied just before the layer's forward pass in the next step, so their all-reduces
    /// overlap the next step instead of ending this one. 0 is the default order.
    pub first_k: usize,
    /// Where the replica runs its weight-gradient work: [`OneDeviceSchedule::InOrder`] on the
    /// compute stream, [`OneDeviceSchedule::Ooo`] on the sub-stream.
    pub schedule: OneDeviceSchedule,
}

/// The plan of `steps` consecutive data-parallel training steps of `problem` (the training
/// graph of one replica, costed for one device's share of the batch; device 0's memory limit
/// applies to every replica).
///
/// * Each device runs the same order of the unrolled steps ([`unroll`]): the builder's order
///   for the work that is not deferred; then the deferred layers' weight-gradient work, in
///   forward order; and each deferred update just before its layer's forward node in the next
///   step (after the last step, at the end). Streams, events and buffers per replica are those
///   of [`build_plan_on_streams`].
/// * Each device gets a `Collective` stream. The parameter gradients (the tensors the updates
///   read) are all-reduced in the order in which the replica produces them, in buckets of
///   [`DataParallel::bucket_bytes`] that never mix steps or deferred with other gradients. An
///   all-reduce is one task on every device's collective stream, in the same position on each;
///   it waits for its gradients on every device, reduces them in place (it is one of their
///   readers), and every other reader of those gradients (the updates) waits for it. Its
///   duration is the ring all-reduce time of one device's bytes over
///   [`DataParallel::network`]. With one replica there is nothing to reduce and no collective.
///
/// Task names repeat across devices: each device runs the same nodes.
///
/// # Errors
/// [`SchedError::Schedule`] for zero replicas, more deferred layers than layers with
/// weights, or a problem that is not a training graph; those of [`unroll`] and
/// [`build_plan_on_streams`].
pub fn data_parallel_plan(
    problem: &PlaceProblem,
    config: &DataParallel,
    steps: usize,
) -> Result<Plan, SchedError> {
    let fail = |message: String| Err(SchedError::Schedule(message));
    if config.replicas == 0 {
        return fail("data parallelism needs at least one replica".into());
    }
    if problem.devices.count() == 0 {
        return fail("no device to schedule on".into());
    }
    if !problem.roles.contains(&Role::Update) {
        return fail("data parallelism needs a training graph, with update nodes".into());
    }
    let layers = layers_with_weights(problem);
    if config.first_k > layers.len() {
        return fail(format!(
            "reverse first-k defers {} layers, but the model has {} layers with weights",
            config.first_k,
            layers.len()
        ));
    }
    let moved = deferred_nodes(problem, &deferral(problem, &layers[..config.first_k]));
    let mut one = problem.clone();
    one.devices.memory.truncate(1);
    let unrolled = unroll(&one, steps)?;
    let order = replica_order(&one, &moved, steps);
    let placement = Placement {
        algo: format!("data parallel x{}", config.replicas),
        device_of: vec![0; unrolled.len()],
        order: vec![order.clone()],
        makespan_us: 0,
        peak_memory_bytes: vec![0],
        transfers: None,
        placement_seconds: 0.0,
    };
    let on_sub_stream: Vec<bool> = match config.schedule {
        OneDeviceSchedule::InOrder => vec![false; unrolled.len()],
        OneDeviceSchedule::Ooo => {
            unrolled.roles.iter().map(|&r| matches!(r, Role::Dw | Role::Update)).collect()
        }
    };
    let replica = build_plan_on_streams(&unrolled, &placement, &on_sub_stream)?;
    let mut plan = replicate(&replica, config.replicas);
    if config.replicas > 1 {
        let n = problem.len();
        let gradients = gradients_in_order(&unrolled, &replica, &order, n, |v| moved[v])?;
        add_all_reduces(&mut plan, &replica, &gradients, config);
    }
    validate(&plan)?;
    Ok(plan)
}

/// One replica's order of the unrolled steps (see [`data_parallel_plan`]), the nodes
/// `moved` marks ([`deferred_nodes`]) run late.
fn replica_order(problem: &PlaceProblem, moved: &[bool], steps: usize) -> Vec<usize> {
    let n = problem.len();
    let late = deferred_order(problem, moved);
    let (late_grads, late_updates): (Vec<usize>, Vec<usize>) =
        late.into_iter().partition(|&v| problem.roles[v] != Role::Update);
    let mut updates_before: HashMap<usize, Vec<usize>> = HashMap::new();
    for &u in &late_updates {
        if let Some(layer) = problem.layer_of[u] {
            updates_before.entry(layer).or_default().push(u);
        }
    }
    let mut order = Vec::with_capacity(steps * n);
    for s in 0..steps {
        for v in (0..n).filter(|&v| !moved[v]) {
            if s > 0
                && let Some(updates) = updates_before.get(&v)
            {
                order.extend(updates.iter().map(|&u| (s - 1) * n + u));
            }
            order.push(s * n + v);
        }
        order.extend(late_grads.iter().map(|&v| s * n + v));
    }
    order.extend(late_updates.iter().map(|&u| (steps - 1) * n + u));
    order
}

/// A parameter gradient of the replica plan: its buffer, producing task and step, and whether
/// it is deferred.
#[derive(Clone, Copy, Debug)]
struct Gradient {
    buffer: BufferId,
    producer: TaskId,
    step: usize,
    late: bool,
}

/// The gradients the updates of `unrolled` (steps of `n` nodes) read, in the order the replica
/// produces them (`order`), tensors of one node in tensor order; `late(v)` tells whether node
/// `v` of a step is deferred work.
fn gradients_in_order(
    unrolled: &PlaceProblem,
    replica: &Plan,
    order: &[usize],
    n: usize,
    late: impl Fn(usize) -> bool,
) -> Result<Vec<Gradient>, SchedError> {
    let mut position = vec![0usize; unrolled.len()];
    for (i, &v) in order.iter().enumerate() {
        position[v] = i;
    }
    let buffer_of: HashMap<&str, BufferId> = replica
        .buffers
        .iter()
        .enumerate()
        .map(|(b, buffer)| (buffer.name.as_str(), BufferId(b as u32)))
        .collect();
    let mut keyed = Vec::new();
    for u in (0..unrolled.len()).filter(|&u| unrolled.roles[u] == Role::Update) {
        for &e in &unrolled.in_edges[u] {
            for &x in &unrolled.edges[e].tensors {
                let tensor = &unrolled.tensors[x];
                let Some(&buffer) = buffer_of.get(tensor.name.as_str()) else {
                    return Err(SchedError::Placement(format!(
                        "gradient `{}` of update `{}` has no buffer",
                        tensor.name, unrolled.names[u]
                    )));
                };
                keyed.push(((position[tensor.producer], x), buffer, tensor.producer));
            }
        }
    }
    keyed.sort_unstable_by_key(|k| k.0);
    keyed.dedup_by_key(|k| k.0);
    Ok(keyed
        .into_iter()
        .map(|(_, buffer, producer)| Gradient {
            buffer,
            producer: TaskId(producer as u32),
            step: producer / n,
            late: late(producer % n),
        })
        .collect())
}

/// `replica` (a one-device plan) run on each of `replicas` devices.
fn replicate(replica: &Plan, replicas: usize) -> Plan {
    let (streams, tasks, events, buffers) = (
        replica.streams.len() as u32,
        replica.tasks.len() as u32,
        replica.events.len() as u32,
        replica.buffers.len() as u32,
    );
    let mut plan = Plan {
        format: Plan::FORMAT.to_string(),
        devices: replicas,
        persistent_bytes: vec![replica.persistent_bytes[0]; replicas],
        streams: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
        buffers: Vec::new(),
    };
    for r in 0..replicas as u32 {
        let task = |t: TaskId| TaskId(t.0 + r * tasks);
        plan.streams.extend(replica.streams.iter().map(|s| Stream {
            device: r as usize,
            kind: s.kind,
            tasks: s.tasks.iter().map(|&t| task(t)).collect(),
        }));
        plan.tasks.extend(replica.tasks.iter().map(|t| Task {
            streams: t.streams.iter().map(|s| StreamId(s.0 + r * streams)).collect(),
            waits: t.waits.iter().map(|e| EventId(e.0 + r * events)).collect(),
            kind: match &t.kind {
                TaskKind::Transfer { buffer, from, to } => TaskKind::Transfer {
                    buffer: BufferId(buffer.0 + r * buffers),
                    from: *from,
                    to: *to,
                },
                kind => kind.clone(),
            },
            ..t.clone()
        }));
        plan.events.extend(replica.events.iter().map(|e| Event { after: task(e.after) }));
        plan.buffers.extend(replica.buffers.iter().map(|b| crate::plan::Buffer {
            device: r as usize,
            producer: task(b.producer),
            readers: b.readers.iter().map(|&t| task(t)).collect(),
            ..b.clone()
        }));
    }
    plan
}

/// Adds the collective streams and the all-reduces of `gradients` (ids in `replica`) to
/// `plan`, the replicated `replica`.
fn add_all_reduces(plan: &mut Plan, replica: &Plan, gradients: &[Gradient], config: &DataParallel) {
    let replicas = config.replicas as u32;
    let (tasks, buffers) = (replica.tasks.len() as u32, replica.buffers.len() as u32);
    let mut event_after: HashMap<TaskId, EventId> =
        plan.events.iter().enumerate().map(|(e, ev)| (ev.after, EventId(e as u32))).collect();
    let mut event = |plan: &mut Plan, after: TaskId| {
        *event_after.entry(after).or_insert_with(|| {
            plan.events.push(Event { after });
            EventId(plan.events.len() as u32 - 1)
        })
    };
    let first_stream = plan.streams.len() as u32;
    for r in 0..replicas {
        plan.streams.push(Stream {
            device: r as usize,
            kind: StreamKind::Collective,
            tasks: Vec::new(),
        });
    }
    for bucket in buckets(replica, gradients, config.bucket_bytes) {
        let id = TaskId(plan.tasks.len() as u32);
        let bytes: u64 = bucket.iter().map(|g| replica.buffers[g.buffer.0 as usize].bytes).sum();
        let mut waits = Vec::new();
        let mut reduced = Vec::new();
        for r in 0..replicas {
            for g in &bucket {
                waits.push(event(plan, TaskId(g.producer.0 + r * tasks)));
                reduced.push(BufferId(g.buffer.0 + r * buffers));
            }
        }
        waits.sort_unstable();
        waits.dedup();
        let first = &replica.buffers[bucket[0].buffer.0 as usize].name;
        let name = match bucket.len() {
            1 => format!("all-reduce:{first}"),
            more => format!("all-reduce:{first}+{}", more - 1),
        };
        let done = event(plan, id);
        for &b in &reduced {
            let buffer = &mut plan.buffers[b.0 as usize];
            for &reader in &buffer.readers {
                let waiting = &mut plan.tasks[reader.0 as usize].waits;
                if !waiting.contains(&done) {
                    waiting.push(done);
                }
            }
            buffer.readers.push(id);
            buffer.readers.sort_unstable();
        }
        for r in 0..replicas {
            plan.streams[(first_stream + r) as usize].tasks.push(id);
        }
        plan.tasks.push(Task {
            name,
            kind: TaskKind::AllReduce { buffers: reduced },
            streams: (0..replicas).map(|r| StreamId(first_stream + r)).collect(),
            waits,
            duration_us: config.network.ring_all_reduce_us(config.replicas, bytes),
            workspace_bytes: 0,
            occupancy: 1.0,
        });
    }
}

/// `gradients` cut into buckets of at least `bucket_bytes` (0: one each), never mixing steps
/// or deferred with other gradients.
fn buckets(replica: &Plan, gradients: &[Gradient], bucket_bytes: u64) -> Vec<Vec<Gradient>> {
    let mut out: Vec<Vec<Gradient>> = Vec::new();
    let mut filled = 0u64;
    for &g in gradients {
        let joins = out.last().is_some_and(|last| {
            let head = last[0];
            head.step == g.step && head.late == g.late && filled < bucket_bytes
        });
        if !joins {
            out.push(Vec::new());
            filled = 0;
        }
        filled += replica.buffers[g.buffer.0 as usize].bytes;
        out.last_mut().expect("pushed above").push(g);
    }
    out
}
