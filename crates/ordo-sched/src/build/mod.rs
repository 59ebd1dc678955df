//! Building a plan from a placement: streams, transfers, events and buffers.
//!
//! [`build_plan_on_streams`] runs the phases in order, each a function of what the ones before
//! made: the placement's check (`placement_check`), the transfers to make and their order
//! (`transfers`), the streams (`streams`), the dependencies between tasks and the readers of
//! each tensor ([`Dependencies`]), the events that carry the dependencies across streams
//! ([`Events`]), the tasks, and the buffers.

mod placement_check;
mod streams;
mod transfers;

use std::collections::HashMap;

use ordo_problem::{PlaceProblem, Placement};

use crate::error::SchedError;
use crate::plan::{
    Buffer, BufferId, Event, EventId, Plan, StreamId, StreamKind, Task, TaskId, TaskKind,
};
use crate::validate::validate;
use placement_check::check_placement;
use streams::{compute_kind, make_streams};
use transfers::{Send, transfers};

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
    let (plan, _) = assemble_plan_on_streams(problem, placement, on_sub_stream)?;
    validate(&plan)?;
    Ok(plan)
}

/// [`build_plan_on_streams`] without the final check of the plan ([`validate`]), for a caller
/// that adds to the plan and checks it once, whole; with each of the problem's tensors' buffer
/// on its producer's device (task `v` computes node `v`), by which the caller finds them.
pub(crate) fn assemble_plan_on_streams(
    problem: &PlaceProblem,
    placement: &Placement,
    on_sub_stream: &[bool],
) -> Result<(Plan, Vec<BufferId>), SchedError> {
    check_placement(problem, placement)?;
    let n = problem.len();
    if on_sub_stream.len() != n {
        let given = on_sub_stream.len();
        return Err(SchedError::Placement(format!("{given} stream choices for {n} nodes")));
    }
    let devices = problem.devices.count();
    let sends = transfers(problem, placement);
    let streams = make_streams(placement, on_sub_stream, &sends, devices);
    let Dependencies { waits_for, local_readers, copy_readers } =
        Dependencies::of(problem, placement, on_sub_stream, &sends);
    let events = Events::of(&waits_for);
    let (mut buffers, buffer_of_tensor) = node_buffers(problem, placement, local_readers);
    let stream_at: HashMap<(usize, StreamKind), StreamId> = streams
        .iter()
        .enumerate()
        .map(|(s, stream)| ((stream.device, stream.kind), StreamId(s as u32)))
        .collect();
    let mut tasks = node_tasks(problem, placement, on_sub_stream, &stream_at);
    tasks.extend(transfer_tasks(problem, &sends, &stream_at, &buffer_of_tensor));
    buffers.extend(received_buffers(problem, &sends, copy_readers));
    let mut persistent_bytes = vec![0u64; devices];
    for (v, memory) in problem.memory.iter().enumerate() {
        let device = placement.device_of[v];
        persistent_bytes[device] = persistent_bytes[device].saturating_add(memory.persistent);
    }
    let plan = Plan {
        format: Plan::FORMAT.to_string(),
        devices,
        persistent_bytes,
        streams,
        tasks: events.apply(tasks),
        events: events.events,
        buffers,
    };
    Ok((plan, buffer_of_tensor))
}

/// What each task waits for on other streams and who reads each tensor. Tasks are the nodes
/// `0..n`, then the transfers in transfer order.
struct Dependencies {
    /// Per task: the producing tasks on other streams that it waits for. A transfer waits for
    /// the tensor's producer; a consumer waits for the transfers that bring its inputs, for a
    /// producer on the other compute stream of its own device, and for the source of a
    /// control edge (one that carries no tensor of its source) on another stream.
    waits_for: Vec<Vec<TaskId>>,
    /// Per tensor: the tasks on its producer's device that read it (its consumers there and
    /// its transfers).
    local_readers: Vec<Vec<TaskId>>,
    /// Per transfer: the consumers of the received copy.
    copy_readers: Vec<Vec<TaskId>>,
}

impl Dependencies {
    fn of(problem: &PlaceProblem, placement: &Placement, sub: &[bool], sends: &[Send]) -> Self {
        let (n, tensors, device) = (problem.len(), &problem.tensors, &placement.device_of);
        let transfer_of: HashMap<(usize, usize), usize> =
            sends.iter().enumerate().map(|(k, s)| ((s.tensor, s.to), k)).collect();
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
        Self { waits_for, local_readers, copy_readers }
    }
}

/// The events: one per task that something on another stream waits for, recorded after it,
/// in task order; and each task's waits as events.
struct Events {
    events: Vec<Event>,
    /// Per task: the events it waits for, ascending, each once.
    waits: Vec<Vec<EventId>>,
}

impl Events {
    fn of(waits_for: &[Vec<TaskId>]) -> Self {
        let mut waited_for = vec![false; waits_for.len()];
        for &t in waits_for.iter().flatten() {
            waited_for[t.0 as usize] = true;
        }
        let mut event_of: Vec<Option<EventId>> = vec![None; waits_for.len()];
        let mut events = Vec::new();
        for (t, _) in waited_for.iter().enumerate().filter(|(_, w)| **w) {
            event_of[t] = Some(EventId(events.len() as u32));
            events.push(Event { after: TaskId(t as u32) });
        }
        let waits = waits_for
            .iter()
            .map(|producers| {
                let mut list: Vec<EventId> =
                    producers.iter().filter_map(|p| event_of[p.0 as usize]).collect();
                list.sort_unstable();
                list.dedup();
                list
            })
            .collect();
        Self { events, waits }
    }

    /// `tasks` (in task order) with their waits.
    fn apply(&self, mut tasks: Vec<Task>) -> Vec<Task> {
        for (task, waits) in tasks.iter_mut().zip(&self.waits) {
            task.waits.clone_from(waits);
        }
        tasks
    }
}

/// The buffers of the nodes' outputs, node by node: each tensor on its producer's device
/// (readers: `local_readers`) and, when the node's outputs exceed its tensors' bytes, one
/// more buffer `<node>:unread` for the rest, without readers. Also each tensor's buffer.
fn node_buffers(
    problem: &PlaceProblem,
    placement: &Placement,
    mut local_readers: Vec<Vec<TaskId>>,
) -> (Vec<Buffer>, Vec<BufferId>) {
    let (n, tensors, device) = (problem.len(), &problem.tensors, &placement.device_of);
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
    (buffers, buffer_of_tensor)
}

/// The received copies, in transfer order, each on its receiver (producer: the transfer;
/// readers: `copy_readers`).
fn received_buffers(
    problem: &PlaceProblem,
    sends: &[Send],
    copy_readers: Vec<Vec<TaskId>>,
) -> impl Iterator<Item = Buffer> {
    let n = problem.len();
    sends.iter().zip(copy_readers).enumerate().map(move |(k, (send, readers))| {
        let tensor = &problem.tensors[send.tensor];
        Buffer {
            name: tensor.name.clone(),
            device: send.to,
            bytes: tensor.bytes,
            producer: TaskId((n + k) as u32),
            readers: sorted(readers),
            retained: problem.memory[tensor.producer].retain_outputs,
        }
    })
}

/// The nodes' tasks, node `v` as task `v` on its device's compute (or sub-compute) stream;
/// their waits are filled in by [`Events::apply`].
fn node_tasks(
    problem: &PlaceProblem,
    placement: &Placement,
    sub: &[bool],
    stream_at: &HashMap<(usize, StreamKind), StreamId>,
) -> Vec<Task> {
    let device = &placement.device_of;
    let mut tasks = Vec::with_capacity(problem.len());
    for v in 0..problem.len() {
        tasks.push(Task {
            name: problem.names[v].clone(),
            kind: TaskKind::Compute { node: problem.names[v].clone(), id: Some(v as u32) },
            streams: vec![stream_at[&(device[v], compute_kind(sub[v]))]],
            waits: Vec::new(),
            duration_us: problem.weights[v],
            workspace_bytes: problem.memory[v].temporary,
            occupancy: problem.occupancy.get(v).copied().unwrap_or(1.0),
        });
    }
    tasks
}

/// The transfers' tasks, in transfer order, each on the sender's tx and the receiver's rx
/// stream of the pair, named `<tensor>-><device>`.
fn transfer_tasks<'a>(
    problem: &'a PlaceProblem,
    sends: &'a [Send],
    stream_at: &'a HashMap<(usize, StreamKind), StreamId>,
    buffer_of_tensor: &'a [BufferId],
) -> impl Iterator<Item = Task> + 'a {
    sends.iter().map(move |send| {
        let tensor = &problem.tensors[send.tensor];
        Task {
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
            waits: Vec::new(),
            duration_us: tensor.comm_us,
            workspace_bytes: 0,
            occupancy: 1.0,
        }
    })
}

fn sorted(mut tasks: Vec<TaskId>) -> Vec<TaskId> {
    tasks.sort_unstable();
    tasks.dedup();
    tasks
}
