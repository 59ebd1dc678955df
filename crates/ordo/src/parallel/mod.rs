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
//! A tensor-parallel stage is one rank's graph (Megatron-LM's split with sequence parallelism,
//! [`ordo_models::TransformerConfig::with_tensor_parallel`]) with its all-reduces costed over
//! the node's links, planned on the cluster seen by the groups
//! ([`Cluster::tensor_parallel_groups`]).
//! Where a stage's peak exceeds its GPU's memory, the optimizer state is sharded across the
//! stage's copies (ZeRO-1, [`ParallelSearch::shard_optimizer`]).
//! Not yet searched: gradient and parameter sharding (ZeRO-2/3, FSDP), recomputation,
//! reverse first-k.

mod evaluate;
mod export;

pub use export::{ParallelExport, export_parallel};

use ordo_cost::{AllReduceAlgorithm, Cluster};
use ordo_sched::{Granularity, Pipeline, PipelineSchedule};

use crate::Model;
use crate::Recompute;
use crate::error::Result;
use crate::parameter::{Parameter, refuse};
use evaluate::{Outcome, SplitProblems};

/// The recomputations `name` asks the planner to try: `auto` (each in turn, least first:
/// [`Recompute::ALL`]) or one of `none`, `selective`, `full`.
///
/// # Errors
/// [`crate::Error::Parameter`] naming the choices for another name.
pub fn recompute_choices(name: &str) -> Result<Vec<Recompute>> {
    if name == "auto" {
        return Ok(Recompute::ALL.to_vec());
    }
    match Recompute::from_name(name) {
        Some(recompute) => Ok(vec![recompute]),
        None => refuse!(
            Parameter::Recompute => name,
            ": choose auto (the least that fits), none, selective or full"
        ),
    }
}

/// The pipeline granularity called `name`: `auto`, `node` or `block`
/// ([`Granularity::from_name`]).
///
/// # Errors
/// [`crate::Error::Parameter`] naming the choices for another name.
pub fn granularity(name: &str) -> Result<Granularity> {
    match Granularity::from_name(name) {
        Some(granularity) => Ok(granularity),
        None => refuse!(
            Parameter::Granularity => format!("{name:?}"),
            format!(
                ": choose auto (per block past {} node-level tasks), node or block",
                Granularity::AUTO_TASKS
            )
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
    /// How finely each configuration's pipeline is simulated: per block by default (within
    /// about 1% of the node level, tens of times faster: [`ordo_sched::per_block`]), per node,
    /// or per block where the node-level plan would be large ([`Granularity::Auto`]).
    pub granularity: Granularity,
}

impl ParallelSearch {
    /// `gpus` and `global_batch`, every schedule contiguous and interleaved, up to 64
    /// micro-batches, NCCL's all-reduce in 25 MiB buckets, pruning on, pipelines simulated per
    /// block.
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
            granularity: Granularity::Block,
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
/// tensor-parallel ranks) on `cluster` under `search` (see the module documentation of
/// `parallel`). `progress(done, total)` is called after each configuration.
///
/// # Errors
/// [`crate::Error::Parameter`] for zero GPUs, more than the cluster has, a zero batch,
/// micro-batch or tensor-parallel limit. What building or costing the model fails with rejects the
/// configurations that need it.
pub fn plan_parallel(
    model_at: &(dyn Fn(usize, usize) -> Result<Model> + Sync),
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
    let mut best_us = f64::INFINITY;
    let total = configs.len();
    let mut done = 0;
    // Split by split (configurations come grouped so), the split's configurations on a pool
    // of threads, pruned against the best step of the splits before: the answer, counts
    // included, does not depend on the threads.
    for group in configs.chunk_by(|a, b| split_of(search, a) == split_of(search, b)) {
        let problems = SplitProblems::new(model_at, cluster, split_of(search, &group[0]));
        let outcomes =
            evaluate_all(group, |config| problems.evaluate_recomputing(*config, search, best_us));
        for (config, (outcome, extra)) in group.iter().zip(outcomes) {
            plans.simulated += extra;
            match outcome {
                Outcome::Rejected(reason) => plans.rejected.push((*config, reason)),
                Outcome::Pruned => plans.pruned += 1,
                Outcome::Simulated(Err(reason)) | Outcome::OverMemory(reason) => {
                    plans.simulated += 1;
                    plans.rejected.push((*config, reason));
                }
                Outcome::Simulated(Ok(candidate)) => {
                    plans.simulated += 1;
                    best_us = best_us.min(candidate.step_time_us);
                    plans.candidates.push(candidate);
                }
            }
            done += 1;
            progress(done, total);
        }
    }
    plans.candidates.sort_by(|a, b| a.step_time_us.total_cmp(&b.step_time_us));
    Ok(plans)
}

/// The split `config` belongs to: its micro-batch size, tensor ranks and stages.
fn split_of(search: &ParallelSearch, config: &ParallelConfig) -> (usize, usize, usize) {
    (search.global_batch / (config.data * config.micro_batches), config.tensor, config.stages)
}

/// `evaluate` of every item of `items`, in order, on up to as many threads as the machine
/// runs at once. Protocol: each worker claims the next unclaimed index from `next` (a relaxed
/// fetch-add: the counter only hands out distinct indices, it orders nothing) and writes its
/// result into that index's slot, which no other worker touches; the scope's join makes every
/// write visible to the caller before the slots are read.
fn evaluate_all<T: Sync, R: Send>(items: &[T], evaluate: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(evaluate).collect();
    }
    let slots: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = evaluate(item);
                    *slots[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(result);
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            let result = slot.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
            result.expect("every index is claimed once and filled")
        })
        .collect()
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
