//! Errors of the placers.

/// Everything that can stop a placement. Every variant names what is at fault.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// No devices were given.
    #[error("no devices to place on: give at least one device")]
    NoDevices,
    /// The cost graph and devices do not make a placement problem.
    #[error(transparent)]
    Problem(#[from] ordo_problem::ProblemError),
    /// A node (or its colocation group) needs more memory than any device has.
    #[error(
        "node `{node}` needs {needed} bytes but the largest device has {available} ({shortfall} short)"
    )]
    NodeTooLarge {
        /// The node (or the first node of the group).
        node: String,
        /// Bytes it needs.
        needed: u64,
        /// Bytes of the largest device.
        available: u64,
        /// `needed - available`.
        shortfall: u64,
    },
    /// The nodes fit individually but not all together.
    #[error(
        "{algo}: {unplaced} of {total} nodes cannot be placed within the memory limits; first: `{first}`"
    )]
    OutOfMemory {
        /// The algorithm.
        algo: &'static str,
        /// Nodes left over.
        unplaced: usize,
        /// All nodes.
        total: usize,
        /// The first node that did not fit.
        first: String,
    },
    /// A placement whose simulated training step needs more memory than a device has (a
    /// budget placer's estimate fell short, e.g. copies sent to a device it had already
    /// filled).
    #[error(
        "{algo}: device {device} would need {peak} bytes during the training step but has {limit}"
    )]
    ExceedsMemory {
        /// The algorithm.
        algo: &'static str,
        /// The first device over its limit.
        device: usize,
        /// Its simulated peak in bytes.
        peak: u64,
        /// Its memory in bytes.
        limit: u64,
    },
    /// An algorithm name that is not known.
    #[error("unknown algorithm `{name}`; known: {known}")]
    UnknownAlgorithm {
        /// What was asked for.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// A placer stopped at its deadline ([`crate::PlaceOptions::deadline`]).
    #[error("{algo} {}", out_of_time(*seconds))]
    OutOfTime {
        /// The algorithm.
        algo: &'static str,
        /// How long it ran, in seconds (0: it was not started).
        seconds: f64,
    },
    /// The favorite-child LP of m-SCT failed (the LP error's message).
    #[error("m-SCT: the favorite-child LP failed: {0}")]
    Lp(String),
    /// A malformed request: a placement or favourite list that does not fit the problem.
    #[error("invalid placement problem: {0}")]
    Invalid(String),
}

/// The end of [`PlaceError::OutOfTime`]'s message.
fn out_of_time(seconds: f64) -> String {
    if seconds > 0.0 {
        format!("stopped after {seconds:.2} s: its time limit ran out")
    } else {
        "was not started: its time limit had run out".into()
    }
}
