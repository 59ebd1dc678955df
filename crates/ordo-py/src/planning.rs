//! Placing, planning and simulating: `ordo.place`, `ordo.plan`, `ordo.simulate` and the
//! objects they return.

use std::collections::HashMap;

use ordo::{
    AutoOptions, Channel, PlaceOptions, Placement, Placer, Planned, Report, SimOptions, Strategy,
    StrategyKind, StrategyParams, StrategySpec,
};
use pyo3::prelude::*;

use crate::model::PyProblem;
use crate::{error, usage};

/// A placer by name (`auto` with `budget` seconds and `seed`, or an algorithm).
fn placer(algo: &str, budget: f64, seed: u64, sct_threshold: f64) -> PyResult<Placer> {
    if !(budget.is_finite() && (0.0..=86_400.0).contains(&budget)) {
        return Err(usage(format!("budget={budget}: expected seconds between 0 and 86400")));
    }
    if !(sct_threshold.is_finite() && sct_threshold >= 0.0) {
        return Err(usage(format!("sct_threshold={sct_threshold}: expected a number >= 0")));
    }
    let place = PlaceOptions { sct_threshold, ..PlaceOptions::default() };
    Ok(match algo.parse::<Placer>().map_err(error)? {
        Placer::Auto(_) => {
            Placer::Auto(AutoOptions { budget_seconds: budget, seed, place, reproducible: false })
        }
        Placer::Algorithm(algo, _) => Placer::Algorithm(algo, place),
    })
}

/// A placement: each node's device, each device's order, the placer's predicted step.
#[pyclass(name = "Placement", module = "ordo", frozen)]
pub struct PyPlacement {
    inner: Placement,
    names: Vec<String>,
    /// The placement file's JSON (`ordo.placement/1`).
    file: String,
    /// For `auto`: where its winning search started.
    winner: Option<String>,
}

impl PyPlacement {
    fn new(problem: &PyProblem, placed: &ordo::Placed) -> PyResult<Self> {
        let file = ordo::placement_file(&problem.inner.place, &placed.placement);
        Ok(Self {
            inner: placed.placement.clone(),
            names: problem.inner.place.names.clone(),
            file: serde_json::to_string(&file).map_err(error)?,
            winner: placed.auto.as_ref().map(|auto| auto.winner.clone()),
        })
    }
}

#[pymethods]
impl PyPlacement {
    /// The algorithm that placed it.
    #[getter]
    fn algo(&self) -> String {
        self.inner.algo.clone()
    }

    /// Each node's device, by node name.
    #[getter]
    fn device_of(&self) -> HashMap<String, usize> {
        self.names.iter().cloned().zip(self.inner.device_of.iter().copied()).collect()
    }

    /// Each device's nodes in the order the placer runs them.
    #[getter]
    fn order(&self) -> Vec<Vec<String>> {
        let name = |&v: &usize| self.names[v].clone();
        self.inner.order.iter().map(|nodes| nodes.iter().map(name).collect()).collect()
    }

    /// The placer's predicted step, in µs.
    #[getter]
    fn makespan_us(&self) -> u64 {
        self.inner.makespan_us
    }

    /// Each device's predicted peak memory, in bytes.
    #[getter]
    fn peak_memory_bytes(&self) -> Vec<u64> {
        self.inner.peak_memory_bytes.clone()
    }

    /// Seconds the placer took.
    #[getter]
    fn placement_seconds(&self) -> f64 {
        self.inner.placement_seconds
    }

    /// For `auto`: where the winning search started (`m-etf on 2 of 4 devices`, ...).
    #[getter]
    fn winner(&self) -> Option<String> {
        self.winner.clone()
    }

    /// The placement file as JSON text (`ordo.placement/1`, as `ordo place --json` prints it).
    fn to_json(&self) -> String {
        self.file.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "ordo.Placement({}, {} devices, {:.3} ms)",
            self.inner.algo,
            self.inner.order.len(),
            self.inner.makespan_us as f64 / 1e3
        )
    }
}

/// Places `problem` with `algo` (`auto`, `m-topo`, `m-etf`, `m-sct`, ...).
#[pyfunction]
#[pyo3(signature = (problem, algo = "auto", *, budget = 2.0, seed = 0, sct_threshold = 0.1))]
pub fn place(
    py: Python<'_>,
    problem: &PyProblem,
    algo: &str,
    budget: f64,
    seed: u64,
    sct_threshold: f64,
) -> PyResult<PyPlacement> {
    let placer = placer(algo, budget, seed, sct_threshold)?;
    let placed = py.detach(|| ordo::place(&problem.inner, &placer)).map_err(error)?;
    PyPlacement::new(problem, &placed)
}

/// A plan: streams, tasks, events and buffers per device.
#[pyclass(name = "Planned", module = "ordo", frozen)]
pub struct PyPlanned {
    pub(crate) inner: Planned,
    placement: Option<Py<PyPlacement>>,
}

#[pymethods]
impl PyPlanned {
    /// The number of devices.
    #[getter]
    fn devices(&self) -> usize {
        self.inner.plan.devices
    }

    /// The number of tasks (kernels, transfers, collectives).
    #[getter]
    fn tasks(&self) -> usize {
        self.inner.plan.tasks.len()
    }

    /// What the plan runs, in words.
    #[getter]
    fn description(&self) -> String {
        self.inner.description.clone()
    }

    /// The placement it was built from, for a placed strategy.
    #[getter]
    fn placement(&self, py: Python<'_>) -> Option<Py<PyPlacement>> {
        self.placement.as_ref().map(|p| p.clone_ref(py))
    }

    /// The plan as JSON text (`ordo.plan/1`, as `ordo plan --json` prints it).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner.plan).map_err(error)
    }

    fn __repr__(&self) -> String {
        format!(
            "ordo.Planned({} tasks on {} devices)",
            self.inner.plan.tasks.len(),
            self.inner.plan.devices
        )
    }
}

/// The parameters of `ordo.plan` and `ordo.pytorch_schedule` in the facade's form.
#[allow(clippy::too_many_arguments)] // Python keyword arguments, each with a default.
fn strategy_params(
    schedule: Option<&str>,
    stages: Option<usize>,
    micro_batches: Option<usize>,
    modulo: Option<usize>,
    action_overhead_us: f64,
    replicas: Option<usize>,
    first_k: usize,
    bucket_bytes: u64,
) -> PyResult<StrategyParams> {
    let overhead = action_overhead_us;
    if !(overhead.is_finite() && overhead >= 0.0) {
        return Err(usage(format!("action_overhead_us={overhead}: expected µs >= 0")));
    }
    Ok(StrategyParams {
        schedule: schedule.map(str::parse).transpose().map_err(error)?,
        stages,
        micro_batches,
        modulo,
        action_overhead_us: overhead.round() as u64,
        replicas,
        first_k,
        bucket_bytes,
        ..StrategyParams::default()
    })
}

/// Plans `problem` with `strategy`: a placer's name (`auto`, `m-etf`, ...; the default), a
/// one-device schedule (`inorder`, `ooo`), `pipeline` (`action_overhead_us`: a runtime's
/// cost per action, charged in the prediction) or `data-parallel`.
#[pyfunction]
#[pyo3(signature = (
    problem, strategy = "auto", *, budget = 2.0, seed = 0, stages = None, micro_batches = None,
    schedule = None, replicas = None, first_k = 0, bucket_bytes = 0, modulo = None,
    action_overhead_us = 0.0
))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments, each with a default.
pub fn plan(
    py: Python<'_>,
    problem: &PyProblem,
    strategy: &str,
    budget: f64,
    seed: u64,
    stages: Option<usize>,
    micro_batches: Option<usize>,
    schedule: Option<&str>,
    replicas: Option<usize>,
    first_k: usize,
    bucket_bytes: u64,
    modulo: Option<usize>,
    action_overhead_us: f64,
) -> PyResult<PyPlanned> {
    if action_overhead_us != 0.0 && strategy != "pipeline" {
        return Err(usage("action_overhead_us applies to the pipeline strategy only"));
    }
    let mut params = strategy_params(
        schedule,
        stages,
        micro_batches,
        modulo,
        action_overhead_us,
        replicas,
        first_k,
        bucket_bytes,
    )?;
    let kind = match StrategyKind::from_name(strategy, &mut params.schedule).map_err(error)? {
        StrategyKind::Placed(_) => StrategyKind::Placed(placer(strategy, budget, seed, 0.1)?),
        kind => kind,
    };
    let spec = StrategySpec::new(kind, &params).map_err(error)?;
    planned(py, problem, &spec.strategy(&problem.inner).map_err(error)?)
}

/// `strategy` planned for `problem` (without the interpreter lock), as a Python object.
fn planned(py: Python<'_>, problem: &PyProblem, strategy: &Strategy) -> PyResult<PyPlanned> {
    let inner = py.detach(|| ordo::plan(&problem.inner, strategy)).map_err(error)?;
    let placement = match &inner.placed {
        Some(placed) => Some(Py::new(py, PyPlacement::new(problem, placed)?)?),
        None => None,
    };
    Ok(PyPlanned { inner, placement })
}

/// Plans a placement made elsewhere: `device_of` gives every node of `problem` its device,
/// `order` each device's nodes in the order they run (default: the problem's node order, a
/// topological one). The plan is checked as a placer's is: every node once, each device's order
/// respecting its dependencies, no wait across devices that could deadlock.
#[pyfunction]
#[pyo3(signature = (problem, device_of, order = None, *, algo = "given"))]
pub fn plan_placement(
    py: Python<'_>,
    problem: &PyProblem,
    device_of: HashMap<String, usize>,
    order: Option<Vec<Vec<String>>>,
    algo: &str,
) -> PyResult<PyPlanned> {
    let names = &problem.inner.place.names;
    let devices = problem.inner.place.devices.count();
    let index: HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, name)| (name.as_str(), i)).collect();
    let id = |name: &str, what: &str| {
        index.get(name).copied().ok_or_else(|| {
            usage(format!("{what} names node `{name}`, which the problem does not have"))
        })
    };
    let mut device = vec![usize::MAX; names.len()];
    for (name, &d) in &device_of {
        if d >= devices {
            return Err(usage(format!(
                "device_of puts node `{name}` on device {d}, but the problem has {devices}"
            )));
        }
        device[id(name, "device_of")?] = d;
    }
    if let Some(v) = device.iter().position(|&d| d == usize::MAX) {
        return Err(usage(format!("device_of has no device for node `{}`", names[v])));
    }
    let mut placement = Placement::in_id_order(algo, device, devices);
    if let Some(order) = order {
        placement.order = order
            .iter()
            .map(|o| o.iter().map(|name| id(name, "order")).collect())
            .collect::<PyResult<_>>()?;
    }
    let strategy = Strategy::Given(placement);
    planned(py, problem, &strategy)
}

/// `problem` (the training problem of one micro-batch) split into a pipeline of `stages`
/// stages over `micro_batches` micro-batches with `schedule` (`modulo`: modulo allocation in
/// groups of that many blocks), as PyTorch's pipeline runtime runs it: a dict of `actions`
/// (each rank's, `"0F0"`, `"1I2"`), `stage_rank` and `stage_units` (each of PyTorch's stages:
/// its rank, the model's blocks it runs) and `csv` (what `_load_csv` reads).
#[pyfunction]
#[pyo3(signature = (problem, *, stages, micro_batches, schedule = "1f1b", modulo = None))]
pub fn pytorch_schedule<'py>(
    py: Python<'py>,
    problem: &PyProblem,
    stages: usize,
    micro_batches: usize,
    schedule: &str,
    modulo: Option<usize>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let params = strategy_params(
        Some(schedule),
        Some(stages),
        Some(micro_batches),
        modulo,
        0.0,
        None,
        0,
        0,
    )?;
    let pipeline = params.pipeline().map_err(error)?;
    let inner = py.detach(|| ordo::pytorch_schedule(&problem.inner, &pipeline)).map_err(error)?;
    let dict = pyo3::types::PyDict::new(py);
    dict.set_item("actions", inner.actions)?;
    dict.set_item("stage_rank", inner.stage_rank)?;
    dict.set_item("stage_units", inner.stage_units)?;
    dict.set_item("csv", inner.csv)?;
    Ok(dict)
}

/// The placer's global order of `planned`'s nodes (a placed plan of `problem`), by name: a
/// topological order of the graph and every device's order together, earliest simulated
/// start first (what the Assigner's global criterion walks).
#[pyfunction]
pub fn global_order(
    py: Python<'_>,
    problem: &PyProblem,
    planned: &PyPlanned,
) -> PyResult<Vec<String>> {
    let order = py.detach(|| ordo::assigner::global_order(&problem.inner, &planned.inner));
    let names = &problem.inner.place.names;
    Ok(order.map_err(error)?.into_iter().map(|v| names[v].clone()).collect())
}

/// The simulator's prediction of a plan's step.
#[pyclass(name = "Report", module = "ordo", frozen)]
pub struct PyReport {
    inner: Report,
    /// The Chrome trace and Gantt chart need the plan: kept as JSON-ready parts.
    trace: String,
    gantt: String,
}

#[pymethods]
impl PyReport {
    /// The step's time in µs.
    #[getter]
    fn step_time_us(&self) -> f64 {
        self.inner.step_time_us
    }

    /// A lower bound on the step's time in µs.
    #[getter]
    fn lower_bound_us(&self) -> f64 {
        self.inner.lower_bound_us
    }

    /// Each device's peak memory in bytes.
    #[getter]
    fn peak_memory_bytes(&self) -> Vec<u64> {
        self.inner.peak_memory_bytes.clone()
    }

    /// Each device's busy share of the step.
    #[getter]
    fn busy_fraction(&self) -> Vec<f64> {
        self.inner.busy_fraction.devices.clone()
    }

    /// Each task's `(name, start_us, finish_us)`.
    #[getter]
    fn tasks(&self) -> Vec<(String, f64, f64)> {
        self.inner.tasks.iter().map(|t| (t.name.clone(), t.start_us, t.finish_us)).collect()
    }

    /// The report as JSON text (as `ordo simulate --json` prints it).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(error)
    }

    /// The step as a Chrome trace (JSON text; Perfetto opens it).
    fn chrome_trace(&self) -> String {
        self.trace.clone()
    }

    /// The step as an SVG Gantt chart.
    fn gantt_svg(&self) -> String {
        self.gantt.clone()
    }

    fn __repr__(&self) -> String {
        format!("ordo.Report(step {:.3} ms)", self.inner.step_time_us / 1e3)
    }
}

/// Simulates `planned`'s step. `channel`: how transfers contend (`tf`, Baechi's TensorFlow
/// model, the default; `pytorch`; `duplex`; `host`); `concurrent_kernels`: kernels of
/// different streams of a device run at once, sharing it; `host_slowdown` (at least 1): the
/// devices share one host, whose work slows by this factor while two devices overlap
/// (`ordo_sim::simulate_on_host`; 1, the default, for devices of their own).
#[pyfunction]
#[pyo3(signature = (planned, *, channel = "tf", concurrent_kernels = false, host_slowdown = 1.0))]
pub fn simulate(
    py: Python<'_>,
    planned: &PyPlanned,
    channel: &str,
    concurrent_kernels: bool,
    host_slowdown: f64,
) -> PyResult<PyReport> {
    if !(host_slowdown.is_finite() && (1.0..=100.0).contains(&host_slowdown)) {
        return Err(usage(format!(
            "host_slowdown={host_slowdown}: expected a number from 1 to 100"
        )));
    }
    let channel = match channel {
        "tf" => Channel::BaechiTf,
        "pytorch" => Channel::BaechiPytorch,
        "duplex" => Channel::Duplex,
        "host" => Channel::Host,
        other => {
            return Err(usage(format!("channel `{other}`: expected tf, pytorch, duplex or host")));
        }
    };
    let options = SimOptions { concurrent_kernels, channel };
    let plan = &planned.inner.plan;
    let inner =
        py.detach(|| ordo::simulate_on_host(plan, &options, host_slowdown)).map_err(error)?;
    let trace = ordo::chrome_trace_json(plan, &inner);
    let gantt = ordo::gantt_svg(plan, &inner, &planned.inner.description);
    Ok(PyReport { inner, trace, gantt })
}
