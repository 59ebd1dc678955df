//! `ordo.LayerGraph`: a profiled module's layers handed to ordo as objects (a layer with its
//! times and memory, an edge, a colocation), from which ordo makes the models to plan.

use ordo::{LayerGraph, ProfileInfo, ProfileLink, ProfiledLayer, SplitBackward};
use pyo3::prelude::*;

use crate::model::PyModel;
use crate::{error, usage};

/// `split_backward` as `ordo.torch.profile` takes it: `False`, `True` or `"pipelining"`.
#[derive(FromPyObject)]
pub(crate) enum SplitArg {
    /// `False` or `True`.
    Flag(bool),
    /// `"pipelining"`.
    Text(String),
}

impl SplitArg {
    fn get(&self) -> PyResult<SplitBackward> {
        match self {
            SplitArg::Flag(false) => Ok(SplitBackward::No),
            SplitArg::Flag(true) => Ok(SplitBackward::Split),
            SplitArg::Text(text) if text == "pipelining" => Ok(SplitBackward::Pipelining),
            SplitArg::Text(text) => {
                Err(usage(format!("split_backward='{text}': expected False, True or 'pipelining'")))
            }
        }
    }
}

/// A profiled module's layers in execution order, the edges between them and the layers
/// that share parameters: `add_layer` returns each layer's index, `add_edge` and `colocate`
/// take indices.
#[pyclass(name = "LayerGraph", module = "ordo")]
pub struct PyLayerGraph {
    inner: LayerGraph,
}

#[pymethods]
impl PyLayerGraph {
    /// An empty graph named `name`, profiled on `device` with `reps` timed repetitions;
    /// `comm=(fixed_us, us_per_byte)` is a transfer's cost; `training`: a layer's node costs
    /// its forward and backward time; `split_backward`: how the backward was timed apart.
    #[new]
    #[pyo3(signature = (name, *, comm, device = "cpu".to_string(), reps = 1, training = true, split_backward = SplitArg::Flag(false)))]
    fn new(
        name: String,
        comm: (f64, f64),
        device: String,
        reps: usize,
        training: bool,
        split_backward: SplitArg,
    ) -> PyResult<Self> {
        let link = ProfileLink { fixed_us: comm.0, us_per_byte: comm.1 };
        let split_backward = split_backward.get()?;
        let info = ProfileInfo { device, reps, training, split_backward, link };
        Ok(Self { inner: LayerGraph::new(name, info).map_err(error)? })
    }

    /// Adds a layer after the others (times in µs, sizes in bytes) and returns its index.
    #[pyo3(signature = (name, *, op_type, forward_us, backward_us = 0.0, input_grad_us = 0.0, weight_grad_us = 0.0, temporary_bytes = 0, persistent_bytes = 0, output_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn add_layer(
        &mut self,
        name: String,
        op_type: String,
        forward_us: f64,
        backward_us: f64,
        input_grad_us: f64,
        weight_grad_us: f64,
        temporary_bytes: u64,
        persistent_bytes: u64,
        output_bytes: u64,
    ) -> PyResult<usize> {
        let layer = ProfiledLayer {
            name,
            op_type,
            forward_us,
            backward_us,
            input_grad_us,
            weight_grad_us,
            temporary_bytes,
            persistent_bytes,
            output_bytes,
        };
        self.inner.add_layer(layer).map_err(error)
    }

    /// Adds the edge from layer `producer` to layer `consumer` (indices).
    fn add_edge(&mut self, producer: usize, consumer: usize) -> PyResult<()> {
        self.inner.add_edge(producer, consumer).map_err(error)
    }

    /// Puts layer `layer` in layer `owner`'s colocation group (they share parameters).
    fn colocate(&mut self, layer: usize, owner: usize) -> PyResult<()> {
        self.inner.colocate(layer, owner).map_err(error)
    }

    /// One node per layer, as `ordo.Model`.
    fn model(&self) -> PyResult<PyModel> {
        Ok(PyModel { inner: self.inner.model().map_err(error)? })
    }

    /// Each layer's forward, input gradient, weight gradient and update as nodes of their
    /// own (needs the backward timed apart).
    fn training_model(&self) -> PyResult<PyModel> {
        Ok(PyModel { inner: self.inner.training_model().map_err(error)? })
    }

    /// The forward pass on logical devices that share memory (no transfer costs anything).
    fn shared_memory_forward_model(&self) -> PyResult<PyModel> {
        Ok(PyModel { inner: self.inner.shared_memory_forward_model().map_err(error)? })
    }

    /// The one-node-per-layer cost graph as JSON text (ordo's NetworkX node-link format,
    /// which `ordo place FILE` and NetworkX read).
    fn to_json(&self) -> String {
        ordo::files::cost_graph_json(&self.inner.cost_graph())
    }

    /// The training graph's cost graph as JSON text (see `training_model`).
    fn training_json(&self) -> PyResult<String> {
        let graph = self.inner.training_cost_graph().map_err(error)?;
        Ok(ordo::files::cost_graph_json(&graph))
    }

    /// The graph's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }
}
