//! A parallel plan exported for PyTorch: the micro-batch, the pipeline's schedule as its
//! runtime reads it, and the process groups.

use ordo_cost::Cluster;

use super::ParallelConfig;
use crate::error::Result;
use crate::parameter::{Parameter, refuse};
use crate::{Model, Problem, StepMode, Target};

/// What a parallel plan needs to run under PyTorch: the micro-batch, the pipeline's schedule as
/// PyTorch's runtime reads it, and the process groups.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelExport {
    /// The configuration exported.
    pub config: ParallelConfig,
    /// Samples in one micro-batch: `global_batch / (D M)`.
    pub micro_batch_size: usize,
    /// The pipeline's actions per rank of a copy, with each stage's `REDUCE_GRAD` across the
    /// copies where there are several (`None` for one stage: plain data parallelism with `M`
    /// accumulated micro-batches).
    pub schedule: Option<crate::PytorchSchedule>,
    /// The ranks of each stage's tensor-parallel group: rank `r` of stage `s` of copy `d` is
    /// GPU `d P T + s T + r`, so that a group's `T` ranks are consecutive GPUs of one node and
    /// a copy's stages follow each other, as the planner costed them.
    pub tensor_groups: Vec<Vec<usize>>,
    /// The ranks of each pipeline: one for each copy `d` and tensor rank `r`, stage by stage
    /// (`d P T + r, d P T + T + r, ...`).
    pub pipeline_groups: Vec<Vec<usize>>,
    /// The ranks whose gradients are all-reduced together: one group for each stage `s` and
    /// tensor rank `r`, copy by copy (`s T + r, P T + s T + r, ...`).
    pub data_groups: Vec<Vec<usize>>,
}

/// The export of `config` for `model_at` on `cluster` with `global_batch` samples per step.
///
/// # Errors
/// [`crate::Error::Parameter`] for a batch the configuration does not split; what planning the
/// pipeline fails with.
pub fn export_parallel(
    model_at: &(dyn Fn(usize, usize) -> Result<Model> + Sync),
    cluster: &Cluster,
    global_batch: usize,
    config: &ParallelConfig,
) -> Result<ParallelExport> {
    let parts = config.data * config.micro_batches;
    if parts == 0 || config.stages == 0 || !global_batch.is_multiple_of(parts) {
        refuse!(
            Parameter::Batch => global_batch,
            format!(": {config} needs a multiple of {parts} samples")
        );
    }
    let micro_batch_size = global_batch / parts;
    let rank = |d: usize, s: usize, r: usize| (d * config.stages + s) * config.tensor + r;
    let (data, tensor, stages) = (config.data, config.tensor, config.stages);
    let schedule = if stages > 1 {
        let target = Target::cluster(cluster.tensor_parallel_groups(tensor)?, Some(stages))?;
        let model = model_at(micro_batch_size, tensor)?;
        let problem = Problem::new(&model, &target, StepMode::TrainingGraph)?;
        let planned = ordo_sched::pipeline_plan(&problem.place, &config.pipeline())?;
        Some(crate::pytorch_schedule_of(&planned, config.schedule, data)?)
    } else {
        None
    };
    Ok(ParallelExport {
        config: *config,
        micro_batch_size,
        schedule,
        tensor_groups: (0..data * stages)
            .map(|group| (group * tensor..(group + 1) * tensor).collect())
            .collect(),
        pipeline_groups: (0..data)
            .flat_map(|d| (0..tensor).map(move |r| (d, r)))
            .map(|(d, r)| (0..stages).map(|s| rank(d, s, r)).collect())
            .collect(),
        data_groups: (0..stages)
            .flat_map(|s| (0..tensor).map(move |r| (s, r)))
            .map(|(s, r)| (0..data).map(|d| rank(d, s, r)).collect())
            .collect(),
    })
}
