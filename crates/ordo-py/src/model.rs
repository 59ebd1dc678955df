//! Models, targets and problems: what a plan is made from.

use ordo::parse_bytes;
use ordo::{Model, Optimizer, Problem, Size, StepMode, Target, Variant};
use pyo3::prelude::*;

use crate::{error, usage};

/// The names of the zoo's models, in the order `ordo models` lists them.
#[pyfunction]
pub fn zoo_models() -> Vec<&'static str> {
    Model::zoo_names()
}

/// An optimizer by the command line's name: `sgd`, `momentum` or `adam`.
pub(crate) fn optimizer(name: &str) -> PyResult<Optimizer> {
    match name {
        "sgd" => Ok(Optimizer::Sgd),
        "momentum" => Ok(Optimizer::SgdMomentum),
        "adam" => Ok(Optimizer::Adam),
        other => Err(usage(format!("optimizer `{other}`: expected sgd, momentum or adam"))),
    }
}

/// A byte count given as an integer or as text with a unit (`"16GiB"`).
#[derive(FromPyObject)]
pub(crate) enum Bytes {
    /// A number of bytes.
    Count(u64),
    /// A size with a unit, as `--memory` takes it.
    Text(String),
}

impl Bytes {
    /// The bytes, more than 0; `what` names the argument in errors.
    pub(crate) fn get(&self, what: &str) -> PyResult<u64> {
        let bytes = match self {
            Bytes::Count(n) => *n,
            Bytes::Text(text) => {
                parse_bytes(text).map_err(|e| usage(format!("{what}={text:?}: {e}")))?
            }
        };
        if bytes == 0 {
            return Err(usage(format!("{what}: a device needs some memory")));
        }
        Ok(bytes)
    }
}

/// A model: a zoo model, an ONNX file, or a cost graph (which can be planned but not run).
#[pyclass(name = "Model", module = "ordo", frozen)]
#[derive(Clone)]
pub struct PyModel {
    pub(crate) inner: Model,
}

/// The size a model is built at.
fn size(small: bool, batch: Option<usize>, seq_len: Option<usize>) -> PyResult<Size> {
    if batch == Some(0) || seq_len == Some(0) {
        return Err(usage("batch and seq_len must be at least 1"));
    }
    let variant = if small { Variant::Small } else { Variant::Full };
    Ok(Size { batch, seq_len, variant, tensor_parallel: None })
}

#[pymethods]
impl PyModel {
    /// A model of the zoo (`ordo.zoo_models()`), full size or its small variant.
    #[staticmethod]
    #[pyo3(signature = (name, *, small = false, batch = None, seq_len = None))]
    fn zoo(
        name: &str,
        small: bool,
        batch: Option<usize>,
        seq_len: Option<usize>,
    ) -> PyResult<Self> {
        let inner = Model::zoo(name, size(small, batch, seq_len)?).map_err(error)?;
        Ok(Self { inner })
    }

    /// What the command line's MODEL names: an `.onnx` file, a cost-graph file (`.json`), or
    /// a zoo model. `dims`: sizes of an ONNX file's symbolic dimensions by name (`--dim`);
    /// `frozen`: its float initializers that do not train (`--freeze`).
    #[staticmethod]
    #[pyo3(signature = (path_or_name, *, small = false, batch = None, seq_len = None, dims = None, frozen = None))]
    fn load(
        path_or_name: &str,
        small: bool,
        batch: Option<usize>,
        seq_len: Option<usize>,
        dims: Option<std::collections::BTreeMap<String, usize>>,
        frozen: Option<std::collections::BTreeSet<String>>,
    ) -> PyResult<Self> {
        let size = size(small, batch, seq_len)?;
        let inner = match (dims, frozen) {
            (None, None) => Model::load(path_or_name, size),
            (dims, frozen) if ordo::is_onnx(path_or_name) => {
                let settings = ordo::OnnxSettings {
                    dims: dims.unwrap_or_default(),
                    frozen: frozen.unwrap_or_default(),
                };
                Model::onnx_with(path_or_name, size, &settings)
            }
            _ => {
                return Err(usage(format!(
                    "dims and frozen apply to ONNX files; `{path_or_name}` is not one"
                )));
            }
        }
        .map_err(error)?;
        Ok(Self { inner })
    }

    /// A cost graph given as JSON text (ordo's NetworkX node-link format, as
    /// `ordo.torch.profile` returns it), named `name` in messages.
    #[staticmethod]
    #[pyo3(signature = (text, name = "cost graph"))]
    fn from_costgraph_json(text: &str, name: &str) -> PyResult<Self> {
        Ok(Self { inner: Model::from_cost_graph_json(text, name).map_err(error)? })
    }

    /// The training graph of this forward model: forward, dX, dW and the optimizer's
    /// updates; `loss="cross-entropy"` adds that loss to a forward graph that ends at its
    /// predictions (an ONNX export of the forward pass).
    #[pyo3(signature = (optimizer = "momentum", loss = None))]
    fn training(&self, optimizer: &str, loss: Option<&str>) -> PyResult<Self> {
        let loss = loss.map(str::parse::<ordo::Loss>).transpose().map_err(error)?;
        let inner = self.inner.training(self::optimizer(optimizer)?, loss).map_err(error)?;
        Ok(Self { inner })
    }

    /// This model in `precision`: `"fp32"` as it is, or mixed precision (`"bf16"`, `"fp16"`):
    /// 16-bit weights and activations, matrix products at the tensor cores' rate, fp32 master
    /// weights and optimizer states charged. Planned and simulated; `Runner` computes in fp32.
    fn in_precision(&self, precision: &str) -> PyResult<Self> {
        let precision = precision.parse::<ordo::Precision>().map_err(error)?;
        Ok(Self { inner: self.inner.in_precision(precision).map_err(error)? })
    }

    /// The model's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Its number of nodes (operators, or a cost graph's nodes).
    #[getter]
    fn nodes(&self) -> usize {
        match (self.inner.graph(), self.inner.as_cost_graph()) {
            (Some(graph), _) => graph.nodes.len(),
            (None, Some(costs)) => costs.nodes.len(),
            (None, None) => 0,
        }
    }

    /// Whether it is a training graph.
    #[getter]
    fn is_training(&self) -> bool {
        self.inner.is_training()
    }

    /// What the import approximated, one sentence each: an ONNX output whose size depends on
    /// the data, planned at its largest. Empty for most models.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes().to_vec()
    }

    /// Whether it has kernels to run (a cost graph has none).
    #[getter]
    fn runnable(&self) -> bool {
        self.inner.graph().is_some()
    }

    fn __repr__(&self) -> String {
        format!("ordo.Model({:?}, {} nodes)", self.inner.name(), self.nodes())
    }
}

/// The devices to plan for and how nodes are costed on them.
#[pyclass(name = "Target", module = "ordo", frozen)]
#[derive(Clone)]
pub struct PyTarget {
    pub(crate) inner: Target,
}

#[pymethods]
impl PyTarget {
    /// `devices` devices of `memory` bytes each (an int, or text such as `"16GiB"`; `None`:
    /// unlimited), nodes costed by `cluster`'s roofline (a shipped cluster's name or a
    /// cluster file; `None`: ordo's default roofline).
    #[staticmethod]
    #[pyo3(signature = (devices, *, memory = None, cluster = None))]
    fn uniform(devices: usize, memory: Option<Bytes>, cluster: Option<&str>) -> PyResult<Self> {
        let memory = memory.map(|m| m.get("memory")).transpose()?.unwrap_or(u64::MAX);
        let mut inner = Target::uniform(devices, memory).map_err(error)?;
        if let Some(name) = cluster {
            inner = inner.costed_by(ordo::cluster(name).map_err(error)?);
        }
        Ok(Self { inner })
    }

    /// The first `devices` devices of a cluster (all of them for `None`), with its memory,
    /// links and roofline; `memory` overrides every device's memory, `nodes` the node count
    /// of a cluster of nodes (whose network then links data-parallel replicas).
    #[staticmethod]
    #[pyo3(signature = (name, *, devices = None, memory = None, nodes = None))]
    fn cluster(
        name: &str,
        devices: Option<usize>,
        memory: Option<Bytes>,
        nodes: Option<usize>,
    ) -> PyResult<Self> {
        let mut cluster = ordo::cluster(name).map_err(error)?;
        if let Some(nodes) = nodes {
            cluster = ordo::with_nodes(cluster, nodes).map_err(error)?;
        }
        if let Some(memory) = memory {
            cluster = cluster.with_memory(memory.get("memory")?);
        }
        Ok(Self { inner: Target::cluster(cluster, devices).map_err(error)? })
    }

    /// The same devices with node times (and a transfer's cost, where measured) from a
    /// profile written by `ordo profile`.
    fn with_profile(&self, path: &str) -> PyResult<Self> {
        let profile = ordo::Profile::read(path).map_err(error)?;
        Ok(Self { inner: self.inner.clone().with_profile(profile) })
    }

    /// The number of devices.
    #[getter]
    fn devices(&self) -> usize {
        self.inner.count()
    }

    /// Each device's memory in bytes (`2**64 - 1`: unlimited).
    #[getter]
    fn memory(&self) -> Vec<u64> {
        self.inner.devices.memory.clone()
    }

    fn __repr__(&self) -> String {
        format!("ordo.Target({} devices)", self.inner.count())
    }
}

/// A model costed for a target under a memory mode: what every strategy is planned from.
#[pyclass(name = "Problem", module = "ordo", frozen)]
pub struct PyProblem {
    pub(crate) inner: Problem,
}

/// A memory mode by name: `forward-only` (Baechi's), `training` (the forward graph charged for
/// a whole step), `training-graph` (a training graph as it is; the default for one).
fn mode(name: Option<&str>, model: &Model, optimizer: &str) -> PyResult<StepMode> {
    let optimizer = self::optimizer(optimizer)?;
    match name {
        None if model.is_training() => Ok(StepMode::TrainingGraph),
        None | Some("training") => Ok(StepMode::Training { optimizer }),
        Some("forward-only") => Ok(StepMode::ForwardOnly),
        Some("training-graph") => Ok(StepMode::TrainingGraph),
        Some(other) => {
            Err(usage(format!("mode `{other}`: expected forward-only, training or training-graph")))
        }
    }
}

#[pymethods]
impl PyProblem {
    /// `model` costed for `target`. `mode`: `forward-only`, `training` (the whole step of a
    /// forward model with `optimizer`'s state) or `training-graph` (default for a training
    /// graph, `training` otherwise).
    #[new]
    #[pyo3(signature = (model, target, *, mode = None, optimizer = "momentum"))]
    fn new(
        model: &PyModel,
        target: &PyTarget,
        mode: Option<&str>,
        optimizer: &str,
    ) -> PyResult<Self> {
        let step = self::mode(mode, &model.inner, optimizer)?;
        let inner = Problem::new(&model.inner, &target.inner, step).map_err(error)?;
        Ok(Self { inner })
    }

    /// The number of nodes placed.
    #[getter]
    fn nodes(&self) -> usize {
        self.inner.place.len()
    }

    /// The number of devices.
    #[getter]
    fn devices(&self) -> usize {
        self.inner.place.devices.count()
    }

    /// Where the node times came from, in words.
    #[getter]
    fn costs(&self) -> String {
        self.inner.costs.clone()
    }

    /// The model's node names, in index order.
    #[getter]
    fn node_names(&self) -> Vec<String> {
        self.inner.place.names.clone()
    }

    /// Each node's compute time in µs, in index order.
    #[getter]
    fn node_times_us(&self) -> Vec<u64> {
        self.inner.place.weights.clone()
    }

    /// The best lower bound on any placement's step, in µs.
    fn lower_bound_us(&self, py: Python<'_>) -> u64 {
        py.detach(|| self.inner.lower_bound_us())
    }

    fn __repr__(&self) -> String {
        format!(
            "ordo.Problem({:?}, {} nodes, {} devices)",
            self.inner.name(),
            self.inner.place.len(),
            self.inner.place.devices.count()
        )
    }
}
