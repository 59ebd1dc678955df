//! The simulator's results.

use serde::{Deserialize, Serialize};

/// When one task ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskTiming {
    /// The task's name.
    pub name: String,
    /// Start, µs from the beginning of the step.
    pub start_us: f64,
    /// End, µs from the beginning of the step.
    pub finish_us: f64,
}

/// Share of the step a link (an ordered device pair) spends transferring.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkBusy {
    /// Sending device.
    pub from: usize,
    /// Receiving device.
    pub to: usize,
    /// Time with at least one transfer on the link / step time.
    pub fraction: f64,
}

/// Utilisation of devices and links.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BusyFraction {
    /// Per device: time with at least one kernel running / step time.
    pub devices: Vec<f64>,
    /// Per ordered pair that carries at least one transfer, sorted by `(from, to)`.
    pub links: Vec<LinkBusy>,
    /// Time with at least one collective (all-reduce) running / step time.
    #[serde(default)]
    pub collectives: f64,
}

/// What [`simulate`](crate::simulate) predicts for one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// End of the last task, µs.
    pub step_time_us: f64,
    /// `max(longest dependency chain of task durations, total compute work / devices)`, µs: no
    /// schedule of this plan can be faster. Compute work is the device time the compute tasks
    /// use, `duration_us * occupancy` summed: a kernel is never faster than its duration, and
    /// a device never does more than one full device's work at a time.
    pub lower_bound_us: f64,
    /// Per device, the most bytes resident at once.
    pub peak_memory_bytes: Vec<u64>,
    /// Utilisation of devices and links.
    pub busy_fraction: BusyFraction,
    /// Per task, in [`Plan::tasks`](ordo_sched::Plan::tasks) order.
    pub tasks: Vec<TaskTiming>,
    /// Per device, `(time_us, bytes)` after every change (buffers, and the workspace of each
    /// task while it runs), from `(0, persistent)` to the level at `step_time_us` once retained
    /// buffers are released. At one instant, frees come before allocations.
    pub memory_timeline: Vec<Vec<(f64, u64)>>,
    /// Task names from the start of the step to the last task to finish, each the predecessor
    /// (stream predecessor, awaited event, or the holder of the resource it waited for) that
    /// determined the next one's start.
    pub critical_path: Vec<String>,
}
