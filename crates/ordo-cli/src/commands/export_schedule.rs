//! `ordo export-schedule MODEL --stages S --micro-batches M --schedule X -o OUT.csv`: a
//! training pipeline's schedule in PyTorch's action format, for
//! `torch.distributed.pipelining` (the same as `ordo simulate MODEL --train --pipeline S
//! --pytorch-schedule OUT.csv`, with the prediction it prints).

use std::path::PathBuf;

use ordo::SimOptions;

use crate::commands::pipeline::{self, PipelineArgs};
use crate::commands::simulate::{Drawings, ScheduleArg};
use crate::placing::ProblemArgs;

/// Arguments of `ordo export-schedule`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model or a cost-graph file; its training graph is split (`--train` implied).
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Pipeline stages, one per rank (or `--modulo` groups of blocks per stage).
    #[arg(allow_negative_numbers = true, long, value_name = "S")]
    pub stages: usize,
    /// Micro-batches per step; `--batch` (the global batch) must be a multiple.
    #[arg(allow_negative_numbers = true, long, value_name = "M", default_value_t = 4)]
    pub micro_batches: usize,
    /// The schedule: gpipe, 1f1b, fast-forward, zb-h1 or zb-h2.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "fast-forward")]
    pub schedule: ScheduleArg,
    /// Modulo layer allocation: block l on stage (l div m) mod S.
    #[arg(allow_negative_numbers = true, long, value_name = "m")]
    pub modulo: Option<usize>,
    /// Where to write the CSV (one line of actions per rank, PyTorch's `compute_only`
    /// format that `_PipelineScheduleRuntime._load_csv` reads).
    #[arg(short, long, value_name = "OUT.csv")]
    pub output: PathBuf,
}

/// Plans and simulates the pipeline (refusing one that does not fit the devices' memory),
/// then writes its actions.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.stages < 2 {
        anyhow::bail!("--stages {}: a pipeline needs at least 2 stages", args.stages);
    }
    let mut problem = args.problem.clone();
    problem.train = true;
    let pipeline_args = PipelineArgs {
        pipeline: Some(args.stages),
        micro_batches: args.micro_batches,
        modulo: args.modulo,
        pytorch_schedule: Some(args.output.clone()),
        granularity: "auto".into(),
    };
    let schedule = args.schedule.0.pipeline()?;
    let loaded = pipeline_args.micro_batch_problem(&problem, None)?.load()?;
    let drawings = Drawings { trace: None, svg: None };
    pipeline::simulate(
        &loaded,
        &pipeline_args,
        schedule,
        None,
        &SimOptions::default(),
        false,
        &drawings,
    )
}
