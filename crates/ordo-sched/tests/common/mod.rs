//! Helpers shared by the integration tests: the hand-made two-device graph and its placement.

// Every test file compiles its own copy of this module and uses only some of the helpers.
#![allow(dead_code)]

use ordo_cost::{CommModel, CostGraph, CostLink, CostNode, StepMode, TensorRef};
use ordo_place::{Devices, PlaceProblem, Placement};
use ordo_sched::{Plan, build_plan};

/// One µs per byte and no fixed cost, so a tensor's transfer time is its size.
pub const BYTES_AS_US: CommModel = CommModel { us_per_byte: 1.0, fixed_us: 0.0 };

/// Nodes `(name, weight, output bytes, persistent bytes)` and links `(source, target,
/// carries the source's output)`; the output tensor of `x` is `x:0`.
pub fn graph(nodes: &[(&str, u64, u64, u64)], links: &[(usize, usize, bool)]) -> CostGraph {
    let mut g = CostGraph::default();
    for (i, &(name, weight, out, persistent)) in nodes.iter().enumerate() {
        let mut node = CostNode::new(i as u64, name, weight);
        node.output_memory = vec![out];
        node.persistent_memory = persistent;
        g.nodes.push(node);
    }
    for &(s, t, carries) in links {
        let tensors = if carries {
            vec![TensorRef::new(format!("{}:0", nodes[s].0), nodes[s].2, &BYTES_AS_US)]
        } else {
            Vec::new()
        };
        g.links.push(CostLink::new(s as u64, t as u64, tensors));
    }
    g
}

/// The hand-made graph: `a` feeds `b` and `c` on device 1 and `d` on device 0; `b`, `c`, `d`
/// feed `e` on device 1; `d` feeds `f` (whose 64-byte output nobody reads); `e` feeds `g` on
/// device 0, and a control edge runs from `c` to `g`. `g` has no output.
pub fn two_device_graph() -> CostGraph {
    graph(
        &[
            ("a", 10, 100, 10),
            ("b", 20, 200, 20),
            ("c", 30, 300, 30),
            ("d", 40, 400, 40),
            ("e", 50, 500, 50),
            ("f", 60, 64, 60),
            ("g", 70, 0, 70),
        ],
        &[
            (0, 1, true),
            (0, 2, true),
            (0, 3, true),
            (1, 4, true),
            (2, 4, true),
            (3, 4, true),
            (3, 5, true),
            (4, 6, true),
            (2, 6, false),
        ],
    )
}

/// The hand-made graph as a problem on two unlimited devices.
pub fn two_device_problem(mode: StepMode) -> PlaceProblem {
    let devices = Devices { memory: vec![u64::MAX / 4; 2], comm: BYTES_AS_US };
    PlaceProblem::new(&two_device_graph(), devices, mode).unwrap()
}

/// A placement by hand: `device_of` and per-device orders.
pub fn placement(device_of: &[usize], order: &[&[usize]]) -> Placement {
    Placement {
        algo: "by-hand".into(),
        device_of: device_of.to_vec(),
        order: order.iter().map(|o| o.to_vec()).collect(),
        makespan_us: 0,
        peak_memory_bytes: vec![0; order.len()],
        transfers: None,
        placement_seconds: 0.0,
    }
}

/// a, d, f, g on device 0 in that order; b, c, e on device 1.
pub fn two_device_placement() -> Placement {
    placement(&[0, 1, 1, 0, 1, 0, 0], &[&[0, 3, 5, 6], &[1, 2, 4]])
}

/// The plan of the hand-made graph, forward only.
pub fn two_device_plan() -> Plan {
    build_plan(&two_device_problem(StepMode::ForwardOnly), &two_device_placement()).unwrap()
}
