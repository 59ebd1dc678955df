//! Simulating a pipeline-parallel training step.

use ordo_sched::PipelinePlan;

use crate::{Report, SimError, SimOptions, simulate};

/// What one simulated step of a pipeline costs.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineReport {
    /// The step's makespan, flush included, in µs.
    pub step_time_us: f64,
    /// Peak memory of each stage's device, in bytes.
    pub peak_memory_bytes: Vec<u64>,
    /// Share of the stages' time without a kernel running: `1 -` the mean busy fraction of
    /// the `S` stage devices.
    pub bubble_fraction: f64,
    /// Each unit's stage.
    pub stage_of_unit: Vec<usize>,
    /// Whether the plan was made per block ([`ordo_sched::Granularity`]) rather than per
    /// node: its step and peaks then approximate the node-level plan's.
    pub per_block: bool,
    /// The simulator's full report.
    pub report: Report,
}

/// Simulates a pipeline's plan made by [`ordo_sched::pipeline_plan`].
///
/// # Errors
/// The simulator's.
pub fn pipeline_report(
    planned: &PipelinePlan,
    options: &SimOptions,
) -> Result<PipelineReport, SimError> {
    let report = simulate(&planned.plan, options)?;
    let stages = planned.stage_of_unit.iter().max().map_or(0, |s| s + 1);
    let busy = &report.busy_fraction.devices[..stages];
    let bubble_fraction = 1.0 - busy.iter().sum::<f64>() / stages.max(1) as f64;
    Ok(PipelineReport {
        step_time_us: report.step_time_us,
        peak_memory_bytes: report.peak_memory_bytes[..stages].to_vec(),
        bubble_fraction,
        stage_of_unit: planned.stage_of_unit.clone(),
        per_block: planned.per_block,
        report,
    })
}
