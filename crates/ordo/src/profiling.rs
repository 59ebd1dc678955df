//! Measuring a model's kernels on this machine into a profile (`ordo.profile/1`), which a
//! [`crate::Target`] then costs with instead of the roofline.

use ordo_cost::{PROFILE_FORMAT, Profile, ProfileLink, ProfileNode};
use ordo_exec::{Feeds, Program, TrainState, synthetic_feeds};

pub use ordo_exec::{
    HeapMeter, Observers, ProfileMode, ProfileOptions, Profiled, WIDE_SPREAD, keep_freed_memory,
};

use crate::Model;
use crate::error::{Result, usage};
use crate::parameter::{Parameter, refuse};

/// A model ready to be timed: its program, parameters and synthetic inputs, made once for
/// the measurements [`Profiler::kernels`], [`Profiler::link`] and
/// [`Profiler::concurrency_slowdown`], which [`Profiler::profile`] puts together.
pub struct Profiler {
    program: Program,
    state: TrainState,
    feeds: Feeds,
    options: ProfileOptions,
}

impl Profiler {
    /// Prepares `model`'s graph to be timed as `options` asks (seeded by its settings).
    ///
    /// # Errors
    /// [`crate::Error::Usage`] for a cost graph (no kernels), [`crate::Error::Parameter`] for
    /// zero timed calls;
    /// [`crate::Error::Exec`] for a graph the runtime cannot prepare.
    pub fn new(model: &Model, options: ProfileOptions) -> Result<Self> {
        if options.reps == 0 {
            refuse!(Parameter::Reps, " must be at least 1");
        }
        let Some(graph) = model.graph() else {
            usage!("{} is a cost graph: it has no kernels to run", model.name())
        };
        let program = Program::new(graph.clone())?;
        let state = TrainState::new(&program, options.settings.seed)?;
        let feeds = synthetic_feeds(program.graph(), options.settings.seed)?;
        Ok(Self { program, state, feeds, options })
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.program.graph().name
    }

    /// Times every node's kernel.
    ///
    /// # Errors
    /// [`crate::Error::Exec`] when a kernel fails.
    pub fn kernels(&self, observers: Observers<'_>) -> Result<Profiled> {
        let profiled =
            ordo_exec::profile(&self.program, &self.state, &self.feeds, &self.options, observers)?;
        Ok(profiled)
    }

    /// A transfer between two CPU devices: its fixed time and time per byte.
    ///
    /// # Errors
    /// [`crate::Error::Exec`] when the measurement fails.
    pub fn link(&self) -> Result<ProfileLink> {
        let comm = ordo_exec::measure_link(11)?;
        Ok(ProfileLink { fixed_us: comm.fixed_us, us_per_byte: comm.us_per_byte })
    }

    /// How much slower a step runs while another runs at once (1.0: not at all).
    ///
    /// # Errors
    /// [`crate::Error::Exec`] when a kernel fails.
    pub fn concurrency_slowdown(&self) -> Result<f64> {
        let slowdown = ordo_exec::concurrency_slowdown(
            &self.program,
            &self.state,
            &self.feeds,
            &self.options,
        )?;
        Ok((slowdown * 1e4).round() / 1e4)
    }

    /// The profile of a model built with `batch`, from the kernels' times and, where
    /// measured, the link and the slowdown of two steps at once.
    pub fn profile(
        &self,
        batch: usize,
        measured: Profiled,
        link: Option<ProfileLink>,
        concurrency_slowdown: Option<f64>,
    ) -> Profile {
        Profile {
            format: PROFILE_FORMAT.to_string(),
            model: self.name().to_string(),
            batch,
            device: device_description(),
            reps: measured.reps,
            warmup: measured.warmup,
            calls: calls_name(self.options.mode).to_string(),
            temporary_measured: true,
            spread: Some((measured.spread * 1e4).round() / 1e4),
            nodes: measured
                .nodes
                .into_iter()
                .map(|n| ProfileNode {
                    name: n.name,
                    // Nanosecond resolution is all a clock gives.
                    time_us: (n.time_us * 1e3).round() / 1e3,
                    output_bytes: n.output_bytes,
                    temporary_bytes: n.temporary_bytes,
                })
                .collect(),
            link,
            step_overhead_us: measured.step_overhead_us,
            concurrency_slowdown,
        }
    }
}

/// How a profile's calls were made, as the profile file records it.
fn calls_name(mode: ProfileMode) -> &'static str {
    match mode {
        ProfileMode::Runtime => "runtime",
        ProfileMode::InStep => "in-step",
        ProfileMode::BackToBack => "back-to-back",
    }
}

/// The machine in words: what a profile's times hold for.
fn device_description() -> String {
    let build = if cfg!(debug_assertions) { "debug" } else { "release" };
    format!(
        "cpu ({} {}), one thread, {build} build of ordo {}",
        std::env::consts::ARCH,
        std::env::consts::OS,
        env!("CARGO_PKG_VERSION")
    )
}
