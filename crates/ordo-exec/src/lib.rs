//! ordo's runtime: executes plans out of order on devices with real kernels.
//!
//! [`cpu`] holds the CPU backend's kernels, one pure function per op of the IR, forward,
//! backward and optimizer steps; the execution engine (streams, dependency counting) is built
//! on top of it.

#![warn(missing_docs)]

pub mod backend;
pub mod conformance;
pub mod cpu;
mod engine;
mod error;
mod link;
pub mod profile;
mod program;
mod runtime_profile;
pub use runtime_profile::concurrency_slowdown;
pub mod sequential;
mod state;

pub use engine::{EngineOptions, Executable, MAX_WORKERS_PER_DEVICE, StepRun, Sync, TaskSpan};
pub use error::ExecError;
pub use link::measure_link;

/// Makes the C allocator keep memory that is freed for the next allocation: glibc hands large
/// blocks (above a threshold that grows to 32 MiB) to the kernel with `mmap` and returns them
/// on free, so every step would fault in fresh zeroed pages for its large tensors (most of a
/// small model's step, and the page faults of parallel workers serialise in the kernel).
/// Serving them from the heap and keeping freed memory makes a step reuse the last step's
/// pages, as a framework's caching allocator does. Call it once, first thing in `main`,
/// before other threads exist; it does nothing elsewhere than on glibc.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes the allocator's thresholds; the caller calls it before
    // other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
pub use profile::{
    HeapMeter, MAX_REPS, NodeProfile, Observers, ProfileMode, ProfileOptions, Profiled,
    WIDE_SPREAD, profile, spread,
};
pub use program::{NodeCall, Program, RunSettings, missing_kernels, scale_backward_seed};
pub use sequential::StepOutputs;
pub use state::{Feeds, TrainState, initial_params, synthetic_feeds};
