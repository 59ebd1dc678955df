//! Training on CPU devices with real kernels: `ordo.Runner`.

use ordo::{EngineOptions, RunSettings, Runner};
use pyo3::prelude::*;

use crate::model::PyProblem;
use crate::planning::PyPlanned;
use crate::{error, usage};

/// A plan bound to its model's kernels on CPU devices, with the training state it advances.
/// Every placement and schedule computes bitwise the losses of sequential execution.
#[pyclass(name = "Runner", module = "ordo", unsendable)]
pub struct PyRunner {
    inner: Runner,
}

#[pymethods]
impl PyRunner {
    /// Binds `planned` (made from `problem`) to CPU devices with `workers` threads each; the
    /// parameters, inputs and dropout are seeded by `seed`, `lr` is the learning rate.
    #[new]
    #[pyo3(signature = (problem, planned, *, workers = 1, seed = 0, lr = 0.01))]
    fn new(
        problem: &PyProblem,
        planned: &PyPlanned,
        workers: usize,
        seed: u64,
        lr: f32,
    ) -> PyResult<Self> {
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(usage(format!("lr={lr}: expected a finite learning rate >= 0")));
        }
        let settings =
            RunSettings { seed, hyper: ordo::Hyper { lr, ..Default::default() }, training: true };
        let options =
            EngineOptions { workers_per_device: workers, settings, ..EngineOptions::default() };
        let inner = Runner::new(&problem.inner, &planned.inner, options).map_err(error)?;
        Ok(Self { inner })
    }

    /// Runs one step (forward, backward, updates) and returns its loss (the mean over
    /// replicas and micro-batches).
    fn step(&mut self, py: Python<'_>) -> PyResult<f32> {
        let runner = &mut self.inner;
        let step = py.detach(|| runner.step()).map_err(error)?;
        Ok(step.loss)
    }

    /// The simulator's prediction of one step of this plan on these CPU devices, in µs.
    fn predict_us(&self) -> PyResult<f64> {
        Ok(self.inner.predict().map_err(error)?.step_time_us)
    }

    /// The number of parameter tensors.
    #[getter]
    fn parameters(&self) -> usize {
        self.inner.parameters().len()
    }
}
