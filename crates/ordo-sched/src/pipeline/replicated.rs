//! Data parallelism over pipelines: `D` copies of a `P`-stage pipeline, each stage's parameter
//! gradients all-reduced among the stage's `D` copies, by symmetry.
//!
//! Every copy runs the same schedule at the same costs, so one pipeline stands for all of them:
//! each stage gets a collective stream, and each of its all-reduces lasts what it lasts among
//! the `D` copies of the stage ([`ordo_cost::Collectives::all_reduce_us`]). The gradients are
//! reduced in the order the stage produces them, in buckets, as soon as the stage's last
//! micro-batch has accumulated them: a stage whose weight-gradient work ends early (the last
//! stage in 1F1B, or any stage whose W actions a zero-bubble schedule runs early) reduces early
//! and overlaps its all-reduces with the other stages' work. Each update waits for its
//! gradient's all-reduce. The plan's size, and the simulation's time and memory, do not
//! depend on `D`.

use std::collections::HashMap;

use ordo_cost::Collectives;
use ordo_problem::PlaceProblem;

use super::{Pipeline, PipelinePlan};
use crate::collectives::{AllReduce, AllReduces, Gradient, bucket_name, buckets, gradients_by};
use crate::data_parallel::replicate;
use crate::error::SchedError;
use crate::plan::{BufferId, Plan, StreamId, TaskId};
use crate::validate::validate;

/// How the copies of a pipeline reduce their gradients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PipelineReplicas {
    /// Copies of the pipeline `D` (at least 1).
    pub replicas: usize,
    /// The links among a stage's copies and the all-reduce algorithm.
    pub network: Collectives,
    /// Gradients are all-reduced in buckets of at least this many bytes (0: one each).
    pub bucket_bytes: u64,
}

/// The plan of `pipeline` for `problem` (as [`super::pipeline_plan`]) with each stage's gradients
/// all-reduced among `replicas.replicas` copies of the stage (see the module documentation of
/// `pipeline/replicated.rs`); with one copy, [`super::pipeline_plan`]'s plan.
///
/// # Errors
/// Those of [`super::pipeline_plan`]; [`SchedError::Pipeline`] for zero copies.
pub fn replicated_pipeline_plan(
    problem: &PlaceProblem,
    pipeline: &Pipeline,
    replicas: &PipelineReplicas,
) -> Result<PipelinePlan, SchedError> {
    replicated_pipeline_plan_of_split(problem, None, pipeline, replicas)
}

/// [`replicated_pipeline_plan`] of a problem already split into the pipeline's micro-batches
/// ([`super::pipeline_plan_of_split`]).
///
/// # Errors
/// As [`replicated_pipeline_plan`] and [`super::pipeline_plan_of_split`].
pub fn replicated_pipeline_plan_of_split(
    problem: &PlaceProblem,
    split: Option<std::sync::Arc<super::MicroBatched>>,
    pipeline: &Pipeline,
    replicas: &PipelineReplicas,
) -> Result<PipelinePlan, SchedError> {
    check_copies(replicas)?;
    let (mut planned, buffer_of) = super::unchecked_pipeline_plan(problem, split, pipeline)?;
    if replicas.replicas > 1 {
        // One copy standing for all: the plan itself, moved rather than copied.
        let one = std::mem::replace(&mut planned.plan, Plan::empty());
        planned.plan = with_stage_all_reduces(&planned, (one, &buffer_of), replicas, 1)?;
    }
    validate(&planned.plan)?;
    Ok(planned)
}

/// [`replicated_pipeline_plan`] with every copy of the pipeline in the plan: copy `r`'s stage
/// `s` on device `r P + s` (`P` the pipeline's devices), each all-reduce on the collective
/// streams of the `D` copies of its stage. What the symmetric plan stands for; for checking
/// it, and for a runtime.
///
/// # Errors
/// As [`replicated_pipeline_plan`]; [`SchedError::Pipeline`] for more than
/// [`ordo_cost::MAX_DEVICES`] devices in all.
pub fn materialised_pipeline_plan(
    problem: &PlaceProblem,
    pipeline: &Pipeline,
    replicas: &PipelineReplicas,
) -> Result<Plan, SchedError> {
    check_copies(replicas)?;
    let (planned, buffer_of) = super::unchecked_pipeline_plan(problem, None, pipeline)?;
    let devices = planned.plan.devices.saturating_mul(replicas.replicas);
    if devices > ordo_cost::MAX_DEVICES {
        return Err(SchedError::Pipeline(format!(
            "{} copies of a {}-device pipeline need {devices} devices; a plan holds at most {}",
            replicas.replicas,
            planned.plan.devices,
            ordo_cost::MAX_DEVICES
        )));
    }
    let one = planned.plan.clone();
    let plan = with_stage_all_reduces(&planned, (one, &buffer_of), replicas, replicas.replicas)?;
    validate(&plan)?;
    Ok(plan)
}

/// At least one copy of the pipeline.
fn check_copies(replicas: &PipelineReplicas) -> Result<(), SchedError> {
    if replicas.replicas == 0 {
        return Err(SchedError::Pipeline("zero copies of the pipeline".into()));
    }
    Ok(())
}

/// `one`, the plan of `planned` (taken out of it) with the buffer of each tensor of
/// `planned.split.problem`, with `copies` of it (all `D`, or one standing for them), a
/// collective stream for each stage with gradients in each copy, and the stages' all-reduces.
fn with_stage_all_reduces(
    planned: &PipelinePlan,
    (one, buffer_of): (Plan, &[BufferId]),
    replicas: &PipelineReplicas,
    copies: usize,
) -> Result<Plan, SchedError> {
    let problem = &planned.split.problem;
    let device_of = &planned.placement.device_of;
    let mut position = vec![0usize; problem.len()];
    for order in &planned.placement.order {
        for (i, &v) in order.iter().enumerate() {
            position[v] = i;
        }
    }
    // Grouped by stage, each stage's in the order it produces them.
    let gradients = gradients_by(
        problem,
        |producer| (device_of[producer], position[producer]),
        |x| {
            let tensor = &problem.tensors[x];
            Gradient {
                tensor: x,
                producer: tensor.producer,
                step: 0,
                late: false,
                bytes: tensor.bytes,
            }
        },
    );
    let mut reduced = Vec::new();
    for (stage, grads) in gradients
        .chunk_by(|a, b| device_of[a.producer] == device_of[b.producer])
        .map(|grads| (device_of[grads[0].producer], grads))
    {
        for bucket in buckets(grads, replicas.bucket_bytes) {
            let buffers = bucket.iter().map(|g| buffer_of[g.tensor]).collect::<Vec<_>>();
            reduced.push((stage, bucket, buffers));
        }
    }
    let (devices, tasks, buffers) =
        (one.devices as u32, one.tasks.len() as u32, one.buffers.len() as u32);
    Plan::check_size(problem.len(), copies, &format!("{copies} copies of the pipeline"))?;
    let mut plan = if copies == 1 { one } else { replicate(&one, copies) };
    let mut reduces = AllReduces::new(&mut plan);
    let mut streams_of: HashMap<usize, Vec<StreamId>> = HashMap::new();
    for (stage, bucket, stage_buffers) in reduced {
        let streams = streams_of
            .entry(stage)
            .or_insert_with(|| {
                (0..copies as u32).map(|r| reduces.stream((r * devices) as usize + stage)).collect()
            })
            .clone();
        let (mut producers, mut copied) = (Vec::new(), Vec::new());
        for r in 0..copies as u32 {
            for (g, b) in bucket.iter().zip(&stage_buffers) {
                producers.push(TaskId(g.producer as u32 + r * tasks));
                copied.push(BufferId(b.0 + r * buffers));
            }
        }
        let bytes = bucket.iter().map(|g| g.bytes).sum();
        reduces.push(AllReduce {
            name: bucket_name(problem, &bucket),
            streams,
            buffers: copied,
            producers,
            duration_us: replicas.network.all_reduce_us(replicas.replicas, bytes),
            replicas: (copies < replicas.replicas).then_some(replicas.replicas),
        });
    }
    Ok(plan)
}
