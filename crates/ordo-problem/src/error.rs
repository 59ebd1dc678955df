//! Errors of building a placement problem.

/// Why a cost graph and devices do not make a placement problem. Every variant names what is
/// at fault.
#[derive(Debug, thiserror::Error)]
pub enum ProblemError {
    /// No devices were given.
    #[error("no devices to place on: give at least one device")]
    NoDevices,
    /// More devices than the placers support.
    #[error("{count} devices asked for; the placers support at most {max}")]
    TooManyDevices {
        /// Devices asked for.
        count: usize,
        /// [`ordo_cost::MAX_DEVICES`].
        max: usize,
    },
    /// The graph has a cycle.
    #[error("the graph has a cycle through node `{node}`")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
    /// A malformed cost graph: a link to a missing node, a `layer` that names no forward node.
    #[error("invalid placement problem: {0}")]
    Invalid(String),
}
