//! ordo's discrete-event simulator: runs a [`Plan`](ordo_sched::Plan) and reports step time,
//! utilisation, memory over time and the critical path, and draws the result as a Chrome trace
//! and SVG charts.
//!
//! ```text
//! let report = ordo_sim::simulate(&plan, &SimOptions::default())?;
//! std::fs::write("trace.json", ordo_sim::chrome_trace_json(&plan, &report))?;
//! ```

mod analysis;
mod booking;
mod engine;
mod error;
mod host;
mod index;
mod memory;
mod options;
mod pipeline;
mod report;
mod svg;
mod trace;
mod tune;

pub use engine::simulate;
pub use error::SimError;
pub use host::simulate_on_host;
pub use options::{Channel, SimOptions};
pub use ordo_sched::layers_with_weights;
pub use pipeline::{PipelineReport, pipeline_report};
pub use report::{BusyFraction, LinkBusy, Report, TaskTiming};
pub use svg::{CompareBar, compare_svg, gantt_svg, memory_svg};
pub use trace::{chrome_trace, chrome_trace_json};
pub use tune::{
    Deferral, Steady, choose_deferral, choose_first_k, data_parallel_steady, refine_deferral,
    steady_state,
};
