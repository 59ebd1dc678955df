//! `--pipeline S --micro-batches M` on `ordo simulate` and `ordo compare`: the training step of
//! a zoo model split into S stages over M micro-batches.

use anyhow::{Context, bail};
use ordo::{Pipeline, PipelineReplicas, PipelineSchedule};
use ordo::{PipelineReport, SimOptions};
use serde_json::json;

use crate::format::{Table, bytes};
use crate::placing::{Loaded, ProblemArgs};
use crate::source::SizeArgs;

/// How the pipeline is cut.
#[derive(clap::Args, Clone, Debug)]
pub struct PipelineArgs {
    /// With `--train`: split the model's blocks into S pipeline stages, one per device. With
    /// `--data-parallel D`: D copies of the pipeline, each stage's gradients all-reduced among
    /// its D copies (simulated by symmetry: one pipeline stands for all).
    #[arg(allow_negative_numbers = true, long, value_name = "S", requires = "train")]
    pub pipeline: Option<usize>,
    /// Micro-batches per step; `--batch` (the global batch) must be a multiple.
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "M",
        default_value_t = 4,
        requires = "pipeline"
    )]
    pub micro_batches: usize,
    /// Modulo layer allocation: block l on stage (l div m) mod S instead of contiguous
    /// stages balanced by cost.
    #[arg(allow_negative_numbers = true, long, value_name = "m", requires = "pipeline")]
    pub modulo: Option<usize>,
    /// Write the schedule as PyTorch's pipeline runtime reads it: each rank's actions
    /// (`0F0,0F1,1I0,...`), one CSV line per rank (`_PipelineScheduleRuntime._load_csv`,
    /// format `compute_only`).
    #[arg(long, value_name = "OUT.csv", requires = "pipeline")]
    pub pytorch_schedule: Option<std::path::PathBuf>,
    /// How finely the pipeline is planned and simulated: `node` (a task per node of the
    /// training graph and micro-batch), `block` (a task per block, pass and micro-batch:
    /// about 1% from the node level, peaks a few percent higher, tens of times faster), or
    /// `auto` (per block past 200,000 node-level tasks).
    #[arg(long, value_name = "auto|node|block", default_value = "auto", requires = "pipeline")]
    pub granularity: String,
}

impl PipelineArgs {
    /// `problem` for one micro-batch: the global batch divided by M (and by the data-parallel
    /// copies `replicas`), and S devices unless a device count or a cluster of one node is
    /// given.
    pub fn micro_batch_problem(
        &self,
        problem: &ProblemArgs,
        replicas: Option<usize>,
    ) -> anyhow::Result<ProblemArgs> {
        let mut problem = problem.clone();
        let Some(stages) = self.pipeline else { return Ok(problem) };
        problem.size = self.micro_batch_size(&problem.target, problem.size, replicas)?;
        // A cluster of nodes has more devices than a placement problem holds: the pipeline's
        // S stand for it.
        if problem.devices.is_none() && (problem.cluster.is_none() || problem.nodes.is_some()) {
            problem.devices = Some(stages);
        }
        Ok(problem)
    }

    /// The size of one micro-batch of `target` at `size` (the global batch, shared by
    /// `replicas` copies of the pipeline). Also checks that `--pipeline` asks for at least two
    /// stages.
    pub fn micro_batch_size(
        &self,
        target: &str,
        size: SizeArgs,
        replicas: Option<usize>,
    ) -> anyhow::Result<SizeArgs> {
        if let Some(stages) = self.pipeline.filter(|&s| s < 2) {
            bail!(
                "--pipeline {stages}: a pipeline needs at least 2 stages (on one device, use \
                 --schedule inorder or ooo)"
            );
        }
        let mut share = size.size();
        if let Some(replicas) = replicas {
            share = share.replica_share(target, replicas)?;
        }
        let micro = share.micro_batch(target, self.micro_batches)?;
        Ok(SizeArgs { batch: micro.batch, ..size })
    }

    /// The pipeline `--pipeline`, `--micro-batches`, `--modulo` and `--granularity` ask for,
    /// with `schedule`.
    pub fn pipeline(&self, schedule: PipelineSchedule) -> anyhow::Result<Pipeline> {
        let pipeline = Pipeline::new(self.pipeline.unwrap_or(0), self.micro_batches, schedule)
            .with_granularity(ordo::granularity(&self.granularity)?);
        Ok(match self.modulo {
            Some(m) => pipeline.with_modulo(m),
            None => pipeline,
        })
    }
}

/// `pipeline` planned and simulated, in `replicas` copies where given.
fn simulate_one(
    loaded: &Loaded,
    pipeline: &Pipeline,
    replicas: Option<&PipelineReplicas>,
    options: &SimOptions,
) -> anyhow::Result<(ordo::PipelinePlan, PipelineReport)> {
    let simulated = match replicas {
        Some(replicas) => {
            ordo::simulate_replicated_pipeline(&loaded.problem, pipeline, replicas, options)
        }
        None => ordo::simulate_pipeline(&loaded.problem, pipeline, options),
    };
    simulated.with_context(|| {
        let copies = replicas.map_or(String::new(), |r| format!(" x {} copies", r.replicas));
        format!(
            "simulating `{}` on a {}-stage pipeline{copies}, {}",
            loaded.label,
            pipeline.stages,
            pipeline.schedule.name()
        )
    })
}

/// `ordo simulate MODEL --train --pipeline S --micro-batches M --schedule ...`; the step
/// drawn where `drawings` asks.
#[allow(clippy::too_many_arguments)] // the command's settings, each its own
pub fn simulate(
    loaded: &Loaded,
    args: &PipelineArgs,
    schedule: PipelineSchedule,
    replicas: Option<&PipelineReplicas>,
    options: &SimOptions,
    as_json: bool,
    drawings: &crate::commands::simulate::Drawings,
) -> anyhow::Result<()> {
    let pipeline = args.pipeline(schedule)?;
    let (planned, result) = simulate_one(loaded, &pipeline, replicas, options)?;
    check_memory(loaded, &result)?;
    let mut written = Vec::new();
    if let Some(path) = &args.pytorch_schedule {
        let copies = replicas.map_or(1, |r| r.replicas);
        let pytorch = ordo::pytorch_schedule_of(&planned, schedule, copies)
            .with_context(|| format!("the {} schedule as PyTorch's actions", schedule.name()))?;
        crate::format::write_file(path, pytorch.csv.as_bytes())?;
        written.push(path.clone());
    }
    let title = format!(
        "{}: {}-stage pipeline, {} micro-batches, {}",
        loaded.label,
        pipeline.stages,
        pipeline.micro_batches,
        schedule.name()
    );
    written.extend(drawings.draw(
        &planned.plan,
        &result.report,
        &title,
        &loaded.problem.place.devices.memory,
    )?);
    if as_json {
        println!("{:#}", row_json(schedule, &result, None, replicas));
        return Ok(());
    }
    println!(
        "{} on {} pipeline stages, {} micro-batches, {}{}",
        loaded.label,
        pipeline.stages,
        pipeline.micro_batches,
        schedule.name(),
        args.modulo.map_or(String::new(), |m| format!(", modulo {m}"))
    );
    if let Some(replicas) = replicas {
        println!(
            "data parallel {} copies of the pipeline (simulated by symmetry); network {}",
            replicas.replicas, replicas.network
        );
    }
    if result.per_block {
        println!(
            "granularity   per block: a task per block, pass and micro-batch (within about 1% \
             of the node level, peaks a few percent higher; --granularity node for the node level)"
        );
    }
    println!("step time     {:.2} ms", result.step_time_us / 1e3);
    println!("bubble        {:.1}% of the stages' time idle", result.bubble_fraction * 100.0);
    println!("stage of each block {:?}", result.stage_of_unit);
    let peaks: Vec<String> = result.peak_memory_bytes.iter().map(|&b| bytes(b)).collect();
    println!("peak memory   {}", peaks.join(" | "));
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// `ordo compare MODEL --train --pipeline S --micro-batches M`: the schedules side by side,
/// speedup over GPipe; also drawn as a bar chart at `svg` when given.
pub fn compare(
    loaded: &Loaded,
    args: &PipelineArgs,
    replicas: Option<&PipelineReplicas>,
    options: &SimOptions,
    as_json: bool,
    svg: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if args.pytorch_schedule.is_some() {
        bail!("--pytorch-schedule writes one schedule: use it with `ordo simulate`, not compare");
    }
    let mut results = Vec::new();
    for schedule in PipelineSchedule::ALL {
        let (_, result) = simulate_one(loaded, &args.pipeline(schedule)?, replicas, options)?;
        results.push((schedule, result));
    }
    let gpipe = results[0].1.step_time_us;
    if let Some(path) = svg {
        let bars: Vec<ordo::CompareBar> = results
            .iter()
            .map(|(schedule, result)| ordo::CompareBar {
                name: schedule.name().to_string(),
                result: Ok((
                    result.step_time_us,
                    result.peak_memory_bytes.iter().copied().max().unwrap_or(0),
                )),
            })
            .collect();
        let title = format!(
            "{} on {} pipeline stages, {} micro-batches: step time and peak memory per schedule",
            loaded.label,
            args.pipeline.unwrap_or(0),
            args.micro_batches
        );
        let limit = loaded.place_problem().devices.memory.iter().copied().min();
        crate::format::write_file(path, ordo::compare_svg(&title, &bars, 0.0, limit).as_bytes())?;
    }
    if as_json {
        let rows: Vec<_> =
            results.iter().map(|(s, r)| row_json(*s, r, Some(gpipe), replicas)).collect();
        let out = json!({
            "target": loaded.label,
            "stages": args.pipeline,
            "micro_batches": args.micro_batches,
            "modulo": args.modulo,
            "schedules": rows,
        });
        println!("{out:#}");
        return Ok(());
    }
    println!(
        "{} on {} pipeline stages, {} micro-batches{}",
        loaded.label,
        args.pipeline.unwrap_or(0),
        args.micro_batches,
        args.modulo.map_or(String::new(), |m| format!(", modulo {m}"))
    );
    let mut table = Table::new(&["schedule", "step ms", "speedup", "bubble", "peak memory"]);
    for (schedule, result) in &results {
        let peak = result.peak_memory_bytes.iter().copied().max().unwrap_or(0);
        let fits = result.peak_memory_bytes.iter().zip(&loaded.place_problem().devices.memory);
        let over = fits.clone().any(|(peak, limit)| peak > limit);
        table.row(vec![
            schedule.name().to_string(),
            format!("{:.2}", result.step_time_us / 1e3),
            format!("{:.3}x", gpipe / result.step_time_us.max(1e-9)),
            format!("{:.1}%", result.bubble_fraction * 100.0),
            format!("{}{}", bytes(peak), if over { " (over the limit)" } else { "" }),
        ]);
    }
    print!("{}", table.render());
    if let Some(path) = svg {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// An error when a stage's peak exceeds its device's memory.
fn check_memory(loaded: &Loaded, result: &PipelineReport) -> anyhow::Result<()> {
    for (stage, (&peak, &limit)) in
        result.peak_memory_bytes.iter().zip(&loaded.place_problem().devices.memory).enumerate()
    {
        if peak > limit {
            bail!(
                "stage {stage} needs {} at its peak, more than its device's {}",
                bytes(peak),
                bytes(limit)
            );
        }
    }
    Ok(())
}

fn row_json(
    schedule: PipelineSchedule,
    result: &PipelineReport,
    baseline_us: Option<f64>,
    replicas: Option<&PipelineReplicas>,
) -> serde_json::Value {
    let mut row = json!({
        "schedule": schedule.name(),
        "step_time_us": result.step_time_us,
        "bubble_fraction": result.bubble_fraction,
        "peak_memory_bytes": result.peak_memory_bytes,
        "stage_of_unit": result.stage_of_unit,
        "granularity": if result.per_block { "block" } else { "node" },
    });
    if let Some(base) = baseline_us {
        row["speedup"] = json!(base / result.step_time_us.max(1e-9));
    }
    if let Some(replicas) = replicas {
        row["replicas"] = json!(replicas.replicas);
        row["bucket_bytes"] = json!(replicas.bucket_bytes);
        row["network"] = crate::commands::data_parallel::network_json(&replicas.network);
    }
    row
}
