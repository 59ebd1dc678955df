//! ordo's Python package: the facade (`ordo` crate) as Python objects, a thin shell as the
//! command line is. A model (`ordo.Model`) costed for a target (`ordo.Target`) is a problem
//! (`ordo.Problem`, all in `model`); `planning` places, plans and simulates it; `run` trains it
//! on CPU devices. Every error is an `ordo.OrdoError` carrying ordo's message.
//!
//! Long computations (placing, simulating, training steps) release the interpreter's lock, so
//! Python threads keep running meanwhile.

mod assign;
mod data_parallel;
mod host_step;
mod layer_call;
mod layers;
mod model;
mod parallel;
mod planning;
mod run;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    ordo,
    OrdoError,
    PyException,
    "An error of ordo: its message names the file, node, option or value at fault."
);

/// `err` as an [`OrdoError`] whose message is ordo's, each cause added once (as the command
/// line prints it).
pub(crate) fn error(err: impl std::error::Error) -> PyErr {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        cause = inner.source();
    }
    OrdoError::new_err(text)
}

/// An [`OrdoError`] with `message`.
pub(crate) fn usage(message: impl Into<String>) -> PyErr {
    OrdoError::new_err(message.into())
}

/// The extension module `ordo._ordo`, re-exported by the `ordo` package.
#[pymodule]
fn _ordo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OrdoError", m.py().get_type::<OrdoError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<model::PyModel>()?;
    m.add_class::<model::PyTarget>()?;
    m.add_class::<model::PyProblem>()?;
    m.add_class::<planning::PyPlacement>()?;
    m.add_class::<planning::PyPlanned>()?;
    m.add_class::<planning::PyReport>()?;
    m.add_class::<run::PyRunner>()?;
    m.add_class::<host_step::PyAssignerPlan>()?;
    m.add_class::<host_step::PyHostStep>()?;
    m.add_class::<layer_call::PyLayerCall>()?;
    m.add_class::<layers::PyLayerGraph>()?;
    m.add_function(wrap_pyfunction!(model::zoo_models, m)?)?;
    m.add_function(wrap_pyfunction!(planning::place, m)?)?;
    m.add_function(wrap_pyfunction!(planning::plan, m)?)?;
    m.add_function(wrap_pyfunction!(planning::plan_placement, m)?)?;
    m.add_function(wrap_pyfunction!(planning::global_order, m)?)?;
    m.add_function(wrap_pyfunction!(planning::pytorch_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(planning::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(assign::reorder_threads, m)?)?;
    m.add_function(wrap_pyfunction!(data_parallel::data_parallel_plan, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::plan_parallel, m)?)?;
    Ok(())
}
