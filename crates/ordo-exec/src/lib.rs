//! ordo's runtime: executes plans out of order on devices with real kernels.
//!
//! [`cpu`] holds the CPU backend's kernels, one pure function per op of the IR, forward,
//! backward and optimizer steps; the execution engine (streams, dependency counting) is built
//! on top of it.

#![warn(missing_docs)]

mod alloc;
pub mod backend;
pub mod cpu;
mod engine;
mod error;
mod link;
pub mod profile;
mod program;
mod runtime_profile;
pub mod sequential;
mod state;

pub use alloc::keep_freed_memory;
pub use engine::{EngineOptions, Executable, MAX_WORKERS_PER_DEVICE, StepRun, Sync, TaskSpan};
pub use error::ExecError;
pub use link::measure_link;

pub use profile::{
    HeapMeter, MAX_REPS, NodeProfile, Observers, ProfileMode, ProfileOptions, Profiled,
    WIDE_SPREAD, profile, spread,
};
pub use program::{NodeCall, Program, RunSettings, missing_kernels, scale_backward_seed};
pub use runtime_profile::concurrency_slowdown;
pub use sequential::StepOutputs;
pub use state::{Feeds, TrainState, copied_feeds, initial_params, synthetic_feeds};
