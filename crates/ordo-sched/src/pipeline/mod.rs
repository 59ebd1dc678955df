//! Pipeline-parallel training over `S` stages and `M` micro-batches: GPipe, 1F1B
//! (PipeDream-flush) and out-of-order backprop's gradient fast-forwarding, with contiguous or
//! modulo allocation of the model's repeated blocks to stages.
//!
//! [`pipeline_plan`] takes the training-graph problem of **one micro-batch** (the model built
//! at batch `B / M`), cuts it into units ([`pipeline_units`]), allocates the units to stages
//! (stage `s` runs on device `s`), copies the graph once per micro-batch ([`micro_batch`]),
//! orders each device's work by the schedule and builds the [`Plan`] with
//! [`crate::build_plan_on_streams`], which adds the transfers between stages. A step ends with a
//! flush: every parameter is updated once, after the last micro-batch's gradient (GPipe's
//! synchronous semantics).
//!
//! **Orders.** A schedule works on operations: the forward, or the backward, of one
//! micro-batch on one *chunk* (a run of consecutive units on one device: a stage under
//! contiguous allocation, `m` units under modulo allocation). The operations are list-scheduled
//! at their predicted costs (node weights; transfer times between devices as delays), each
//! device taking, whenever it is idle, the most urgent ready operation its schedule allows;
//! the order found is each device's order in the plan. That order is one a real execution
//! keeps, so the plan cannot deadlock, for any allocation.
//!
//! * [`PipelineSchedule::Gpipe`]: all forwards (oldest micro-batch first), then, once a device
//!   has run all its forwards, its backwards micro-batch by micro-batch, each chunk's dX and dW
//!   together in build order (as autograd runs them).
//! * [`PipelineSchedule::OneFOneB`]: a device has at most `ceil((V - d) / k)` micro-batches in
//!   flight (`V` chunks, `d` its first chunk, `k` its chunk count: `S - s` on stage `s` under
//!   contiguous allocation) and runs a ready backward before a forward. With stages of equal
//!   cost this is PipeDream-flush exactly: `S - s - 1` forwards of warm-up, then one forward
//!   one backward, then the cool-down.
//! * [`PipelineSchedule::FastForward`]: 1F1B's micro-batch cap (the original's `push`
//!   variant, which its pre-training scripts use) on the micro-batches whose dX is not done,
//!   with each chunk's backward split into its dX, run first and sent to the previous stage
//!   at once, and its dW, run when nothing more urgent is ready (priority dX, then forward,
//!   then dW). A dW may lag one micro-batch: a new micro-batch starts on a device only while
//!   at most one micro-batch there waits for nothing but its dW, so the activations dW reads
//!   stay bounded (one micro-batch more than 1F1B's), and in the cool-down the dWs fill the
//!   time the device would wait for a dX. The original lets the last stage defer every dW
//!   behind the last micro-batch's dX (all `M` micro-batches' activations alive there, as
//!   GPipe) and the other stages none; one micro-batch of lag everywhere gets the last stage's
//!   gain without its memory.
//!   With [`Pipeline::dw_on_sub_stream`] the dW nodes run on the device's sub-stream, beside
//!   the next forward or dX when the simulator lets kernels share a device.
//! * [`PipelineSchedule::ZbH1`] and [`PipelineSchedule::ZbH2`] (Zero Bubble): the same split
//!   into dX (B) and dW (W) and the same priorities (B, then F, then W), but the cap counts a
//!   micro-batch as in flight until its last W, since W reads its activations: at most 1F1B's
//!   count (ZB-H1: 1F1B's memory, the Ws fill the cool-down and part of the warm-up's idle
//!   time), or twice that less one (ZB-H2: more warm-up forwards, which fill the start of the
//!   pipeline; no bubble at equal costs).
//!
//! **Memory.** Parameters and optimizer state are held once, on their stage; each
//! micro-batch's activations live from their forward node until their last backward reader,
//! so GPipe holds all `M` micro-batches' activations at its peak and 1F1B at most `S - s` on
//! stage `s`.

mod actions;
mod blocks;
mod interleaved;
mod microbatch;
mod order;
mod replicated;
mod units;

pub use actions::{Action, ActionKind, pytorch_actions, pytorch_csv, pytorch_csv_with_reduce_grad};
pub use blocks::{PerBlock, per_block};
pub use microbatch::{MicroBatched, micro_batch, micro_batch_layout};
pub use replicated::{
    PipelineReplicas, materialised_pipeline_plan, replicated_pipeline_plan,
    replicated_pipeline_plan_of_split,
};
pub use units::{PipelineUnits, balanced_split, block_of, pipeline_units};

use ordo_problem::{PlaceProblem, Placement};

use crate::build::assemble_plan_on_streams;
use crate::error::SchedError;
use crate::plan::Plan;

/// How the stages of a pipeline order their work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PipelineSchedule {
    /// All forwards, then all backwards (Huang et al., GPipe).
    Gpipe,
    /// One forward one backward after a warm-up (PipeDream-flush).
    OneFOneB,
    /// Out-of-order backprop's gradient fast-forwarding: 1F1B with each backward's dX first.
    FastForward,
    /// Zero Bubble's ZB-H1 (Qi et al., ICLR 2024): 1F1B's warm-up, each backward split into
    /// its input gradient (B, first) and weight gradient (W, filling idle time), with at most
    /// as many micro-batches' activations alive (F done, W not) as 1F1B keeps: 1F1B's memory,
    /// about a third of its bubble.
    ZbH1,
    /// Zero Bubble's ZB-H2: ZB-H1 with twice 1F1B's activations alive less one (`2(S - s) - 1`
    /// on stage `s`), so that extra warm-up forwards fill the start of the pipeline and the Ws
    /// its end: no bubble at equal costs, for about twice the memory.
    ZbH2,
}

impl PipelineSchedule {
    /// Every schedule.
    pub const ALL: [PipelineSchedule; 5] = [
        PipelineSchedule::Gpipe,
        PipelineSchedule::OneFOneB,
        PipelineSchedule::FastForward,
        PipelineSchedule::ZbH1,
        PipelineSchedule::ZbH2,
    ];

    /// The schedule's name on the command line: `gpipe`, `1f1b`, `fast-forward`, `zb-h1` or
    /// `zb-h2`.
    pub fn name(self) -> &'static str {
        match self {
            PipelineSchedule::Gpipe => "gpipe",
            PipelineSchedule::OneFOneB => "1f1b",
            PipelineSchedule::FastForward => "fast-forward",
            PipelineSchedule::ZbH1 => "zb-h1",
            PipelineSchedule::ZbH2 => "zb-h2",
        }
    }

    /// Whether the schedule splits each backward into its input gradient and its weight
    /// gradient, run apart (fast-forward, zero bubble), rather than running them together.
    pub fn splits_backward(self) -> bool {
        matches!(
            self,
            PipelineSchedule::FastForward | PipelineSchedule::ZbH1 | PipelineSchedule::ZbH2
        )
    }

    /// The schedule called `name` (see [`PipelineSchedule::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A pipeline configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pipeline {
    /// Number of stages `S`; stage `s` runs on device `s`.
    pub stages: usize,
    /// Number of micro-batches `M` per step.
    pub micro_batches: usize,
    /// How the stages order their work.
    pub schedule: PipelineSchedule,
    /// `None`: contiguous allocation, the units split into `S` runs of balanced cost.
    /// `Some(m)`: modulo allocation, unit `l` on stage `(l / m) % S` (out-of-order backprop's
    /// round-robin in groups of `m` blocks; Megatron's interleaving with `m`-block chunks).
    pub modulo: Option<usize>,
    /// Whether weight-gradient (dW) nodes run on each device's sub-stream.
    pub dw_on_sub_stream: bool,
    /// A runtime's cost of starting one action (one chunk's forward, backward, input or
    /// weight gradient of a micro-batch, as PyTorch's pipeline runtime runs them), in µs:
    /// added to the first task of each action, so that the prediction charges a schedule
    /// with more (smaller) actions for them. 0 by default; measured by the Python package.
    pub action_overhead_us: u64,
    /// Whether the plan has a task per node of the training graph or per block and pass
    /// ([`Granularity`]).
    pub granularity: Granularity,
}

/// How finely a pipeline is planned: a task per node of the training graph and micro-batch
/// (what a runtime runs), or per block, pass and micro-batch ([`per_block`]: for predictions
/// at scale, where the node-level plan would hold millions of tasks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// Per block where the node-level plan would have more than [`Granularity::AUTO_TASKS`]
    /// compute tasks (nodes times micro-batches), per node otherwise.
    #[default]
    Auto,
    /// A task per node and micro-batch.
    Node,
    /// A task per block, pass and micro-batch.
    Block,
}

impl Granularity {
    /// The node-level compute tasks (a micro-batch's nodes times the micro-batches) above
    /// which [`Granularity::Auto`] plans per block.
    pub const AUTO_TASKS: usize = 200_000;

    /// Every granularity, [`Granularity::name`] order.
    pub const ALL: [Granularity; 3] = [Granularity::Auto, Granularity::Node, Granularity::Block];

    /// Its name on the command line: `auto`, `node` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Auto => "auto",
            Granularity::Node => "node",
            Granularity::Block => "block",
        }
    }

    /// The granularity called `name` (see [`Granularity::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.name() == name)
    }

    /// Whether a pipeline of `micro_batches` micro-batches of `problem` (one micro-batch's
    /// training graph) is planned per block.
    pub fn per_block(self, problem: &PlaceProblem, micro_batches: usize) -> bool {
        match self {
            Granularity::Auto => {
                problem.mode == ordo_cost::StepMode::TrainingGraph
                    && problem.len().saturating_mul(micro_batches) > Self::AUTO_TASKS
            }
            Granularity::Node => false,
            Granularity::Block => true,
        }
    }
}

impl Pipeline {
    /// `stages` stages, `micro_batches` micro-batches, contiguous allocation, everything on
    /// the main compute streams.
    pub fn new(stages: usize, micro_batches: usize, schedule: PipelineSchedule) -> Self {
        Self {
            stages,
            micro_batches,
            schedule,
            modulo: None,
            dw_on_sub_stream: false,
            action_overhead_us: 0,
            granularity: Granularity::Auto,
        }
    }

    /// The same pipeline planned at `granularity`.
    pub fn with_granularity(self, granularity: Granularity) -> Self {
        Self { granularity, ..self }
    }

    /// Whether it is planned per block for `problem` ([`Granularity::per_block`]).
    pub fn per_block(&self, problem: &PlaceProblem) -> bool {
        self.granularity.per_block(problem, self.micro_batches)
    }

    /// The same pipeline with `us` charged per action ([`Pipeline::action_overhead_us`]).
    pub fn with_action_overhead(self, us: u64) -> Self {
        Self { action_overhead_us: us, ..self }
    }

    /// The same pipeline with modulo allocation in groups of `m` units.
    pub fn with_modulo(self, m: usize) -> Self {
        Self { modulo: Some(m), ..self }
    }

    /// The same pipeline with the dW nodes on the devices' sub-streams.
    pub fn with_dw_on_sub_stream(self) -> Self {
        Self { dw_on_sub_stream: true, ..self }
    }
}

/// A pipeline's plan and how it was made.
#[derive(Clone, Debug)]
pub struct PipelinePlan {
    /// The plan of one step.
    pub plan: Plan,
    /// The micro-batched problem the plan runs (its nodes are the plan's first tasks), shared
    /// by the plans of every schedule of the same problem and micro-batch count. Planned per
    /// block, the micro-batches of the merged problem ([`per_block`]).
    pub split: std::sync::Arc<MicroBatched>,
    /// Whether the plan was made per block ([`Granularity`]): its tasks are blocks' passes.
    pub per_block: bool,
    /// The placement of `split.problem` the plan was built from.
    pub placement: Placement,
    /// The units of the one-micro-batch problem.
    pub units: PipelineUnits,
    /// Each unit's stage (= device).
    pub stage_of_unit: Vec<usize>,
    /// Each unit's chunk: a run of consecutive units on one device (a stage under contiguous
    /// allocation, `m` units under modulo allocation); PyTorch's pipeline calls a chunk a
    /// stage.
    pub chunk_of_unit: Vec<usize>,
    /// Each chunk's device.
    pub device_of_chunk: Vec<usize>,
}

/// Each unit's chunk, and each chunk's stage: contiguous runs of balanced cost, or the modulo
/// rule.
///
/// # Errors
/// [`SchedError::Pipeline`] for zero stages, `m = 0`, more stages than units, or a modulo
/// allocation that leaves a stage without units.
pub fn allocate_units(
    problem: &PlaceProblem,
    units: &PipelineUnits,
    pipeline: &Pipeline,
) -> Result<(Vec<usize>, Vec<usize>), SchedError> {
    let stages = pipeline.stages;
    match pipeline.modulo {
        None => {
            let bounds = balanced_split(&units.costs(problem), stages)?;
            let chunk_of_unit =
                (0..units.len()).map(|u| bounds.partition_point(|&b| b <= u) - 1).collect();
            Ok((chunk_of_unit, (0..stages).collect()))
        }
        Some(0) => Err(SchedError::Pipeline("modulo allocation in groups of 0 units".into())),
        Some(m) => {
            units::check_unit_count(units.len(), stages)?;
            let chunks = units.len().div_ceil(m);
            if chunks < stages {
                return Err(SchedError::Pipeline(format!(
                    "modulo allocation of {} units in groups of {m} fills only {chunks} of the \
                     {stages} stages",
                    units.len()
                )));
            }
            let chunk_of_unit = (0..units.len()).map(|u| u / m).collect();
            Ok((chunk_of_unit, (0..chunks).map(|c| c % stages).collect()))
        }
    }
}

/// The plan of `pipeline` for the training-graph problem `problem` of one micro-batch (see
/// the module documentation of `pipeline/mod.rs`). Devices from `S` on stay idle.
///
/// # Errors
/// [`SchedError::Pipeline`] for zero stages or micro-batches, fewer devices than stages, more
/// stages than units, or a modulo allocation that leaves a stage empty; those of
/// [`crate::build_plan_on_streams`].
pub fn pipeline_plan(
    problem: &PlaceProblem,
    pipeline: &Pipeline,
) -> Result<PipelinePlan, SchedError> {
    pipeline_plan_of_split(problem, None, pipeline)
}

/// The problem a pipeline plans, one micro-batch's: `problem` itself, or merged per block
/// when `pipeline` is planned per block ([`Pipeline::per_block`]).
///
/// # Errors
/// Those of [`per_block`].
pub fn pipeline_problem<'a>(
    problem: &'a PlaceProblem,
    pipeline: &Pipeline,
) -> Result<std::borrow::Cow<'a, PlaceProblem>, SchedError> {
    Ok(if pipeline.per_block(problem) {
        std::borrow::Cow::Owned(per_block(problem, pipeline.schedule)?.problem)
    } else {
        std::borrow::Cow::Borrowed(problem)
    })
}

/// The micro-batches `pipeline` plans for `problem` ([`pipeline_problem`] split by
/// [`micro_batch`]), for a caller that plans several schedules of one split
/// ([`pipeline_plan_of_split`]). Plans per block share a split only where their schedules
/// run the backward alike ([`PipelineSchedule::splits_backward`]).
///
/// # Errors
/// Those of [`pipeline_problem`] and [`micro_batch`].
pub fn pipeline_split(
    problem: &PlaceProblem,
    pipeline: &Pipeline,
) -> Result<std::sync::Arc<MicroBatched>, SchedError> {
    let planned = pipeline_problem(problem, pipeline)?;
    let mut split = micro_batch(&planned, pipeline.micro_batches)?;
    if let std::borrow::Cow::Owned(merged) = planned {
        split.merged = Some((std::sync::Arc::new(merged), pipeline.schedule.splits_backward()));
    }
    Ok(std::sync::Arc::new(split))
}

/// [`pipeline_plan`] with `problem` already split into the pipeline's micro-batches
/// ([`pipeline_split`]), where the caller plans several schedules of one split; `None` splits
/// it here.
///
/// # Errors
/// As [`pipeline_plan`]; [`SchedError::Pipeline`] for a split of another micro-batch count or
/// size of problem.
pub fn pipeline_plan_of_split(
    problem: &PlaceProblem,
    split: Option<std::sync::Arc<MicroBatched>>,
    pipeline: &Pipeline,
) -> Result<PipelinePlan, SchedError> {
    let (planned, _) = unchecked_pipeline_plan(problem, split, pipeline)?;
    crate::validate::validate(&planned.plan)?;
    Ok(planned)
}

/// [`pipeline_plan_of_split`] without the final check of its plan ([`crate::validate()`]), for
/// a caller that adds to the plan and checks it once, whole; with the buffer of each tensor of
/// the micro-batched problem on its producer's device.
pub(crate) fn unchecked_pipeline_plan(
    problem: &PlaceProblem,
    split: Option<std::sync::Arc<MicroBatched>>,
    pipeline: &Pipeline,
) -> Result<(PipelinePlan, Vec<crate::plan::BufferId>), SchedError> {
    let (stages, devices) = (pipeline.stages, problem.devices.count());
    if stages == 0 {
        return Err(SchedError::Pipeline("zero stages".into()));
    }
    if pipeline.micro_batches == 0 {
        return Err(SchedError::Pipeline("zero micro-batches".into()));
    }
    if devices < stages {
        return Err(SchedError::Pipeline(format!(
            "{stages} stages need {stages} devices, the problem has {devices}"
        )));
    }
    let per_block = pipeline.per_block(problem);
    let split = match split {
        Some(split) => split,
        None => {
            // The allocation's errors (more stages than units, ...) before any micro-batch is
            // made.
            allocate_units(problem, &pipeline_units(problem), pipeline)?;
            pipeline_split(problem, pipeline)?
        }
    };
    // Planned per block, the merged problem: its units are the problem's, in the same order
    // (`per_block` checks it), so they are allocated alike.
    let merged = split.merged.clone();
    let apart = pipeline.schedule.splits_backward();
    let problem: &PlaceProblem = match (&merged, per_block) {
        (Some((merged, split_apart)), true) if *split_apart == apart => merged,
        (None, false) => problem,
        _ => {
            return Err(SchedError::Pipeline(format!(
                "a split made {}per block, for a {} pipeline planned {}per block",
                if merged.is_some() { "" } else { "not " },
                pipeline.schedule.name(),
                if per_block { "" } else { "not " }
            )));
        }
    };
    let units = pipeline_units(problem);
    let (chunk_of_unit, device_of_chunk) = allocate_units(problem, &units, pipeline)?;
    let copies = split.provenance.origin.iter().all(|v| v.index() < problem.len());
    if split.micro_batches() != pipeline.micro_batches || !copies {
        return Err(SchedError::Pipeline(format!(
            "a split into {} micro-batches of another problem, for a pipeline of {}",
            split.micro_batches(),
            pipeline.micro_batches
        )));
    }
    let chunk_of: Vec<usize> =
        split.provenance.origin.iter().map(|v| chunk_of_unit[units.unit_of[v.index()]]).collect();
    let rank = units::build_rank(problem);
    let orders =
        order::device_orders(&split, &chunk_of, &device_of_chunk, pipeline.schedule, &rank)?;
    let device_of: Vec<usize> = chunk_of.iter().map(|&c| device_of_chunk[c]).collect();
    let transfers = transfer_order(&split.problem, &device_of, &orders.finish_us);
    let placement = Placement {
        algo: format!("pipeline {}", pipeline.schedule.name()),
        device_of,
        order: orders.order,
        makespan_us: 0,
        peak_memory_bytes: vec![0; devices],
        transfers: Some(transfers),
        placement_seconds: 0.0,
    };
    let on_sub_stream: Vec<bool> = split
        .problem
        .roles
        .iter()
        .zip(&split.provenance.micro_batch)
        .map(|(&role, m)| pipeline.dw_on_sub_stream && role == ordo_ir::Role::Dw && m.is_some())
        .collect();
    let (plan, buffer_of_tensor) =
        assemble_plan_on_streams(&split.problem, &placement, &on_sub_stream)?;
    let stage_of_unit = chunk_of_unit.iter().map(|&c| device_of_chunk[c]).collect();
    let mut planned = PipelinePlan {
        plan,
        split,
        placement,
        units,
        stage_of_unit,
        chunk_of_unit,
        device_of_chunk,
        per_block,
    };
    if pipeline.action_overhead_us > 0 {
        // The orders are made; the overhead changes what they are predicted to take.
        for (_, v) in
            actions::actions_with_first_nodes(&planned, pipeline.schedule).into_iter().flatten()
        {
            planned.plan.tasks[v].duration_us += pipeline.action_overhead_us;
        }
    }
    Ok((planned, buffer_of_tensor))
}

/// Every transfer between devices, `(tensor, receiving device)`, in the order the list
/// schedule produces the tensors (ties in topological order), for the channels to serve them
/// in: the order in which a stage actually sends, rather than micro-batch by micro-batch.
fn transfer_order(
    problem: &PlaceProblem,
    device_of: &[usize],
    finish_us: &[u64],
) -> Vec<(usize, usize)> {
    let mut transfers: Vec<(u64, usize, usize, usize)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for edge in &problem.edges {
        for &x in &edge.tensors {
            let (producer, to) = (problem.tensors[x].producer, device_of[edge.target]);
            if device_of[producer] != to && seen.insert((x, to)) {
                transfers.push((finish_us[producer], problem.topo_rank[producer], to, x));
            }
        }
    }
    transfers.sort_unstable();
    transfers.into_iter().map(|(_, _, to, x)| (x, to)).collect()
}
