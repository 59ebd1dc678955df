//! One configuration evaluated: its problem built (shared by the schedules of its split),
//! rejected, pruned or simulated, its optimizer state sharded where the whole does not fit.

use ordo_cost::Cluster;
use ordo_sched::{Pipeline, PipelineReplicas};
use ordo_sim::SimOptions;

use super::{ParallelCandidate, ParallelConfig, ParallelSearch};
use crate::error::Result;
use crate::{Model, Problem, Recompute, StepMode, Target};

/// The model builder the planner calls: the training model at a micro-batch's size, as one
/// of the given number of tensor-parallel ranks. Called from several threads at once.
pub(super) type ModelAt<'a> = &'a (dyn Fn(usize, usize) -> Result<Model> + Sync);

/// The problems of one split (micro-batch size, tensor ranks, stages), one for each
/// recomputation, built when first asked for (by whichever thread asks first) and shared by
/// every schedule of the split.
pub(super) struct SplitProblems<'a> {
    model_at: ModelAt<'a>,
    cluster: &'a Cluster,
    /// Micro-batch size, tensor ranks, stages.
    split: (usize, usize, usize),
    built: [std::sync::OnceLock<Result<Built>>; Recompute::ALL.len()],
}

impl<'a> SplitProblems<'a> {
    /// The split of `micro` samples, `tensor` ranks and `stages` stages, nothing built yet.
    pub(super) fn new(
        model_at: ModelAt<'a>,
        cluster: &'a Cluster,
        split: (usize, usize, usize),
    ) -> Self {
        Self { model_at, cluster, split, built: Default::default() }
    }

    /// The split's problem recomputing `recompute`.
    pub(super) fn get(&self, recompute: Recompute) -> &Result<Built> {
        let at = Recompute::ALL.iter().position(|&r| r == recompute).unwrap_or(0);
        self.built[at].get_or_init(|| {
            let (micro, tensor, stages) = self.split;
            Built::new(self.model_at, self.cluster, micro, tensor, stages, recompute)
        })
    }

    /// `config` (of this split) with the least of `search`'s recomputations that fits, pruned
    /// against `best_us`; and how many simulations that took beyond the last.
    pub(super) fn evaluate_recomputing(
        &self,
        config: ParallelConfig,
        search: &ParallelSearch,
        best_us: f64,
    ) -> (Outcome, usize) {
        let mut outcome = Outcome::Pruned;
        for (k, &recompute) in search.recompute.iter().enumerate() {
            outcome = match self.get(recompute) {
                Ok(built) => evaluate(built, config, search, best_us),
                Err(e) => Outcome::Rejected(e.to_string()),
            };
            match outcome {
                Outcome::OverMemory(_) if k + 1 < search.recompute.len() => {}
                _ => return (outcome, k),
            }
        }
        (outcome, search.recompute.len().saturating_sub(1))
    }
}

/// A problem of one micro-batch on a pipeline's devices, with what the planner reads of it.
pub(super) struct Built {
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
    /// simulation then says why). Planned per block, the schedules that run each backward
    /// whole and those that split it have a split each (`[whole, split]`).
    split: [std::sync::OnceLock<Option<std::sync::Arc<ordo_sched::MicroBatched>>>; 2],
    /// The problem's pipeline units, and which of its nodes run once per step: what every
    /// configuration's stage loads are summed from.
    units: std::sync::OnceLock<(ordo_sched::PipelineUnits, Vec<bool>)>,
}

impl Built {
    /// One of `tensor` ranks of the model built at `micro` samples, costed for `stages`
    /// tensor-parallel groups of `cluster`.
    fn new(
        model_at: ModelAt<'_>,
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
        let (split, units) = Default::default();
        Ok(Self {
            problem,
            flops,
            persistent,
            optimizer_state,
            peak_flops,
            recompute,
            split,
            units,
        })
    }
}

/// What became of one configuration.
pub(super) enum Outcome {
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
    // The copies the optimizer state is shared by (1: each holds all of it).
    let shared_by = if sharding { copies } else { 1 };
    // No stage holds less than an even share of the parameters, gradients and optimizer
    // state: where that share does not fit, nothing needs simulating.
    let least = persistent - optimizer_state + optimizer_state.div_ceil(shared_by);
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
    let pipeline = config.pipeline().with_granularity(search.granularity);
    let units = built.units.get_or_init(|| {
        let layout = ordo_sched::micro_batch_layout(&problem.place, 1);
        let once = (0..problem.place.len()).map(|v| layout.runs_once(v)).collect();
        (ordo_sched::pipeline_units(&problem.place), once)
    });
    let loads = StageLoads::of(problem, units, &pipeline);
    // A stage whose parameters, gradients and optimizer state (sharded where allowed) do not
    // fit, whatever the activations: nothing needs simulating.
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
    let apart = pipeline.per_block(&problem.place) && pipeline.schedule.splits_backward();
    let split = built.split[usize::from(apart)]
        .get_or_init(|| ordo_sched::pipeline_split(&problem.place, &pipeline).ok());
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
/// there, and once the work done once per step: updates, sums of tied gradients), its
/// persistent memory and, of that, its optimizer state. `None` where the units cannot be
/// allocated (the simulation then says why).
struct StageLoads {
    compute_us: Vec<u64>,
    persistent: Vec<u64>,
    optimizer_state: Vec<u64>,
}

impl StageLoads {
    fn of(
        problem: &Problem,
        (units, once): &(ordo_sched::PipelineUnits, Vec<bool>),
        pipeline: &Pipeline,
    ) -> Option<Self> {
        let p = &problem.place;
        let (chunk_of_unit, device_of_chunk) =
            ordo_sched::allocate_units(p, units, pipeline).ok()?;
        let stages = pipeline.stages;
        let mut loads = StageLoads {
            compute_us: vec![0; stages],
            persistent: vec![0; stages],
            optimizer_state: vec![0; stages],
        };
        for (v, &weight) in p.weights.iter().enumerate() {
            let stage = device_of_chunk[chunk_of_unit[units.unit_of[v]]];
            let update = p.roles[v] == ordo_ir::Role::Update;
            let times = if once[v] { 1 } else { pipeline.micro_batches };
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
