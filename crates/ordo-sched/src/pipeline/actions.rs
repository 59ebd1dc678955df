//! A pipeline plan as PyTorch's pipeline runtime reads a schedule
//! (`torch.distributed.pipelining`): per rank, a list of compute actions, each the forward
//! (`F`), full backward (`B`), input gradient (`I`) or weight gradient (`W`) of one
//! micro-batch on one of PyTorch's *stages*, which are ordo's chunks (a stage under
//! contiguous allocation; under modulo allocation a rank has several). An action's text is
//! `{stage}{kind}{micro-batch}` (`0F3`, `2I0`); a schedule file is a CSV with one row per rank
//! (the `compute_only` format of `_PipelineScheduleRuntime._load_csv`, which adds the sends
//! and receives itself).
//!
//! Each device's order in the plan becomes its rank's actions: an action appears where the
//! first node of its work does (a chunk's forward of a micro-batch; its backward, or its
//! input-gradient and weight-gradient work apart for a schedule that
//! [splits the backward](super::PipelineSchedule::splits_backward)). Work done once per step
//! (the optimizer's updates) is not an action: PyTorch's runtime leaves it to the caller.

use std::collections::HashSet;
use std::fmt;

use ordo_ir::Role;

use super::{PipelinePlan, PipelineSchedule};
use crate::error::SchedError;

/// What an action computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// The forward pass (`F`).
    Forward,
    /// The backward pass, input and weight gradients together (`B`).
    Backward,
    /// The input gradient alone (`I`).
    InputGradient,
    /// The weight gradient alone (`W`).
    WeightGradient,
}

impl ActionKind {
    /// PyTorch's letter for it.
    pub fn letter(self) -> char {
        match self {
            ActionKind::Forward => 'F',
            ActionKind::Backward => 'B',
            ActionKind::InputGradient => 'I',
            ActionKind::WeightGradient => 'W',
        }
    }
}

/// One compute action of a rank: `kind` of micro-batch `micro_batch` on stage (chunk) `stage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Action {
    /// PyTorch's stage index: ordo's chunk.
    pub stage: usize,
    /// What it computes.
    pub kind: ActionKind,
    /// The micro-batch.
    pub micro_batch: usize,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.stage, self.kind.letter(), self.micro_batch)
    }
}

/// Each rank's (device's) actions, in the plan's order (see the module documentation).
///
/// # Errors
/// [`SchedError::Pipeline`] when the plan lacks some stage's forward or backward of a
/// micro-batch (a plan this module did not build).
pub fn pytorch_actions(
    pipeline: &PipelinePlan,
    schedule: PipelineSchedule,
) -> Result<Vec<Vec<Action>>, SchedError> {
    let ranks = actions_with_first_nodes(pipeline, schedule);
    let emitted: HashSet<Action> = ranks.iter().flatten().map(|&(a, _)| a).collect();
    check_complete(pipeline, schedule, &emitted)?;
    Ok(ranks.into_iter().map(|rank| rank.into_iter().map(|(a, _)| a).collect()).collect())
}

/// Each rank's actions in the plan's order, each with the node of the split problem (= task
/// of the plan) where it starts.
pub(super) fn actions_with_first_nodes(
    pipeline: &PipelinePlan,
    schedule: PipelineSchedule,
) -> Vec<Vec<(Action, usize)>> {
    let split = &pipeline.split;
    let problem = &split.problem;
    let chunk_of = |v: usize| pipeline.chunk_of_unit[pipeline.units.unit_of[split.original(v)]];
    let mut emitted: HashSet<Action> = HashSet::new();
    let mut ranks = Vec::with_capacity(pipeline.placement.order.len());
    for order in &pipeline.placement.order {
        let mut actions = Vec::new();
        for &v in order {
            let Some(micro_batch) = split.micro_batch(v) else { continue };
            let stage = chunk_of(v);
            let mut emit = |kind| {
                let action = Action { stage, kind, micro_batch };
                if emitted.insert(action) {
                    actions.push((action, v));
                }
            };
            match (problem.roles[v], schedule.splits_backward()) {
                (Role::Forward, _) => emit(ActionKind::Forward),
                (Role::Dx | Role::Dw, false) => emit(ActionKind::Backward),
                (Role::Dx, true) => emit(ActionKind::InputGradient),
                (Role::Dw, true) => {
                    // PyTorch computes the input gradient first, which a weight gradient reads
                    // (the stage's saved graph): a chunk without input-gradient work gets
                    // its `I` here.
                    emit(ActionKind::InputGradient);
                    emit(ActionKind::WeightGradient);
                }
                (Role::Update | Role::Comm, _) => {}
            }
        }
        ranks.push(actions);
    }
    ranks
}

/// Every chunk has every micro-batch's forward and backward actions.
fn check_complete(
    pipeline: &PipelinePlan,
    schedule: PipelineSchedule,
    emitted: &HashSet<Action>,
) -> Result<(), SchedError> {
    let micro_batches = pipeline.split.scheduled_micro_batches();
    let kinds: &[ActionKind] = if schedule.splits_backward() {
        &[ActionKind::Forward, ActionKind::InputGradient, ActionKind::WeightGradient]
    } else {
        &[ActionKind::Forward, ActionKind::Backward]
    };
    for stage in 0..pipeline.device_of_chunk.len() {
        for micro_batch in 0..micro_batches {
            for &kind in kinds {
                let action = Action { stage, kind, micro_batch };
                if !emitted.contains(&action) {
                    return Err(SchedError::Pipeline(format!(
                        "the plan has no work for action {action} (stage {stage}, micro-batch \
                         {micro_batch})"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The actions as PyTorch's `compute_only` CSV: one line per rank, actions separated by
/// commas.
pub fn pytorch_csv(ranks: &[Vec<Action>]) -> String {
    let mut csv = String::new();
    for actions in ranks {
        let row: Vec<String> = actions.iter().map(Action::to_string).collect();
        csv.push_str(&row.join(","));
        csv.push('\n');
    }
    csv
}

/// [`pytorch_csv`] for copies of the pipeline reducing each stage's gradients across the
/// copies (data parallelism over the pipeline): each stage's `{s}REDUCE_GRAD` and its
/// `{s}WAIT_REDUCE_GRAD` right after the stage's `micro_batches`-th weight-gradient (or full
/// backward) action, where PyTorch's `_add_reduce_grad` places them: once the stage's
/// gradients are accumulated over every micro-batch.
pub fn pytorch_csv_with_reduce_grad(ranks: &[Vec<Action>], micro_batches: usize) -> String {
    let mut csv = String::new();
    let mut finished: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for actions in ranks {
        let mut row: Vec<String> = Vec::with_capacity(actions.len() + 2);
        for action in actions {
            row.push(action.to_string());
            if matches!(action.kind, ActionKind::WeightGradient | ActionKind::Backward) {
                let count = finished.entry(action.stage).or_default();
                *count += 1;
                if *count == micro_batches {
                    row.push(format!("{}REDUCE_GRAD", action.stage));
                    row.push(format!("{}WAIT_REDUCE_GRAD", action.stage));
                }
            }
        }
        csv.push_str(&row.join(","));
        csv.push('\n');
    }
    csv
}
