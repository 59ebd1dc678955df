//! The plan: what runs where, on which stream, in which order, waiting for which events. It is
//! the contract between the scheduler, the simulator and the runtime, so that a prediction and a
//! measurement are of the same thing.
//!
//! Rules a valid plan keeps (checked by `validate`):
//! * every stream is an in-order queue of tasks on one device;
//! * a compute task is on exactly one compute stream of its device;
//! * an all-reduce is on the collective stream of each device it joins, at the same relative
//!   position in each (so every device issues its collectives in one order), and reads the
//!   same gradients, in the same order, on each of those devices;
//! * a transfer task is on the tx stream of the sender for that peer **and** on the rx stream of
//!   the receiver for that peer, at the same relative position in both (it starts when it is
//!   first in both queues);
//! * a dependency between tasks of different streams is an [`Event`] recorded after the
//!   producing task and waited for by the consumer; a dependency within one stream is implied
//!   by the order;
//! * a buffer is allocated when its producer starts and freed when the last of its readers
//!   (transfers included) has finished, unless it is retained until the end of the step;
//! * a task's `workspace_bytes` are allocated on its device when it starts and freed when it
//!   ends (at one instant, frees come before allocations); a transfer's are 0;
//! * a task's `occupancy` is a share of its device in `(0, 1]`.

use crate::error::SchedError;
use serde::{Deserialize, Serialize};

/// Index of a stream in [`Plan::streams`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StreamId(pub u32);

/// Index of a task in [`Plan::tasks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub u32);

/// Index of an event in [`Plan::events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(pub u32);

/// Index of a buffer in [`Plan::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BufferId(pub u32);

/// What a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamKind {
    /// The device's main compute stream.
    Compute,
    /// A second compute stream (out-of-order backprop runs dW here).
    SubCompute,
    /// Sends from this device to `peer`.
    Tx {
        /// The receiving device.
        peer: usize,
    },
    /// Receives on this device from `peer`.
    Rx {
        /// The sending device.
        peer: usize,
    },
    /// The device's collective operations (all-reduces), in the order every device issues
    /// them.
    Collective,
}

/// An in-order queue of tasks on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stream {
    /// The device.
    pub device: usize,
    /// What it carries.
    pub kind: StreamKind,
    /// Its tasks, in execution order.
    pub tasks: Vec<TaskId>,
}

/// What a task does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskKind {
    /// Runs a node of the graph.
    Compute {
        /// The node's name: what files and messages show (and what a plan checked against a
        /// graph, `ordo_sched::check_against`, is matched by).
        node: String,
        /// The node's index in the problem the plan was built from, which is its `NodeId` in
        /// the graph the problem was costed from: what the runtime binds the task by (`None`
        /// in plans written before it was recorded, or by hand, which the runtime refuses).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u32>,
    },
    /// Copies a buffer from one device to another.
    Transfer {
        /// The buffer read on the sender.
        buffer: BufferId,
        /// Sending device.
        from: usize,
        /// Receiving device.
        to: usize,
    },
    /// Sums buffers across devices in place (ring all-reduce): afterwards each device's
    /// buffers hold the sum of all devices' values. It starts when it is first in the
    /// collective stream of every device it joins and its events have fired.
    AllReduce {
        /// The buffers it reduces: for each of its devices in the order of
        /// [`Task::streams`], the same number of buffers (one per gradient, in one order).
        buffers: Vec<BufferId>,
        /// In a plan that holds one replica of a data-parallel group for all of them
        /// (simulated by symmetry, [`crate::data_parallel_replica_plan`]): how many replicas
        /// the all-reduce joins; its one device stands for them. `None` when every
        /// participant is in the plan.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replicas: Option<usize>,
    },
}

/// One unit of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Readable name: the node's name, `<buffer>-><device>` for a transfer, or
    /// `all-reduce:<first buffer>` for an all-reduce.
    pub name: String,
    /// What it does.
    pub kind: TaskKind,
    /// Streams it is on: one for a compute task; tx (sender) then rx (receiver) for a
    /// transfer; the collective stream of each device it joins, in device order, for an
    /// all-reduce.
    pub streams: Vec<StreamId>,
    /// Events it waits for before it starts.
    pub waits: Vec<EventId>,
    /// Predicted duration in µs when it has the device (or link) to itself.
    pub duration_us: u64,
    /// Scratch bytes held on the task's device while it runs: allocated when it starts, freed
    /// when it ends (a compute node's [`ordo_cost::NodeMemory::temporary`]; 0 for a transfer).
    #[serde(default)]
    pub workspace_bytes: u64,
    /// Share of its device a compute task keeps busy while it runs, in `(0, 1]` (the node's
    /// [`ordo_problem::PlaceProblem::occupancy`]); 1 for a transfer, and when a plan file has
    /// none. A simulator that runs kernels of different streams at once lets kernels whose
    /// occupancies sum to at most 1 run side by side at full speed.
    #[serde(default = "full_occupancy")]
    pub occupancy: f64,
}

/// A task that fills its device: the default of [`Task::occupancy`].
fn full_occupancy() -> f64 {
    1.0
}

/// Recorded when task `after` finishes; tasks on other streams wait for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The task whose end the event marks.
    pub after: TaskId,
}

/// A tensor in device memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    /// Tensor name (a received copy keeps the name; its device tells the copies apart).
    pub name: String,
    /// The device holding it.
    pub device: usize,
    /// Size in bytes.
    pub bytes: u64,
    /// The task that writes it (a compute task, or the transfer that brings it).
    pub producer: TaskId,
    /// Every task that reads it, transfers and all-reduces included (an all-reduce reads and
    /// rewrites it in place; tasks after it wait for its event). A buffer without readers is freed when
    /// its producer finishes, unless it is retained.
    pub readers: Vec<TaskId>,
    /// Kept until the end of the step (activations saved for backward) instead of being freed
    /// after the last reader.
    pub retained: bool,
}

/// A whole step's schedule over several devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Always [`Plan::FORMAT`].
    pub format: String,
    /// Number of devices.
    pub devices: usize,
    /// Bytes resident on each device for the whole step (parameters, gradients, optimizer
    /// state).
    pub persistent_bytes: Vec<u64>,
    /// All streams.
    pub streams: Vec<Stream>,
    /// All tasks.
    pub tasks: Vec<Task>,
    /// All cross-stream events.
    pub events: Vec<Event>,
    /// All buffers.
    pub buffers: Vec<Buffer>,
}

impl Plan {
    /// The format tag of this version.
    pub const FORMAT: &'static str = "ordo.plan/1";

    /// The most compute tasks a plan holds: 2^23 (8,388,608), the bound under which sums of
    /// tasks' times stay exact ([`ordo_cost::MAX_TIME_US`]). A request for more (micro-batches,
    /// unrolled steps or replicas times a graph's nodes) is refused before anything is
    /// allocated for it.
    pub const MAX_TASKS: usize = 1 << 23;

    /// Checks that `copies` copies of a graph of `nodes` nodes fit in a plan
    /// ([`Plan::MAX_TASKS`]); `what` says what the copies are (`4096 micro-batches`).
    ///
    /// # Errors
    /// [`SchedError::TooLarge`] naming `what`, the tasks and the limit.
    pub fn check_size(nodes: usize, copies: usize, what: &str) -> Result<(), SchedError> {
        match nodes.checked_mul(copies) {
            Some(tasks) if tasks <= Self::MAX_TASKS => Ok(()),
            tasks => Err(SchedError::TooLarge {
                what: what.to_string(),
                nodes,
                tasks: tasks.map_or_else(|| "more than 2^64".into(), |t| t.to_string()),
            }),
        }
    }

    /// A plan of no device and nothing to do (what a plan moved out of leaves).
    pub(crate) fn empty() -> Self {
        Self {
            format: Self::FORMAT.to_string(),
            devices: 0,
            persistent_bytes: Vec::new(),
            streams: Vec::new(),
            tasks: Vec::new(),
            events: Vec::new(),
            buffers: Vec::new(),
        }
    }
}
