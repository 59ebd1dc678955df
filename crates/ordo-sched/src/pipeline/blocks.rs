//! A training-graph problem seen per block: each pipeline unit's forward, input-gradient,
//! weight-gradient and update work merged into one node each, so that a pipeline of many
//! stages and micro-batches is planned and simulated over hundreds of nodes per micro-batch
//! rather than tens of thousands.
//!
//! What the merge keeps and what it approximates (measured against the node-level simulation
//! in `doc/schedules.md`):
//!
//! * **Kept exactly**: every unit's compute per pass (a merged node's weight is the sum of its
//!   members'), so the stages' balance, the allocation of units to stages and every device's
//!   busy time; the tensors that cross from one merged node to another (each stage's inputs,
//!   the saved activations the backward reads, the gradients the updates read), with their
//!   bytes and transfer times; parameters, gradients and optimizer state (persistent memory).
//! * **Approximated**: a merged node sends its outputs when all of its members are done, where
//!   the node-level plan sends each as soon as its producer is (a stage's input gradient waits
//!   for the first block's last input-gradient node rather than for the node that makes it);
//!   the outputs of a merged node are allocated when it starts and the tensors it reads freed
//!   when it ends, where the node-level plan allocates each output when its producer starts
//!   and frees each input after its last reader; and the tensors that live only inside a
//!   merged node become its workspace, sized so that its members' own peak (run alone, in
//!   build order) is met. Peaks come out higher by a few percent at most; a little lower
//!   only where a transfer that arrives later allocates its copy later (0.06% measured).

use std::collections::{BinaryHeap, HashMap};

use ordo_cost::{NodeMemory, StepMode};
use ordo_ir::Role;
use ordo_problem::{Edge, PlaceProblem, Tensor};

use super::PipelineSchedule;
use super::microbatch::micro_batch_layout;
use super::units::{PipelineUnits, build_rank, pipeline_units};
use crate::error::SchedError;

/// A problem whose nodes are merged per pipeline unit and pass (see the module documentation),
/// and which nodes of the source each merged node holds.
#[derive(Clone, Debug)]
pub struct PerBlock {
    /// The merged problem: one node per unit and pass (forward, dX, dW, and the work done once
    /// per step: updates, sums of tied gradients), named `<unit>` (the forward) and
    /// `<unit>.<pass>`.
    pub problem: PlaceProblem,
    /// Per merged node, the nodes of the source problem it holds, in build order.
    pub members: Vec<Vec<usize>>,
}

/// A problem's nodes grouped per unit and pass, the groups in a topological order of the
/// graph they make (every merged edge goes to a later group).
struct Groups {
    /// Per group: its unit, role and whether it runs once per step.
    keys: Vec<(usize, Role, bool)>,
    /// Per group: its nodes, in build order.
    members: Vec<Vec<usize>>,
    /// Per node: its group.
    group_of: Vec<usize>,
    /// The dependencies between groups added for the schedule, `(before, after)`
    /// ([`backward_joins`]).
    joins: Vec<(usize, usize)>,
}

/// `problem`'s nodes grouped per unit of `units`, role and whether they run once per step,
/// numbered in a topological order of the groups (with `schedule`'s joins, see
/// [`backward_joins`]) that takes the group whose first member comes first in build order
/// wherever there is a choice.
///
/// # Errors
/// [`SchedError::Pipeline`] when the groups depend on each other in a cycle.
fn groups(
    problem: &PlaceProblem,
    units: &PipelineUnits,
    schedule: PipelineSchedule,
) -> Result<Groups, SchedError> {
    let layout = micro_batch_layout(problem, 1);
    let rank = build_rank(problem);
    let mut by_rank: Vec<usize> = (0..problem.len()).collect();
    by_rank.sort_by_key(|&v| rank[v]);
    // Groups numbered in order of their first member in build order.
    let mut index: HashMap<(usize, Role, bool), usize> = HashMap::new();
    let mut keys: Vec<(usize, Role, bool)> = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut group_of = vec![0; problem.len()];
    for &v in &by_rank {
        let key = (units.unit_of[v], problem.roles[v], layout.runs_once(v));
        let g = *index.entry(key).or_insert_with(|| {
            keys.push(key);
            members.push(Vec::new());
            keys.len() - 1
        });
        members[g].push(v);
        group_of[v] = g;
    }
    let joins = if schedule.splits_backward() {
        Vec::new()
    } else {
        backward_joins(problem, &group_of, &keys)
    };
    let order = merged_order(problem, &group_of, members.len(), &joins).ok_or_else(|| {
        SchedError::Pipeline("the blocks' passes depend on each other in a cycle".into())
    })?;
    let mut renumber = vec![0; members.len()];
    for (i, &g) in order.iter().enumerate() {
        renumber[g] = i;
    }
    let mut sorted = Groups {
        keys: keys.clone(),
        members: vec![Vec::new(); members.len()],
        group_of: group_of.iter().map(|&g| renumber[g]).collect(),
        joins: joins.iter().map(|&(a, b)| (renumber[a], renumber[b])).collect(),
    };
    for (g, m) in members.into_iter().enumerate() {
        sorted.keys[renumber[g]] = keys[g];
        sorted.members[renumber[g]] = m;
    }
    Ok(sorted)
}

/// What flows between the groups: the tensors a node of another group reads (each produced
/// by its producer's group), the merged edges (one per pair of groups, in the order of the
/// problem's edges, each carrying its tensors once; then the joins, carrying none), and per
/// tensor of `problem` whether it is one of them (external).
fn merged_dataflow(
    problem: &PlaceProblem,
    Groups { group_of, joins, .. }: &Groups,
) -> (Vec<Tensor>, Vec<Edge>, Vec<bool>) {
    let mut external = vec![false; problem.tensors.len()];
    for e in &problem.edges {
        if group_of[e.source] != group_of[e.target] {
            for &x in &e.tensors {
                external[x] = true;
            }
        }
    }
    let mut tensor_of = vec![usize::MAX; problem.tensors.len()];
    let mut tensors = Vec::new();
    for (x, t) in problem.tensors.iter().enumerate() {
        if external[x] {
            tensor_of[x] = tensors.len();
            tensors.push(Tensor { producer: group_of[t.producer], ..t.clone() });
        }
    }
    let mut edges: Vec<Edge> = Vec::new();
    let mut edge_of: HashMap<(usize, usize), usize> = HashMap::new();
    let mut carried: std::collections::HashSet<(usize, usize)> = Default::default();
    let mut edge = |edges: &mut Vec<Edge>, source: usize, target: usize| {
        *edge_of.entry((source, target)).or_insert_with(|| {
            edges.push(Edge { source, target, comm_us: 0, tensors: Vec::new() });
            edges.len() - 1
        })
    };
    for e in &problem.edges {
        let (source, target) = (group_of[e.source], group_of[e.target]);
        if source == target {
            continue;
        }
        let k = edge(&mut edges, source, target);
        for &x in &e.tensors {
            if carried.insert((x, target)) {
                edges[k].tensors.push(tensor_of[x]);
                edges[k].comm_us = edges[k].comm_us.saturating_add(problem.tensors[x].comm_us);
            }
        }
    }
    for &(source, target) in joins {
        edge(&mut edges, source, target);
    }
    (tensors, edges, external)
}

/// The name of the merged node of unit `unit` with role `role`, run once per step (updates
/// and the sums of tied parameters' gradients) or per micro-batch: the unit's own name for its
/// forward (so the merged problem has the same units), `<unit>.<pass>` for the rest.
fn merged_name(unit: &str, role: Role, once: bool) -> String {
    let pass = match (role, once) {
        (Role::Forward, _) => return unit.to_string(),
        (Role::Dx, _) => "dx",
        (Role::Dw, false) => "dw",
        (Role::Dw, true) => "dw-sum",
        (Role::Update, _) => "update",
        (Role::Comm, _) => "comm",
    };
    format!("{unit}.{pass}")
}

/// The training-graph problem `problem` (one micro-batch) with each pipeline unit's
/// ([`pipeline_units`]) forward, dX, dW and once-per-step work merged into one node each, for
/// pipelines of `schedule`: where it runs a block's dX and dW together (GPipe, 1F1B), what a
/// block's dX sends also waits for its dW, as in the node-level plan. Pipelines planned on it
/// allocate the same units to the same stages as on `problem`.
///
/// # Errors
/// [`SchedError::Pipeline`] for a problem that is not a training graph
/// ([`StepMode::TrainingGraph`]), or whose merged nodes would depend on each other in a
/// cycle.
pub fn per_block(
    problem: &PlaceProblem,
    schedule: PipelineSchedule,
) -> Result<PerBlock, SchedError> {
    if problem.mode != StepMode::TrainingGraph {
        return Err(SchedError::Pipeline(
            "only a training graph merges per block (its nodes have forward and backward roles)"
                .into(),
        ));
    }
    let units = pipeline_units(problem);
    let groups = groups(problem, &units, schedule)?;
    let (tensors, edges, external) = merged_dataflow(problem, &groups);
    let Groups { keys, members, group_of, .. } = groups;
    let n = members.len();

    let forward_of_unit: HashMap<usize, usize> = keys
        .iter()
        .enumerate()
        .filter(|(_, (_, role, _))| *role == Role::Forward)
        .map(|(g, &(unit, _, _))| (unit, g))
        .collect();
    let internal_peak = internal_peaks(problem, &members, &group_of, &external);
    let mut output_bytes = vec![0u64; n];
    for t in &tensors {
        output_bytes[t.producer] = output_bytes[t.producer].saturating_add(t.bytes);
    }
    let mut out_edges = vec![Vec::new(); n];
    let mut in_edges = vec![Vec::new(); n];
    for (k, e) in edges.iter().enumerate() {
        out_edges[e.source].push(k);
        in_edges[e.target].push(k);
    }
    // Built field by field rather than cloned from `problem`: none of its per-node data is
    // kept (the topological order is set below).
    let mut out = PlaceProblem {
        names: keys
            .iter()
            .map(|&(unit, role, once)| merged_name(&units.names[unit], role, once))
            .collect(),
        weights: members
            .iter()
            .map(|m| m.iter().fold(0u64, |sum, &v| sum.saturating_add(problem.weights[v])))
            .collect(),
        occupancy: members.iter().map(|m| weighted_occupancy(problem, m)).collect(),
        roles: keys.iter().map(|&(_, role, _)| role).collect(),
        layer_of: keys
            .iter()
            .map(|&(unit, role, _)| {
                (role != Role::Forward).then(|| forward_of_unit.get(&unit).copied()).flatten()
            })
            .collect(),
        memory: (0..n)
            .map(|g| NodeMemory {
                temporary: internal_peak[g],
                persistent: members[g]
                    .iter()
                    .fold(0u64, |sum, &v| sum.saturating_add(problem.memory[v].persistent)),
                outputs: output_bytes[g],
                retain_outputs: false,
            })
            .collect(),
        edges,
        out_edges,
        in_edges,
        tensors,
        group_of: (0..n).collect(),
        groups: (0..n).map(|g| vec![g]).collect(),
        topo_order: Vec::new(),
        topo_rank: Vec::new(),
        devices: problem.devices.clone(),
        mode: problem.mode,
    };
    out.set_topo_order()?;
    let merged_units = pipeline_units(&out);
    if merged_units.names != units.names {
        return Err(SchedError::Pipeline(format!(
            "merged per block, the model's {} units ({}, ...) became {} other ones ({}, ...)",
            units.len(),
            units.names.first().map_or("", String::as_str),
            merged_units.len(),
            merged_units.names.first().map_or("", String::as_str),
        )));
    }
    Ok(PerBlock { problem: out, members })
}

/// For a schedule that runs each block's dX and dW together (one backward action), the
/// dependencies that make what a block's dX sends to another block wait for the block's dW
/// too, `(dW group, reader group)`: in the node-level plan the backward's nodes interleave, so
/// the gradient of a block's input is made (and sent) near the end of its whole backward, not
/// when its input gradients alone would be done.
fn backward_joins(
    problem: &PlaceProblem,
    group_of: &[usize],
    keys: &[(usize, Role, bool)],
) -> Vec<(usize, usize)> {
    let weight_gradients: HashMap<usize, usize> = keys
        .iter()
        .enumerate()
        .filter(|&(_, &(_, role, once))| role == Role::Dw && !once)
        .map(|(g, &(unit, _, _))| (unit, g))
        .collect();
    let mut joins = std::collections::BTreeSet::new();
    for e in &problem.edges {
        let (a, b) = (group_of[e.source], group_of[e.target]);
        let ((unit, role, _), (other, ..)) = (keys[a], keys[b]);
        if role == Role::Dx
            && unit != other
            && !e.tensors.is_empty()
            && let Some(&dw) = weight_gradients.get(&unit)
        {
            joins.insert((dw, b));
        }
    }
    joins.into_iter().collect()
}

/// The groups in a topological order of the graph they make, the one whose first members come
/// earliest in build order wherever there is a choice; `None` when they form a cycle. Groups
/// are numbered in order of their first member, so the lowest ready number goes first.
fn merged_order(
    problem: &PlaceProblem,
    group_of: &[usize],
    groups: usize,
    joins: &[(usize, usize)],
) -> Option<Vec<usize>> {
    let mut successors: Vec<Vec<usize>> = vec![Vec::new(); groups];
    let mut waiting = vec![0usize; groups];
    let mut seen = std::collections::HashSet::new();
    let fine = problem.edges.iter().map(|e| (group_of[e.source], group_of[e.target]));
    for (a, b) in fine.chain(joins.iter().copied()) {
        if a != b && seen.insert((a, b)) {
            successors[a].push(b);
            waiting[b] += 1;
        }
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<usize>> =
        (0..groups).filter(|&g| waiting[g] == 0).map(std::cmp::Reverse).collect();
    let mut order = Vec::with_capacity(groups);
    while let Some(std::cmp::Reverse(g)) = ready.pop() {
        order.push(g);
        for &s in &successors[g] {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push(std::cmp::Reverse(s));
            }
        }
    }
    (order.len() == groups).then_some(order)
}

/// Per group, the workspace that makes its peak that of its members run alone in build
/// order, given that the merged node allocates all of its external outputs when it starts:
/// the members' peak (each external output allocated when its producer starts and held to the
/// end, the internal tensors from their producer's start to their last reader's end in the
/// group, the part of a member's outputs that no edge carries while it runs, and the running
/// member's workspace) less the external outputs, or 0 where they are more.
fn internal_peaks(
    problem: &PlaceProblem,
    members: &[Vec<usize>],
    group_of: &[usize],
    external: &[bool],
) -> Vec<u64> {
    let mut produced: Vec<Vec<usize>> = vec![Vec::new(); problem.len()];
    for (x, t) in problem.tensors.iter().enumerate() {
        produced[t.producer].push(x);
    }
    // Per internal tensor, its readers (all in its producer's group).
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); problem.tensors.len()];
    for e in &problem.edges {
        for &x in &e.tensors {
            if !external[x] && group_of[e.target] == group_of[e.source] {
                readers[x].push(e.target);
            }
        }
    }
    members
        .iter()
        .map(|m| {
            let position: HashMap<usize, usize> =
                m.iter().enumerate().map(|(i, &v)| (v, i)).collect();
            // Bytes freed after member i: internal tensors whose last reader is member i.
            let mut freed_after = vec![0u64; m.len()];
            let (mut level, mut peak, mut outputs) = (0u64, 0u64, 0u64);
            for (i, &v) in m.iter().enumerate() {
                let mut allocated = 0u64;
                for &x in &produced[v] {
                    let bytes = problem.tensors[x].bytes;
                    allocated = allocated.saturating_add(bytes);
                    if external[x] {
                        outputs = outputs.saturating_add(bytes);
                    } else {
                        let last = readers[x].iter().filter_map(|r| position.get(r)).max();
                        let last = last.copied().unwrap_or(i).max(i);
                        freed_after[last] = freed_after[last].saturating_add(bytes);
                    }
                }
                let unread = problem.memory[v].outputs.saturating_sub(allocated);
                level = level.saturating_add(allocated).saturating_add(unread);
                peak = peak.max(level.saturating_add(problem.memory[v].temporary));
                level = level.saturating_sub(unread).saturating_sub(freed_after[i]);
            }
            peak.saturating_sub(outputs)
        })
        .collect()
}

/// The occupancy of a merged node: its members', weighted by their compute time (their plain
/// mean when none takes time).
fn weighted_occupancy(problem: &PlaceProblem, members: &[usize]) -> f64 {
    let occupancy = |v: usize| problem.occupancy.get(v).copied().unwrap_or(1.0);
    let total: f64 = members.iter().map(|&v| problem.weights[v] as f64).sum();
    if total > 0.0 {
        members.iter().map(|&v| occupancy(v) * problem.weights[v] as f64).sum::<f64>() / total
    } else {
        members.iter().map(|&v| occupancy(v)).sum::<f64>() / members.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_ir::op::Optimizer;
    use ordo_problem::Devices;

    /// The sample MLP's training graph (Adam) on two devices, in `mode`.
    fn mlp(mode: StepMode) -> PlaceProblem {
        let (forward, loss) = ordo_ir::samples::mlp();
        let graph = ordo_ir::training::training_graph(&forward, loss, Optimizer::Adam).unwrap();
        let costed = ordo_cost::costgraph_from_graph(&graph);
        PlaceProblem::new(&costed, Devices::uniform(2, u64::MAX / 4), mode).unwrap()
    }

    #[test]
    fn merging_keeps_each_units_work_state_and_crossing_tensors() {
        let problem = mlp(StepMode::TrainingGraph);
        let merged = per_block(&problem, PipelineSchedule::ZbH1).unwrap();
        let out = &merged.problem;
        assert!(out.len() < problem.len());
        assert_eq!(pipeline_units(out).names, pipeline_units(&problem).names);
        assert_eq!(out.total_work_us(), problem.total_work_us());
        let persistent = |p: &PlaceProblem| p.memory.iter().map(|m| m.persistent).sum::<u64>();
        assert_eq!(persistent(out), persistent(&problem));
        // Every node is in exactly one merged node, with its role.
        let mut held: Vec<usize> = merged.members.iter().flatten().copied().collect();
        held.sort_unstable();
        assert_eq!(held, (0..problem.len()).collect::<Vec<_>>());
        for (g, members) in merged.members.iter().enumerate() {
            assert!(members.iter().all(|&v| problem.roles[v] == out.roles[g]), "{}", out.names[g]);
        }
        // Edges go forward in index order (build order), and each carries only tensors its
        // source makes.
        for e in &out.edges {
            assert!(e.source < e.target);
            assert!(e.tensors.iter().all(|&x| out.tensors[x].producer == e.source));
        }
        assert!(out.names.iter().any(|n| n.ends_with(".dw")), "{:?}", out.names);
    }

    #[test]
    fn a_whole_backward_makes_a_blocks_input_gradient_wait_for_its_weight_gradient() {
        let problem = mlp(StepMode::TrainingGraph);
        let apart = per_block(&problem, PipelineSchedule::ZbH1).unwrap().problem;
        let together = per_block(&problem, PipelineSchedule::OneFOneB).unwrap().problem;
        let control = |p: &PlaceProblem| {
            p.edges.iter().filter(|e| e.tensors.is_empty() && p.roles[e.source] == Role::Dw).count()
        };
        assert_eq!(control(&apart), 0);
        assert!(control(&together) > 0);
    }

    #[test]
    fn only_a_training_graph_merges() {
        let forward = mlp(StepMode::ForwardOnly);
        let err = per_block(&forward, PipelineSchedule::Gpipe).unwrap_err().to_string();
        assert!(err.contains("only a training graph"), "{err}");
    }
}
