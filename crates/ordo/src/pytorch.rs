//! ordo's pipeline schedules simulated, and in the form PyTorch's pipeline runtime runs
//! (`torch.distributed.pipelining`): each rank's actions, and which of the model's blocks
//! make each of PyTorch's stages.

use ordo_sched::{
    Pipeline, PipelinePlan, PipelineReplicas, PipelineSchedule, pytorch_actions, pytorch_csv,
};
use ordo_sim::{PipelineReport, SimOptions};

use crate::Problem;
use crate::error::Result;
use crate::parameter::{Parameter, refuse};

/// A pipeline schedule for PyTorch's `_PipelineScheduleRuntime`.
#[derive(Clone, Debug, PartialEq)]
pub struct PytorchSchedule {
    /// Each rank's actions, as PyTorch writes them (`0F0`, `1I2`, `0W2`, `2B1`).
    pub actions: Vec<Vec<String>>,
    /// Each of PyTorch's stages (ordo's chunks), its rank.
    pub stage_rank: Vec<usize>,
    /// Each stage, the model's blocks (pipeline units) it runs, in order.
    pub stage_units: Vec<Vec<String>>,
    /// The actions as the CSV `_load_csv` reads (format `compute_only`).
    pub csv: String,
}

/// `pipeline` planned for the one-micro-batch training problem `problem`, and its step
/// simulated with `options`, stage by stage.
///
/// # Errors
/// [`crate::Error::Sched`] for a pipeline that does not fit the problem (more stages than
/// devices or units, ...); [`crate::Error::Sim`] from the simulator.
pub fn simulate_pipeline(
    problem: &Problem,
    pipeline: &Pipeline,
    options: &SimOptions,
) -> Result<(PipelinePlan, PipelineReport)> {
    let mut planned = ordo_sched::pipeline_plan(&problem.place, pipeline)?;
    problem.cost_transfers_between_nodes(&mut planned.plan);
    let report = ordo_sim::pipeline_report(&planned, options)?;
    Ok((planned, report))
}

/// `replicas` copies of `pipeline` (data parallelism over pipelines), each stage's gradients
/// all-reduced among its copies, planned for the one-micro-batch training problem `problem`
/// and simulated by symmetry: one pipeline stands for all copies
/// ([`ordo_sched::replicated_pipeline_plan`]).
///
/// # Errors
/// As [`simulate_pipeline`]; [`crate::Error::Parameter`] for zero copies.
pub fn simulate_replicated_pipeline(
    problem: &Problem,
    pipeline: &Pipeline,
    replicas: &PipelineReplicas,
    options: &SimOptions,
) -> Result<(PipelinePlan, PipelineReport)> {
    simulate_replicated_split(problem, None, pipeline, replicas, options)
}

/// [`simulate_replicated_pipeline`] of `problem` already split into the pipeline's
/// micro-batches (`None`: split here), for a caller simulating several schedules of one split.
pub(crate) fn simulate_replicated_split(
    problem: &Problem,
    split: Option<std::sync::Arc<ordo_sched::MicroBatched>>,
    pipeline: &Pipeline,
    replicas: &PipelineReplicas,
    options: &SimOptions,
) -> Result<(PipelinePlan, PipelineReport)> {
    if replicas.replicas == 0 {
        refuse!(Parameter::Replicas => 0, ": data parallelism needs at least one replica");
    }
    let mut planned =
        ordo_sched::replicated_pipeline_plan_of_split(&problem.place, split, pipeline, replicas)?;
    problem.cost_transfers_between_nodes(&mut planned.plan);
    let report = ordo_sim::pipeline_report(&planned, options)?;
    Ok((planned, report))
}

/// `pipeline` planned for the one-micro-batch training problem `problem`, as PyTorch's
/// pipeline runtime runs it.
///
/// # Errors
/// The scheduler's, for a pipeline that does not fit the problem.
pub fn pytorch_schedule(problem: &Problem, pipeline: &Pipeline) -> Result<PytorchSchedule> {
    let planned = ordo_sched::pipeline_plan(&problem.place, pipeline)?;
    pytorch_schedule_of(&planned, pipeline.schedule, 1)
}

/// The pipeline `planned` with `schedule` (the schedule it was planned with), as PyTorch's
/// pipeline runtime runs it; with `replicas` copies of it (more than 1), each stage's
/// `REDUCE_GRAD` (and its wait) where PyTorch's runtime reduces the stage's gradients across
/// the copies ([`ordo_sched::pytorch_csv_with_reduce_grad`]).
///
/// # Errors
/// The scheduler's, for a schedule PyTorch's actions cannot express.
pub fn pytorch_schedule_of(
    planned: &PipelinePlan,
    schedule: PipelineSchedule,
    replicas: usize,
) -> Result<PytorchSchedule> {
    let ranks = pytorch_actions(planned, schedule)?;
    let mut stage_units = vec![Vec::new(); planned.device_of_chunk.len()];
    for (unit, &chunk) in planned.chunk_of_unit.iter().enumerate() {
        stage_units[chunk].push(planned.units.names[unit].clone());
    }
    Ok(PytorchSchedule {
        actions: ranks.iter().map(|r| r.iter().map(ToString::to_string).collect()).collect(),
        stage_rank: planned.device_of_chunk.clone(),
        stage_units,
        csv: if replicas > 1 {
            ordo_sched::pytorch_csv_with_reduce_grad(&ranks, planned.split.micro_batches())
        } else {
            pytorch_csv(&ranks)
        },
    })
}
