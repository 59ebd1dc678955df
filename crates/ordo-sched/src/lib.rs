//! ordo's plan builder: from a placement, per-device streams with ordered tasks, transfers on
//! tx/rx streams, cross-stream events and buffer lifetimes.
//!
//! [`build_plan`] makes a [`Plan`] from a placement, [`validate`] checks any plan against the
//! rules in [`plan`], [`check_against`] checks that a plan runs a given graph, [`task_graph`]
//! and [`task_order`] give its dependency graph, and [`read_plan`] / [`write_plan`] store it as
//! JSON. [`pipeline_plan`] plans pipeline-parallel training over stages and micro-batches.

mod build;
mod check;
mod collectives;
mod data_parallel;
mod error;
mod graph;
mod io;
mod one_device;
mod pipeline;
pub mod plan;
mod reorder;
mod steady;
mod validate;

pub use build::{build_plan, build_plan_on_streams};
pub use check::check_against;
pub use data_parallel::{
    DataParallel, GradientBucket, data_parallel_plan, data_parallel_replica_plan, gradient_buckets,
};
pub use error::SchedError;
pub use graph::{task_graph, task_order};
pub use io::{read_plan, write_plan};
pub use one_device::{
    OneDeviceSchedule, deferral, layers_with_weights, one_device_plan, steady_plan,
};
pub use pipeline::{
    Action, ActionKind, Granularity, MicroBatched, PerBlock, Pipeline, PipelinePlan,
    PipelineReplicas, PipelineSchedule, PipelineUnits, allocate_units, balanced_split, block_of,
    materialised_pipeline_plan, micro_batch, micro_batch_layout, per_block, pipeline_plan,
    pipeline_plan_of_split, pipeline_problem, pipeline_split, pipeline_units, pytorch_actions,
    pytorch_csv, pytorch_csv_with_reduce_grad, replicated_pipeline_plan,
    replicated_pipeline_plan_of_split,
};
pub use plan::{
    Buffer, BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};
pub use reorder::{HostCriterion, HostWalk, LayerPlacement, PlacedLayers, threads};
pub use steady::unroll;
pub use validate::validate;
