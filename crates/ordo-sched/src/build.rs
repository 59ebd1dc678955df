//! Building a plan from a placement: streams, transfers, events and buffers.

use std::collections::{BTreeSet, HashMap};

use ordo_problem::{PlaceProblem, Placement};

use crate::error::SchedError;
use crate::plan::{
    Buffer, BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};
use crate::validate::validate;

/// A transfer to make: tensor `tensor` from device `from` to device `to`, at `rank` in the
/// plan's transfer order. Field order is the sort order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Send<'a> {
    rank: usize,
    to: usize,
    name: &'a str,
    tensor: usize,
    from: usize,
}

/// The plan that runs `placement` of `problem`, in the order the placement gives each device.
///
/// * **Streams**, per device in device order: one `Compute` stream with the device's order,
///   then a `Tx { peer }` stream for each peer it sends to, then an `Rx { peer }` stream for
///   each peer it receives from, peers ascending. Devices without nodes keep an empty compute
///   stream.
/// * **Tasks**: task `i < n` computes node `i` (duration: the node's weight; workspace: its
///   [`ordo_cost::NodeMemory::temporary`]; occupancy: its [`PlaceProblem::occupancy`], 1 where the
///   problem lists none); after them come
///   the transfers. A tensor consumed on another device is sent once to each such device
///   however many consumers it has there (duration: the tensor's `comm_us`; occupancy 1), named
///   `<tensor>-><device>`. Transfers are numbered, and queued on each (sender, receiver) pair's
///   tx and rx streams, in the order of the placement's transfer schedule
///   ([`Placement::transfers`]: the order in which the placer's own schedule booked the
///   channels) when it lists every transfer; otherwise by the producer's position in one
///   topological order of the device orders and the edges together, then receiver and tensor
///   name. Either order is one in which the transfers can run one after another, so that the
///   simulator's Baechi-TF model, which serves each device's channel in transfer order, cannot
///   deadlock on a plan built here.
/// * **Events**: one per task that something on another stream waits for, recorded after it,
///   in task order. A transfer waits for the tensor's producer; a consumer waits for the
///   transfers that bring its inputs; a consumer of a control edge (one that carries no tensor
///   of its source) from another device waits for the source itself.
/// * **Buffers**: first, node by node, each tensor on its producer's device (readers: its
///   consumers there and its transfers) and, when the node's outputs
///   ([`ordo_cost::NodeMemory::outputs`]) exceed its tensors' bytes, one more buffer named
///   `<node>:unread` for the rest, with no readers (so a node whose outputs nobody reads still
///   holds its memory); then each received copy on its receiver, in transfer order (producer:
///   the transfer; readers: the consumers there). `retained` is the producer's
///   [`ordo_cost::NodeMemory::retain_outputs`]. A buffer without readers is freed when its
///   producer finishes unless it is retained.
/// * `persistent_bytes`: per device, the sum of its nodes' [`ordo_cost::NodeMemory::persistent`].
///
/// The result is deterministic and passes [`validate`].
///
/// # Errors
/// [`SchedError::Placement`] when the placement does not cover the problem's nodes and devices
/// exactly once each; [`SchedError::OrderViolation`] when a device's order runs a node before a
/// node on the same device that it depends on; [`SchedError::Cycle`] when the device orders
/// together deadlock (a device waits for a transfer whose producer comes after it elsewhere).
pub fn build_plan(problem: &PlaceProblem, placement: &Placement) -> Result<Plan, SchedError> {
    build_plan_on_streams(problem, placement, &vec![false; problem.len()])
}

/// [`build_plan`] with each node `v` for which `on_sub_stream[v]` holds on its device's
/// `SubCompute` stream instead of its `Compute` stream (each stream keeps the device's order),
/// for schedules that run some kernels beside the main ones (out-of-order backprop's dW). A
/// device with such nodes has its `SubCompute` stream right after its `Compute` stream, and a
/// node that depends on a node of the other stream of its device waits for it through an
/// event.
///
/// # Errors
/// Those of [`build_plan`], and [`SchedError::Placement`] when `on_sub_stream` does not have
/// one entry per node.
pub fn build_plan_on_streams(
    problem: &PlaceProblem,
    placement: &Placement,
    on_sub_stream: &[bool],
) -> Result<Plan, SchedError> {
    check_placement(problem, placement)?;
    let n = problem.len();
    if on_sub_stream.len() != n {
        let given = on_sub_stream.len();
        return Err(SchedError::Placement(format!("{given} stream choices for {n} nodes")));
    }
    let sub = on_sub_stream;
    let devices = problem.devices.count();
    let device = &placement.device_of;
    let tensors = &problem.tensors;
    let mut issued: HashMap<(usize, usize), usize> = HashMap::new();
    for (k, &key) in placement.transfers.iter().flatten().enumerate() {
        issued.entry(key).or_insert(k);
    }
    let mut needed: BTreeSet<(usize, usize, usize)> = BTreeSet::new();
    for edge in &problem.edges {
        for &x in &edge.tensors {
            let (from, to) = (device[tensors[x].producer], device[edge.target]);
            if from != to {
                needed.insert((x, from, to));
            }
        }
    }
    let listed = needed.iter().all(|&(x, _, to)| issued.contains_key(&(x, to)));
    let position = (!listed).then(|| joint_topological_position(problem, placement));
    let rank = |x: usize, to: usize| match &position {
        None => issued[&(x, to)],
        Some(position) => position[tensors[x].producer],
    };
    let mut sends = BTreeSet::new();
    for &(x, from, to) in &needed {
        let name = &tensors[x].name;
        sends.insert(Send { rank: rank(x, to), to, name, tensor: x, from });
    }
    let sends: Vec<Send> = sends.into_iter().collect();
    let transfer_of: HashMap<(usize, usize), usize> =
        sends.iter().enumerate().map(|(k, s)| ((s.tensor, s.to), k)).collect();

    let streams = make_streams(placement, sub, &sends, devices);
    let stream_at: HashMap<(usize, StreamKind), StreamId> = streams
        .iter()
        .enumerate()
        .map(|(s, stream)| ((stream.device, stream.kind), StreamId(s as u32)))
        .collect();

    // Producing tasks each task waits for on other streams; local and received readers.
    let mut waits_for: Vec<Vec<TaskId>> = vec![Vec::new(); n + sends.len()];
    let mut local_readers: Vec<Vec<TaskId>> = vec![Vec::new(); tensors.len()];
    let mut copy_readers: Vec<Vec<TaskId>> = vec![Vec::new(); sends.len()];
    for (k, send) in sends.iter().enumerate() {
        let transfer = TaskId((n + k) as u32);
        waits_for[n + k].push(TaskId(tensors[send.tensor].producer as u32));
        local_readers[send.tensor].push(transfer);
    }
    for edge in &problem.edges {
        let (source, target) = (edge.source, edge.target);
        let mut from_source = false;
        for &x in &edge.tensors {
            from_source |= tensors[x].producer == source;
            let producer = tensors[x].producer;
            if device[producer] == device[target] {
                local_readers[x].push(TaskId(target as u32));
                if sub[producer] != sub[target] {
                    waits_for[target].push(TaskId(producer as u32));
                }
            } else {
                let k = transfer_of[&(x, device[target])];
                copy_readers[k].push(TaskId(target as u32));
                waits_for[target].push(TaskId((n + k) as u32));
            }
        }
        let other_stream = device[source] != device[target] || sub[source] != sub[target];
        if other_stream && !from_source {
            waits_for[target].push(TaskId(source as u32));
        }
    }

    let mut event_of: Vec<Option<EventId>> = vec![None; waits_for.len()];
    for &t in waits_for.iter().flatten() {
        event_of[t.0 as usize] = Some(EventId(0));
    }
    let mut events = Vec::new();
    for (t, slot) in event_of.iter_mut().enumerate() {
        if slot.is_some() {
            *slot = Some(EventId(events.len() as u32));
            events.push(Event { after: TaskId(t as u32) });
        }
    }
    let waits = |t: usize| -> Vec<EventId> {
        let mut list: Vec<EventId> =
            waits_for[t].iter().filter_map(|p| event_of[p.0 as usize]).collect();
        list.sort_unstable();
        list.dedup();
        list
    };

    let mut buffers = Vec::new();
    let mut buffer_of_tensor = vec![BufferId(0); tensors.len()];
    let mut tensors_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (x, tensor) in tensors.iter().enumerate() {
        tensors_of[tensor.producer].push(x);
    }
    for v in 0..n {
        let retained = problem.memory[v].retain_outputs;
        let mut bytes = 0u64;
        for &x in &tensors_of[v] {
            buffer_of_tensor[x] = BufferId(buffers.len() as u32);
            bytes = bytes.saturating_add(tensors[x].bytes);
            buffers.push(Buffer {
                name: tensors[x].name.clone(),
                device: device[v],
                bytes: tensors[x].bytes,
                producer: TaskId(v as u32),
                readers: sorted(std::mem::take(&mut local_readers[x])),
                retained,
            });
        }
        let unread = problem.memory[v].outputs.saturating_sub(bytes);
        if unread > 0 {
            buffers.push(Buffer {
                name: format!("{}:unread", problem.names[v]),
                device: device[v],
                bytes: unread,
                producer: TaskId(v as u32),
                readers: Vec::new(),
                retained,
            });
        }
    }

    let mut tasks = Vec::with_capacity(n + sends.len());
    for v in 0..n {
        tasks.push(Task {
            name: problem.names[v].clone(),
            kind: TaskKind::Compute { node: problem.names[v].clone(), id: Some(v as u32) },
            streams: vec![stream_at[&(device[v], compute_kind(sub[v]))]],
            waits: waits(v),
            duration_us: problem.weights[v],
            workspace_bytes: problem.memory[v].temporary,
            occupancy: problem.occupancy.get(v).copied().unwrap_or(1.0),
        });
    }
    for (k, send) in sends.iter().enumerate() {
        let tensor = &tensors[send.tensor];
        tasks.push(Task {
            name: format!("{}->{}", tensor.name, send.to),
            kind: TaskKind::Transfer {
                buffer: buffer_of_tensor[send.tensor],
                from: send.from,
                to: send.to,
            },
            streams: vec![
                stream_at[&(send.from, StreamKind::Tx { peer: send.to })],
                stream_at[&(send.to, StreamKind::Rx { peer: send.from })],
            ],
            waits: waits(n + k),
            duration_us: tensor.comm_us,
            workspace_bytes: 0,
            occupancy: 1.0,
        });
        buffers.push(Buffer {
            name: tensor.name.clone(),
            device: send.to,
            bytes: tensor.bytes,
            producer: TaskId((n + k) as u32),
            readers: sorted(std::mem::take(&mut copy_readers[k])),
            retained: problem.memory[tensor.producer].retain_outputs,
        });
    }

    let mut persistent_bytes = vec![0u64; devices];
    for (v, memory) in problem.memory.iter().enumerate() {
        persistent_bytes[device[v]] = persistent_bytes[device[v]].saturating_add(memory.persistent);
    }
    let plan = Plan {
        format: Plan::FORMAT.to_string(),
        devices,
        persistent_bytes,
        streams,
        tasks,
        events,
        buffers,
    };
    validate(&plan)?;
    Ok(plan)
}

fn sorted(mut tasks: Vec<TaskId>) -> Vec<TaskId> {
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}

fn compute_kind(on_sub_stream: bool) -> StreamKind {
    if on_sub_stream { StreamKind::SubCompute } else { StreamKind::Compute }
}

/// Per device: compute stream, sub-stream if used, tx streams, rx streams (peers ascending),
/// with their tasks.
fn make_streams(
    placement: &Placement,
    sub: &[bool],
    sends: &[Send],
    devices: usize,
) -> Vec<Stream> {
    let n = placement.device_of.len();
    let mut tx: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); devices];
    let mut rx: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); devices];
    for send in sends {
        tx[send.from].insert(send.to);
        rx[send.to].insert(send.from);
    }
    let mut streams = Vec::new();
    let mut link_index = HashMap::new();
    for d in 0..devices {
        let on = |side: bool| -> Vec<TaskId> {
            placement.order[d]
                .iter()
                .filter(|&&v| sub[v] == side)
                .map(|&v| TaskId(v as u32))
                .collect()
        };
        streams.push(Stream { device: d, kind: StreamKind::Compute, tasks: on(false) });
        let sub_tasks = on(true);
        if !sub_tasks.is_empty() {
            streams.push(Stream { device: d, kind: StreamKind::SubCompute, tasks: sub_tasks });
        }
        let links = tx[d].iter().map(|&peer| StreamKind::Tx { peer });
        for kind in links.chain(rx[d].iter().map(|&peer| StreamKind::Rx { peer })) {
            link_index.insert((d, kind), streams.len());
            streams.push(Stream { device: d, kind, tasks: Vec::new() });
        }
    }
    for (k, send) in sends.iter().enumerate() {
        let task = TaskId((n + k) as u32);
        streams[link_index[&(send.from, StreamKind::Tx { peer: send.to })]].tasks.push(task);
        streams[link_index[&(send.to, StreamKind::Rx { peer: send.from })]].tasks.push(task);
    }
    streams
}

/// Each node's position in a topological order of the graph whose edges are the problem's
/// edges (producer to consumer) and each device's order (one node to the next); the smallest
/// node index goes first among those available. Nodes on a cycle get `usize::MAX` (the plan's
/// validation reports the cycle).
fn joint_topological_position(problem: &PlaceProblem, placement: &Placement) -> Vec<usize> {
    let n = problem.len();
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); n];
    for edge in &problem.edges {
        successors[edge.source].push(edge.target);
        for &x in &edge.tensors {
            successors[problem.tensors[x].producer].push(edge.target);
        }
    }
    for order in &placement.order {
        for pair in order.windows(2) {
            successors[pair[0]].push(pair[1]);
        }
    }
    let mut indegree = vec![0usize; n];
    for list in &mut successors {
        list.sort_unstable();
        list.dedup();
        for &c in list.iter() {
            indegree[c] += 1;
        }
    }
    let mut available: std::collections::BinaryHeap<std::cmp::Reverse<usize>> =
        (0..n).filter(|&v| indegree[v] == 0).map(std::cmp::Reverse).collect();
    let mut position = vec![usize::MAX; n];
    let mut count = 0;
    while let Some(std::cmp::Reverse(v)) = available.pop() {
        position[v] = count;
        count += 1;
        for &c in &successors[v] {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                available.push(std::cmp::Reverse(c));
            }
        }
    }
    position
}

/// Checks that the placement covers every node and device exactly once and that each device's
/// order respects the dependencies between its own nodes.
fn check_placement(problem: &PlaceProblem, placement: &Placement) -> Result<(), SchedError> {
    let (n, devices) = (problem.len(), problem.devices.count());
    let fail = |message: String| Err(SchedError::Placement(message));
    if placement.device_of.len() != n {
        return fail(format!("device_of has {} entries for {n} nodes", placement.device_of.len()));
    }
    if placement.order.len() != devices {
        return fail(format!("order has {} devices, the problem {devices}", placement.order.len()));
    }
    if let Some(v) = placement.device_of.iter().position(|&d| d >= devices) {
        let (name, d) = (&problem.names[v], placement.device_of[v]);
        return fail(format!("node `{name}` is on device {d}, but there are {devices} devices"));
    }
    let mut position = vec![usize::MAX; n];
    for (d, order) in placement.order.iter().enumerate() {
        for (i, &v) in order.iter().enumerate() {
            if v >= n {
                return fail(format!("the order of device {d} lists node {v} of {n}"));
            }
            let name = &problem.names[v];
            if placement.device_of[v] != d || position[v] != usize::MAX {
                let on = placement.device_of[v];
                return fail(format!(
                    "node `{name}` is on device {on} but listed again or in the order of device {d}"
                ));
            }
            position[v] = i;
        }
    }
    if let Some(v) = position.iter().position(|&p| p == usize::MAX) {
        let (name, on) = (&problem.names[v], placement.device_of[v]);
        return fail(format!("node `{name}` is on device {on} but in no device's order"));
    }
    let device = &placement.device_of;
    for edge in &problem.edges {
        let producers = edge.tensors.iter().map(|&x| problem.tensors[x].producer);
        for before in std::iter::once(edge.source).chain(producers) {
            let after = edge.target;
            if device[before] == device[after] && position[before] >= position[after] {
                return Err(SchedError::OrderViolation {
                    device: device[after],
                    producer: problem.names[before].clone(),
                    consumer: problem.names[after].clone(),
                });
            }
        }
    }
    Ok(())
}
