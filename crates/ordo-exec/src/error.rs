//! The runtime's error.

use ordo_sched::SchedError;

use crate::cpu::KernelError;

/// Why a run could not start or did not finish. Every variant names what is wrong: the node, the
/// task, the device.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Ops and element types without a CPU kernel, all of them, each with the nodes that use
    /// it.
    #[error("{0}")]
    Unsupported(String),
    /// A kernel rejected its arguments or failed; the step was cancelled.
    #[error("task `{task}` (node `{node}`) failed: {source}")]
    Kernel {
        /// The task's name.
        task: String,
        /// The node it ran.
        node: String,
        /// What the kernel said.
        #[source]
        source: KernelError,
    },
    /// The backend failed a task: a collective that timed out or whose participants
    /// disagree, an event that could not be waited for.
    #[error("task `{task}`: {source}")]
    Backend {
        /// The task (or the step's closing work: synchronising or reading back a device).
        task: String,
        /// What the backend said.
        #[source]
        source: crate::backend::BackendError,
    },
    /// The plan does not run the graph it was given (a task naming an unknown node, a node
    /// without its input buffer on its device, ...).
    #[error("the plan does not match the graph: {0}")]
    Mismatch(String),
    /// The plan breaks a rule of plans.
    #[error("invalid plan")]
    Plan(#[from] SchedError),
    /// An input of the graph has no fed tensor, or a fed tensor does not fit it.
    #[error("input `{name}`: {message}")]
    Feed {
        /// The input node.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A device's memory budget would be exceeded; the step was cancelled.
    #[error(
        "device {device} is out of memory at task `{task}`: it needs {needed} more bytes with \
         {in_use} of its {budget} in use"
    )]
    OutOfMemory {
        /// The device.
        device: usize,
        /// The task that asked.
        task: String,
        /// Bytes it asked for.
        needed: u64,
        /// Bytes in use then.
        in_use: u64,
        /// The device's budget.
        budget: u64,
    },
    /// A run setting that cannot work (no worker threads, a data-parallel plan fed the
    /// wrong number of shards, ...).
    #[error("{0}")]
    Config(String),
}
