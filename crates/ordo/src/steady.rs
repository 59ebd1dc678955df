//! Steady states: strategies whose work crosses from one step into the next (reverse first-k,
//! deferred weight gradients), compared by simulating several steps.

use ordo_sched::{DataParallel, OneDeviceSchedule};
use ordo_sim::{Deferral, SimOptions, Steady};

use crate::Problem;
use crate::error::Result;
use crate::parameter::{Parameter, refuse};

/// How many of the first layers with weights reverse first-k defers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstK {
    /// Chosen by simulation among at most this many values of `k`.
    Auto {
        /// Most values of `k` to simulate.
        max_tries: usize,
    },
    /// This `k`.
    Fixed(usize),
}

/// A data-parallel step in its steady state: the default order and reverse first-k, next to
/// one device without communication.
#[derive(Clone, Debug)]
pub struct DataParallelSteady {
    /// The configuration, with the `k` used.
    pub config: DataParallel,
    /// The default order (`k = 0`).
    pub default: Steady,
    /// Reverse first-k with `config.first_k`.
    pub chosen: Steady,
    /// The search, when `k` was chosen by simulation.
    pub search: Option<Deferral>,
    /// One device alone, no communication.
    pub single: Steady,
}

/// The network between data-parallel replicas: `gbps` Gbit/s and `latency_us` per message.
///
/// # Errors
/// [`crate::Error::Parameter`] for a bandwidth that is not positive and finite or a latency that
/// is negative or not finite.
pub fn network(gbps: f64, latency_us: f64) -> Result<ordo_cost::CommModel> {
    if !(gbps.is_finite() && gbps > 0.0) {
        refuse!(Parameter::NetworkGbps => gbps, ": expected a positive bandwidth");
    }
    if !(latency_us.is_finite() && latency_us >= 0.0) {
        refuse!(Parameter::NetworkLatencyUs => latency_us, ": expected a non-negative number");
    }
    Ok(ordo_cost::CommModel { us_per_byte: 8.0 / (gbps * 1e3), fixed_us: latency_us })
}

/// The all-reduce algorithm called `name` (`ring`, `tree`, `hierarchical`, `nccl`).
///
/// # Errors
/// [`crate::Error::Parameter`] naming [`Parameter::AllReduce`] for another name.
pub fn all_reduce_algorithm(name: &str) -> Result<ordo_cost::AllReduceAlgorithm> {
    match ordo_cost::AllReduceAlgorithm::from_name(name) {
        Some(algorithm) => Ok(algorithm),
        None => refuse!(
            Parameter::AllReduce => format!("{name:?}"),
            ": expected ring, tree, hierarchical or nccl"
        ),
    }
}

/// The links and algorithm of an all-reduce among `replicas` data-parallel replicas of
/// `problem`: one node's `link` when given; otherwise the problem's cluster, whose replicas fill
/// a node before the next ([`ordo_cost::Cluster::collectives`]); otherwise the problem's link
/// between devices.
pub fn data_parallel_network(
    problem: &Problem,
    replicas: usize,
    link: Option<ordo_cost::CommModel>,
    algorithm: ordo_cost::AllReduceAlgorithm,
) -> ordo_cost::Collectives {
    stage_network(problem, replicas, 1, link, algorithm)
}

/// [`data_parallel_network`] for the copies of one stage of a pipeline of `stages` devices,
/// each copy on `stages` consecutive devices ([`ordo_cost::Cluster::collectives`] with that
/// stride).
pub fn stage_network(
    problem: &Problem,
    replicas: usize,
    stages: usize,
    link: Option<ordo_cost::CommModel>,
    algorithm: ordo_cost::AllReduceAlgorithm,
) -> ordo_cost::Collectives {
    use ordo_cost::Collectives;
    let network = match (link, &problem.cluster) {
        (Some(link), _) => Collectives::flat(link),
        (None, Some(cluster)) => cluster.collectives(replicas, stages),
        (None, None) => Collectives::flat(problem.place.devices.comm),
    };
    network.with_algorithm(algorithm)
}

/// Simulates `config` (its `first_k` ignored) on `problem`'s device 0 with `first_k`, the
/// default order and one device alone, each in its steady state.
///
/// # Errors
/// [`crate::Error::Parameter`] for zero replicas; [`crate::Error::Sim`] from the simulator.
pub fn data_parallel_steady(
    problem: &Problem,
    config: &DataParallel,
    first_k: FirstK,
    options: &SimOptions,
) -> Result<DataParallelSteady> {
    if config.replicas == 0 {
        refuse!(Parameter::Replicas => 0, ": data parallelism needs at least one replica");
    }
    let p = &problem.place;
    let base = DataParallel { first_k: 0, ..*config };
    let default = ordo_sim::data_parallel_steady(p, &base, options)?;
    let none = vec![false; p.len()];
    let single = ordo_sim::steady_state(p, config.schedule, &none, options)?;
    let (config, chosen, search) = match first_k {
        FirstK::Fixed(k) => {
            let config = DataParallel { first_k: k, ..base };
            (config, ordo_sim::data_parallel_steady(p, &config, options)?, None)
        }
        FirstK::Auto { max_tries } => {
            let search = ordo_sim::choose_first_k(p, &base, options, max_tries)?;
            let config = DataParallel { first_k: search.deferred.len(), ..base };
            (config, search.steady, Some(search))
        }
    };
    Ok(DataParallelSteady { config, default, chosen, search, single })
}

/// The one-device training schedules of a training-graph problem, each in its steady state.
#[derive(Clone, Debug)]
pub struct OneDeviceSchedules {
    /// PyTorch's order on one stream.
    pub inorder: Steady,
    /// Out-of-order backprop (dW on the sub-stream) with the first `k` layers' weight-gradient
    /// work deferred into the next step, `k` chosen by simulation (`tried[0]` is `k = 0`).
    pub deferred: Deferral,
    /// That deferral refined layer by layer.
    pub refined: Deferral,
}

/// Simulates `inorder`, `ooo` and `ooo` with a deferral chosen by simulation (at most
/// `max_tries` values of `k`) and refined layer by layer (at most `max_flips` flips), on
/// device 0 of `problem`.
///
/// # Errors
/// [`crate::Error::Sim`] from the simulator (a problem that is not a training graph).
pub fn one_device_schedules(
    problem: &Problem,
    options: &SimOptions,
    max_tries: usize,
    max_flips: usize,
) -> Result<OneDeviceSchedules> {
    let p = &problem.place;
    let none = vec![false; p.len()];
    let inorder = ordo_sim::steady_state(p, OneDeviceSchedule::InOrder, &none, options)?;
    let deferred = ordo_sim::choose_deferral(p, options, max_tries)?;
    let refined = ordo_sim::refine_deferral(p, &deferred, options, max_flips)?;
    Ok(OneDeviceSchedules { inorder, deferred, refined })
}

/// The all-reduces of one data-parallel step of `problem` under `config`, in the order every
/// replica issues them ([`ordo_sched::gradient_buckets`]): what a runtime outside ordo (PyTorch)
/// needs to issue ordo's buckets and reverse first-k order.
///
/// # Errors
/// [`crate::Error::Parameter`] for zero replicas; [`crate::Error::Sched`] for a problem that is
/// not a training graph or a `first_k` beyond its layers with weights.
pub fn data_parallel_buckets(
    problem: &Problem,
    config: &DataParallel,
) -> Result<Vec<ordo_sched::GradientBucket>> {
    if config.replicas == 0 {
        refuse!(Parameter::Replicas => 0, ": data parallelism needs at least one replica");
    }
    Ok(ordo_sched::gradient_buckets(&problem.place, config)?)
}

/// `schedule`'s steady state on device 0 of `problem`, no weight-gradient work deferred.
///
/// # Errors
/// [`crate::Error::Sim`] from the simulator (a problem that is not a training graph).
pub fn one_device_steady(
    problem: &Problem,
    schedule: OneDeviceSchedule,
    options: &SimOptions,
) -> Result<Steady> {
    let none = vec![false; problem.place.len()];
    Ok(ordo_sim::steady_state(&problem.place, schedule, &none, options)?)
}
