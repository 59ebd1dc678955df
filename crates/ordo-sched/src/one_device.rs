//! Training schedules on one device: in order, as PyTorch runs a step, and out of order, with
//! the weight gradients beside the critical path.

use ordo_ir::Role;
use ordo_problem::{PlaceProblem, Placement};

use crate::build::build_plan_on_streams;
use crate::error::SchedError;
use crate::plan::Plan;
use crate::steady::unroll;

/// How one device runs a training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OneDeviceSchedule {
    /// PyTorch's order on one stream: the forward pass, then each layer's backward with its
    /// dX and dW together (last layer first), then the optimizer updates.
    InOrder,
    /// Out-of-order backprop: the same order, but the dW nodes and the updates (which only
    /// the next step needs) on the device's sub-stream, so that they run beside the dX chain
    /// that the rest of the backward pass waits for.
    Ooo,
}

impl OneDeviceSchedule {
    /// The schedule's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            OneDeviceSchedule::InOrder => "inorder",
            OneDeviceSchedule::Ooo => "ooo",
        }
    }
}

/// The plan of the training graph `problem` (its nodes in the training-graph builder's order,
/// each tagged with its [`Role`] in [`PlaceProblem::roles`]) on device 0 under `schedule`.
///
/// # Errors
/// [`SchedError::Schedule`] when the problem has no device, [`SchedError::Placement`] when its node order is not a
/// topological order; the errors of [`build_plan_on_streams`].
pub fn one_device_plan(
    problem: &PlaceProblem,
    schedule: OneDeviceSchedule,
) -> Result<Plan, SchedError> {
    steady_plan(problem, schedule, &vec![false; problem.len()], 1)
}

/// Which nodes deferring the weight-gradient work of the `deferred` layers (by node index)
/// moves late: the dW, parameter-gradient sums and updates of those layers, and every other
/// weight-gradient node that reads one of them (the gradient sum and update of a weight that
/// a deferred layer shares with a kept one, like tied embeddings), so that nothing kept in its
/// place waits for work moved after it.
pub(crate) fn deferred_nodes(problem: &PlaceProblem, deferred: &[bool]) -> Vec<bool> {
    let weight_work = |v: usize| matches!(problem.roles[v], Role::Dw | Role::Update);
    let mut late: Vec<bool> = (0..problem.len())
        .map(|v| {
            weight_work(v)
                && problem.layer_of[v].is_some_and(|layer| deferred.get(layer) == Some(&true))
        })
        .collect();
    for &v in &problem.topo_order {
        if !late[v]
            && weight_work(v)
            && problem.in_edges[v].iter().any(|&e| late[problem.edges[e].source])
        {
            late[v] = true;
        }
    }
    late
}

/// The plan of `steps` consecutive training steps of `problem` on device 0 ([`unroll`]), for
/// simulating a schedule in its steady state. `deferred` marks forward layers (by node index)
/// whose weight-gradient work (dW, parameter-gradient sums, updates) is deferred: in each step
/// it runs after the step's other work, layer by layer in forward order, so that it overlaps
/// the next step's forward pass, which waits for each layer's update just before the layer
/// (the original's "FWD" map; the others are "BWD", run as soon as their inputs are there).
/// With [`OneDeviceSchedule::Ooo`] all weight-gradient work is on the sub-stream.
///
/// # Errors
/// [`SchedError::Schedule`] when `deferred` does not have one entry per node, defers layers
/// under [`OneDeviceSchedule::InOrder`], or the problem has no device; those of [`unroll`] and
/// [`build_plan_on_streams`].
pub fn steady_plan(
    problem: &PlaceProblem,
    schedule: OneDeviceSchedule,
    deferred: &[bool],
    steps: usize,
) -> Result<Plan, SchedError> {
    let (n, devices) = (problem.len(), problem.devices.count());
    if deferred.len() != n {
        return Err(SchedError::Schedule(format!(
            "{} deferral flags for {n} nodes",
            deferred.len()
        )));
    }
    if schedule == OneDeviceSchedule::InOrder && deferred.contains(&true) {
        return Err(SchedError::Schedule("the in-order schedule defers nothing".into()));
    }
    if devices == 0 {
        return Err(SchedError::Schedule("no device to schedule on".into()));
    }
    let unrolled = unroll(problem, steps)?;
    let moved = deferred_nodes(problem, deferred);
    let late = deferred_order(problem, &moved);
    let mut device_order = Vec::with_capacity(unrolled.len());
    for s in 0..steps {
        device_order.extend((0..n).filter(|&v| !moved[v]).map(|v| s * n + v));
        device_order.extend(late.iter().map(|&v| s * n + v));
    }
    let mut order = vec![Vec::new(); devices];
    order[0] = device_order;
    let placement = Placement {
        algo: format!("single, {}", schedule.name()),
        device_of: vec![0; unrolled.len()],
        order,
        makespan_us: 0,
        peak_memory_bytes: vec![0; devices],
        transfers: None,
        placement_seconds: 0.0,
    };
    let on_sub_stream: Vec<bool> = match schedule {
        OneDeviceSchedule::InOrder => vec![false; unrolled.len()],
        OneDeviceSchedule::Ooo => {
            unrolled.roles.iter().map(|&r| matches!(r, Role::Dw | Role::Update)).collect()
        }
    };
    build_plan_on_streams(&unrolled, &placement, &on_sub_stream)
}

/// The nodes `chosen` marks (see [`deferred_nodes`]) in the order they run in a step: a
/// topological order among them that takes the smallest `(layer, node)` first.
pub(crate) fn deferred_order(problem: &PlaceProblem, chosen: &[bool]) -> Vec<usize> {
    use std::cmp::Reverse;
    let mut waiting = vec![0usize; problem.len()];
    for edge in &problem.edges {
        if chosen[edge.source] && chosen[edge.target] {
            waiting[edge.target] += 1;
        }
    }
    let key = |v: usize| Reverse((problem.layer_of[v].unwrap_or(usize::MAX), v));
    let mut ready: std::collections::BinaryHeap<Reverse<(usize, usize)>> =
        (0..problem.len()).filter(|&v| chosen[v] && waiting[v] == 0).map(key).collect();
    let mut order = Vec::new();
    while let Some(Reverse((_, v))) = ready.pop() {
        order.push(v);
        for &e in &problem.out_edges[v] {
            let target = problem.edges[e].target;
            if chosen[target] {
                waiting[target] -= 1;
                if waiting[target] == 0 {
                    ready.push(key(target));
                }
            }
        }
    }
    order
}

/// Per node of `problem`: whether it is one of `layers` (forward nodes), as a deferral
/// ([`steady_plan`], reverse first-k) marks the layers whose weight-gradient work it defers.
pub fn deferral(problem: &PlaceProblem, layers: &[usize]) -> Vec<bool> {
    let mut deferred = vec![false; problem.len()];
    for &layer in layers {
        deferred[layer] = true;
    }
    deferred
}

/// The layers with weight gradients (forward nodes that some dW node belongs to), in forward
/// order: the layers a deferral or reverse first-k counts.
pub fn layers_with_weights(problem: &PlaceProblem) -> Vec<usize> {
    let mut layers: Vec<usize> = (0..problem.len())
        .filter(|&v| problem.roles[v] == Role::Dw)
        .filter_map(|v| problem.layer_of[v])
        .collect();
    layers.sort_unstable();
    layers.dedup();
    layers
}
