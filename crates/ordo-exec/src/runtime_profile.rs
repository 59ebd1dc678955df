//! Node times measured inside the runtime ([`crate::ProfileMode::Runtime`]), and the runtime's
//! cost per step outside its tasks.

use ordo_cost::StepMode;
use ordo_ir::Role;
use ordo_problem::{Devices, PlaceProblem, Placement};

use std::time::Instant;

use crate::engine::{EngineOptions, Executable};
use crate::error::ExecError;
use crate::profile::ProfileOptions;
use crate::program::{Program, RunSettings};
use crate::state::{Feeds, TrainState};

/// `program` bound to one device with one worker, nodes in id order (a topological order):
/// task `v` computes node `v` (the plan builder's numbering).
fn one_device(program: &Program, settings: RunSettings) -> Result<Executable, ExecError> {
    let graph = program.graph();
    let n = graph.nodes.len();
    let mode = if graph.nodes.iter().any(|node| node.role == Role::Update) {
        StepMode::TrainingGraph
    } else {
        StepMode::ForwardOnly
    };
    let cost = ordo_cost::costgraph_from_graph(graph);
    let problem = PlaceProblem::new(&cost, Devices::uniform(1, u64::MAX), mode)
        .map_err(|e| ExecError::Config(format!("profiling in the runtime: {e}")))?;
    let plan = ordo_sched::build_plan(&problem, &Placement::in_id_order("profile", vec![0; n], 1))?;
    Executable::new(program.clone(), &plan, EngineOptions { settings, ..EngineOptions::default() })
}

/// What [`task_times`] measured.
pub(crate) struct TaskTimes {
    /// Per node, its time in each timed step, µs.
    pub(crate) times: Vec<Vec<f64>>,
    /// Untimed and timed steps made.
    pub(crate) warmup: usize,
    pub(crate) reps: usize,
    /// Each timed step's wall time, µs.
    pub(crate) step_us: Vec<f64>,
    /// The median over the timed steps of the wall time less the span of the tasks, µs: what
    /// a step costs outside its tasks (starting and joining the workers, handing out the first
    /// task, collecting the results).
    pub(crate) overhead_us: f64,
}

/// Per node, its times in µs in steps of the runtime on one device with one worker, timed
/// after untimed steps until the machine is warm, as many as `options` asks (see
/// [`ProfileOptions`]); `progress` is told the timed steps made. A node's time runs from the
/// start of its task to the start of the next one (the last node's to its end). Every step
/// starts from a copy of `state`.
pub(crate) fn task_times(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
    progress: &dyn Fn(usize),
) -> Result<TaskTimes, ExecError> {
    let exe = one_device(program, options.settings)?;
    let step = || exe.run_step(&mut state.clone(), std::slice::from_ref(feeds));
    let clock = Instant::now();
    let mut warmup = 0;
    while options.more_warmup(warmup, clock.elapsed().as_secs_f64()) {
        step()?;
        warmup += 1;
    }
    let n = program.graph().nodes.len();
    let mut measured = TaskTimes {
        times: vec![Vec::with_capacity(options.reps); n],
        warmup,
        reps: 0,
        step_us: Vec::new(),
        overhead_us: 0.0,
    };
    let mut overheads = Vec::new();
    let timing = Instant::now();
    while options.more_timed(measured.reps, timing.elapsed().as_secs_f64()) {
        let run = step()?;
        for (v, node_times) in measured.times.iter_mut().enumerate() {
            let end = run.tasks.get(v + 1).map_or(run.tasks[v].finish_us, |t| t.start_us);
            node_times.push((end - run.tasks[v].start_us).max(0.0));
        }
        let first = run.tasks.iter().map(|t| t.start_us).fold(f64::INFINITY, f64::min);
        let last = run.tasks.iter().map(|t| t.finish_us).fold(0.0, f64::max);
        overheads.push((run.wall_us - (last - first).max(0.0)).max(0.0));
        measured.step_us.push(run.wall_us);
        measured.reps += 1;
        progress(measured.reps);
    }
    overheads.sort_by(f64::total_cmp);
    measured.overhead_us = overheads.get(overheads.len() / 2).copied().unwrap_or(0.0);
    Ok(measured)
}

/// How much slower a step of `program` runs while another copy of it runs at the same time on
/// this machine: the median step of two copies running at once (each on its own thread, one
/// device, one worker) over the median step of one copy alone, each measured for
/// `options.timed_seconds / 2` (at least 5 steps), after `options.warmup_seconds` of warm-up.
/// 1 on a machine whose cores share nothing; more where they share caches, memory bandwidth
/// or, on a virtual machine, a physical core (two hyper-threads). This is what two CPU devices
/// (or two workers on one) cost that one does not. Clamped to `[1, 4]`.
///
/// # Errors
/// Those of running the steps.
pub fn concurrency_slowdown(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
) -> Result<f64, ExecError> {
    let window = (options.timed_seconds / 2.0).max(0.0);
    // Steps of one copy for `window` seconds (at least 5), their wall times.
    let steps = |exe: &Executable| -> Result<Vec<f64>, ExecError> {
        let clock = Instant::now();
        let mut walls = Vec::new();
        while walls.len() < 5 || clock.elapsed().as_secs_f64() < window {
            walls.push(exe.run_step(&mut state.clone(), std::slice::from_ref(feeds))?.wall_us);
        }
        Ok(walls)
    };
    let (first, second) =
        (one_device(program, options.settings)?, one_device(program, options.settings)?);
    let clock = Instant::now();
    while clock.elapsed().as_secs_f64() < options.warmup_seconds {
        first.run_step(&mut state.clone(), std::slice::from_ref(feeds))?;
    }
    let alone = steps(&first)?;
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| steps(&second));
        let mine = steps(&first);
        (mine, other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let mut together = a?;
    together.extend(b?);
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (alone, together) = (median(alone), median(together));
    Ok(if alone > 0.0 { (together / alone).clamp(1.0, 4.0) } else { 1.0 })
}
