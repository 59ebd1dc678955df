//! The result of a placement and its JSON form.

use serde::{Deserialize, Serialize};

use crate::problem::PlaceProblem;

/// Where every node runs and in which order, with the placer's predictions.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// The algorithm that produced it, e.g. `m-etf`.
    pub algo: String,
    /// Device of each node.
    pub device_of: Vec<usize>,
    /// Per device, its nodes in execution order.
    pub order: Vec<Vec<usize>>,
    /// Predicted step (or forward) time in µs, Baechi-TF channel model.
    pub makespan_us: u64,
    /// Predicted peak memory of each device in bytes.
    pub peak_memory_bytes: Vec<u64>,
    /// The transfers of the placer's own schedule, `(tensor index, receiving device)` in the
    /// order the placer booked them on the channels (m-ETF and m-SCT: when each consumer
    /// started; the others, from Baechi's simulator: when each producer was taken). Each tensor
    /// is listed at most once per device. A plan built from the placement numbers its transfers
    /// in this order, and the simulator's Baechi-TF channel model serves each device's one
    /// channel in that order, which reproduces the placer's schedule; `None` when unknown.
    pub transfers: Option<Vec<(usize, usize)>>,
    /// Wall time of the placement itself, in seconds.
    pub placement_seconds: f64,
}

impl Placement {
    /// Node `v` on device `device_of[v]`, each device running its nodes in id order (a
    /// topological order for graphs built in order), with no predictions: for a plan chosen by
    /// hand, a measurement or a test rather than by a placer.
    pub fn in_id_order(algo: &str, device_of: Vec<usize>, devices: usize) -> Self {
        let mut order = vec![Vec::new(); devices];
        for (v, &d) in device_of.iter().enumerate() {
            order[d].push(v);
        }
        Placement {
            algo: algo.to_string(),
            device_of,
            order,
            makespan_us: 0,
            peak_memory_bytes: vec![0; devices],
            transfers: None,
            placement_seconds: 0.0,
        }
    }
}

/// The versioned JSON form of a [`Placement`], with node names instead of indices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementFile {
    /// Always [`PlacementFile::FORMAT`].
    pub format: String,
    /// The algorithm.
    pub algo: String,
    /// `"forward-only"`, `"training"` (the forward graph, charged for the whole step) or
    /// `"training-graph"`.
    pub mode: String,
    /// Number of devices.
    pub devices: usize,
    /// Node name -> device index.
    pub device_of: std::collections::BTreeMap<String, usize>,
    /// Per device, node names in execution order.
    pub order: Vec<Vec<String>>,
    /// Predicted makespan in µs of this placement run in this order.
    pub makespan_us: u64,
    /// Baechi's VirtualScheduler (greedy dispatch by ready time) on this placement: the number
    /// Baechi reports, for comparison with it. For m-ETF and m-SCT it can differ from
    /// `makespan_us`, which follows the placer's own order.
    pub baechi_makespan_us: u64,
    /// No placement that fits the memory limits finishes sooner: the largest of
    /// `ordo_place::lower_bounds`, in µs.
    pub lower_bound_us: u64,
    /// `max(critical path, total work / devices)` in µs: the classic bound, at most
    /// `lower_bound_us` (0 in files written before it was recorded).
    #[serde(default)]
    pub simple_lower_bound_us: u64,
    /// Predicted peak memory per device in bytes.
    pub peak_memory_bytes: Vec<u64>,
    /// Memory limit per device in bytes.
    pub memory_limit_bytes: Vec<u64>,
    /// Wall time of the placement in seconds.
    pub placement_seconds: f64,
}

impl PlacementFile {
    /// The format tag of this version.
    pub const FORMAT: &'static str = "ordo.placement/1";

    /// The file form of `placement` for `problem`, with the analyses a file records beside it:
    /// Baechi's simulated makespan of the placement and the problem's lower bound (both
    /// computed by `ordo-place`, whose `placement_file` fills them in).
    pub fn new(
        problem: &PlaceProblem,
        placement: &Placement,
        baechi_makespan_us: u64,
        lower_bound_us: u64,
    ) -> Self {
        let name = |v: &usize| problem.names[*v].clone();
        Self {
            format: Self::FORMAT.to_string(),
            algo: placement.algo.clone(),
            mode: match problem.mode {
                ordo_cost::StepMode::ForwardOnly => "forward-only".into(),
                ordo_cost::StepMode::Training { .. } => "training".into(),
                ordo_cost::StepMode::TrainingGraph => "training-graph".into(),
            },
            devices: problem.devices.count(),
            device_of: placement
                .device_of
                .iter()
                .enumerate()
                .map(|(v, &d)| (problem.names[v].clone(), d))
                .collect(),
            order: placement.order.iter().map(|o| o.iter().map(name).collect()).collect(),
            makespan_us: placement.makespan_us,
            baechi_makespan_us,
            lower_bound_us,
            simple_lower_bound_us: problem.simple_lower_bound_us(),
            peak_memory_bytes: placement.peak_memory_bytes.clone(),
            memory_limit_bytes: problem.devices.memory.clone(),
            placement_seconds: placement.placement_seconds,
        }
    }
}
