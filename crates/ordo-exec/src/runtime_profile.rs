//! Node times measured inside the runtime ([`crate::ProfileMode::Runtime`]), and the runtime's
//! cost per step outside its tasks.

use ordo_cost::StepMode;
use ordo_ir::Role;
use ordo_problem::{Devices, PlaceProblem, Placement};

use crate::engine::{EngineOptions, Executable, StepRun};
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

/// Runs `warmup + reps` steps of `exe`, each from a copy of `state`; the timed ones.
fn timed_steps(
    exe: &Executable,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
) -> Result<Vec<StepRun>, ExecError> {
    let mut runs = Vec::with_capacity(options.reps);
    for step in 0..options.warmup + options.reps {
        let mut copy = state.clone();
        let run = exe.run_step(&mut copy, std::slice::from_ref(feeds))?;
        if step >= options.warmup {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Per node, its `reps` times in µs after `warmup` untimed steps of the runtime on one device
/// with one worker. A node's time runs from the start of its task to the start of the next
/// one (the last node's to its end).
pub(crate) fn task_times(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
) -> Result<Vec<Vec<f64>>, ExecError> {
    let exe = one_device(program, options.settings)?;
    let mut times = vec![Vec::with_capacity(options.reps); program.graph().nodes.len()];
    for run in timed_steps(&exe, state, feeds, options)? {
        for (v, node_times) in times.iter_mut().enumerate() {
            let end = run.tasks.get(v + 1).map_or(run.tasks[v].finish_us, |t| t.start_us);
            node_times.push((end - run.tasks[v].start_us).max(0.0));
        }
    }
    Ok(times)
}

/// What a step of the runtime costs outside its tasks (starting and joining the workers,
/// handing out the first task, collecting the results), in µs: the median over `reps` steps
/// (after `warmup`) of one device with one worker of the step's wall time less the time from
/// its first task's start to its last task's end.
///
/// # Errors
/// Those of running the steps.
pub fn step_overhead_us(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
) -> Result<f64, ExecError> {
    let exe = one_device(program, options.settings)?;
    let mut overheads: Vec<f64> = timed_steps(&exe, state, feeds, options)?
        .iter()
        .map(|run| {
            let first = run.tasks.iter().map(|t| t.start_us).fold(f64::INFINITY, f64::min);
            let last = run.tasks.iter().map(|t| t.finish_us).fold(0.0, f64::max);
            (run.wall_us - (last - first).max(0.0)).max(0.0)
        })
        .collect();
    overheads.sort_by(f64::total_cmp);
    Ok(overheads.get(overheads.len() / 2).copied().unwrap_or(0.0))
}
