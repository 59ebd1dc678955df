//! A placed layer's `forward` as the Assigner wraps it (`ordo._ordo.LayerCall`): the common
//! call (the host calls a layer on tensors it holds, the layer runs on the host at once, no
//! mode watches the host) is made here without going through Python; every other call goes
//! to the Python `Step` (`call`, or `arrived` once the layer is reached here). A call made on
//! another thread than the step's host, or outside a step, is the layer's own `forward`.
//!
//! Per call this costs one call into Rust, the step's lookup (a mutex, uncontended) and the
//! bookkeeping of `HostStep`, instead of a Python closure, a method and two calls into Rust.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};

use crate::host_step::PyAssignerPlan;

/// One wrapped module's `forward`.
#[pyclass(name = "LayerCall", module = "ordo", frozen)]
pub struct PyLayerCall {
    plan: Py<PyAssignerPlan>,
    /// The module's index in `AssignerPlan.modules`.
    module: usize,
    /// The module's own `forward`.
    forward: Py<PyAny>,
    /// The module writes its first argument (`inplace=True`): always the Python path.
    inplace: bool,
    /// `torch.Tensor`: arguments of exactly this type are values the host holds.
    tensor: Py<PyType>,
}

#[pymethods]
impl PyLayerCall {
    /// Wraps `forward`, module `module` of `plan`; `tensor` is `torch.Tensor`.
    #[new]
    fn new(
        plan: Py<PyAssignerPlan>,
        module: usize,
        forward: Py<PyAny>,
        inplace: bool,
        tensor: Py<PyType>,
    ) -> Self {
        Self { plan, module, forward, inplace, tensor }
    }

    /// What it refers to, for the garbage collector: a module's `forward` refers to the
    /// module, which holds this object as its `forward`; without this, a distributed module
    /// dropped without `close()` would keep its layers and their parameters alive.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.plan)?;
        visit.call(&self.forward)?;
        visit.call(&self.tensor)
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let forward = self.forward.bind(py);
        let Some((core, step)) = self.plan.get().current_on_this_thread(py) else {
            return forward.call(args, kwargs).map(Bound::unbind);
        };
        let step = step.bind(py);
        let tensor = self.tensor.bind(py);
        let plain = kwargs.is_none_or(|k| k.is_empty())
            && args.iter().all(|a| a.get_type().is(tensor))
            && !self.inplace;
        // The Python side takes the keyword arguments as a dict, empty for none.
        let keywords = || kwargs.cloned().unwrap_or_else(|| PyDict::new(py));
        if !plain {
            let call = (self.module, forward, args, keywords(), self.inplace);
            return step.call_method1("call", call).map(Bound::unbind);
        }
        let core = core.get();
        let (layer, how) = core.arrive_at(self.module, &[])?;
        if !core.runs_here(layer, how) {
            let arrived = (layer, how, forward, args, keywords(), self.inplace);
            return step.call_method1("arrived", arrived).map(Bound::unbind);
        }
        // The layer's own operations are not the host's between layers (`Step.in_layer`).
        step.setattr("in_layer", true)?;
        let value = forward.call(args, kwargs);
        step.setattr("in_layer", false)?;
        let value = value?;
        core.mark(layer)?;
        Ok(value.unbind())
    }
}
