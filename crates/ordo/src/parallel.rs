//! The parallel planner: given a model, a cluster, a GPU count and a global batch, the data and
//! pipeline degrees, micro-batch count and schedule that train fastest within each GPU's
//! memory, each configuration simulated (data parallelism by symmetry), the others' reasons
//! for losing kept.
//!
//! The search space: every split of the GPUs into `D` copies of a `P`-stage pipeline whose
//! stages are tensor-parallel groups of `T` GPUs within a node (`D T P` = GPUs; `P = 1` is
//! plain data parallelism with gradient accumulation, `T = 1` no tensor parallelism; `T` up
//! to [`ParallelSearch::max_tensor_parallel`] and dividing a node's GPUs), every micro-batch
//! count `M` that divides each copy's share of the batch (up to
//! [`ParallelSearch::max_micro_batches`]), and every pipeline schedule, with contiguous stages
//! and interleaved (the blocks dealt round-robin). A configuration is
//! rejected when the batch does not split, the model has fewer blocks than stages, or a stage's
//! peak exceeds its device's memory (unsimulated when even an even share of the parameters,
//! gradients and optimizer state exceeds it); it is pruned, unsimulated, when a lower bound on
//! its step (its busiest stage's compute, with no bubble and no communication) is no better
//! than the best simulated so far ([`ParallelSearch::exhaustive`] turns pruning off).
//! A tensor-parallel stage is one rank's graph (Megatron-LM's split,
//! [`ordo_models::TransformerConfig::with_tensor_parallel`]) with its all-reduces costed over
//! the node's links, planned on the cluster seen by the groups
//! ([`Cluster::tensor_parallel_groups`]).
//! Where a stage's peak exceeds its GPU's memory, the optimizer state is sharded across the
//! stage's copies (ZeRO-1, [`ParallelSearch::shard_optimizer`]).
//! Not yet searched: gradient and parameter sharding (ZeRO-2/3, FSDP), recomputation,
//! reverse first-k.

use ordo_cost::{AllReduceAlgorithm, Cluster};
use ordo_sched::{Pipeline, PipelineReplicas, PipelineSchedule};
use ordo_sim::SimOptions;

use crate::Recompute;
use crate::error::Result;
use crate::parameter::{Parameter, refuse};
use crate::{Model, Problem, StepMode, Target};

/// The recomputations `name` asks the planner to try: `auto` (each in turn, least first:
/// [`Recompute::ALL`]) or one of `none`, `selective`, `full`.
///
/// # Errors
/// [`crate::Error::Parameter`] naming the choices for another name.
pub fn recompute_choices(name: &str) -> Result<Vec<Recompute>> {
    if name == "auto" {
        return Ok(Recompute::ALL.to_vec());
    }
    match Recompute::ALL.into_iter().find(|r| r.name() == name) {
        Some(recompute) => Ok(vec![recompute]),
        None => refuse!(
            Parameter::Recompute => name,
            ": choose auto (the least that fits), none, selective or full"
        ),
    }
}

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
    /// The most tensor-parallel ranks tried (1: none); at most a node's GPUs are.
    pub max_tensor_parallel: usize,
    /// The all-reduce algorithm of the stages' copies.
    pub all_reduce: AllReduceAlgorithm,
    /// Gradients are all-reduced in buckets of at least this many bytes.
    pub bucket_bytes: u64,
    /// Shard the optimizer state across a stage's copies where the whole state does not fit
    /// (ZeRO-1: each copy keeps and updates `1 / D` of it; the gradients' all-reduce becomes a
    /// reduce-scatter and the parameters' all-gather, the same bytes in a ring).
    pub shard_optimizer: bool,
    /// The activation recomputations tried, in order, for a configuration that does not fit
    /// with the ones before (a step recomputing more is longer).
    pub recompute: Vec<Recompute>,
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
            max_tensor_parallel: 8,
            all_reduce: AllReduceAlgorithm::Nccl,
            bucket_bytes: 25 << 20,
            shard_optimizer: true,
            recompute: Recompute::ALL.to_vec(),
            exhaustive: false,
        }
    }
}

/// One configuration: `data` copies of a `stages`-stage pipeline of `tensor`-rank
/// tensor-parallel stages, `micro_batches` per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParallelConfig {
    /// Data-parallel copies `D`.
    pub data: usize,
    /// Tensor-parallel ranks `T` of each stage.
    pub tensor: usize,
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
            "dp {} x tp {} x pp {}, {} micro-batches, {}{}",
            self.data,
            self.tensor,
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
    /// Each stage's peak memory in bytes (every copy's stage alike), with the optimizer state
    /// sharded where [`ParallelCandidate::sharded_optimizer`] says so.
    pub peak_memory_bytes: Vec<u64>,
    /// Whether the optimizer state is sharded across each stage's copies (ZeRO-1): only where
    /// the whole state does not fit.
    pub sharded_optimizer: bool,
    /// The activations recomputed: the least of [`ParallelSearch::recompute`] that fits.
    pub recompute: Recompute,
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
/// batch of the given size, one micro-batch, as one rank of the given number of
/// tensor-parallel ranks) on `cluster` under `search` (see the module
/// documentation of `parallel.rs`). `progress(done, total)` is called after each
/// configuration.
///
/// # Errors
/// [`crate::Error::Parameter`] for zero GPUs, more than the cluster has, a zero batch,
/// micro-batch or tensor-parallel limit. What building or costing the model fails with rejects the
/// configurations that need it.
pub fn plan_parallel(
    model_at: &dyn Fn(usize, usize) -> Result<Model>,
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
    if search.max_tensor_parallel == 0 {
        refuse!(Parameter::TensorParallel, " must be at least 1");
    }
    if search.recompute.is_empty() {
        refuse!(Parameter::Recompute, ": no recomputation to try");
    }
    let (configs, rejected) = configurations(search, cluster.devices_per_node());
    let mut plans = ParallelPlans { candidates: Vec::new(), rejected, simulated: 0, pruned: 0 };
    // Problems by (micro-batch size, tensor ranks, stages) and recomputation: every schedule
    // of a split shares one. Configurations come split by split, so the problems of the split
    // before are dropped as the next begins.
    let mut problems: Vec<(Recompute, Result<Built>)> = Vec::new();
    let mut split = None;
    let mut best_us = f64::INFINITY;
    let total = configs.len();
    for (done, config) in configs.into_iter().enumerate() {
        let micro = search.global_batch / (config.data * config.micro_batches);
        if split.replace((micro, config.tensor, config.stages))
            != Some((micro, config.tensor, config.stages))
        {
            problems.clear();
        }
        // The least recomputation that fits.
        let mut outcome = Outcome::Pruned;
        for (k, &recompute) in search.recompute.iter().enumerate() {
            let at = match problems.iter().position(|(r, _)| *r == recompute) {
                Some(at) => at,
                None => {
                    let built = Built::new(
                        model_at,
                        cluster,
                        micro,
                        config.tensor,
                        config.stages,
                        recompute,
                    );
                    problems.push((recompute, built));
                    problems.len() - 1
                }
            };
            outcome = match &problems[at].1 {
                Ok(built) => evaluate(built, config, search, best_us),
                Err(e) => Outcome::Rejected(e.to_string()),
            };
            match outcome {
                Outcome::OverMemory(_) if k + 1 < search.recompute.len() => plans.simulated += 1,
                _ => break,
            }
        }
        match outcome {
            Outcome::Rejected(reason) => plans.rejected.push((config, reason)),
            Outcome::Pruned => plans.pruned += 1,
            Outcome::Simulated(Err(reason)) | Outcome::OverMemory(reason) => {
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
    /// The training graph's FLOPs for one micro-batch on all the tensor-parallel ranks.
    flops: u64,
    /// Bytes resident for the whole step (parameters, gradients, optimizer state).
    persistent: u64,
    /// Of which the optimizer's state (master weights and moments).
    optimizer_state: u64,
    /// A GPU's peak FLOP/s for the model's precision (the tensor cores' in mixed precision).
    peak_flops: f64,
    /// The activations its training graph recomputes.
    recompute: Recompute,
    /// The problem split into the configuration's micro-batches, made by the first schedule
    /// simulated and shared by the others (`None` inside where it does not split: the
    /// simulation then says why).
    split: std::cell::OnceCell<Option<std::sync::Arc<ordo_sched::MicroBatched>>>,
}

impl Built {
    /// One of `tensor` ranks of the model built at `micro` samples, costed for `stages`
    /// tensor-parallel groups of `cluster`.
    fn new(
        model_at: &dyn Fn(usize, usize) -> Result<Model>,
        cluster: &Cluster,
        micro: usize,
        tensor: usize,
        stages: usize,
        recompute: Recompute,
    ) -> Result<Self> {
        let model = model_at(micro, tensor)?;
        // The model's FLOPs, not the recomputed ones: MFU counts the model's work.
        let rank_flops = model.graph().map_or(0, |g| ordo_ir::graph_stats(g).flops);
        let model = model.with_recompute(recompute)?;
        let flops = rank_flops.saturating_mul(tensor as u64);
        let groups = cluster.tensor_parallel_groups(tensor)?;
        let target = Target::cluster(groups, Some(stages))?;
        let problem = Problem::new(&model, &target, StepMode::TrainingGraph)?;
        let p = &problem.place;
        let persistent = p.memory.iter().map(|m| m.persistent).sum();
        let optimizer_state = (0..p.len())
            .filter(|&v| p.roles[v] == ordo_ir::Role::Update)
            .map(|v| p.memory[v].persistent)
            .sum();
        let device = &cluster.node_devices()[0];
        let peak_flops = if model.is_mixed_precision() {
            device.half_precision_flops.unwrap_or(device.peak_flops)
        } else {
            device.peak_flops
        };
        let split = std::cell::OnceCell::new();
        Ok(Self { problem, flops, persistent, optimizer_state, peak_flops, recompute, split })
    }
}

/// What became of one configuration.
enum Outcome {
    /// Refused without simulating it.
    Rejected(String),
    /// Its lower bound is no better than the best so far.
    Pruned,
    /// Simulated: a candidate, or why planning or simulating it failed.
    Simulated(std::result::Result<ParallelCandidate, String>),
    /// Simulated, and a stage's peak exceeds its GPU's memory (even with the optimizer state
    /// sharded, where allowed): why.
    OverMemory(String),
}

/// `config` on `built`: rejected when even an even share of the parameters, gradients and
/// optimizer state (sharded where allowed) does not fit, pruned when its busiest stage's
/// compute is no better than `best_us`, else simulated and checked against each stage's
/// memory, with the optimizer state sharded where the whole does not fit.
///
/// The optimizer state is resident the whole step, so sharding it lowers each stage's peak by
/// exactly the share it no longer holds: `(1 - 1 / D)` of its updates' state.
fn evaluate(
    built: &Built,
    config: ParallelConfig,
    search: &ParallelSearch,
    best_us: f64,
) -> Outcome {
    let Built { problem, flops, persistent, optimizer_state, peak_flops, .. } = built;
    let limits = &problem.place.devices.memory;
    let copies = config.data as u64;
    let sharding = search.shard_optimizer && copies > 1;
    // No stage holds less than an even share of the parameters, gradients and optimizer
    // state: where that share does not fit, nothing needs simulating.
    let least = if sharding {
        persistent - optimizer_state + optimizer_state.div_ceil(copies)
    } else {
        *persistent
    };
    let share = least.div_ceil(config.stages as u64);
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
    let pipeline = config.pipeline();
    let loads = StageLoads::of(problem, &pipeline);
    // A stage whose parameters, gradients and optimizer state (sharded where allowed) do not
    // fit, whatever the activations: nothing needs simulating.
    let shared_by = if sharding { copies } else { 1 };
    if let Some((stage, bytes)) = loads.as_ref().and_then(|l| l.over(limits, shared_by)) {
        return Outcome::Rejected(format!(
            "stage {stage} holds {} of parameters, gradients and optimizer state{}, more than \
             its GPU's {}",
            ordo_cost::format_bytes(bytes),
            if sharding { " (the state sharded)" } else { "" },
            ordo_cost::format_bytes(limits[stage])
        ));
    }
    // No step is shorter than its busiest stage's compute: each micro-batch's work there and
    // its updates once, the stages cut as the pipeline cuts them.
    if !search.exhaustive && loads.as_ref().map_or(0.0, StageLoads::bound_us) >= best_us {
        return Outcome::Pruned;
    }
    let network =
        crate::stage_network(problem, config.data, config.stages, None, search.all_reduce);
    let replicas =
        PipelineReplicas { replicas: config.data, network, bucket_bytes: search.bucket_bytes };
    let split = built.split.get_or_init(|| {
        ordo_sched::micro_batch(&problem.place, config.micro_batches).ok().map(std::sync::Arc::new)
    });
    let simulated = crate::pytorch::simulate_replicated_split(
        problem,
        split.clone(),
        &pipeline,
        &replicas,
        &SimOptions::default(),
    );
    let report = match simulated {
        Ok((_, report)) => report,
        Err(e) => return Outcome::Simulated(Err(e.to_string())),
    };
    let over = |peaks: &[u64]| peaks.iter().zip(limits).position(|(peak, limit)| peak > limit);
    let mut peaks = report.peak_memory_bytes.clone();
    let mut sharded_optimizer = false;
    if let Some(stage) = over(&peaks) {
        let whole = format!(
            "stage {stage} needs {} at its peak, more than its device's {}",
            ordo_cost::format_bytes(peaks[stage]),
            ordo_cost::format_bytes(limits[stage])
        );
        if !sharding {
            return Outcome::OverMemory(whole);
        }
        let state = loads.as_ref().map_or(&[][..], |l| &l.optimizer_state[..]);
        for (peak, &state) in peaks.iter_mut().zip(state) {
            *peak -= state - state.div_ceil(copies);
        }
        if let Some(stage) = over(&peaks) {
            return Outcome::OverMemory(format!(
                "{whole}; {} with the optimizer state sharded across the {copies} copies",
                ordo_cost::format_bytes(peaks[stage])
            ));
        }
        sharded_optimizer = true;
    }
    let step_s = report.step_time_us / 1e6;
    let step_flops = *flops as f64 * (config.micro_batches * config.data) as f64;
    Outcome::Simulated(Ok(ParallelCandidate {
        config,
        step_time_us: report.step_time_us,
        samples_per_s: search.global_batch as f64 / step_s,
        mfu: step_flops / (step_s * search.gpus as f64 * peak_flops),
        peak_memory_bytes: peaks,
        sharded_optimizer,
        recompute: built.recompute,
        bubble_fraction: report.bubble_fraction,
    }))
}

/// What each stage of `pipeline` holds and does, its units allocated as
/// [`ordo_sched::pipeline_plan`] allocates them: its compute in µs (every micro-batch's work
/// there and its updates once), its persistent memory and, of that, its optimizer state.
/// `None` where the units cannot be allocated (the simulation then says why).
struct StageLoads {
    compute_us: Vec<u64>,
    persistent: Vec<u64>,
    optimizer_state: Vec<u64>,
}

impl StageLoads {
    fn of(problem: &Problem, pipeline: &Pipeline) -> Option<Self> {
        let p = &problem.place;
        let units = ordo_sched::pipeline_units(p);
        let (chunk_of_unit, device_of_chunk) =
            ordo_sched::allocate_units(p, &units, pipeline).ok()?;
        let stages = pipeline.stages;
        let mut loads = StageLoads {
            compute_us: vec![0; stages],
            persistent: vec![0; stages],
            optimizer_state: vec![0; stages],
        };
        for (v, &weight) in p.weights.iter().enumerate() {
            let stage = device_of_chunk[chunk_of_unit[units.unit_of[v]]];
            let update = p.roles[v] == ordo_ir::Role::Update;
            let times = if update { 1 } else { pipeline.micro_batches };
            loads.compute_us[stage] += weight * times as u64;
            loads.persistent[stage] += p.memory[v].persistent;
            if update {
                loads.optimizer_state[stage] += p.memory[v].persistent;
            }
        }
        Some(loads)
    }

    /// The busiest stage's compute in µs: no step is shorter.
    fn bound_us(&self) -> f64 {
        self.compute_us.iter().copied().max().unwrap_or(0) as f64
    }

    /// The first stage whose persistent memory, its optimizer state shared by `copies`,
    /// exceeds its limit, with that memory: no schedule fits it.
    fn over(&self, limits: &[u64], copies: u64) -> Option<(usize, u64)> {
        let held = |s: usize| {
            let state = self.optimizer_state[s];
            self.persistent[s] - state + state.div_ceil(copies)
        };
        (0..self.persistent.len()).map(|s| (s, held(s))).find(|&(s, bytes)| bytes > limits[s])
    }
}

/// Every configuration of `search` on nodes of `per_node` GPUs, fewest tensor ranks first,
/// then fewest stages (the cheapest to simulate), and within a split fewest micro-batches
/// first; and the splits whose copies the batch cannot be shared among, with why.
fn configurations(
    search: &ParallelSearch,
    per_node: usize,
) -> (Vec<ParallelConfig>, Vec<(ParallelConfig, String)>) {
    let (mut configs, mut rejected) = (Vec::new(), Vec::new());
    let tensor_ranks = divisors(per_node)
        .filter(|&t| t <= search.max_tensor_parallel && search.gpus.is_multiple_of(t));
    let splits = tensor_ranks
        .flat_map(|tensor| divisors(search.gpus / tensor).map(move |stages| (tensor, stages)));
    for (tensor, stages) in splits {
        let data = search.gpus / (tensor * stages);
        if !search.global_batch.is_multiple_of(data) {
            let schedule = PipelineSchedule::OneFOneB;
            let config = ParallelConfig {
                data,
                tensor,
                stages,
                micro_batches: 1,
                schedule,
                interleaved: false,
            };
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
                        tensor,
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
    model_at: &dyn Fn(usize, usize) -> Result<Model>,
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
