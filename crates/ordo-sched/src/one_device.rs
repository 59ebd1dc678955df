//! Training schedules on one device: in order, as PyTorch runs a step, and out of order, with
//! the weight gradients beside the critical path.

use ordo_ir::Role;
use ordo_place::{PlaceProblem, Placement};

use crate::build::build_plan_on_streams;
use crate::error::SchedError;
use crate::plan::Plan;

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
/// [`SchedError::Placement`] when the problem has no device or its node order is not a
/// topological order; the errors of [`build_plan_on_streams`].
pub fn one_device_plan(
    problem: &PlaceProblem,
    schedule: OneDeviceSchedule,
) -> Result<Plan, SchedError> {
    let devices = problem.devices.count();
    if devices == 0 {
        return Err(SchedError::Placement("no device to schedule on".into()));
    }
    let n = problem.len();
    let mut order = vec![Vec::new(); devices];
    order[0] = (0..n).collect();
    let placement = Placement {
        algo: format!("single, {}", schedule.name()),
        device_of: vec![0; n],
        order,
        makespan_us: 0,
        peak_memory_bytes: vec![0; devices],
        transfers: None,
        placement_seconds: 0.0,
    };
    let on_sub_stream: Vec<bool> = match schedule {
        OneDeviceSchedule::InOrder => vec![false; n],
        OneDeviceSchedule::Ooo => {
            problem.roles.iter().map(|&r| matches!(r, Role::Dw | Role::Update)).collect()
        }
    };
    build_plan_on_streams(problem, &placement, &on_sub_stream)
}
