//! The facade's one error type: each stage's error, kept typed, and the facade's own checks.

use std::path::PathBuf;

/// Everything that can stop the pipeline. Stage errors keep their type (`#[from]`), so a
/// caller (the CLI, the Python package) can tell them apart; every message names what is at
/// fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A zoo model could not be built.
    #[error(transparent)]
    Model(#[from] ordo_models::ModelError),
    /// An ONNX file could not be imported.
    #[error("importing {}: {source}", path.display())]
    Onnx {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ordo_onnx::OnnxError,
    },
    /// A graph is malformed, or its training graph cannot be built.
    #[error(transparent)]
    Ir(#[from] ordo_ir::IrError),
    /// A cost-graph file could not be read.
    #[error(transparent)]
    CostGraph(#[from] ordo_cost::CostGraphError),
    /// A cluster file could not be read.
    #[error(transparent)]
    Cluster(#[from] ordo_cost::ClusterError),
    /// A profile could not be read or does not fit the graph.
    #[error(transparent)]
    Profile(#[from] ordo_cost::ProfileError),
    /// The graph and devices do not make a placement problem.
    #[error(transparent)]
    Problem(#[from] ordo_problem::ProblemError),
    /// A placer failed.
    #[error(transparent)]
    Place(#[from] ordo_place::PlaceError),
    /// A schedule or plan could not be built.
    #[error(transparent)]
    Sched(#[from] ordo_sched::SchedError),
    /// The simulator refused a plan.
    #[error(transparent)]
    Sim(#[from] ordo_sim::SimError),
    /// The runtime failed.
    #[error(transparent)]
    Exec(#[from] ordo_exec::ExecError),
    /// A parameter's value that cannot be used, or parameters that do not go together, with
    /// each parameter named for the shell to word ([`crate::ParameterError::worded`]).
    #[error(transparent)]
    Parameter(#[from] crate::parameter::ParameterError),
    /// A request that does not make sense for what it is applied to, in the user's words
    /// (a cost graph asked to train, a pipeline schedule on one device, ...).
    #[error("{0}")]
    Usage(String),
}

/// The facade's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Err(Error::Usage(...))` from a format string.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Usage(format!($($arg)*)))
    };
}
pub(crate) use usage;
