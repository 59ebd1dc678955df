//! The placement a plan is built from covers the problem exactly and keeps each device's
//! order within the dependencies between its own nodes.

use ordo_problem::{PlaceProblem, Placement};

use crate::error::SchedError;

/// Checks that the placement covers every node and device exactly once and that each device's
/// order respects the dependencies between its own nodes.
pub(super) fn check_placement(
    problem: &PlaceProblem,
    placement: &Placement,
) -> Result<(), SchedError> {
    let (n, devices) = (problem.len(), problem.devices.count());
    let fail = |message: String| Err(SchedError::Placement(message));
    if placement.device_of.len() != n {
        return fail(format!("device_of has {} entries for {n} nodes", placement.device_of.len()));
    }
    if placement.order.len() != devices {
        return fail(format!("order has {} devices, the problem {devices}", placement.order.len()));
    }
    if let Some(v) = placement.device_of.iter().position(|&d| d >= devices) {
        let (name, d) = (&problem.names[v], placement.device_of[v]);
        return fail(format!("node `{name}` is on device {d}, but there are {devices} devices"));
    }
    let mut position = vec![usize::MAX; n];
    for (d, order) in placement.order.iter().enumerate() {
        for (i, &v) in order.iter().enumerate() {
            if v >= n {
                return fail(format!("the order of device {d} lists node {v} of {n}"));
            }
            let name = &problem.names[v];
            if placement.device_of[v] != d || position[v] != usize::MAX {
                let on = placement.device_of[v];
                return fail(format!(
                    "node `{name}` is on device {on} but listed again or in the order of device {d}"
                ));
            }
            position[v] = i;
        }
    }
    if let Some(v) = position.iter().position(|&p| p == usize::MAX) {
        let (name, on) = (&problem.names[v], placement.device_of[v]);
        return fail(format!("node `{name}` is on device {on} but in no device's order"));
    }
    let device = &placement.device_of;
    for edge in &problem.edges {
        let producers = edge.tensors.iter().map(|&x| problem.tensors[x].producer);
        for before in std::iter::once(edge.source).chain(producers) {
            let after = edge.target;
            if device[before] == device[after] && position[before] >= position[after] {
                return Err(SchedError::OrderViolation {
                    device: device[after],
                    producer: problem.names[before].clone(),
                    consumer: problem.names[after].clone(),
                });
            }
        }
    }
    Ok(())
}
