//! The parallel planner: given a model, a cluster, a GPU count and a global batch, the data and
//! pipeline degrees, micro-batch count and schedule that train fastest within each GPU's
//! memory, each configuration simulated (data parallelism by symmetry), the others' reasons
//! for losing kept.
//!
//! The search space: every split of the GPUs into `D` copies of a `P`-stage pipeline (`D P`
//! = GPUs; `P = 1` is plain data parallelism with gradient accumulation), every micro-batch
//! count `M` that divides each copy's share of the batch (up to
//! [`ParallelSearch::max_micro_batches`]), and every pipeline schedule, with contiguous stages
//! and interleaved (the blocks dealt round-robin). A configuration is
//! rejected when the batch does not split, the model has fewer blocks than stages, or a stage's
//! peak exceeds its device's memory (unsimulated when even an even share of the parameters,
//! gradients and optimizer state exceeds it); it is pruned, unsimulated, when a lower bound on
//! its step (its busiest stage's compute, with no bubble and no communication) is no better
//! than the best simulated so far ([`ParallelSearch::exhaustive`] turns pruning off).
//! Not yet searched: tensor parallelism, optimizer sharding, recomputation, reverse first-k.

use ordo_cost::{AllReduceAlgorithm, Cluster};
use ordo_sched::{Pipeline, PipelineReplicas, PipelineSchedule};
use ordo_sim::SimOptions;

use crate::error::Result;
use crate::parameter::{Parameter, refuse};
use crate::{Model, Problem, StepMode, Target};

/// What the planner searches.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelSearch {
    /// GPUs in all (at least 1, at most the cluster's).
    pub gpus: usize,
    /// The global batch: samples per training step over all copies.
    pub global_batch: usize,
    /// The pipeline schedules tried (for `P > 1`).
    pub schedules: Vec<PipelineSchedule>,
    /// Also try each schedule interleaved: the blocks dealt round-robin to the stages, one at
    /// a time (modulo allocation in groups of 1; 1F1B so becomes Megatron's interleaved 1F1B).
    pub interleaved: bool,
    /// The most micro-batches per step tried.
    pub max_micro_batches: usize,
    /// The all-reduce algorithm of the stages' copies.
    pub all_reduce: AllReduceAlgorithm,
    /// Gradients are all-reduced in buckets of at least this many bytes.
    pub bucket_bytes: u64,
    /// Simulate every configuration, pruning none (to check the pruning).
    pub exhaustive: bool,
}

impl ParallelSearch {
    /// `gpus` and `global_batch`, every schedule contiguous and interleaved, up to 64
    /// micro-batches, NCCL's all-reduce in 25 MiB buckets, pruning on.
    pub fn new(gpus: usize, global_batch: usize) -> Self {
        Self {
            gpus,
            global_batch,
            schedules: PipelineSchedule::ALL.to_vec(),
            interleaved: true,
            max_micro_batches: 64,
            all_reduce: AllReduceAlgorithm::Nccl,
            bucket_bytes: 25 << 20,
            exhaustive: false,
        }
    }
}

/// One configuration: `data` copies of a `stages`-stage pipeline, `micro_batches` per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParallelConfig {
    /// Data-parallel copies `D`.
    pub data: usize,
    /// Pipeline stages `P`.
    pub stages: usize,
    /// Micro-batches per step `M`, each of `global_batch / (D M)` samples.
    pub micro_batches: usize,
    /// The pipeline's schedule.
    pub schedule: PipelineSchedule,
    /// Whether the blocks are dealt round-robin to the stages (modulo allocation in groups of
    /// 1) rather than in contiguous runs.
    pub interleaved: bool,
}

impl ParallelConfig {
    /// The pipeline it runs.
    pub fn pipeline(&self) -> Pipeline {
        let pipeline = Pipeline::new(self.stages, self.micro_batches, self.schedule);
        if self.interleaved { pipeline.with_modulo(1) } else { pipeline }
    }
}

impl std::fmt::Display for ParallelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dp {} x pp {}, {} micro-batches, {}{}",
            self.data,
            self.stages,
            self.micro_batches,
            self.schedule.name(),
            if self.interleaved { " interleaved" } else { "" }
        )
    }
}

/// A configuration simulated and fitting the memory.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelCandidate {
    /// What it is.
    pub config: ParallelConfig,
    /// Predicted step time in µs.
    pub step_time_us: f64,
    /// Samples per second: the global batch over the step time.
    pub samples_per_s: f64,
    /// Model FLOPs utilisation: the training graph's FLOPs per step over the GPUs' peak
    /// (tensor-core peak in mixed precision) for the step time.
    pub mfu: f64,
    /// Each stage's peak memory in bytes (every copy's stage alike).
    pub peak_memory_bytes: Vec<u64>,
    /// Share of the stages' time idle.
    pub bubble_fraction: f64,
}

/// The planner's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParallelPlans {
    /// The configurations that fit, fastest first.
    pub candidates: Vec<ParallelCandidate>,
    /// The configurations that do not, each with why.
    pub rejected: Vec<(ParallelConfig, String)>,
    /// Configurations simulated.
    pub simulated: usize,
    /// Configurations pruned by their lower bound.
    pub pruned: usize,
}

/// The best configurations of `model_at` (the training model, in its precision, built at a
/// batch of the given size: one micro-batch) on `cluster` under `search` (see the module
/// documentation of `parallel.rs`). `progress(done, total)` is called after each
/// configuration.
///
/// # Errors
/// [`crate::Error::Parameter`] for zero GPUs, more than the cluster has, a zero batch or
/// micro-batch limit. What building or costing the model fails with rejects the
/// configurations that need it.
pub fn plan_parallel(
    model_at: &dyn Fn(usize) -> Result<Model>,
    cluster: &Cluster,
    search: &ParallelSearch,
    mut progress: impl FnMut(usize, usize),
) -> Result<ParallelPlans> {
    let gpus = search.gpus;
    if gpus == 0 {
        refuse!(Parameter::Gpus, " must be at least 1");
    }
    if gpus > cluster.device_count() {
        refuse!(
            Parameter::Gpus => gpus,
            format!(": cluster `{}` has {} devices", cluster.name, cluster.device_count())
        );
    }
    if search.max_micro_batches == 0 {
        refuse!(Parameter::MaxMicroBatches, " must be at least 1");
    }
    if search.global_batch == 0 {
        refuse!(Parameter::Batch, " (the global batch) must be at least 1");
    }
    let (configs, rejected) = configurations(search);
    let mut plans = ParallelPlans { candidates: Vec::new(), rejected, simulated: 0, pruned: 0 };
    // Problems by (micro-batch size, stages): every schedule of a split shares one.
    let mut problems: std::collections::HashMap<(usize, usize), Result<Built>> =
        std::collections::HashMap::new();
    let mut best_us = f64::INFINITY;
    let total = configs.len();
    for (done, config) in configs.into_iter().enumerate() {
        let micro = search.global_batch / (config.data * config.micro_batches);
        let built = problems
            .entry((micro, config.stages))
            .or_insert_with(|| Built::new(model_at, cluster, micro, config.stages));
        let outcome = match built {
            Ok(built) => evaluate(built, config, search, best_us),
            Err(e) => Outcome::Rejected(e.to_string()),
        };
        match outcome {
            Outcome::Rejected(reason) => plans.rejected.push((config, reason)),
            Outcome::Pruned => plans.pruned += 1,
            Outcome::Simulated(Err(reason)) => {
                plans.simulated += 1;
                plans.rejected.push((config, reason));
            }
            Outcome::Simulated(Ok(candidate)) => {
                plans.simulated += 1;
                best_us = best_us.min(candidate.step_time_us);
                plans.candidates.push(candidate);
            }
        }
        progress(done + 1, total);
    }
    plans.candidates.sort_by(|a, b| a.step_time_us.total_cmp(&b.step_time_us));
    Ok(plans)
}

/// A problem of one micro-batch on a pipeline's devices, with what the planner reads of it.
struct Built {
    problem: Problem,
    /// The training graph's FLOPs for one micro-batch.
    flops: u64,
    /// Bytes resident for the whole step (parameters, gradients, optimizer state).
    persistent: u64,
    /// A GPU's peak FLOP/s for the model's precision (the tensor cores' in mixed precision).
    peak_flops: f64,
}

impl Built {
    /// The model built at `micro` samples, costed for `stages` devices of `cluster`.
    fn new(
        model_at: &dyn Fn(usize) -> Result<Model>,
        cluster: &Cluster,
        micro: usize,
        stages: usize,
    ) -> Result<Self> {
        let model = model_at(micro)?;
        let flops = model.graph().map_or(0, |g| ordo_ir::graph_stats(g).flops);
        let target = Target::cluster(cluster.clone(), Some(stages))?;
        let problem = Problem::new(&model, &target, StepMode::TrainingGraph)?;
        let persistent = problem.place.memory.iter().map(|m| m.persistent).sum();
        let device = &cluster.node_devices()[0];
        let peak_flops = if model.is_mixed_precision() {
            device.half_precision_flops.unwrap_or(device.peak_flops)
        } else {
            device.peak_flops
        };
        Ok(Self { problem, flops, persistent, peak_flops })
    }
}

/// What became of one configuration.
enum Outcome {
    /// Refused without simulating it.
    Rejected(String),
    /// Its lower bound is no better than the best so far.
    Pruned,
    /// Simulated: a candidate, or why it does not fit.
    Simulated(std::result::Result<ParallelCandidate, String>),
}

/// `config` on `built`: rejected when even an even share of the parameters, gradients and
/// optimizer state does not fit, pruned when its busiest stage's compute is no better than
/// `best_us`, else simulated and checked against each stage's memory.
fn evaluate(
    built: &Built,
    config: ParallelConfig,
    search: &ParallelSearch,
    best_us: f64,
) -> Outcome {
    let Built { problem, flops, persistent, peak_flops } = built;
    let limits = &problem.place.devices.memory;
    // No stage holds less than an even share of the parameters, gradients and optimizer
    // state: where that share does not fit, nothing needs simulating.
    let share = persistent.div_ceil(config.stages as u64);
    let smallest = limits.iter().copied().min().unwrap_or(u64::MAX);
    if share > smallest {
        return Outcome::Rejected(format!(
            "even spread over {} stages, the parameters, gradients and optimizer state need {} \
             per GPU, more than its {}",
            config.stages,
            ordo_cost::format_bytes(share),
            ordo_cost::format_bytes(smallest)
        ));
    }
    // No step is shorter than its busiest stage's compute: each micro-batch's work there and
    // its updates once, the stages cut as the pipeline cuts them.
    let pipeline = config.pipeline();
    if !search.exhaustive && stage_bound_us(problem, &pipeline) >= best_us {
        return Outcome::Pruned;
    }
    let network =
        crate::stage_network(problem, config.data, config.stages, None, search.all_reduce);
    let replicas =
        PipelineReplicas { replicas: config.data, network, bucket_bytes: search.bucket_bytes };
    let simulated =
        crate::simulate_replicated_pipeline(problem, &pipeline, &replicas, &SimOptions::default());
    let report = match simulated {
        Ok((_, report)) => report,
        Err(e) => return Outcome::Simulated(Err(e.to_string())),
    };
    let over = report.peak_memory_bytes.iter().zip(limits).position(|(peak, limit)| peak > limit);
    if let Some(stage) = over {
        return Outcome::Simulated(Err(format!(
            "stage {stage} needs {} at its peak, more than its device's {}",
            ordo_cost::format_bytes(report.peak_memory_bytes[stage]),
            ordo_cost::format_bytes(limits[stage])
        )));
    }
    let step_s = report.step_time_us / 1e6;
    let step_flops = *flops as f64 * (config.micro_batches * config.data) as f64;
    Outcome::Simulated(Ok(ParallelCandidate {
        config,
        step_time_us: report.step_time_us,
        samples_per_s: search.global_batch as f64 / step_s,
        mfu: step_flops / (step_s * search.gpus as f64 * peak_flops),
        peak_memory_bytes: report.peak_memory_bytes,
        bubble_fraction: report.bubble_fraction,
    }))
}

/// The compute of `pipeline`'s busiest stage in µs: on each stage, every micro-batch's work
/// and the updates once, the units allocated as [`ordo_sched::pipeline_plan`] allocates them;
/// 0 where they cannot be (the simulation then says why).
fn stage_bound_us(problem: &Problem, pipeline: &Pipeline) -> f64 {
    let p = &problem.place;
    let units = ordo_sched::pipeline_units(p);
    let Ok((chunk_of_unit, device_of_chunk)) = ordo_sched::allocate_units(p, &units, pipeline)
    else {
        return 0.0;
    };
    let mut stage_us = vec![0u64; pipeline.stages];
    for (v, &weight) in p.weights.iter().enumerate() {
        let stage = device_of_chunk[chunk_of_unit[units.unit_of[v]]];
        let times = if p.roles[v] == ordo_ir::Role::Update { 1 } else { pipeline.micro_batches };
        stage_us[stage] += weight * times as u64;
    }
    stage_us.into_iter().max().unwrap_or(0) as f64
}

/// Every configuration of `search`, fewest stages first (the cheapest to simulate), and within
/// a split fewest micro-batches first; and the splits whose copies the batch cannot be shared
/// among, with why.
fn configurations(search: &ParallelSearch) -> (Vec<ParallelConfig>, Vec<(ParallelConfig, String)>) {
    let (mut configs, mut rejected) = (Vec::new(), Vec::new());
    for stages in divisors(search.gpus) {
        let data = search.gpus / stages;
        if !search.global_batch.is_multiple_of(data) {
            let schedule = PipelineSchedule::OneFOneB;
            let config =
                ParallelConfig { data, stages, micro_batches: 1, schedule, interleaved: false };
            let reason = format!(
                "the global batch {} is not a multiple of {data} copies",
                search.global_batch
            );
            rejected.push((config, reason));
            continue;
        }
        let share = search.global_batch / data;
        for micro_batches in divisors(share).filter(|&m| m <= search.max_micro_batches) {
            let schedules: &[PipelineSchedule] =
                if stages == 1 { &[PipelineSchedule::OneFOneB] } else { &search.schedules };
            let layouts: &[bool] =
                if stages > 1 && search.interleaved { &[false, true] } else { &[false] };
            for &schedule in schedules {
                for &interleaved in layouts {
                    configs.push(ParallelConfig {
                        data,
                        stages,
                        micro_batches,
                        schedule,
                        interleaved,
                    });
                }
            }
        }
    }
    (configs, rejected)
}

/// The divisors of `n`, ascending.
fn divisors(n: usize) -> impl Iterator<Item = usize> {
    (1..=n).filter(move |&d| n.is_multiple_of(d))
}

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
    /// The ranks of each copy of the pipeline, stage by stage: copy `d` is ranks
    /// `d P .. d P + P - 1`, so that a copy's stages sit on consecutive GPUs (a node, where it
    /// fits) as the planner costed them.
    pub pipeline_groups: Vec<Vec<usize>>,
    /// The ranks of each stage's copies, whose gradients are all-reduced together: stage `s`
    /// is ranks `s, P + s, 2 P + s, ...`.
    pub data_groups: Vec<Vec<usize>>,
}

/// The export of `config` for `model_at` on `cluster` with `global_batch` samples per step.
///
/// # Errors
/// [`crate::Error::Parameter`] for a batch the configuration does not split; what planning the
/// pipeline fails with.
pub fn export_parallel(
    model_at: &dyn Fn(usize) -> Result<Model>,
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
    let (data, stages) = (config.data, config.stages);
    let schedule = if stages > 1 {
        let target = Target::cluster(cluster.clone(), Some(stages))?;
        let problem = Problem::new(&model_at(micro_batch_size)?, &target, StepMode::TrainingGraph)?;
        let planned = ordo_sched::pipeline_plan(&problem.place, &config.pipeline())?;
        Some(crate::pytorch_schedule_of(&planned, config.schedule, data)?)
    } else {
        None
    };
    Ok(ParallelExport {
        config: *config,
        micro_batch_size,
        schedule,
        pipeline_groups: (0..data).map(|d| (d * stages..(d + 1) * stages).collect()).collect(),
        data_groups: (0..stages).map(|s| (0..data).map(|d| d * stages + s).collect()).collect(),
    })
}
