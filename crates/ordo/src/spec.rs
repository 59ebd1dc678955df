//! One strategy spec for every shell: which strategy, with which parameters, checked here once
//! whether they came from the command line or from Python, then resolved against a problem
//! into a [`Strategy`].

use std::str::FromStr;

use ordo_cost::{AllReduceAlgorithm, CommModel};
use ordo_sched::{DataParallel, OneDeviceSchedule, Pipeline, PipelineSchedule};

use crate::error::{Error, Result};
use crate::parameter::{Parameter, ParameterError, refuse};
use crate::{Placer, Problem, Strategy, TaskOrder};

/// A schedule by name: one device's (each data-parallel replica's), or a pipeline's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `inorder` or `ooo`.
    OneDevice(OneDeviceSchedule),
    /// `gpipe`, `1f1b`, `fast-forward`, `zb-h1` or `zb-h2`.
    Pipeline(PipelineSchedule),
}

impl Schedule {
    /// Every schedule, one-device ones first.
    pub const ALL: [Schedule; 7] = [
        Schedule::OneDevice(OneDeviceSchedule::InOrder),
        Schedule::OneDevice(OneDeviceSchedule::Ooo),
        Schedule::Pipeline(PipelineSchedule::Gpipe),
        Schedule::Pipeline(PipelineSchedule::OneFOneB),
        Schedule::Pipeline(PipelineSchedule::FastForward),
        Schedule::Pipeline(PipelineSchedule::ZbH1),
        Schedule::Pipeline(PipelineSchedule::ZbH2),
    ];

    /// What the schedule does, in a line.
    pub fn description(self) -> &'static str {
        match self {
            Schedule::OneDevice(OneDeviceSchedule::InOrder) => {
                "PyTorch's order on one stream: forward, each layer's dX and dW together, updates \
                 last"
            }
            Schedule::OneDevice(OneDeviceSchedule::Ooo) => {
                "Out-of-order backprop: dW and updates on a sub-stream beside the dX chain"
            }
            Schedule::Pipeline(PipelineSchedule::Gpipe) => {
                "Pipeline: all forwards, then all backwards (GPipe)"
            }
            Schedule::Pipeline(PipelineSchedule::OneFOneB) => {
                "Pipeline: one forward one backward after a warm-up (PipeDream-flush)"
            }
            Schedule::Pipeline(PipelineSchedule::FastForward) => {
                "Pipeline: 1F1B with each backward's dX first and sent on at once, dW after it \
                 (gradient fast-forwarding)"
            }
            Schedule::Pipeline(PipelineSchedule::ZbH1) => {
                "Pipeline: Zero Bubble's ZB-H1, 1F1B's memory with the weight gradients filling \
                 idle time"
            }
            Schedule::Pipeline(PipelineSchedule::ZbH2) => {
                "Pipeline: Zero Bubble's ZB-H2, more warm-up forwards and no bubble, about twice \
                 1F1B's memory"
            }
        }
    }

    /// The schedule's name, as [`Schedule::from_str`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::OneDevice(s) => s.name(),
            Schedule::Pipeline(s) => s.name(),
        }
    }

    /// The one-device schedule (each data-parallel replica's).
    ///
    /// # Errors
    /// [`Error::Parameter`] for a pipeline schedule: it needs stages.
    pub fn one_device(self) -> Result<OneDeviceSchedule> {
        match self {
            Schedule::OneDevice(s) => Ok(s),
            Schedule::Pipeline(s) => {
                refuse!(Parameter::Schedule => s.name(), " needs ", Parameter::Stages, " S")
            }
        }
    }

    /// The pipeline schedule.
    ///
    /// # Errors
    /// [`Error::Parameter`] for a one-device schedule, naming the ones a pipeline takes.
    pub fn pipeline(self) -> Result<PipelineSchedule> {
        match self {
            Schedule::Pipeline(s) => Ok(s),
            Schedule::OneDevice(s) => refuse!(
                Parameter::Stages,
                " takes ",
                Parameter::Schedule,
                format!(" gpipe, 1f1b, fast-forward, zb-h1 or zb-h2, not {}", s.name())
            ),
        }
    }
}

impl FromStr for Schedule {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match Schedule::ALL.into_iter().find(|s| s.name() == name) {
            Some(schedule) => Ok(schedule),
            None => {
                let known: Vec<&str> = Schedule::ALL.iter().map(|s| s.name()).collect();
                let text = format!(" `{name}`: expected one of {}", known.join(", "));
                Err(Error::Parameter(ParameterError::named(Parameter::Schedule).text(text)))
            }
        }
    }
}

/// Which kind of strategy a shell asks for; its parameters come in [`StrategyParams`].
#[derive(Clone, Debug, PartialEq)]
pub enum StrategyKind {
    /// Every node placed by a placer.
    Placed(Placer),
    /// The whole step on one device, by the schedule the parameters name (in order by default).
    OneDevice,
    /// Pipeline stages over micro-batches.
    Pipeline,
    /// Replicas of the step, gradients all-reduced.
    DataParallel,
}

impl StrategyKind {
    /// The kind a strategy's name gives (the Python package's `strategy=`): `pipeline`,
    /// `data-parallel`, a one-device schedule (`inorder`, `ooo`, which `schedule` then holds),
    /// or a placer's name (`auto`, `m-etf`, ...).
    ///
    /// # Errors
    /// [`Error::Place`] for a name that is none of these, listing the placers;
    /// [`Error::Parameter`] for a `schedule` other than the one the name gives.
    pub fn from_name(name: &str, schedule: &mut Option<Schedule>) -> Result<Self> {
        Ok(match name {
            "pipeline" => StrategyKind::Pipeline,
            "data-parallel" => StrategyKind::DataParallel,
            "inorder" | "ooo" => {
                let named: Schedule = name.parse()?;
                if let Some(given) = schedule.filter(|&given| given != named) {
                    refuse!(
                        Parameter::Schedule => given.name(),
                        format!(" disagrees with the strategy, {name}")
                    );
                }
                *schedule = Some(named);
                StrategyKind::OneDevice
            }
            placer => StrategyKind::Placed(placer.parse()?),
        })
    }
}

/// The parameters of a strategy. Each applies to some kinds only: one given to a kind that
/// does not take it is refused, naming it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StrategyParams {
    /// The schedule: one device's, each replica's, or a pipeline's (default: in order, and
    /// fast-forward for a pipeline).
    pub schedule: Option<Schedule>,
    /// Pipeline stages (at least 2).
    pub stages: Option<usize>,
    /// Micro-batches per pipeline step (at least 1).
    pub micro_batches: Option<usize>,
    /// A pipeline's modulo allocation.
    pub modulo: Option<usize>,
    /// What each of a pipeline's actions costs a runtime, in µs, charged in the prediction.
    pub action_overhead_us: u64,
    /// Data-parallel replicas (at least 1).
    pub replicas: Option<usize>,
    /// The network between replicas, as one node's link (default: the problem's cluster of
    /// nodes, or its link between devices).
    pub network: Option<CommModel>,
    /// The data-parallel all-reduce's algorithm (default: ring).
    pub all_reduce: Option<AllReduceAlgorithm>,
    /// Reverse first-k: layers with weights whose gradient work is deferred.
    pub first_k: usize,
    /// Gradient buckets of at least this many bytes (0: one gradient each).
    pub bucket_bytes: u64,
    /// Training steps in one plan (data parallel: default 1; deferred work: default 2, at
    /// least 2).
    pub steps: Option<usize>,
    /// Out-of-order backprop's steady state: the weight-gradient work of the first `defer`
    /// layers with weights deferred into the next step (needs the `ooo` schedule).
    pub defer: Option<usize>,
    /// The order of each device's tasks in a placed plan.
    pub order: TaskOrder,
}

impl StrategyParams {
    /// The pipeline these parameters ask for (its stages, micro-batches, schedule, modulo and
    /// action overhead), checked.
    ///
    /// # Errors
    /// [`Error::Parameter`] naming the parameter at fault.
    pub fn pipeline(&self) -> Result<Pipeline> {
        let schedule =
            self.schedule.map_or(Ok(PipelineSchedule::FastForward), Schedule::pipeline)?;
        let stages = self.stages.ok_or_else(|| needed(Parameter::Stages))?;
        if stages < 2 {
            refuse!(
                Parameter::Stages => stages,
                ": a pipeline needs at least 2 stages (on one device, use ",
                Parameter::Schedule,
                " inorder or ooo)"
            );
        }
        let micro_batches = count(self.micro_batches, Parameter::MicroBatches)?;
        let pipeline = Pipeline::new(stages, micro_batches, schedule)
            .with_action_overhead(self.action_overhead_us);
        Ok(match self.modulo {
            Some(m) => pipeline.with_modulo(m),
            None => pipeline,
        })
    }
}

/// A strategy whose parameters are checked, not yet bound to a problem.
#[derive(Clone, Debug, PartialEq)]
pub enum StrategySpec {
    /// Every node placed by `placer`, each device running its nodes in `order`.
    Placed {
        /// The placement algorithm.
        placer: Placer,
        /// The order of each device's tasks.
        order: TaskOrder,
    },
    /// The whole step on one device.
    OneDevice(OneDeviceSchedule),
    /// Out-of-order backprop's steady state on one device.
    Steady {
        /// Where the weight-gradient work runs.
        schedule: OneDeviceSchedule,
        /// How many of the first layers with weights have their dW work deferred.
        layers: usize,
        /// Training steps in one plan (at least 2).
        steps: usize,
    },
    /// The step replicated, gradients all-reduced.
    DataParallel {
        /// Replicas (at least 1).
        replicas: usize,
        /// Each replica's schedule.
        schedule: OneDeviceSchedule,
        /// Reverse first-k.
        first_k: usize,
        /// Bucket size in bytes.
        bucket_bytes: u64,
        /// The network between replicas (`None`: the problem's cluster of nodes, or its
        /// link).
        network: Option<CommModel>,
        /// The all-reduce's algorithm.
        all_reduce: AllReduceAlgorithm,
        /// Training steps in one plan (at least 1).
        steps: usize,
    },
    /// Pipeline stages over micro-batches.
    Pipeline(Pipeline),
}

impl StrategySpec {
    /// The strategy of `kind` with `params`, checked: every parameter `kind` does not take
    /// is absent, every count in range.
    ///
    /// # Errors
    /// [`Error::Parameter`] naming the parameter at fault.
    pub fn new(kind: StrategyKind, params: &StrategyParams) -> Result<Self> {
        let p = params;
        let placed = matches!(kind, StrategyKind::Placed(_));
        if p.order == TaskOrder::Model && !placed {
            refuse!(
                Parameter::Order,
                " model applies to placed plans, not to ",
                Parameter::Schedule,
                ", ",
                Parameter::Replicas,
                " or ",
                Parameter::Stages
            );
        }
        if p.steps.is_some() && p.defer.is_none() && kind != StrategyKind::DataParallel {
            refuse!(
                Parameter::Steps,
                " applies to ",
                Parameter::Defer,
                " and ",
                Parameter::Replicas,
                " plans"
            );
        }
        if p.defer.is_some() && kind != StrategyKind::OneDevice {
            refuse!(Parameter::Defer, " applies to one device's ", Parameter::Schedule, " ooo");
        }
        let pipeline_only = [
            (Parameter::Modulo, p.modulo.is_some()),
            (Parameter::MicroBatches, p.micro_batches.is_some()),
            (Parameter::Stages, p.stages.is_some()),
        ];
        if kind != StrategyKind::Pipeline
            && let Some((parameter, _)) = pipeline_only.iter().find(|(_, given)| *given)
        {
            refuse!(*parameter, " applies to pipelines only");
        }
        let data_parallel_only = [
            (Parameter::Replicas, p.replicas.is_some()),
            (Parameter::FirstK, p.first_k > 0),
            (Parameter::BucketBytes, p.bucket_bytes > 0),
            (Parameter::AllReduce, p.all_reduce.is_some()),
        ];
        if kind != StrategyKind::DataParallel
            && let Some((parameter, _)) = data_parallel_only.iter().find(|(_, given)| *given)
        {
            refuse!(*parameter, " applies to data-parallel plans only");
        }
        Ok(match kind {
            StrategyKind::Placed(placer) => {
                if let Some(schedule) = p.schedule {
                    refuse!(
                        Parameter::Schedule => schedule.name(),
                        " applies to one device, replicas or a pipeline, not to a placement"
                    );
                }
                StrategySpec::Placed { placer, order: p.order }
            }
            StrategyKind::Pipeline => StrategySpec::Pipeline(p.pipeline()?),
            StrategyKind::DataParallel => {
                let replicas = count(p.replicas, Parameter::Replicas)?;
                let steps = p.steps.unwrap_or(1);
                if steps == 0 {
                    refuse!(Parameter::Steps => 0, ": a plan makes at least one step");
                }
                StrategySpec::DataParallel {
                    replicas,
                    schedule: p
                        .schedule
                        .map_or(Ok(OneDeviceSchedule::InOrder), Schedule::one_device)?,
                    first_k: p.first_k,
                    bucket_bytes: p.bucket_bytes,
                    network: p.network,
                    all_reduce: p.all_reduce.unwrap_or_default(),
                    steps,
                }
            }
            StrategyKind::OneDevice => {
                let schedule = match p.schedule {
                    Some(Schedule::Pipeline(s)) => refuse!(
                        Parameter::Schedule => s.name(),
                        " is a pipeline schedule: give ",
                        Parameter::Stages,
                        " S"
                    ),
                    Some(Schedule::OneDevice(s)) => s,
                    None => OneDeviceSchedule::InOrder,
                };
                match p.defer {
                    None => StrategySpec::OneDevice(schedule),
                    Some(layers) => {
                        if schedule != OneDeviceSchedule::Ooo {
                            refuse!(
                                Parameter::Defer,
                                " needs ",
                                Parameter::Schedule,
                                " ooo (the in-order schedule defers nothing)"
                            );
                        }
                        let steps = p.steps.unwrap_or(2);
                        if steps < 2 {
                            refuse!(
                                Parameter::Steps => steps,
                                ": deferred work crosses steps; give at least 2"
                            );
                        }
                        StrategySpec::Steady { schedule, layers, steps }
                    }
                }
            }
        })
    }

    /// The devices its problem has: a pipeline's stages, one for a one-device schedule or a
    /// data-parallel replica's problem, `None` for a placement (the problem says).
    pub fn devices(&self) -> Option<usize> {
        match self {
            StrategySpec::Placed { .. } => None,
            StrategySpec::Pipeline(pipeline) => Some(pipeline.stages),
            _ => Some(1),
        }
    }

    /// The strategy on `problem`: the deferred layers found in its graph, the network its
    /// link where none was given.
    ///
    /// # Errors
    /// [`Error::Parameter`] for more deferred layers than the problem has layers with weights.
    pub fn strategy(&self, problem: &Problem) -> Result<Strategy> {
        Ok(match self {
            StrategySpec::Placed { placer, order } => {
                Strategy::Placed { placer: placer.clone(), order: *order }
            }
            StrategySpec::OneDevice(schedule) => Strategy::OneDevice(*schedule),
            StrategySpec::Steady { schedule, layers, steps } => {
                let with_weights = ordo_sched::layers_with_weights(&problem.place);
                if *layers > with_weights.len() {
                    refuse!(
                        Parameter::Defer => layers,
                        format!(
                            ": the model has {} layers with weights",
                            with_weights.len()
                        )
                    );
                }
                let deferred = ordo_sched::deferral(&problem.place, &with_weights[..*layers]);
                Strategy::Steady { schedule: *schedule, deferred, steps: *steps }
            }
            StrategySpec::DataParallel {
                replicas,
                schedule,
                first_k,
                bucket_bytes,
                network,
                all_reduce,
                steps,
            } => {
                let network =
                    crate::data_parallel_network(problem, *replicas, *network, *all_reduce);
                let config = DataParallel {
                    replicas: *replicas,
                    network,
                    bucket_bytes: *bucket_bytes,
                    first_k: *first_k,
                    schedule: *schedule,
                };
                Strategy::DataParallel { config, steps: *steps }
            }
            StrategySpec::Pipeline(pipeline) => Strategy::Pipeline(*pipeline),
        })
    }
}

/// A count a strategy needs: given, and at least 1.
fn count(value: Option<usize>, parameter: Parameter) -> Result<usize> {
    match value {
        Some(0) => refuse!(parameter, " must be at least 1"),
        Some(n) => Ok(n),
        None => Err(needed(parameter)),
    }
}

/// The error for a parameter the strategy needs and was not given.
fn needed(parameter: Parameter) -> Error {
    Error::Parameter(ParameterError::about(parameter, "the strategy needs ").then(parameter))
}
