//! ordo's cost stage: the cost-graph interchange format and the roofline cost model.
//!
//! * [`CostGraph`] is the NetworkX node-link JSON format with Baechi's attribute names that
//!   placers read: [`read_costgraph`] / [`parse_costgraph`] check it and
//!   [`write_costgraph`] / [`to_json_string`] write it.
//! * [`costgraph_from_graph`] costs an [`ordo_ir::Graph`] with a [`Roofline`] for compute time
//!   (launch overhead, and throughput scaled by the share of the device a kernel occupies) and a
//!   [`CommModel`] for transfer time.
//! * [`Profile`] is a measured profile (`ordo.profile/1`, written by `ordo profile`);
//!   [`apply_profile`] costs a graph's nodes with it instead of the roofline.
//! * [`synth`] makes layered random cost graphs of any size.
//! * [`node_memory`] gives what a node needs on its device for one forward pass or for a whole
//!   training step.
//!
//! ```
//! let graph = ordo_cost::synth(50, 7);
//! let text = ordo_cost::to_json_string(&graph);
//! let back = ordo_cost::parse_costgraph(&text, "synth.json")?;
//! assert_eq!(back, graph);
//! # Ok::<(), ordo_cost::CostGraphError>(())
//! ```

mod bytes;
mod cluster;
mod collective;
mod costgraph;
mod export;
mod file;
mod memory;
mod model;
mod profile;
mod synth;

pub use bytes::{ParseBytesError, format_bytes, parse_bytes};
pub use cluster::{
    Cluster, ClusterError, DeviceKind, DeviceSpec, LinkSpec, MAX_CLUSTER_DEVICES, MAX_DEVICES,
    NetworkSpec, Topology,
};
pub use collective::{AllReduceAlgorithm, Collectives, InterNode};
pub use costgraph::{
    ColocationGroup, CostGraph, CostGraphError, CostLink, CostNode, EdgeLabel, NodeLabel,
    TensorRef, parse_costgraph, read_costgraph, to_json_string, write_costgraph,
};
pub use export::{costgraph_for_cluster, costgraph_from_graph, costgraph_with};
pub use file::{FileError, write_atomically};
pub use memory::{NodeMemory, Optimizer, StepMode, node_memory};
pub use model::{CommModel, KernelCost, Roofline};
pub use profile::{PROFILE_FORMAT, Profile, ProfileError, ProfileLink, ProfileNode, apply_profile};
pub use synth::synth;

/// The longest time, in µs, that ordo accepts or computes for one thing (a node's compute, a
/// transfer, a link's latency, a kernel launch): 2^40 µs, about 12.7 days. A file that gives
/// more is refused with the field named; a time computed from sizes (a roofline, a transfer
/// of a huge tensor over a slow link) saturates at it. Sums of these times over a schedule
/// of up to 2^23 tasks then stay below 2^63, so no time ever wraps or reaches the `u64::MAX`
/// that placers and simulators use for "not yet".
pub const MAX_TIME_US: u64 = 1 << 40;

/// Why `x` is not a time ordo accepts (negative, not finite, or above [`MAX_TIME_US`]), as the
/// end of a message about a field: `is -1; it must be ...`. `unit` names what `x` counts.
pub(crate) fn time_problem(x: f64, unit: &str) -> Option<String> {
    let shown = readable(x);
    if !(x.is_finite() && x >= 0.0) {
        Some(format!("is {shown}; it must be a finite, non-negative number of {unit}"))
    } else if x > MAX_TIME_US as f64 {
        Some(too_long(&shown, unit))
    } else {
        None
    }
}

/// The end of a message about a time of `shown` `unit` above [`MAX_TIME_US`].
pub(crate) fn too_long(shown: &str, unit: &str) -> String {
    format!("is {shown} {unit}, more than ordo's limit of {MAX_TIME_US} µs (about 12.7 days)")
}

/// `x` as a person reads it in a message: plain for everyday magnitudes, in scientific
/// notation for absurd ones (`1e308`, not 309 digits).
pub(crate) fn readable(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}
