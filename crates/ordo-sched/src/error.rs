//! Errors of the plan builder, the plan checker and plan files.

use std::path::PathBuf;

/// Everything that can go wrong building, checking, reading or writing a plan. Every variant
/// names the node, task, stream, event, buffer or file at fault; streams read as
/// `stream 3 (device 0 tx->1)`, events as `event 2 (after a)`.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    /// A derived problem (unrolled steps, micro-batches) is not a valid problem.
    #[error(transparent)]
    Problem(#[from] ordo_problem::ProblemError),
    /// The placement does not fit the problem (lengths, device indices, orders).
    #[error("placement does not match the problem: {0}")]
    Placement(String),
    /// A schedule's settings do not fit the problem (zero replicas, more deferred layers than
    /// the model has, a graph without updates).
    #[error("cannot build the schedule: {0}")]
    Schedule(String),
    /// A pipeline configuration that does not fit the problem (stages, micro-batches,
    /// devices, units).
    #[error("pipeline: {0}")]
    Pipeline(String),
    /// Copies of a graph (micro-batches, steps, replicas) that would make a plan of more than
    /// [`crate::Plan::MAX_TASKS`] tasks.
    #[error(
        "{what} of a graph of {nodes} nodes make {tasks} tasks; a plan holds at most {} (2^23): \
         ask for fewer",
        crate::Plan::MAX_TASKS
    )]
    TooLarge {
        /// What the copies are (`4096 micro-batches`).
        what: String,
        /// The graph's nodes.
        nodes: usize,
        /// The tasks they would make.
        tasks: String,
    },
    /// A device's order runs a node before one it depends on.
    #[error("device {device} runs `{consumer}` before `{producer}`, which it depends on")]
    OrderViolation {
        /// The device.
        device: usize,
        /// The node that depends on `consumer`.
        producer: String,
        /// The node that is run too early.
        consumer: String,
    },
    /// The plan's format tag is not [`crate::Plan::FORMAT`].
    #[error("plan format is {found:?}, expected {expected:?}")]
    Format {
        /// The tag found.
        found: String,
        /// The tag expected.
        expected: &'static str,
    },
    /// `persistent_bytes` does not have one entry per device.
    #[error("persistent_bytes has {len} entries for {devices} devices")]
    PersistentBytes {
        /// Entries found.
        len: usize,
        /// Devices of the plan.
        devices: usize,
    },
    /// An id that is out of range.
    #[error("{owner} names {kind} {id}, but the plan has only {count}")]
    UnknownId {
        /// What holds the id, e.g. `task a` or `buffer a:0 on device 1`.
        owner: String,
        /// `stream`, `task`, `event` or `buffer`.
        kind: &'static str,
        /// The id.
        id: u32,
        /// How many of that kind the plan has.
        count: usize,
    },
    /// A stream on a device the plan does not have, or a tx/rx stream with a bad peer.
    #[error("{stream}: {problem}")]
    Stream {
        /// The stream.
        stream: String,
        /// What is wrong.
        problem: String,
    },
    /// A compute task that is not on exactly one compute stream.
    #[error("compute task `{task}`: {problem}")]
    Compute {
        /// The task's name.
        task: String,
        /// What is wrong.
        problem: String,
    },
    /// A transfer whose devices, buffer or streams do not agree.
    #[error("transfer `{task}`: {problem}")]
    Transfer {
        /// The task's name.
        task: String,
        /// What is wrong.
        problem: String,
    },
    /// An all-reduce whose streams, devices or buffers do not agree.
    #[error("all-reduce `{task}`: {problem}")]
    AllReduce {
        /// The task's name.
        task: String,
        /// What is wrong.
        problem: String,
    },
    /// A task's occupancy is not a share of a device: NaN, 0 or less, or more than 1.
    #[error(
        "task `{task}`: occupancy is {occupancy}; it must be a share of the device, more than 0 \
         and at most 1"
    )]
    Occupancy {
        /// The task's name.
        task: String,
        /// The occupancy found.
        occupancy: f64,
    },
    /// A stream lists a task that does not name the stream, or the other way round.
    #[error("task `{task}` and {stream} disagree: {problem}")]
    Membership {
        /// The task's name.
        task: String,
        /// The stream.
        stream: String,
        /// What is wrong.
        problem: String,
    },
    /// A buffer on a bad device, or whose producer or readers are on another device.
    #[error("buffer `{buffer}` on device {device}: {problem}")]
    Buffer {
        /// The buffer's name.
        buffer: String,
        /// Its device.
        device: usize,
        /// What is wrong.
        problem: String,
    },
    /// Stream order and events make tasks wait for each other in a circle: a run would
    /// deadlock. `tasks` lists the cycle in dependency order (each waits for the one before,
    /// the first for the last).
    #[error("dependency cycle across streams: {}", cycle_text(tasks))]
    Cycle {
        /// Names of the tasks on the cycle.
        tasks: Vec<String>,
    },
    /// The plan does not run the graph it is checked against: a compute task names a node the
    /// graph does not have, or a node has no compute task or several.
    #[error("the plan does not match the graph: {0}")]
    Mismatch(String),
    /// A plan file could not be read.
    #[error("cannot read plan file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A plan file could not be written.
    #[error("cannot write plan file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A plan file is not plan JSON.
    #[error("plan file {} is not a valid plan: {}{source}", path.display(), field_prefix(at))]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where in the file: the path of the field at fault (`tasks[0].duration_us`), or `.`
        /// for the whole file.
        at: String,
        /// The cause.
        source: serde_json::Error,
    },
    /// A plan file parses but breaks the plan's rules.
    #[error("plan file {}: {source}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The rule broken.
        source: Box<SchedError>,
    },
}

/// `tasks[0].duration_us: `, or nothing for the whole file.
fn field_prefix(at: &str) -> String {
    if at.is_empty() || at == "." { String::new() } else { format!("{at}: ") }
}

/// `a -> b -> c -> a`.
fn cycle_text(tasks: &[String]) -> String {
    let mut text = tasks.join(" -> ");
    if let Some(first) = tasks.first() {
        text.push_str(" -> ");
        text.push_str(first);
    }
    text
}
