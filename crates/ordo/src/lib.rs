//! ordo as a library: the whole pipeline as a typed API that the `ordo` command and the
//! Python package are thin shells over.
//!
//! A model ([`Model`]: zoo, ONNX or cost graph) is costed for a [`Target`] (devices, their
//! links and memory, a roofline or a measured profile) into a [`Problem`]; a [`Strategy`]
//! (placed by any [`Placer`], `auto` included; one device in or out of order; data parallel;
//! pipeline) turns it into a plan ([`plan`] gives a [`Planned`]); the simulator predicts the
//! plan ([`simulate`]) and a [`Runner`] executes it on CPU devices with real kernels.
//!
//! Place the training step of a small ResNet-50 on two CPU devices with m-ETF, predict it,
//! and train it for a few steps:
//!
//! ```
//! use ordo::{EngineOptions, Model, Optimizer, Problem, Runner, SimOptions, Size, StepMode};
//! use ordo::{Strategy, Target};
//!
//! let model = Model::zoo("resnet50", Size::small())?;
//! let training = model.training(Optimizer::SgdMomentum, None)?;
//! let target = Target::uniform(2, u64::MAX)?.costed_by(ordo::cluster("cpu")?);
//! let problem = Problem::new(&training, &target, StepMode::TrainingGraph)?;
//!
//! let planned = ordo::plan(&problem, &Strategy::placed("m-etf".parse()?))?;
//! let predicted = ordo::simulate(&planned, &SimOptions::default())?;
//! assert!(predicted.step_time_us > 0.0);
//!
//! let mut runner = Runner::new(&problem, &planned, EngineOptions::default())?;
//! let first = runner.step()?.loss;
//! let mut last = first;
//! for _ in 0..3 {
//!     last = runner.step()?.loss;
//! }
//! assert!(last < first, "training lowers the loss: {first} -> {last}");
//! # Ok::<(), ordo::Error>(())
//! ```
//!
//! A pipeline runs the same way: here GPT-2's small variant (batch 2 per micro-batch) on two
//! stages, four micro-batches, Zero Bubble's ZB-H1 schedule:
//!
//! ```
//! use ordo::{EngineOptions, Model, Optimizer, Pipeline, PipelineSchedule, Problem, Runner};
//! use ordo::{SimOptions, Size, StepMode, Strategy, Target};
//!
//! let model = Model::zoo("gpt2_small", Size::small())?.training(Optimizer::Adam, None)?;
//! let target = Target::uniform(2, u64::MAX)?.costed_by(ordo::cluster("cpu")?);
//! let problem = Problem::new(&model, &target, StepMode::TrainingGraph)?;
//! let strategy = Strategy::Pipeline(Pipeline::new(2, 4, PipelineSchedule::ZbH1));
//! let planned = ordo::plan(&problem, &strategy)?;
//! let predicted = ordo::simulate(&planned, &SimOptions::default())?;
//! let mut runner = Runner::new(&problem, &planned, EngineOptions::default())?;
//! let loss = runner.step()?.loss;
//! assert!(loss.is_finite() && predicted.step_time_us > 0.0);
//! # Ok::<(), ordo::Error>(())
//! ```

#![warn(missing_docs)]

pub mod assigner;
mod compare;
mod error;
pub mod files;
mod layers;
mod loss;
mod model;
pub mod onnx_node_tests;
mod parallel;
mod parameter;
mod problem;
pub mod profiling;
mod published;
mod pytorch;
mod run;
mod spec;
mod steady;
mod strategy;
mod target;

pub use compare::{CompareProgress, PlacerResult, compare_placers};
pub use error::{Error, Result};
pub use layers::{LayerGraph, ProfileInfo, ProfiledLayer, SplitBackward};
pub use loss::{Loss, with_loss};
pub use model::{
    Model, ModelKind, OnnxSettings, Precision, Size, Variant, is_file, is_onnx, zoo, zoo_batch,
};
pub use parallel::{
    ParallelCandidate, ParallelConfig, ParallelExport, ParallelPlans, ParallelSearch,
    export_parallel, granularity, plan_parallel, recompute_choices,
};
pub use parameter::{Parameter, ParameterError};
pub use problem::Problem;
pub use published::{
    PublishedPrediction, PublishedRun, PublishedTable, predict_published, published_tables,
};
pub use pytorch::{
    PytorchSchedule, pytorch_schedule, pytorch_schedule_of, simulate_pipeline,
    simulate_replicated_pipeline,
};
pub use run::{Runner, StepResult, measured_report, predict, program};
pub use spec::{Schedule, StrategyKind, StrategyParams, StrategySpec};
pub use steady::{
    DataParallelSteady, FirstK, OneDeviceSchedules, all_reduce_algorithm, data_parallel_buckets,
    data_parallel_network, data_parallel_steady, network, one_device_schedules, one_device_steady,
    stage_network,
};
pub use strategy::{Placed, Placer, Planned, Strategy, TaskOrder, place, place_reporting, plan};
pub use target::{Target, cluster, with_nodes};

// The stages' plain-data types that the facade's API hands out, and the drawings of them.
pub use ordo_cost::{
    AllReduceAlgorithm, Cluster, Collectives, CommModel, CostGraph, MAX_DEVICES, Optimizer,
    Profile, ProfileLink, ProfileNode, StepMode, parse_bytes,
};
pub use ordo_exec::cpu::Hyper;
pub use ordo_exec::{EngineOptions, RunSettings, StepRun, Sync, TrainState};
pub use ordo_ir::transform::Recompute;
pub use ordo_ir::{Graph, graph_stats, node_stats};
pub use ordo_models::{Family, ModelSpec, TransformerConfig};
pub use ordo_place::{
    Algorithm, AutoOptions, AutoPlacement, AutoProgress, PlaceOptions, PlacementFile,
    placement_file,
};
pub use ordo_problem::{Devices, PlaceProblem, Placement};
pub use ordo_sched::{
    DataParallel, GradientBucket, Granularity, OneDeviceSchedule, Pipeline, PipelinePlan,
    PipelineReplicas, PipelineSchedule, Plan, StreamKind, TaskKind,
};
pub use ordo_sim::{
    Channel, CompareBar, Deferral, PipelineReport, Report, SimOptions, Steady, chrome_trace_json,
    compare_svg, gantt_svg, memory_svg, simulate_on_host,
};

/// The simulator's prediction of `plan`'s step (a plan read from a file, or made by [`plan`]).
///
/// # Errors
/// [`Error::Sim`] if the simulator refuses the plan.
pub fn simulate_plan(plan: &Plan, options: &SimOptions) -> Result<Report> {
    Ok(ordo_sim::simulate(plan, options)?)
}

/// The simulator's prediction of `planned`'s step.
///
/// # Errors
/// [`Error::Sim`] if the simulator refuses the plan.
pub fn simulate(planned: &Planned, options: &SimOptions) -> Result<Report> {
    Ok(ordo_sim::simulate(&planned.plan, options)?)
}
