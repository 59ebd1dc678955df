//! `ordo profile MODEL --out FILE`: time every node's CPU kernel and write a profile that
//! `--profile FILE` uses instead of the roofline.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use ordo::profiling::{Observers, ProfileMode, ProfileOptions, Profiler, WIDE_SPREAD};
use ordo::{Profile, ProfileNode, RunSettings};

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
    let forward = source::load(&args.target, args.size.clone())?;
    if forward.graph().is_none() {
        bail!("{} is a cost graph: it has no kernels to run", forward.name());
    }
    let model = if args.train { forward.training(args.optimizer.into(), None)? } else { forward };
    let batch = batch_of(&args.target, args.size.clone());
    let options = ProfileOptions {
        reps: args.reps,
        warmup: args.warmup,
        warmup_seconds: crate::placing::seconds("--warmup-seconds", &args.warmup_seconds)?,
        timed_seconds: crate::placing::seconds("--timed-seconds", &args.timed_seconds)?,
        settings: RunSettings { seed: args.seed, ..RunSettings::default() },
        mode: args.calls.mode(),
    };
    let profile = measure(&model, batch, options, !args.no_link)?;
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

/// Profiles `model` (built with `batch`) on this machine as `options` asks, measuring a
/// transfer between two CPU devices too when `link` is set: what `ordo profile` writes, and
/// what `ordo run` measures before it plans when it is given no profile.
pub fn measure(
    model: &ordo::Model,
    batch: usize,
    options: ProfileOptions,
    link: bool,
) -> anyhow::Result<Profile> {
    let label = model.graph().map_or_else(|| model.name().to_string(), |g| g.name.clone());
    let profiler = match Profiler::new(model, options) {
        // A bad option speaks for itself; a graph the runtime cannot prepare is named.
        Err(e @ ordo::Error::Parameter(_)) => return Err(e.into()),
        prepared => prepared.with_context(|| format!("preparing `{label}`"))?,
    };
    crate::heap::enable();
    let measured = crate::progress::with_spinner(&format!("profiling `{label}`"), |bar| {
        bar.set_message(format!("profiling `{label}`: timed calls per kernel"));
        let progress =
            |made: usize, planned: usize| crate::progress::set_counts(bar, made, planned);
        let observers = Observers { heap: Some(&crate::heap::Meter), progress: Some(&progress) };
        profiler.kernels(observers)
    })
    .with_context(|| format!("profiling `{label}`"))?;
    let (link, concurrency_slowdown) = if link {
        let link = crate::progress::with_spinner("measuring transfers", |_| profiler.link())?;
        let slowdown = crate::progress::with_spinner("measuring two steps at once", |_| {
            profiler.concurrency_slowdown()
        })
        .with_context(|| format!("profiling `{label}` twice at once"))?;
        (Some(link), Some(slowdown))
    } else {
        (None, None)
    };
    Ok(profiler.profile(batch, measured, link, concurrency_slowdown))
}

/// The batch size the model was built with.
pub fn batch_of(name: &str, size: SizeArgs) -> usize {
    size.batch.or_else(|| ordo::zoo_batch(name, size.variant())).unwrap_or(0)
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
        if spread > WIDE_SPREAD {
            println!(
                "warning: the machine's speed varied by more than {:.0}% while profiling, so \
                 predictions from this profile may be off by as much; profile again on an idle \
                 machine, or with a longer --timed-seconds",
                WIDE_SPREAD * 100.0
            );
        }
    }
}
