//! What the Python package's Assigner needs from a placed plan: the host-side decisions
//! (Baechi-PyTorch's `isNotWaiting` and the global criterion), and the placer's global order
//! that the global criterion walks.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeSet, BinaryHeap};

use ordo_sched::TaskKind;
use ordo_sim::{Channel, SimOptions};

pub use ordo_sched::{HostCriterion, HostWalk, LayerPlacement, PlacedLayers, threads};

use crate::error::Result;
use crate::{Planned, Problem};

/// The placer's global order of `planned`'s nodes (a placed plan of `problem`): a
/// topological order of the problem's edges and every device's order together, taking among
/// the ready nodes the one whose compute starts first in the simulated step (Baechi's
/// channel model, kernels one at a time), then the lowest node index. Nodes are problem
/// indices.
///
/// # Errors
/// [`crate::Error::Usage`] for a plan without a placement; [`crate::Error::Sim`] if the
/// simulator refuses the plan.
pub fn global_order(problem: &Problem, planned: &Planned) -> Result<Vec<usize>> {
    let Some(placed) = &planned.placed else {
        return Err(crate::Error::Usage(format!(
            "the global order needs a placement; `{}` has none",
            planned.description
        )));
    };
    let options = SimOptions { concurrent_kernels: false, channel: Channel::BaechiTf };
    let report = ordo_sim::simulate_on_host(&planned.plan, &options, 1.0)?;
    let n = problem.place.len();
    let mut start = vec![0.0; n];
    // Plans ordo builds record each compute task's node id (the runtime binds by it too).
    for (task, timing) in planned.plan.tasks.iter().zip(&report.tasks) {
        if let TaskKind::Compute { id: Some(id), .. } = task.kind
            && let Some(s) = start.get_mut(id as usize)
        {
            *s = timing.start_us;
        }
    }
    let mut successors: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for edge in &problem.place.edges {
        successors[edge.source].insert(edge.target);
    }
    for order in &placed.placement.order {
        for pair in order.windows(2) {
            successors[pair[0]].insert(pair[1]);
        }
    }
    let mut waiting = vec![0usize; n];
    for targets in &successors {
        for &t in targets {
            waiting[t] += 1;
        }
    }
    let key = |v: usize| Reverse(Key(start[v], v));
    let mut ready: BinaryHeap<Reverse<Key>> =
        (0..n).filter(|&v| waiting[v] == 0).map(key).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(Key(_, v))) = ready.pop() {
        order.push(v);
        for &t in &successors[v] {
            waiting[t] -= 1;
            if waiting[t] == 0 {
                ready.push(key(t));
            }
        }
    }
    Ok(order)
}

/// The layers of `planned` (a placed plan of `problem`, one layer per node) as the Assigner
/// walks them: each one's parents (the problem's in-edges, in edge order), its device and
/// each device's order from the placement, and the [`global_order`].
///
/// # Errors
/// As [`global_order`]; [`crate::Error::Sched`] for a placement whose orders do not cover
/// its nodes.
pub fn placed_layers(problem: &Problem, planned: &Planned) -> Result<PlacedLayers> {
    let global = global_order(problem, planned)?;
    let placement = &planned.placed.as_ref().expect("global_order checked it").placement;
    let p = &problem.place;
    let parents =
        (0..p.len()).map(|v| p.in_edges[v].iter().map(|&e| p.edges[e].source).collect()).collect();
    let layers =
        PlacedLayers::new(parents, placement.device_of.clone(), placement.order.clone(), global)?;
    Ok(layers)
}

/// A ready node's priority: its simulated start, then its index.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key(f64, usize);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}
