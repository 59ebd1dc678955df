//! `ordo profile MODEL --out FILE`: time every node's CPU kernel and write a profile that
//! `--profile FILE` uses instead of the roofline.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use ordo_cost::{PROFILE_FORMAT, Profile, ProfileLink, ProfileNode};
use ordo_exec::{
    Observers, ProfileMode, ProfileOptions, Program, RunSettings, TrainState, synthetic_feeds,
};

use crate::format::Table;
use crate::placing::OptimizerArg;
use crate::source::{self, SizeArgs};

/// How `ordo profile` calls the kernels.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CallsArg {
    /// Whole steps of the runtime, one device, one worker.
    Runtime,
    /// Whole passes of kernel calls over the graph.
    InStep,
    /// Each node all its calls in a row.
    BackToBack,
}

impl CallsArg {
    fn mode(self) -> ProfileMode {
        match self {
            CallsArg::Runtime => ProfileMode::Runtime,
            CallsArg::InStep => ProfileMode::InStep,
            CallsArg::BackToBack => ProfileMode::BackToBack,
        }
    }
}

/// How a profile's calls were made, as `--calls` names it and the profile file records it.
fn calls_name(mode: ProfileMode) -> &'static str {
    match mode {
        ProfileMode::Runtime => "runtime",
        ProfileMode::InStep => "in-step",
        ProfileMode::BackToBack => "back-to-back",
    }
}

/// Arguments of `ordo profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model name (see `ordo models`) or an ONNX model (`.onnx`).
    pub target: String,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Profile the model's training graph (forward, dX, dW and updates), as `--train` places
    /// it; without it the forward graph, as placed without `--train`.
    #[arg(long)]
    pub train: bool,
    /// Optimizer of the training graph's updates.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "momentum")]
    pub optimizer: OptimizerArg,
    /// Timed calls of each kernel, at least (more while `--timed-seconds` last); the median is
    /// kept.
    #[arg(allow_negative_numbers = true, long, default_value_t = 5)]
    pub reps: usize,
    /// Untimed calls of each kernel before the timed ones, at least (more while
    /// `--warmup-seconds` last).
    #[arg(allow_negative_numbers = true, long, default_value_t = 2)]
    pub warmup: usize,
    /// Untimed calls go on for this long: a cold process (and a virtual machine's idle cores)
    /// runs the first tens of milliseconds several times slower.
    #[arg(allow_hyphen_values = true, long, default_value = "0.3s", value_name = "TIME")]
    pub warmup_seconds: String,
    /// Timed calls go on for this long (up to 2,000 per kernel), so that a short disturbance
    /// of the machine touches few of them (not with `--calls back-to-back`).
    #[arg(allow_hyphen_values = true, long, default_value = "0.5s", value_name = "TIME")]
    pub timed_seconds: String,
    /// How the calls are made: `runtime` (whole steps of the runtime on one device and one
    /// worker; a node's time includes what the runtime spends on its task), `in-step` (whole
    /// passes of kernel calls) or `back-to-back` (each node all its calls in a row: the kernel
    /// alone, warm caches).
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "runtime")]
    pub calls: CallsArg,
    /// Seed of the parameters, synthetic inputs and dropout masks.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    pub seed: u64,
    /// Do not measure what a second CPU device costs: a transfer between two devices, and two
    /// steps running at once (together about a second).
    #[arg(long)]
    pub no_link: bool,
    /// Where to write the profile (JSON, `ordo.profile/1`).
    #[arg(allow_negative_numbers = true, long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Builds the graph, times every node and writes the profile.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let start = Instant::now();
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let forward = source::load(&args.target, args.size.clone())?;
    if forward.graph().is_none() {
        bail!("{} is a cost graph: it has no kernels to run", forward.name());
    }
    let model = if args.train { forward.training(args.optimizer.into(), None)? } else { forward };
    let graph = model.into_graph().expect("checked above: the model has a graph");
    let batch = batch_of(&args.target, args.size.clone());
    let options = ProfileOptions {
        reps: args.reps,
        warmup: args.warmup,
        warmup_seconds: crate::placing::seconds("--warmup-seconds", &args.warmup_seconds)?,
        timed_seconds: crate::placing::seconds("--timed-seconds", &args.timed_seconds)?,
        settings: RunSettings { seed: args.seed, ..RunSettings::default() },
        mode: args.calls.mode(),
    };
    let profile = measure(graph, batch, &options, !args.no_link)?;
    profile.write(&args.out)?;
    print_summary(&profile);
    println!(
        "wrote {} in {:.2} s ({} nodes x {} timed + {} warm-up calls)",
        args.out.display(),
        start.elapsed().as_secs_f64(),
        profile.nodes.len(),
        profile.reps,
        profile.warmup
    );
    Ok(())
}

/// Profiles `graph` (built with `batch`) on this machine as `options` asks, measuring a
/// transfer between two CPU devices too when `link` is set: what `ordo profile` writes, and
/// what `ordo run` measures before it plans when it is given no profile.
pub fn measure(
    graph: ordo_ir::Graph,
    batch: usize,
    options: &ProfileOptions,
    link: bool,
) -> anyhow::Result<Profile> {
    let label = graph.name.clone();
    let program = Program::new(graph).with_context(|| format!("preparing `{label}`"))?;
    let state = TrainState::new(&program, options.settings.seed)?;
    let feeds = synthetic_feeds(program.graph(), options.settings.seed)?;
    crate::heap::enable();
    let measured = crate::progress::with_spinner(&format!("profiling `{label}`"), |bar| {
        bar.set_message(format!("profiling `{label}`: timed calls per kernel"));
        let progress =
            |made: usize, planned: usize| crate::progress::set_counts(bar, made, planned);
        let observers = Observers { heap: Some(&crate::heap::Meter), progress: Some(&progress) };
        ordo_exec::profile(&program, &state, &feeds, options, observers)
    })
    .with_context(|| format!("profiling `{label}`"))?;
    let (link, concurrency_slowdown) = if link {
        let comm =
            crate::progress::with_spinner("measuring transfers", |_| ordo_exec::measure_link(11))?;
        let slowdown = crate::progress::with_spinner("measuring two steps at once", |_| {
            ordo_exec::concurrency_slowdown(&program, &state, &feeds, options)
        })
        .with_context(|| format!("profiling `{label}` twice at once"))?;
        let link = ProfileLink { fixed_us: comm.fixed_us, us_per_byte: comm.us_per_byte };
        (Some(link), Some((slowdown * 1e4).round() / 1e4))
    } else {
        (None, None)
    };
    Ok(Profile {
        format: PROFILE_FORMAT.to_string(),
        model: label,
        batch,
        device: device_description(),
        reps: measured.reps,
        warmup: measured.warmup,
        calls: calls_name(options.mode).to_string(),
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
    })
}

/// The batch size the model was built with.
pub fn batch_of(name: &str, size: SizeArgs) -> usize {
    size.batch
        .or_else(|| ordo_models::spec(name).ok().map(|s| s.config(size.variant()).batch))
        .unwrap_or(0)
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

pub fn print_summary(profile: &Profile) {
    let total: f64 = profile.nodes.iter().map(|n| n.time_us).sum();
    println!(
        "profiled {} on {}: {} nodes, {:.2} ms of kernels in all",
        profile.model,
        profile.device,
        profile.nodes.len(),
        total / 1e3
    );
    let mut slowest: Vec<&ProfileNode> = profile.nodes.iter().collect();
    slowest.sort_by(|a, b| b.time_us.total_cmp(&a.time_us));
    let mut table = Table::new(&["slowest nodes", "time", "outputs", "temporary"]);
    for node in slowest.iter().take(8) {
        table.row(vec![
            node.name.clone(),
            format!("{:.1} us", node.time_us),
            crate::format::bytes(node.output_bytes.iter().sum()),
            crate::format::bytes(node.temporary_bytes),
        ]);
    }
    print!("{}", table.render());
    if let Some(spread) = profile.spread {
        println!(
            "spread        {:.1}% (interquartile range of the {} timed steps over their median)",
            spread * 100.0,
            profile.reps
        );
        if spread > ordo_exec::WIDE_SPREAD {
            println!(
                "warning: the machine's speed varied by more than {:.0}% while profiling, so \
                 predictions from this profile may be off by as much; profile again on an idle \
                 machine, or with a longer --timed-seconds",
                ordo_exec::WIDE_SPREAD * 100.0
            );
        }
    }
}
