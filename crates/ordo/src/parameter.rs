//! Errors about a parameter's value, in words each shell finishes: the facade names a
//! parameter by what it is ([`Parameter`]), the command line words it as its flag
//! (`--micro-batches`), the Python package as its keyword (`micro_batches`).

use std::fmt;

/// A parameter of the facade's API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Parameter {
    /// The number of devices.
    Devices,
    /// The number of pipeline stages.
    Stages,
    /// Micro-batches per step of a pipeline.
    MicroBatches,
    /// A pipeline's modulo allocation.
    Modulo,
    /// A schedule's name.
    Schedule,
    /// Data-parallel replicas.
    Replicas,
    /// Reverse first-k's layer count.
    FirstK,
    /// The size of a gradient bucket.
    BucketBytes,
    /// Training steps in one plan.
    Steps,
    /// Layers whose weight-gradient work is deferred into the next step.
    Defer,
    /// The order of each device's tasks.
    Order,
    /// The network's bandwidth between replicas, Gbit/s.
    NetworkGbps,
    /// The network's latency per message, µs.
    NetworkLatencyUs,
    /// The data-parallel all-reduce's algorithm.
    AllReduce,
    /// The nodes of a cluster.
    Nodes,
    /// A batch size.
    Batch,
    /// The GPUs a parallel plan uses.
    Gpus,
    /// The most micro-batches the parallel planner tries.
    MaxMicroBatches,
    /// The ranks of a tensor-parallel group (the most the parallel planner tries).
    TensorParallel,
    /// Activation recomputation (`none`, `selective`, `full`; `auto` tries them in turn).
    Recompute,
    /// The loss added to a forward graph to train it.
    Loss,
    /// A zoo model's small variant.
    Small,
    /// The relative tolerance of a comparison with expected values.
    Rtol,
    /// The absolute tolerance of a comparison with expected values.
    Atol,
    /// Timed calls of each kernel when profiling.
    Reps,
    /// How finely a pipeline is planned and simulated (`auto`, `node`, `block`).
    Granularity,
}

impl Parameter {
    /// The parameter's name in the facade's API (a Python keyword).
    pub fn name(self) -> &'static str {
        match self {
            Parameter::Devices => "devices",
            Parameter::Stages => "stages",
            Parameter::MicroBatches => "micro_batches",
            Parameter::Modulo => "modulo",
            Parameter::Schedule => "schedule",
            Parameter::Replicas => "replicas",
            Parameter::FirstK => "first_k",
            Parameter::BucketBytes => "bucket_bytes",
            Parameter::Steps => "steps",
            Parameter::Defer => "defer",
            Parameter::Order => "order",
            Parameter::NetworkGbps => "network_gbps",
            Parameter::NetworkLatencyUs => "latency_us",
            Parameter::AllReduce => "all_reduce",
            Parameter::Nodes => "nodes",
            Parameter::Batch => "batch",
            Parameter::Gpus => "gpus",
            Parameter::MaxMicroBatches => "max_micro_batches",
            Parameter::TensorParallel => "tensor_parallel",
            Parameter::Recompute => "recompute",
            Parameter::Loss => "loss",
            Parameter::Small => "small",
            Parameter::Rtol => "rtol",
            Parameter::Atol => "atol",
            Parameter::Reps => "reps",
            Parameter::Granularity => "granularity",
        }
    }
}

/// One piece of a [`ParameterError`]'s message.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    /// A parameter, by name.
    Named(Parameter),
    /// A parameter with the value it was given (`--devices 0`, `devices=0`).
    Valued(Parameter, String),
}

/// A value that a parameter cannot take, or parameters that do not go together: a message
/// whose parameters each shell words its own way ([`ParameterError::worded`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ParameterError {
    /// The parameter at fault.
    pub parameter: Parameter,
    pieces: Vec<Piece>,
}

impl ParameterError {
    /// A message about `parameter`, starting with its name.
    pub(crate) fn named(parameter: Parameter) -> Self {
        Self { parameter, pieces: vec![Piece::Named(parameter)] }
    }

    /// A message about `parameter`, starting with its name and the value it was given.
    pub(crate) fn valued(parameter: Parameter, value: impl fmt::Display) -> Self {
        Self { parameter, pieces: vec![Piece::Valued(parameter, value.to_string())] }
    }

    /// A message about `parameter` that starts with `text`.
    pub(crate) fn about(parameter: Parameter, text: impl Into<String>) -> Self {
        Self { parameter, pieces: vec![Piece::Text(text.into())] }
    }

    /// The message followed by `text`.
    pub(crate) fn text(mut self, text: impl Into<String>) -> Self {
        self.pieces.push(Piece::Text(text.into()));
        self
    }

    /// The message followed by `parameter` with the value `value`.
    pub(crate) fn valued_then(mut self, parameter: Parameter, value: impl fmt::Display) -> Self {
        self.pieces.push(Piece::Valued(parameter, value.to_string()));
        self
    }

    /// The message followed by the name of `parameter`.
    pub(crate) fn then(mut self, parameter: Parameter) -> Self {
        self.pieces.push(Piece::Named(parameter));
        self
    }

    /// The message with each parameter worded by `word`, given the parameter and the value
    /// it was given where the message quotes one (`--devices 0` on a command line,
    /// `devices=0` in Python).
    pub fn worded(&self, word: impl Fn(Parameter, Option<&str>) -> String) -> String {
        let mut message = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => message.push_str(text),
                Piece::Named(parameter) => message.push_str(&word(*parameter, None)),
                Piece::Valued(parameter, value) => {
                    message.push_str(&word(*parameter, Some(value)));
                }
            }
        }
        message
    }
}

impl fmt::Display for ParameterError {
    /// The message with each parameter by its API name, as Python words it (`devices=0`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.worded(|parameter, value| match value {
            Some(value) => format!("{}={value}", parameter.name()),
            None => parameter.name().to_string(),
        }))
    }
}

impl std::error::Error for ParameterError {}

/// `Err(Error::Parameter(...))`: `refuse!(Parameter::Devices, " must be at least 1")` for a
/// message that starts with the parameter, `refuse!(Parameter::Devices => n, ": ...")` with
/// the parameter and its value; then text and parameters in turn.
macro_rules! refuse {
    ($parameter:expr => $value:expr, $($piece:expr),+ $(,)?) => {{
        let mut error = $crate::parameter::ParameterError::valued($parameter, $value);
        $(error = $crate::parameter::Extend::extend($piece, error);)+
        return Err($crate::error::Error::Parameter(error));
    }};
    ($parameter:expr, $($piece:expr),+ $(,)?) => {{
        let mut error = $crate::parameter::ParameterError::named($parameter);
        $(error = $crate::parameter::Extend::extend($piece, error);)+
        return Err($crate::error::Error::Parameter(error));
    }};
}
pub(crate) use refuse;

/// What a piece of [`refuse!`] adds: text, or a parameter's name.
pub(crate) trait Extend {
    fn extend(self, error: ParameterError) -> ParameterError;
}

impl Extend for String {
    fn extend(self, error: ParameterError) -> ParameterError {
        error.text(self)
    }
}

impl Extend for &str {
    fn extend(self, error: ParameterError) -> ParameterError {
        error.text(self)
    }
}

impl Extend for Parameter {
    fn extend(self, error: ParameterError) -> ParameterError {
        error.then(self)
    }
}
