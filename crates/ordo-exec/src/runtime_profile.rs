//! Node times measured inside the runtime ([`crate::ProfileMode::Runtime`]).

use ordo_cost::StepMode;
use ordo_ir::Role;
use ordo_place::{Devices, PlaceProblem, Placement};

use crate::engine::{EngineOptions, Executable};
use crate::error::ExecError;
use crate::profile::ProfileOptions;
use crate::program::Program;
use crate::state::{Feeds, TrainState};

/// Per node, its `reps` times in µs after `warmup` untimed steps: the program run by the
/// engine on one device with one worker, nodes in id order (a topological order), each step
/// from a copy of `state`. A node's time runs from the start of its task to the start of the
/// next one (the last node's to its end).
pub(crate) fn task_times(
    program: &Program,
    state: &TrainState,
    feeds: &Feeds,
    options: &ProfileOptions,
) -> Result<Vec<Vec<f64>>, ExecError> {
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
    let placement = Placement::in_id_order("profile", vec![0; n], 1);
    let plan = ordo_sched::build_plan(&problem, &placement)?;
    let engine = EngineOptions { settings: options.settings, ..EngineOptions::default() };
    let exe = Executable::new(program.clone(), &plan, engine)?;
    let mut times = vec![Vec::with_capacity(options.reps); n];
    for step in 0..options.warmup + options.reps {
        let mut copy = state.clone();
        let run = exe.run_step(&mut copy, std::slice::from_ref(feeds))?;
        if step < options.warmup {
            continue;
        }
        // Task v computes node v (the plan builder's numbering), in this order on the one
        // compute stream.
        for (v, node_times) in times.iter_mut().enumerate() {
            let end = run.tasks.get(v + 1).map_or(run.tasks[v].finish_us, |t| t.start_us);
            node_times.push((end - run.tasks[v].start_us).max(0.0));
        }
    }
    Ok(times)
}
