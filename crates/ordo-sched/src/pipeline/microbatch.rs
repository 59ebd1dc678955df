//! Micro-batching a training graph: `M` copies of its forward and backward work, the weight
//! gradients accumulated across the copies, one update per parameter.

use ordo_ir::Role;
use ordo_ir::transform::{MicroBatchLayout, Provenance, micro_batch_suffix};
use ordo_problem::{Edge, PlaceProblem, Tensor};

use crate::error::SchedError;
use crate::steady::copy_tensor_name;

/// A training-graph problem split into micro-batches, and where each of its nodes comes from.
#[derive(Clone, Debug)]
pub struct MicroBatched {
    /// The micro-batched problem (see [`micro_batch`]).
    pub problem: PlaceProblem,
    /// Per node of `problem`: the node of the original problem it copies and its micro-batch
    /// (`None` for work done once per step), as [`ordo_ir::transform::micro_batch`] gives the
    /// micro-batched graph's: the same indices, made by the same [`MicroBatchLayout`].
    pub provenance: Provenance,
    /// The one-micro-batch problem the copies were made of where it is not the caller's own
    /// but that problem merged per block ([`super::pipeline_split`]), and whether it was
    /// merged for schedules that split the backward
    /// ([`super::PipelineSchedule::splits_backward`]); `None` otherwise.
    pub merged: Option<(std::sync::Arc<PlaceProblem>, bool)>,
}

impl MicroBatched {
    /// The node of the original problem that node `i` copies.
    pub fn original(&self, i: usize) -> usize {
        self.provenance.origin[i].index()
    }

    /// Node `i`'s micro-batch, `None` for work done once per step.
    pub fn micro_batch(&self, i: usize) -> Option<usize> {
        self.provenance.micro_batch[i].map(|m| m as usize)
    }

    /// The number of micro-batches.
    pub fn micro_batches(&self) -> usize {
        self.provenance.micro_batches()
    }

    /// The micro-batches its nodes run in: [`MicroBatched::micro_batches`], or 0 when every
    /// node runs once per step (there is then no micro-batch to schedule).
    pub(super) fn scheduled_micro_batches(&self) -> usize {
        let copies = self.provenance.micro_batch.iter().flatten();
        copies.max().map_or(0, |&m| m as usize + 1)
    }
}

/// The layout of `micro_batches` copies of the training-graph problem `problem`: which nodes
/// run once per step ([`MicroBatchLayout`]), read from the problem's roles and edges.
pub fn micro_batch_layout(problem: &PlaceProblem, micro_batches: usize) -> MicroBatchLayout {
    let reads = |v: usize| problem.in_edges[v].iter().map(|&e| problem.edges[e].source);
    MicroBatchLayout::new(&problem.roles, reads, micro_batches)
}

/// `micro_batches` copies of the training-graph problem `problem`, the graph of one
/// micro-batch (its costs are those of a micro-batch), as one step that sums their gradients,
/// laid out by [`MicroBatchLayout`] (as [`ordo_ir::transform::micro_batch`] lays out the
/// graph):
///
/// * every node that does not run once per step (forward, dX and dW nodes, inputs included)
///   is copied once per micro-batch `m`, named `<name>/mb<m>`, with its tensors
///   (`<node>/mb<m>:<slot>`) and the edges between such nodes; copies `m > 0` hold no
///   persistent memory (parameters are stored once);
/// * **gradient accumulation**: the dW node of micro-batch `m > 0` reads the gradients of
///   the same dW node of micro-batch `m - 1` (an edge carrying them) and adds its own into
///   them, as `param.grad += ...` does in place. The addition is fused into the dW kernel
///   (a GEMM with `beta = 1`), so it costs no extra time here; the gradient buffer is live from
///   the first micro-batch's dW to the update (two copies while a dW runs, a small
///   overestimate);
/// * the nodes that run once per step (updates, sums of tied gradients) are not copied and
///   read the last micro-batch's accumulated gradients; any other input they have comes from
///   every micro-batch.
///
/// Each node is its own colocation group. A copy's layer ([`PlaceProblem::layer_of`]) is its
/// forward node in the same micro-batch; a once-per-step node's is micro-batch 0's.
///
/// # Errors
/// [`SchedError::Pipeline`] for zero micro-batches; [`SchedError::Placement`] when the result
/// has a cycle.
pub fn micro_batch(
    problem: &PlaceProblem,
    micro_batches: usize,
) -> Result<MicroBatched, SchedError> {
    if micro_batches == 0 {
        return Err(SchedError::Pipeline("zero micro-batches".into()));
    }
    crate::Plan::check_size(
        problem.len(),
        micro_batches,
        &format!("{micro_batches} micro-batches"),
    )?;
    let layout = micro_batch_layout(problem, micro_batches);
    let provenance = layout.provenance();
    let once = |v: usize| layout.runs_once(v);
    let node = |v: usize, m: usize| layout.node(v, m);
    let total = layout.len();
    let last = micro_batches - 1;

    let mut out = problem.clone();
    out.names = vec![String::new(); total];
    out.weights = vec![0; total];
    out.occupancy = vec![1.0; total];
    out.roles = vec![Role::Forward; total];
    out.layer_of = vec![None; total];
    out.memory = vec![Default::default(); total];
    for (i, (origin, m)) in provenance.origin.iter().zip(&provenance.micro_batch).enumerate() {
        let (v, m) = (origin.index(), m.map(|m| m as usize));
        out.names[i] = match m {
            Some(m) => format!("{}{}", problem.names[v], micro_batch_suffix(m)),
            None => problem.names[v].clone(),
        };
        out.weights[i] = problem.weights[v];
        out.occupancy[i] = problem.occupancy.get(v).copied().unwrap_or(1.0);
        out.roles[i] = problem.roles[v];
        out.layer_of[i] = problem.layer_of[v].map(|l| node(l, m.unwrap_or(0)));
        out.memory[i] = problem.memory[v];
        if m.is_some_and(|m| m > 0) {
            out.memory[i].persistent = 0;
        }
    }

    // Tensors: one copy per micro-batch of a copied producer's.
    let mut tensor_of: Vec<Vec<usize>> = Vec::with_capacity(problem.tensors.len());
    out.tensors.clear();
    for x in &problem.tensors {
        let batches = if once(x.producer) { 1 } else { micro_batches };
        let ids = (0..batches)
            .map(|m| {
                let producer = node(x.producer, m);
                let name = if once(x.producer) {
                    x.name.clone()
                } else {
                    copy_tensor_name(&x.name, &problem.names[x.producer], &micro_batch_suffix(m))
                };
                out.tensors.push(Tensor { name, producer, ..x.clone() });
                out.tensors.len() - 1
            })
            .collect();
        tensor_of.push(ids);
    }
    let tensor =
        |x: usize, m: usize| tensor_of[x][if once(problem.tensors[x].producer) { 0 } else { m }];

    out.edges.clear();
    let push = |edges: &mut Vec<Edge>, source: usize, target: usize, tensors: Vec<usize>| {
        let comm_us = tensors.iter().map(|&x| out.tensors[x].comm_us).sum();
        edges.push(Edge { source, target, comm_us, tensors });
    };
    let mut edges = Vec::new();
    for e in &problem.edges {
        let (s, t) = (e.source, e.target);
        // Micro-batches of the source that feed the target, each into the target's copy `m`
        // (or its only node).
        let batches: Vec<(usize, usize)> = match (once(s), once(t)) {
            (false, false) => (0..micro_batches).map(|m| (m, m)).collect(),
            (false, true) if layout.accumulates(s) => vec![(last, 0)],
            (false, true) => (0..micro_batches).map(|m| (m, 0)).collect(),
            (true, false) => (0..micro_batches).map(|m| (0, m)).collect(),
            (true, true) => vec![(0, 0)],
        };
        for (from, to) in batches {
            let tensors = e.tensors.iter().map(|&x| tensor(x, from)).collect();
            push(&mut edges, node(s, from), node(t, to), tensors);
        }
    }
    for v in (0..problem.len()).filter(|&v| layout.accumulates(v)) {
        let produced: Vec<usize> =
            (0..problem.tensors.len()).filter(|&x| problem.tensors[x].producer == v).collect();
        for m in 1..micro_batches {
            let tensors = produced.iter().map(|&x| tensor(x, m - 1)).collect();
            push(&mut edges, node(v, m - 1), node(v, m), tensors);
        }
    }
    out.edges = edges;
    out.out_edges = vec![Vec::new(); total];
    out.in_edges = vec![Vec::new(); total];
    for (k, e) in out.edges.iter().enumerate() {
        out.out_edges[e.source].push(k);
        out.in_edges[e.target].push(k);
    }
    out.group_of = (0..total).collect();
    out.groups = (0..total).map(|v| vec![v]).collect();
    out.set_topo_order()?;
    Ok(MicroBatched { problem: out, provenance, merged: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_cost::StepMode;
    use ordo_ir::op::Optimizer;
    use ordo_problem::Devices;

    /// The sample MLP's training graph (Adam) on one device.
    fn mlp() -> PlaceProblem {
        let (forward, loss) = ordo_ir::samples::mlp();
        let graph = ordo_ir::training::training_graph(&forward, loss, Optimizer::Adam).unwrap();
        let costed = ordo_cost::costgraph_from_graph(&graph);
        PlaceProblem::new(&costed, Devices::uniform(1, u64::MAX / 4), StepMode::TrainingGraph)
            .unwrap()
    }

    #[test]
    fn copies_per_micro_batch_accumulate_gradients_and_update_once() {
        let problem = mlp();
        let n = problem.len();
        let layout = micro_batch_layout(&problem, 3);
        let once: Vec<usize> = (0..n).filter(|&v| layout.runs_once(v)).collect();
        assert!(once.iter().all(|&v| problem.roles[v] == Role::Update));
        let split = micro_batch(&problem, 3).unwrap();
        let out = &split.problem;
        assert_eq!(out.len(), 3 * (n - once.len()) + once.len());
        let find = |name: &str| out.names.iter().position(|x| x == name).unwrap();
        let (dw0, dw1, dw2) = (find("fc1.dw/mb0"), find("fc1.dw/mb1"), find("fc1.dw/mb2"));
        let update = find("fc1.weight.update");
        assert_eq!(split.micro_batch(dw1), Some(1));
        assert_eq!(split.micro_batch(update), None);
        let edge = |s: usize, t: usize| out.edges.iter().find(|e| e.source == s && e.target == t);
        // Micro-batch 1 adds into micro-batch 0's gradient; the update reads the last one.
        assert!(edge(dw0, dw1).is_some_and(|e| !e.tensors.is_empty()));
        assert!(edge(dw1, dw2).is_some());
        assert!(edge(dw2, update).is_some() && edge(dw0, update).is_none());
        assert_eq!(out.tensors[edge(dw0, dw1).unwrap().tensors[0]].name, "fc1.dw/mb0:0");
        // Parameters are held once; each copy's layer is its own micro-batch's forward node.
        let fc1 = problem.names.iter().position(|x| x == "fc1").unwrap();
        assert_eq!(out.memory[find("fc1/mb0")].persistent, problem.memory[fc1].persistent);
        assert_eq!(out.memory[find("fc1/mb2")].persistent, 0);
        assert_eq!(out.layer_of[dw2], Some(find("fc1/mb2")));
        assert_eq!(out.layer_of[update], Some(find("fc1/mb0")));
        assert_eq!(out.topo_order.len(), out.len());
        assert!(micro_batch(&problem, 0).is_err());
    }

    #[test]
    fn copies_past_a_plans_size_are_refused_before_they_are_made() {
        let problem = mlp();
        let n = problem.len();
        let fits = crate::Plan::MAX_TASKS / n;
        assert!(crate::Plan::check_size(n, fits, "").is_ok());
        let err = micro_batch(&problem, fits + 1).unwrap_err().to_string();
        assert!(err.contains(&format!("{} micro-batches of a graph of {n} nodes", fits + 1)));
        assert!(err.contains("at most 8388608"), "{err}");
        let err = micro_batch(&problem, usize::MAX).unwrap_err().to_string();
        assert!(err.contains("more than 2^64 tasks"), "{err}");
        let err = crate::unroll(&problem, fits + 1).unwrap_err().to_string();
        assert!(err.contains("unrolled steps"), "{err}");
    }
}
