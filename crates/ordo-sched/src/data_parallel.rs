//! Data-parallel training: every device runs a replica of the training step on its share of the
//! batch, and the parameter gradients are summed across devices by all-reduces before the
//! updates, as ParallelExecutor and PyTorch's DDP do; with reverse first-k scheduling from
//! out-of-order backprop.

use std::collections::HashMap;

use ordo_cost::Collectives;
use ordo_ir::Role;
use ordo_problem::{PlaceProblem, Placement};

use crate::build::assemble_plan_on_streams;
use crate::collectives::{AllReduce, AllReduces, Gradient, bucket_name, buckets, gradients_by};
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
    /// The links between replicas and the all-reduce algorithm: one node's link for a ring
    /// (`CommModel::into`), or a cluster's nodes ([`ordo_cost::Cluster::collectives`]).
    pub network: Collectives,
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
///   of [`crate::build_plan_on_streams`].
/// * Each device gets a `Collective` stream. The parameter gradients (the tensors the updates
///   read) are all-reduced in the order in which the replica produces them, in buckets of
///   [`DataParallel::bucket_bytes`] that never mix steps or deferred with other gradients. An
///   all-reduce is one task on every device's collective stream, in the same position on each;
///   it waits for its gradients on every device, reduces them in place (it is one of their
///   readers), and every other reader of those gradients (the updates) waits for it. Its
///   duration is the all-reduce time of one device's bytes over [`DataParallel::network`]
///   ([`Collectives::all_reduce_us`]). With one replica there is nothing to reduce and no collective.
///
/// Task names repeat across devices: each device runs the same nodes.
///
/// # Errors
/// [`SchedError::Schedule`] for zero replicas, more deferred layers than layers with
/// weights, or a problem that is not a training graph; those of [`unroll`] and
/// [`crate::build_plan_on_streams`].
pub fn data_parallel_plan(
    problem: &PlaceProblem,
    config: &DataParallel,
    steps: usize,
) -> Result<Plan, SchedError> {
    plan_on_devices(problem, config, steps, config.replicas)
}

/// [`data_parallel_plan`] by symmetry: one replica's plan, on device 0, with its collective
/// stream, each all-reduce lasting what it lasts among `config.replicas` replicas. Every
/// replica runs the same tasks at the same costs, so every replica's gradients are ready at
/// the same moment and each all-reduce starts when this replica's are: the simulated step is
/// the materialised plan's, while its size does not grow with the replicas. For simulation;
/// a runtime needs every replica's tasks ([`data_parallel_plan`]).
///
/// # Errors
/// As [`data_parallel_plan`].
pub fn data_parallel_replica_plan(
    problem: &PlaceProblem,
    config: &DataParallel,
    steps: usize,
) -> Result<Plan, SchedError> {
    plan_on_devices(problem, config, steps, 1)
}

/// [`data_parallel_plan`] with `devices` of the replicas materialised (all of them, or one).
fn plan_on_devices(
    problem: &PlaceProblem,
    config: &DataParallel,
    steps: usize,
    devices: usize,
) -> Result<Plan, SchedError> {
    let fail = |message: String| Err(SchedError::Schedule(message));
    if config.replicas == 0 {
        return fail("data parallelism needs at least one replica".into());
    }
    if problem.devices.count() == 0 {
        return fail("no device to schedule on".into());
    }
    let moved = moved_nodes(problem, config)?;
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
    Plan::check_size(unrolled.len(), devices, &format!("{devices} replicas"))?;
    let (replica, buffer_of) = assemble_plan_on_streams(&unrolled, &placement, &on_sub_stream)?;
    let mut plan = replicate(&replica, devices);
    if config.replicas > 1 {
        let n = problem.len();
        let gradients = gradients_in_order(&unrolled, &order, n, |v| moved[v]);
        add_all_reduces(&mut plan, (&replica, &buffer_of, devices), &unrolled, &gradients, config);
    }
    validate(&plan)?;
    Ok(plan)
}

/// The nodes of one step that reverse first-k with `config.first_k` moves ([`deferred_nodes`]).
fn moved_nodes(problem: &PlaceProblem, config: &DataParallel) -> Result<Vec<bool>, SchedError> {
    if !problem.roles.contains(&Role::Update) {
        return Err(SchedError::Schedule(
            "data parallelism needs a training graph, with update nodes".into(),
        ));
    }
    let layers = layers_with_weights(problem);
    if config.first_k > layers.len() {
        return Err(SchedError::Schedule(format!(
            "reverse first-k defers {} layers, but the model has {} layers with weights",
            config.first_k,
            layers.len()
        )));
    }
    Ok(deferred_nodes(problem, &deferral(problem, &layers[..config.first_k])))
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

/// The gradients the updates of `unrolled` (steps of `n` nodes) read, in the order the replica
/// produces them (`order`), tensors of one node in tensor order; `late(v)` tells whether node
/// `v` of a step is deferred work.
fn gradients_in_order(
    unrolled: &PlaceProblem,
    order: &[usize],
    n: usize,
    late: impl Fn(usize) -> bool,
) -> Vec<Gradient> {
    let mut position = vec![0usize; unrolled.len()];
    for (i, &v) in order.iter().enumerate() {
        position[v] = i;
    }
    gradients_by(
        unrolled,
        |producer| position[producer],
        |x| {
            let tensor = &unrolled.tensors[x];
            Gradient {
                tensor: x,
                producer: tensor.producer,
                step: tensor.producer / n,
                late: late(tensor.producer % n),
                bytes: tensor.bytes,
            }
        },
    )
}

/// One all-reduce of a data-parallel step: the parameter gradients it sums, in the order the
/// replica produces them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GradientBucket {
    /// The gradient tensors (ids in the problem).
    pub tensors: Vec<usize>,
    /// The layer (forward node) of each gradient: the node it is the gradient of, or the
    /// producing node where the problem names no layer.
    pub layers: Vec<usize>,
    /// The bytes reduced.
    pub bytes: u64,
    /// Whether these are gradients of layers reverse first-k defers (computed after the dX
    /// chain in forward order, applied before the layer's next forward pass).
    pub deferred: bool,
}

/// The all-reduces of one data-parallel step of `problem` under `config`, in the order every
/// replica issues them: the buckets of [`data_parallel_plan`] (gradients in the order of the
/// replica's schedule, cut into buckets of at least `config.bucket_bytes`, deferred gradients
/// apart, in forward order, last). What a runtime outside ordo needs to issue the same
/// all-reduces in the same order on every rank.
///
/// # Errors
/// As [`data_parallel_plan`].
pub fn gradient_buckets(
    problem: &PlaceProblem,
    config: &DataParallel,
) -> Result<Vec<GradientBucket>, SchedError> {
    let moved = moved_nodes(problem, config)?;
    let order = replica_order(problem, &moved, 1);
    let gradients = gradients_in_order(problem, &order, problem.len(), |v| moved[v]);
    Ok(buckets(&gradients, config.bucket_bytes)
        .into_iter()
        .map(|bucket| GradientBucket {
            tensors: bucket.iter().map(|g| g.tensor).collect(),
            layers: bucket
                .iter()
                .map(|g| problem.layer_of[g.producer].unwrap_or(g.producer))
                .collect(),
            bytes: bucket.iter().map(|g| g.bytes).sum(),
            deferred: bucket[0].late,
        })
        .collect())
}

/// `replica` run `replicas` times side by side: copy `r` of device `d` is device
/// `r * replica.devices + d`, its streams, tasks, events and buffers numbered after the copies
/// before it.
pub(crate) fn replicate(replica: &Plan, replicas: usize) -> Plan {
    let (devices, streams, tasks, events, buffers) = (
        replica.devices,
        replica.streams.len() as u32,
        replica.tasks.len() as u32,
        replica.events.len() as u32,
        replica.buffers.len() as u32,
    );
    let mut plan = Plan {
        format: Plan::FORMAT.to_string(),
        devices: devices * replicas,
        persistent_bytes: replica.persistent_bytes.repeat(replicas),
        streams: Vec::new(),
        tasks: Vec::new(),
        events: Vec::new(),
        buffers: Vec::new(),
    };
    for r in 0..replicas as u32 {
        let device = |d: usize| r as usize * devices + d;
        let task = |t: TaskId| TaskId(t.0 + r * tasks);
        plan.streams.extend(replica.streams.iter().map(|s| Stream {
            device: device(s.device),
            kind: match s.kind {
                StreamKind::Tx { peer } => StreamKind::Tx { peer: device(peer) },
                StreamKind::Rx { peer } => StreamKind::Rx { peer: device(peer) },
                kind => kind,
            },
            tasks: s.tasks.iter().map(|&t| task(t)).collect(),
        }));
        plan.tasks.extend(replica.tasks.iter().map(|t| Task {
            streams: t.streams.iter().map(|s| StreamId(s.0 + r * streams)).collect(),
            waits: t.waits.iter().map(|e| EventId(e.0 + r * events)).collect(),
            kind: match &t.kind {
                TaskKind::Transfer { buffer, from, to } => TaskKind::Transfer {
                    buffer: BufferId(buffer.0 + r * buffers),
                    from: device(*from),
                    to: device(*to),
                },
                kind => kind.clone(),
            },
            ..t.clone()
        }));
        plan.events.extend(replica.events.iter().map(|e| Event { after: task(e.after) }));
        plan.buffers.extend(replica.buffers.iter().map(|b| crate::plan::Buffer {
            device: device(b.device),
            producer: task(b.producer),
            readers: b.readers.iter().map(|&t| task(t)).collect(),
            ..b.clone()
        }));
    }
    plan
}

/// Adds the collective streams and the all-reduces of `gradients` (of `unrolled`, whose nodes
/// are `replica`'s tasks and whose tensor `x` is `replica`'s buffer `buffer_of[x]`) to `plan`,
/// the replicated `replica`.
fn add_all_reduces(
    plan: &mut Plan,
    (replica, buffer_of, devices): (&Plan, &[BufferId], usize),
    unrolled: &PlaceProblem,
    gradients: &[Gradient],
    config: &DataParallel,
) {
    // The replicas materialised: every one, or one standing for all (its all-reduces still
    // last what they last among `config.replicas`).
    let replicas = devices as u32;
    let (tasks, buffers) = (replica.tasks.len() as u32, replica.buffers.len() as u32);
    let mut reduces = AllReduces::new(plan);
    let streams: Vec<StreamId> = (0..devices).map(|r| reduces.stream(r)).collect();
    for bucket in buckets(gradients, config.bucket_bytes) {
        let bytes: u64 = bucket.iter().map(|g| g.bytes).sum();
        let bucket_buffers: Vec<BufferId> = bucket.iter().map(|g| buffer_of[g.tensor]).collect();
        let (mut producers, mut reduced) = (Vec::new(), Vec::new());
        for r in 0..replicas {
            for (g, b) in bucket.iter().zip(&bucket_buffers) {
                producers.push(TaskId(g.producer as u32 + r * tasks));
                reduced.push(BufferId(b.0 + r * buffers));
            }
        }
        reduces.push(AllReduce {
            name: bucket_name(unrolled, &bucket),
            streams: streams.clone(),
            buffers: reduced,
            producers,
            duration_us: config.network.all_reduce_us(config.replicas, bytes),
            // One device standing for the group: the plan is simulated by symmetry.
            replicas: (devices < config.replicas).then_some(config.replicas),
        });
    }
}
