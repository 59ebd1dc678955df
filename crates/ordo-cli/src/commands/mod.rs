//! One module per subcommand.

pub mod compare;
pub mod data_parallel;
pub mod export;
pub mod export_schedule;
pub mod inspect;
pub mod models;
pub mod onnx_conformance;
pub mod pipeline;
pub mod place;
pub mod plan;
pub mod plan_parallel;
pub mod profile;
pub mod published;
pub mod run;
pub mod schedules;
pub mod simulate;
pub mod synth;
