//! Training runs that others measured at scale, kept as data with their sources
//! (`crates/ordo/data/published_runs.json`), and ordo's prediction of each: the configuration
//! built, planned and simulated as the planner does it, its step time held against the one
//! the published model FLOPs utilisation implies.

use serde::Deserialize;

use crate::error::{Error, Result, usage};
use crate::{
    Model, Optimizer, Pipeline, PipelineReplicas, PipelineSchedule, Precision, Problem, Recompute,
    Size, StepMode, Target,
};
use ordo_models::{Family, TransformerConfig};

/// The shipped tables of published runs.
const RUNS: &str = include_str!("../data/published_runs.json");

/// A table of published runs from one source on one kind of cluster.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedTable {
    /// A short name to select it by.
    pub name: String,
    /// What the runs are.
    pub title: String,
    /// Where each number comes from.
    pub source: String,
    /// The shipped cluster that stands for the one measured on.
    pub cluster: String,
    /// The training precision (`bf16`, `fp16`, `fp32`).
    pub precision: String,
    /// A GPU's peak FLOP/s the published utilisation is relative to.
    pub peak_flops: f64,
    /// The runs.
    pub rows: Vec<PublishedRun>,
}

/// One published run of a GPT model: its configuration and its model FLOPs utilisation.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedRun {
    /// The model's name in the source (`175B`).
    pub model: String,
    /// Blocks.
    pub layers: usize,
    /// Width.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Vocabulary.
    pub vocab: usize,
    /// Sequence length.
    pub seq: usize,
    /// Tensor-parallel ranks.
    pub tensor: usize,
    /// Pipeline stages.
    pub stages: usize,
    /// Data-parallel copies.
    pub data: usize,
    /// Sequences per step.
    pub global_batch: usize,
    /// Sequences per micro-batch.
    pub micro_batch: usize,
    /// Model chunks per stage of an interleaved schedule (1: not interleaved).
    pub chunks: usize,
    /// Activation recomputation (`none`, `selective`, `full`).
    pub recompute: String,
    /// The published model FLOPs utilisation.
    pub published_mfu: f64,
}

impl PublishedRun {
    /// GPUs in all.
    pub fn gpus(&self) -> usize {
        self.tensor * self.stages * self.data
    }

    /// Micro-batches per step of each copy.
    pub fn micro_batches(&self) -> usize {
        self.global_batch / (self.micro_batch * self.data).max(1)
    }

    /// Model FLOPs of one step as Megatron-LM counts them (matrix products, no recomputation):
    /// `72 B s l h^2 (1 + s / 6h + V / 12 l h)`.
    pub fn model_flops(&self) -> f64 {
        let (b, s, l, h, v) = (
            self.global_batch as f64,
            self.seq as f64,
            self.layers as f64,
            self.hidden as f64,
            self.vocab as f64,
        );
        72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))
    }

    /// The step time in µs the published utilisation implies on GPUs of `peak_flops`.
    pub fn published_step_us(&self, peak_flops: f64) -> f64 {
        self.model_flops() / (self.published_mfu * self.gpus() as f64 * peak_flops) * 1e6
    }
}

/// ordo's prediction of a published run.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedPrediction {
    /// Predicted step time in µs.
    pub step_time_us: f64,
    /// The model FLOPs utilisation that step time gives (the same FLOP count as the
    /// published one).
    pub mfu: f64,
    /// `predicted / published - 1` of the step time.
    pub error: f64,
    /// Each stage's predicted peak memory in bytes.
    pub peak_memory_bytes: Vec<u64>,
}

/// The shipped tables of published runs.
///
/// # Errors
/// [`Error::Usage`] if the shipped data does not parse (a broken build).
pub fn published_tables() -> Result<Vec<PublishedTable>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        format: String,
        tables: Vec<PublishedTable>,
    }
    let file: File = serde_json::from_str(RUNS)
        .map_err(|e| Error::Usage(format!("the published runs do not parse: {e}")))?;
    if file.format != "ordo.published/1" {
        usage!("the published runs are in format `{}`, not ordo.published/1", file.format);
    }
    Ok(file.tables)
}

/// ordo's prediction of `run` from `table`: the GPT model built as one tensor-parallel rank at
/// the micro-batch's size, trained with Adam in the table's precision with the run's
/// recomputation, its pipeline (1F1B, interleaved in the run's chunks) simulated on enough
/// nodes of the table's cluster with its copies' all-reduces (NCCL's choice, 25 MiB buckets).
///
/// # Errors
/// A run that does not build or plan (sizes that do not split, an unknown recomputation).
pub fn predict_published(
    table: &PublishedTable,
    run: &PublishedRun,
) -> Result<PublishedPrediction> {
    let config = TransformerConfig {
        name: format!("gpt-{}", run.model),
        family: Family::Gpt2,
        layers: run.layers,
        hidden: run.hidden,
        heads: run.heads,
        kv_heads: run.heads,
        intermediate: 4 * run.hidden,
        vocab: run.vocab,
        max_positions: run.seq,
        type_vocab: 0,
        tied_embeddings: true,
        norm_eps: 1e-5,
        tensor_parallel: 1,
    };
    let size = Size {
        batch: Some(run.micro_batch),
        seq_len: Some(run.seq),
        tensor_parallel: Some(run.tensor),
        ..Size::default()
    };
    let Some(recompute) = Recompute::from_name(&run.recompute) else {
        usage!(
            "{}: run {}: recompute `{}` is none of none, selective, full",
            table.name,
            run.model,
            run.recompute
        );
    };
    let model = Model::transformer(&config, size)?
        .training(Optimizer::Adam, None)?
        .in_precision(table.precision.parse::<Precision>()?)?
        .with_recompute(recompute)?;
    let cluster = crate::cluster(&table.cluster)?;
    let nodes = run.gpus().div_ceil(cluster.devices_per_node());
    let cluster = crate::with_nodes(cluster, nodes.max(1))?;
    let target = Target::cluster(cluster.tensor_parallel_groups(run.tensor)?, Some(run.stages))?;
    let problem = Problem::new(&model, &target, StepMode::TrainingGraph)?;
    let mut pipeline = Pipeline::new(run.stages, run.micro_batches(), PipelineSchedule::OneFOneB);
    if run.chunks > 1 {
        pipeline = pipeline.with_modulo((run.layers / (run.chunks * run.stages)).max(1));
    }
    let network = crate::stage_network(
        &problem,
        run.data,
        run.stages,
        None,
        ordo_cost::AllReduceAlgorithm::Nccl,
    );
    let replicas = PipelineReplicas { replicas: run.data, network, bucket_bytes: 25 << 20 };
    let (_, report) =
        crate::simulate_replicated_pipeline(&problem, &pipeline, &replicas, &Default::default())?;
    let published = run.published_step_us(table.peak_flops);
    let step_s = report.step_time_us / 1e6;
    Ok(PublishedPrediction {
        step_time_us: report.step_time_us,
        mfu: run.model_flops() / (step_s * run.gpus() as f64 * table.peak_flops),
        error: report.step_time_us / published - 1.0,
        peak_memory_bytes: report.peak_memory_bytes,
    })
}
