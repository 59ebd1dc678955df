//! Strategies: how a training step is spread over the devices, and the plan that carries it
//! out.

use std::str::FromStr;

use ordo_place::{Algorithm, AutoOptions, AutoPlacement, AutoProgress, PlaceError, PlaceOptions};
use ordo_problem::Placement;
use ordo_sched::{DataParallel, MicroBatched, OneDeviceSchedule, Pipeline, Plan};

use crate::Problem;
use crate::error::{Result, usage};
use crate::parameter::{Parameter, refuse};

/// A placement algorithm: one of Baechi's placers or a baseline, or `auto` (all of them,
/// improved by a simulated search within a budget).
#[derive(Clone, Debug, PartialEq)]
pub enum Placer {
    /// [`ordo_place::place_auto`] with these options.
    Auto(AutoOptions),
    /// [`ordo_place::place`] with this algorithm and these options.
    Algorithm(Algorithm, PlaceOptions),
}

impl Placer {
    /// The placer's name, as [`Placer::from_str`] reads it.
    pub fn name(&self) -> &'static str {
        match self {
            Placer::Auto(_) => "auto",
            Placer::Algorithm(algo, _) => algo.name(),
        }
    }
}

impl FromStr for Placer {
    type Err = PlaceError;

    /// `auto` (default budget and seed) or an [`Algorithm`] name (default options).
    fn from_str(name: &str) -> Result<Self, PlaceError> {
        if name == "auto" {
            return Ok(Placer::Auto(AutoOptions::default()));
        }
        match name.parse::<Algorithm>() {
            Ok(algo) => Ok(Placer::Algorithm(algo, PlaceOptions::default())),
            Err(PlaceError::UnknownAlgorithm { name, known }) => {
                Err(PlaceError::UnknownAlgorithm { name, known: format!("{known}, auto") })
            }
            Err(other) => Err(other),
        }
    }
}

/// A placement, and what `auto` did to find it.
#[derive(Clone, Debug)]
pub struct Placed {
    /// The placement.
    pub placement: Placement,
    /// The candidates and the search, when the placer was `auto`.
    pub auto: Option<AutoPlacement>,
}

/// Places `problem` with `placer`.
///
/// # Errors
/// [`crate::Error::Place`] from the placer.
pub fn place(problem: &Problem, placer: &Placer) -> Result<Placed> {
    place_reporting(problem, placer, &mut |_| {})
}

/// [`place`], telling `report` how far `auto` has got (see
/// [`ordo_place::place_auto_reporting`]); the other placers report nothing.
///
/// # Errors
/// As [`place`].
pub fn place_reporting(
    problem: &Problem,
    placer: &Placer,
    report: &mut dyn FnMut(&AutoProgress),
) -> Result<Placed> {
    Ok(match placer {
        Placer::Auto(options) => {
            let auto = ordo_place::place_auto_reporting(&problem.place, options, report)?;
            Placed { placement: auto.placement.clone(), auto: Some(auto) }
        }
        Placer::Algorithm(algo, options) => {
            Placed { placement: ordo_place::place(&problem.place, *algo, options)?, auto: None }
        }
    })
}

/// Order of each device's compute tasks in a placed plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskOrder {
    /// The placer's order.
    #[default]
    Placer,
    /// The model's own node order on each device (for debugging).
    Model,
}

/// How a training step (or forward pass) is spread over the devices.
#[derive(Clone, Debug)]
pub enum Strategy {
    /// Every node placed on a device by `placer`, each device running its nodes in `order`.
    Placed {
        /// The placement algorithm.
        placer: Placer,
        /// The order of each device's tasks.
        order: TaskOrder,
    },
    /// A placement made elsewhere (by hand, or by a placer on another cost graph of the same
    /// layers): every node on its device, each device running its nodes in the given order.
    Given(Placement),
    /// The whole training graph on device 0, in order or out of order.
    OneDevice(OneDeviceSchedule),
    /// The training graph replicated on `replicas` devices, gradients all-reduced; `steps`
    /// training steps in one plan (1, or more so that reverse first-k's deferred updates are
    /// applied in the next step's forward pass, as its steady state).
    DataParallel {
        /// Replicas, network, buckets, reverse first-k and each replica's schedule.
        config: DataParallel,
        /// Training steps in the plan (at least 1).
        steps: usize,
    },
    /// The blocks of a micro-batch's training graph split into pipeline stages.
    Pipeline(Pipeline),
    /// `steps` training steps on device 0 as one plan, so that work crosses from a step into
    /// the next: with [`OneDeviceSchedule::Ooo`], the weight-gradient work of the `deferred`
    /// forward layers (one flag per node) runs after the step's other work and their updates
    /// just before the layer's forward pass of the next step (out-of-order backprop's steady
    /// state, as `ordo_sched::steady_plan`).
    Steady {
        /// Where the weight-gradient work runs.
        schedule: OneDeviceSchedule,
        /// Per node of the problem: whether it is a forward layer whose dW work is deferred.
        deferred: Vec<bool>,
        /// Training steps in the plan (at least 1).
        steps: usize,
    },
}

impl Strategy {
    /// `placer`, each device in the placer's order.
    pub fn placed(placer: Placer) -> Self {
        Strategy::Placed { placer, order: TaskOrder::Placer }
    }
}

/// A strategy's plan, and how it was made.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The plan: streams, tasks, events and buffers of every device.
    pub plan: Plan,
    /// The placement, for a placed strategy.
    pub placed: Option<Placed>,
    /// The number of data-parallel replicas (1 when not data parallel): each needs its own
    /// inputs, and their gradients are averaged.
    pub replicas: usize,
    /// The strategy in words, e.g. `placed with m-etf on 2 devices`.
    pub description: String,
    /// For a pipeline, the micro-batched problem the plan runs: its nodes are copies of the
    /// problem's, per micro-batch, with an origin table.
    pub micro_batched: Option<MicroBatched>,
    /// Training steps one run of the plan makes (1 but for [`Strategy::Steady`]); node `v` of
    /// step `s` is task `s * n + v`.
    pub steps: usize,
}

impl Planned {
    /// `plan`, described: no placement, one replica, one step, no micro-batches.
    fn new(plan: Plan, description: String) -> Self {
        Self { plan, placed: None, replicas: 1, description, micro_batched: None, steps: 1 }
    }

    /// Micro-batches per step: a pipeline's, 1 otherwise.
    pub fn micro_batches(&self) -> usize {
        self.micro_batched.as_ref().map_or(1, MicroBatched::micro_batches)
    }

    /// Checks that the plan belongs to `problem`: as many devices (a data-parallel plan: one
    /// per replica, each with the problem's first device's memory), and each device's
    /// simulated peak within its memory.
    ///
    /// # Errors
    /// [`crate::Error::Usage`] naming the devices or the device, its peak and its memory;
    /// [`crate::Error::Sim`] for a plan the simulator cannot run.
    pub fn check_belongs_to(&self, problem: &Problem) -> Result<()> {
        let memory = &problem.place.devices.memory;
        let limits = if self.replicas > 1 {
            vec![memory.first().copied().unwrap_or(u64::MAX); self.replicas]
        } else {
            memory.clone()
        };
        if self.plan.devices != limits.len() {
            usage!(
                "the plan ({}) runs on {} devices; the problem `{}` has {}: plan it for this \
                 problem",
                self.description,
                self.plan.devices,
                problem.name(),
                limits.len()
            );
        }
        if limits.iter().all(|&limit| limit == u64::MAX) {
            return Ok(());
        }
        let report = ordo_sim::simulate(&self.plan, &ordo_sim::SimOptions::default())?;
        for (device, (&peak, &limit)) in report.peak_memory_bytes.iter().zip(&limits).enumerate() {
            if peak > limit {
                usage!(
                    "the plan ({}) needs {} at its peak on device {device}, more than the {} \
                     the problem `{}` gives it: plan it for this problem",
                    self.description,
                    ordo_cost::format_bytes(peak),
                    ordo_cost::format_bytes(limit),
                    problem.name()
                );
            }
        }
        Ok(())
    }
}

/// Plans `strategy` for `problem`.
///
/// # Errors
/// [`crate::Error::Place`] from a placer, [`crate::Error::Sched`] from the scheduler,
/// [`crate::Error::Usage`] for a strategy that does not fit the problem (a one-device
/// schedule on several devices).
pub fn plan(problem: &Problem, strategy: &Strategy) -> Result<Planned> {
    let p = &problem.place;
    let devices = p.devices.count();
    Ok(match strategy {
        Strategy::Placed { placer, order } => {
            let mut placed = place(problem, placer)?;
            if *order == TaskOrder::Model {
                in_model_order(&mut placed.placement);
            }
            let plan = ordo_sched::build_plan(p, &placed.placement)?;
            let description = format!("placed with {} on {devices} devices", placed.placement.algo);
            Planned { placed: Some(placed), ..Planned::new(plan, description) }
        }
        Strategy::Given(placement) => {
            let plan = ordo_sched::build_plan(p, placement)?;
            let description = format!("placed by {} on {devices} devices", placement.algo);
            let placed = Placed { placement: placement.clone(), auto: None };
            Planned { placed: Some(placed), ..Planned::new(plan, description) }
        }
        Strategy::OneDevice(schedule) => {
            if devices != 1 {
                usage!(
                    "the {} schedule runs on one device, but the problem has {devices}",
                    schedule.name()
                );
            }
            let plan = ordo_sched::one_device_plan(p, *schedule)?;
            let description = format!("one device, {}", schedule.name());
            Planned::new(plan, description)
        }
        Strategy::DataParallel { config, steps } => {
            // The plan holds every replica's tasks (a runtime needs them all); the steady
            // states simulate any number of replicas by symmetry (`data_parallel_steady`).
            if config.replicas > ordo_cost::MAX_DEVICES {
                refuse!(
                    Parameter::Replicas => config.replicas,
                    format!(
                        ": a plan of every replica takes at most {} devices; simulate the \
                         steady state instead (one replica stands for all)",
                        ordo_cost::MAX_DEVICES
                    )
                );
            }
            let plan = ordo_sched::data_parallel_plan(p, config, *steps)?;
            let description =
                format!("{} data-parallel replicas, {}", config.replicas, config.schedule.name());
            Planned { replicas: config.replicas, steps: *steps, ..Planned::new(plan, description) }
        }
        Strategy::Steady { schedule, deferred, steps } => {
            if devices != 1 {
                usage!(
                    "the steady state of the {} schedule runs on one device, but the problem \
                     has {devices}",
                    schedule.name()
                );
            }
            let plan = ordo_sched::steady_plan(p, *schedule, deferred, *steps)?;
            let layers = deferred.iter().filter(|&&d| d).count();
            let description =
                format!("one device, {}, {layers} layers deferred, {steps} steps", schedule.name());
            Planned { steps: *steps, ..Planned::new(plan, description) }
        }
        Strategy::Pipeline(pipeline) => {
            // A plan to run has a task per node: a block's merged pass has no kernel.
            let pipeline = &pipeline.with_granularity(ordo_sched::Granularity::Node);
            let mut planned = ordo_sched::pipeline_plan(p, pipeline)?;
            problem.cost_transfers_between_nodes(&mut planned.plan);
            let description = format!(
                "{} pipeline stages, {} micro-batches, {}",
                pipeline.stages,
                pipeline.micro_batches,
                pipeline.schedule.name()
            );
            Planned {
                micro_batched: Some(std::sync::Arc::unwrap_or_clone(planned.split)),
                ..Planned::new(planned.plan, description)
            }
        }
    })
}

/// Each device runs its nodes in the model's order (node ids, a topological order), and the
/// transfers in the order that follows from it.
fn in_model_order(placement: &mut Placement) {
    for order in &mut placement.order {
        order.sort_unstable();
    }
    placement.transfers = None;
}
