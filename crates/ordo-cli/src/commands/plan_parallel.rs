//! `ordo plan-parallel MODEL --cluster C --gpus N --batch B`: the data and pipeline degrees,
//! micro-batches and schedule that train fastest on N GPUs of a cluster, each simulated.

use anyhow::Context;
use ordo::{ParallelPlans, ParallelSearch, PipelineSchedule};
use serde_json::json;

use crate::commands::data_parallel::AllReduceArg;
use crate::format::{Table, bytes};
use crate::placing::{OptimizerArg, PrecisionArg};
use crate::source::{self, SizeArgs};

/// Arguments of `ordo plan-parallel`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model, a Hugging Face `config.json`, or a transformer by its fields
    /// (`llama:layers=32,hidden=4096,...`).
    pub target: String,
    /// The cluster: a shipped name (e.g. `h100x8-ib-ndr`) or a file.
    #[arg(long)]
    pub cluster: String,
    /// Nodes of the cluster (default: the description's).
    #[arg(allow_negative_numbers = true, long)]
    pub nodes: Option<usize>,
    /// GPUs to use (default: all of the cluster's).
    #[arg(allow_negative_numbers = true, long)]
    pub gpus: Option<usize>,
    /// The global batch: samples per step over all GPUs.
    #[arg(allow_negative_numbers = true, long)]
    pub batch: usize,
    /// Sequence length of sequence models (default: the model's).
    #[arg(allow_negative_numbers = true, long)]
    pub seq_len: Option<usize>,
    /// The zoo model's small variant.
    #[arg(long)]
    pub small: bool,
    /// Weights and activations in `fp32`, or mixed precision in `bf16` or `fp16`.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "fp32")]
    pub precision: PrecisionArg,
    /// The optimizer (its state is part of each stage's memory).
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "adam")]
    pub optimizer: OptimizerArg,
    /// The most micro-batches per step tried.
    #[arg(allow_negative_numbers = true, long, default_value_t = 64)]
    pub max_micro_batches: usize,
    /// The most tensor-parallel ranks per stage tried (Megatron-LM's split of GPT and LLaMA
    /// decoders, within a node); 1 tries none.
    #[arg(allow_negative_numbers = true, long, default_value_t = 8)]
    pub tensor_parallel: usize,
    /// Activation recomputation: `auto` tries none, then selective (the attention's scores),
    /// then full (each block from its input) for a configuration that does not fit; or one of
    /// them only.
    #[arg(long, default_value = "auto", value_name = "auto|none|selective|full")]
    pub recompute: String,
    /// The all-reduce among a stage's copies.
    #[arg(long, value_enum, default_value = "nccl")]
    pub all_reduce: AllReduceArg,
    /// Simulate every configuration (no pruning by lower bound).
    #[arg(long)]
    pub exhaustive: bool,
    /// How finely each pipeline is simulated: `block` (a task per block, pass and
    /// micro-batch: within about 1% of the node level, peaks a few percent higher), `node`,
    /// or `auto` (per block past 200,000 node-level tasks).
    #[arg(long, value_name = "auto|node|block", default_value = "block")]
    pub granularity: String,
    /// How many of the best plans to print.
    #[arg(allow_negative_numbers = true, long, default_value_t = 5)]
    pub top: usize,
    /// Print the plans and rejections as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the best plan for PyTorch into DIR: `plan.json` (the configuration, the
    /// micro-batch, each stage's blocks, the process groups, the prediction) and, for a
    /// pipeline, `schedule.csv` (each rank's actions, as `_PipelineScheduleRuntime._load_csv`
    /// reads them).
    #[arg(long, value_name = "DIR")]
    pub export: Option<std::path::PathBuf>,
}

/// Searches and prints the best plans and why the others lost.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let mut cluster = ordo::cluster(&args.cluster)?;
    if let Some(nodes) = args.nodes {
        cluster = ordo::with_nodes(cluster, nodes)?;
    }
    let gpus = args.gpus.unwrap_or(cluster.device_count());
    let search = ParallelSearch {
        max_micro_batches: args.max_micro_batches,
        max_tensor_parallel: args.tensor_parallel,
        recompute: ordo::recompute_choices(&args.recompute)?,
        all_reduce: args.all_reduce.into(),
        exhaustive: args.exhaustive,
        granularity: ordo::granularity(&args.granularity)?,
        ..ParallelSearch::new(gpus, args.batch)
    };
    let size = SizeArgs {
        batch: None,
        seq_len: args.seq_len,
        small: args.small,
        dims: Vec::new(),
        frozen: Vec::new(),
    };
    let model_at = |micro: usize, tensor: usize| -> ordo::Result<ordo::Model> {
        let size = SizeArgs { batch: Some(micro), ..size.clone() };
        let size = ordo::Size { tensor_parallel: Some(tensor), ..size.size() };
        let model = ordo::Model::load(&args.target, size)?;
        model.training(args.optimizer.into(), None)?.in_precision(args.precision.0)
    };
    let name = source::load(&args.target, size.clone())?.name().to_string();
    let plans = crate::progress::with_spinner("searching", |bar| {
        ordo::plan_parallel(&model_at, &cluster, &search, |done, total| {
            crate::progress::set_counts(bar, done, total)
        })
    })
    .with_context(|| format!("planning `{name}` on {gpus} GPUs of `{}`", cluster.name))?;
    if let Some(dir) = &args.export {
        let Some(best) = plans.candidates.first() else {
            anyhow::bail!("--export {}: no configuration fits, nothing to export", dir.display());
        };
        let export = ordo::export_parallel(&model_at, &cluster, args.batch, &best.config)
            .with_context(|| format!("exporting {}", best.config))?;
        write_export(dir, &export, best, &name, &cluster.name)?;
    }
    if args.json {
        println!("{:#}", plans_json(&plans, args.top));
        return Ok(());
    }
    let granularity = match search.granularity {
        ordo::Granularity::Block => "per block".to_string(),
        ordo::Granularity::Node => "per node".to_string(),
        ordo::Granularity::Auto => {
            format!("per block past {} tasks, else per node", ordo::Granularity::AUTO_TASKS)
        }
    };
    println!(
        "{name} on {gpus} GPUs of `{}`, global batch {}: {} configurations simulated \
         ({granularity}), {} pruned by their lower bound, {} rejected",
        cluster.name,
        args.batch,
        plans.simulated,
        plans.pruned,
        plans.rejected.len()
    );
    let mut table =
        Table::new(&["plan", "step ms", "samples/s", "MFU", "bubble", "peak memory (max stage)"]);
    for c in plans.candidates.iter().take(args.top) {
        let sharded = if c.sharded_optimizer { ", optimizer sharded" } else { "" };
        let recompute = match c.recompute {
            ordo::Recompute::None => String::new(),
            r => format!(", recompute {}", r.name()),
        };
        table.row(vec![
            format!("{}{sharded}{recompute}", c.config),
            format!("{:.2}", c.step_time_us / 1e3),
            format!("{:.1}", c.samples_per_s),
            format!("{:.1}%", c.mfu * 100.0),
            format!("{:.1}%", c.bubble_fraction * 100.0),
            bytes(c.peak_memory_bytes.iter().copied().max().unwrap_or(0)),
        ]);
    }
    print!("{}", table.render());
    if plans.candidates.is_empty() {
        println!("no configuration fits");
    }
    for (config, why) in plans.rejected.iter().take(args.top) {
        println!("rejected {config}: {why}");
    }
    if plans.rejected.len() > args.top {
        println!("... and {} more rejected (--json lists them)", plans.rejected.len() - args.top);
    }
    Ok(())
}

/// `plan.json` and `schedule.csv` of `export` in `dir` (created if missing).
fn write_export(
    dir: &std::path::Path,
    export: &ordo::ParallelExport,
    best: &ordo::ParallelCandidate,
    model: &str,
    cluster: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--export {}", dir.display()))?;
    let c = &export.config;
    let plan = json!({
        "model": model,
        "cluster": cluster,
        "data": c.data,
        "tensor": c.tensor,
        "stages": c.stages,
        "micro_batches": c.micro_batches,
        "micro_batch_size": export.micro_batch_size,
        "schedule": c.schedule.name(),
        "interleaved": c.interleaved,
        "sharded_optimizer": best.sharded_optimizer,
        "recompute": best.recompute.name(),
        "stage_units": export.schedule.as_ref().map(|s| &s.stage_units),
        "stage_rank": export.schedule.as_ref().map(|s| &s.stage_rank),
        "tensor_groups": export.tensor_groups,
        "pipeline_groups": export.pipeline_groups,
        "data_groups": export.data_groups,
        "predicted": {
            "step_time_us": best.step_time_us,
            "samples_per_s": best.samples_per_s,
            "mfu": best.mfu,
            "peak_memory_bytes": best.peak_memory_bytes,
        },
    });
    crate::format::write_file(&dir.join("plan.json"), format!("{plan:#}\n").as_bytes())?;
    if let Some(schedule) = &export.schedule {
        crate::format::write_file(&dir.join("schedule.csv"), schedule.csv.as_bytes())?;
    }
    Ok(())
}

fn plans_json(plans: &ParallelPlans, top: usize) -> serde_json::Value {
    let config = |c: &ordo::ParallelConfig| {
        json!({"data": c.data, "tensor": c.tensor, "stages": c.stages,
               "micro_batches": c.micro_batches,
               "schedule": c.schedule.name(), "interleaved": c.interleaved})
    };
    let candidates: Vec<_> = plans
        .candidates
        .iter()
        .take(top)
        .map(|c| {
            json!({
                "config": config(&c.config),
                "step_time_us": c.step_time_us,
                "samples_per_s": c.samples_per_s,
                "mfu": c.mfu,
                "sharded_optimizer": c.sharded_optimizer,
                "recompute": c.recompute.name(),
                "bubble_fraction": c.bubble_fraction,
                "peak_memory_bytes": c.peak_memory_bytes,
            })
        })
        .collect();
    let rejected: Vec<_> =
        plans.rejected.iter().map(|(c, why)| json!({"config": config(c), "reason": why})).collect();
    json!({
        "candidates": candidates,
        "rejected": rejected,
        "simulated": plans.simulated,
        "pruned": plans.pruned,
        "schedules": PipelineSchedule::ALL.iter().map(|s| s.name()).collect::<Vec<_>>(),
    })
}
