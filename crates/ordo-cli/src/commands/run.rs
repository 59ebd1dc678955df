//! `ordo run MODEL --devices cpu:N`: place, schedule and execute training steps on CPU
//! devices with real kernels, next to the simulator's prediction of the same plan.

use std::path::PathBuf;

use anyhow::{Context, bail};
use ordo::PlaceOptions;
use ordo::StepMode;
use ordo::profiling::{ProfileMode, ProfileOptions};
use ordo::{EngineOptions, RunSettings, StepRun};
use ordo::{StrategyKind, StrategyParams, StrategySpec, Target, TaskOrder};
use serde_json::json;

use crate::commands::pipeline::PipelineArgs;
use crate::commands::simulate::ScheduleArg;
use crate::format::{Table, bytes};
use crate::placing::{OptimizerArg, SearchArgs};
use crate::progress::with_spinner;
use crate::source::{self, SizeArgs};

/// Cross-stream synchronisation of the runtime.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum SyncArg {
    /// Wait for exactly the events the plan gives (non-blocking).
    Events,
    /// Wait for the whole producing device up to the event (coarse, for debugging).
    DeviceWait,
}

/// Order of each device's compute tasks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderArg {
    /// The placer's (or schedule's) order.
    Plan,
    /// The model's own node order on each device (for debugging).
    Model,
}

/// Arguments of `ordo run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model or an `.onnx` file.
    pub target: String,
    #[command(flatten)]
    pub size: SizeArgs,
    /// CPU devices to run on, `cpu:N` (or just `N`); each is a pool of worker threads.
    #[arg(allow_negative_numbers = true, long, default_value = "cpu:1")]
    pub devices: String,
    /// Placement algorithm (see `ordo place --help`).
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub algo: String,
    /// `--budget` of `--algo auto`; `--seed` also seeds the initial parameters, the synthetic
    /// inputs and dropout.
    #[command(flatten)]
    pub search: SearchArgs,
    /// Run training steps (forward, backward, update) instead of forward passes.
    #[arg(long)]
    pub train: bool,
    /// Number of steps.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1)]
    pub steps: usize,
    /// With `--train` on one device: `inorder` or `ooo` (dW and updates on a sub-stream)
    /// instead of a placement; with `--data-parallel`, each replica's schedule; with
    /// `--pipeline`, the pipeline's: `gpipe`, `1f1b` or `fast-forward` (the default).
    #[arg(allow_negative_numbers = true, long, value_enum, requires = "train")]
    pub schedule: Option<ScheduleArg>,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// With `--train`: one replica per device, gradients all-reduced (`--batch` is each
    /// replica's).
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "N",
        requires = "train",
        conflicts_with_all = ["devices", "pipeline"]
    )]
    pub data_parallel: Option<usize>,
    /// With `--data-parallel`: reverse first-k, the weight gradients and updates of the first
    /// K layers with weights run after the whole dX chain, their all-reduces last.
    #[arg(
        allow_negative_numbers = true,
        long,
        value_name = "K",
        default_value_t = 0,
        requires = "data_parallel"
    )]
    pub first_k: usize,
    /// With `--data-parallel`: all-reduce gradients in buckets of at least this size (e.g.
    /// `1MiB`); 0 reduces each gradient on its own.
    #[arg(
        allow_hyphen_values = true,
        long,
        value_name = "SIZE",
        default_value = "0",
        requires = "data_parallel"
    )]
    pub bucket: String,
    /// With `--schedule ooo`: out-of-order backprop's steady state, the weight-gradient work
    /// of the first N layers with weights deferred into the next step's forward pass. Each run
    /// of the plan is `--unroll` steps; `--steps` must be a multiple of it.
    #[arg(allow_negative_numbers = true, long, value_name = "N", requires = "schedule")]
    pub defer: Option<usize>,
    /// Training steps in one plan: with `--defer` (default 2, at least 2, so that work can cross
    /// steps), or with `--data-parallel` (default 1; more applies reverse first-k's deferred
    /// updates in the next step's forward pass).
    #[arg(allow_negative_numbers = true, long, value_name = "K")]
    pub unroll: Option<usize>,
    /// Cross-stream synchronisation.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "events")]
    pub sync: SyncArg,
    /// Order of each device's tasks.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "plan")]
    pub order: OrderArg,
    /// Worker threads per device.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1)]
    pub workers: usize,
    /// Memory budget of each device, e.g. `512MiB` (default: unlimited).
    #[arg(allow_hyphen_values = true, long)]
    pub memory: Option<String>,
    /// With `--train` on a forward graph without a loss (an ONNX export): the loss to add.
    #[arg(allow_negative_numbers = true, long, value_enum, requires = "train")]
    pub loss: Option<crate::placing::LossArg>,
    /// Optimizer of the updates.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "momentum")]
    pub optimizer: OptimizerArg,
    /// Learning rate.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.01)]
    pub lr: f32,
    /// Run no kernel and move no data: measures the runtime's own overhead.
    #[arg(long)]
    pub empty_kernels: bool,
    /// Node compute times from a profile written by `ordo profile` of the same graph, for
    /// placing and for the prediction (default: the model is profiled on this machine first,
    /// for about a second).
    #[arg(allow_negative_numbers = true, long, value_name = "FILE", conflicts_with = "roofline")]
    pub profile: Option<PathBuf>,
    /// Cost the nodes with the shipped `cpu` cluster's roofline instead of profiling them
    /// first: faster, but the prediction is an estimate (often several times too fast).
    #[arg(long)]
    pub roofline: bool,
    /// Untimed steps (on a copy of the state, so the losses are unchanged) run this long before
    /// the measured ones: a cold process, and a virtual machine's idle cores, run the first
    /// tens of milliseconds several times slower.
    #[arg(allow_hyphen_values = true, long, default_value = "0.3s", value_name = "TIME")]
    pub warmup_seconds: String,
    /// Write the last step as a Chrome trace, in the simulator's format.
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Write the simulator's prediction of the step as a Chrome trace, to lay beside `--trace`.
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.json")]
    pub predicted_trace: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The number of devices in `cpu:N` or `N`.
fn parse_devices(text: &str) -> anyhow::Result<usize> {
    let count = text.strip_prefix("cpu:").unwrap_or(text);
    match count.parse::<usize>() {
        Ok(n) => device_count("--devices", n),
        _ => bail!("--devices {text}: expected `cpu:N` with N at least 1"),
    }
}

/// `n` devices asked for by `option`: at least 1, at most [`ordo::MAX_DEVICES`].
fn device_count(option: &str, n: usize) -> anyhow::Result<usize> {
    let max = ordo::MAX_DEVICES;
    if n == 0 || n > max {
        bail!("{option} {n}: expected from 1 to {max} devices");
    }
    Ok(n)
}

/// What is executed: the problem, its plan and how it was made.
struct Prepared {
    problem: ordo::Problem,
    planned: ordo::Planned,
    label: String,
    /// Each device's memory budget (`--memory`).
    budget: Option<u64>,
}

/// The strategy the options ask for, checked before the model is loaded.
fn strategy_spec(args: &Args) -> anyhow::Result<StrategySpec> {
    if ordo::granularity(&args.pipeline.granularity)? == ordo::Granularity::Block {
        bail!(
            "--granularity block: a run executes every node's kernel; a pipeline planned per \
             block is for predictions (`ordo simulate`)"
        );
    }
    let kind = if args.pipeline.pipeline.is_some() {
        StrategyKind::Pipeline
    } else if args.data_parallel.is_some() {
        StrategyKind::DataParallel
    } else if args.schedule.is_some() {
        StrategyKind::OneDevice
    } else {
        StrategyKind::Placed(args.search.placer(&args.algo, &PlaceOptions::default())?)
    };
    let bucket_bytes = match args.data_parallel {
        Some(_) => {
            ordo::parse_bytes(&args.bucket).with_context(|| format!("--bucket {}", args.bucket))?
        }
        None => 0,
    };
    let pipeline = &args.pipeline;
    let params = StrategyParams {
        schedule: args.schedule.map(|arg| arg.0),
        stages: pipeline.pipeline,
        micro_batches: pipeline.pipeline.map(|_| pipeline.micro_batches),
        modulo: pipeline.modulo,
        replicas: args.data_parallel,
        first_k: args.first_k,
        bucket_bytes,
        steps: args.unroll,
        defer: args.defer,
        order: match args.order {
            OrderArg::Plan => TaskOrder::Placer,
            OrderArg::Model => TaskOrder::Model,
        },
        ..StrategyParams::default()
    };
    Ok(StrategySpec::new(kind, &params)?)
}

/// What the plan runs, in words (a placement's is made once it is placed).
fn label(spec: &StrategySpec) -> String {
    match spec {
        StrategySpec::Pipeline(pipeline) => format!(
            "{}-stage pipeline, {} micro-batches, {}{}",
            pipeline.stages,
            pipeline.micro_batches,
            pipeline.schedule.name(),
            pipeline.modulo.map_or(String::new(), |m| format!(", modulo {m}"))
        ),
        StrategySpec::DataParallel { replicas, schedule, first_k, bucket_bytes, steps, .. } => {
            let mut label = format!("{replicas} data-parallel replicas, {}", schedule.name());
            if *first_k > 0 {
                label.push_str(&format!(", reverse first-{first_k}"));
            }
            if *bucket_bytes > 0 {
                label.push_str(&format!(", buckets of {}", bytes(*bucket_bytes)));
            }
            if *steps > 1 {
                label.push_str(&format!(", {steps} steps a run"));
            }
            label
        }
        StrategySpec::OneDevice(schedule) => format!("one device, {}", schedule.name()),
        StrategySpec::Steady { layers, steps, .. } => {
            format!("one device, ooo, {layers} layers deferred, {steps} steps a run")
        }
        StrategySpec::Placed { .. } => String::new(),
    }
}

fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    let spec = strategy_spec(args)?;
    let devices = match (args.data_parallel, args.pipeline.pipeline) {
        (Some(n), _) => device_count("--data-parallel", n)?,
        (None, Some(n)) => device_count("--pipeline", n)?,
        (None, None) => parse_devices(&args.devices)?,
    };
    if let StrategySpec::OneDevice(schedule) | StrategySpec::Steady { schedule, .. } = &spec
        && devices != 1
    {
        bail!(
            "--schedule {} runs on one device; give --devices cpu:1 (or --data-parallel N \
             for one replica per device)",
            schedule.name()
        );
    }
    // A pipeline runs the model built for one micro-batch, copied once per micro-batch.
    let size = match args.pipeline.pipeline {
        Some(_) => args.pipeline.micro_batch_size(&args.target, args.size.clone(), None)?,
        None => args.size.clone(),
    };
    let forward = source::load(&args.target, size.clone())?;
    forward.require_graph("ordo run needs a model with kernels")?;
    // The runtime runs the graph itself: its memory as the graph says (a training graph's
    // updates in place), or the forward pass alone.
    let mode = if args.train { StepMode::TrainingGraph } else { StepMode::ForwardOnly };
    let model = if args.train {
        forward.training(args.optimizer.into(), args.loss.map(Into::into))?
    } else {
        forward
    };
    model.check_kernels().with_context(|| format!("preparing `{}`", args.target))?;
    let cpu = ordo::cluster("cpu").context("the shipped `cpu` cluster")?;
    let budget = args.memory.as_deref().map(crate::placing::memory_option).transpose()?;
    let comm = cpu.comm(0, 1);
    let profile = match &args.profile {
        Some(path) => Some(ordo::Profile::read(path)?),
        None if args.roofline || args.empty_kernels => None,
        None => {
            let options = ProfileOptions {
                mode: ProfileMode::Runtime,
                settings: RunSettings { seed: args.search.seed, ..RunSettings::default() },
                ..ProfileOptions::default()
            };
            // What a second device or worker costs is measured only where there is one.
            let several = devices > 1
                || args.workers > 1
                || args.pipeline.pipeline.is_some()
                || args.data_parallel.is_some();
            let batch = crate::commands::profile::batch_of(&args.target, size);
            Some(crate::commands::profile::measure(&model, batch, options, several)?)
        }
    };
    let problem_on = |n: usize| -> anyhow::Result<ordo::Problem> {
        let target =
            Target::uniform(n, budget.unwrap_or(u64::MAX))?.costed_by(cpu.clone()).with_comm(comm);
        let target = match &profile {
            Some(profile) => target.with_profile(profile.clone()),
            None => target,
        };
        ordo::Problem::new(&model, &target, mode).with_context(|| match &args.profile {
            Some(path) => format!("costing `{}` with {}", model.name(), path.display()),
            None => format!("preparing `{}`", model.name()),
        })
    };
    let problem = problem_on(spec.devices().unwrap_or(devices))?;
    let strategy = spec.strategy(&problem)?;
    let planned = with_spinner("planning", |_| ordo::plan(&problem, &strategy))
        .with_context(|| format!("planning `{}`", model.name()))?;
    let label = match &planned.placed {
        Some(placed) => format!("placed with {} on {devices} CPU devices", placed.placement.algo),
        None => label(&spec),
    };
    Ok(Prepared { problem, planned, label, budget })
}

/// Places, schedules, runs the steps and reports.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.steps == 0 {
        bail!("--steps must be at least 1");
    }
    // Checked before the model is profiled and planned, which can take seconds.
    let warmup_seconds = crate::placing::seconds("--warmup-seconds", &args.warmup_seconds)?;
    let Prepared { problem, planned, label, budget } = prepare(args)?;
    let plan = &planned.plan;
    let settings = RunSettings {
        seed: args.search.seed,
        hyper: ordo::Hyper { lr: args.lr, ..Default::default() },
        training: true,
    };
    let options = EngineOptions {
        sync: match args.sync {
            SyncArg::Events => ordo::Sync::Events,
            SyncArg::DeviceWait => ordo::Sync::DeviceWait,
        },
        workers_per_device: args.workers,
        memory_budget: vec![budget; plan.devices],
        empty_kernels: args.empty_kernels,
        settings,
    };
    // A steady-state plan makes several training steps a run; times are per training step.
    let per_run = planned.steps;
    if !args.steps.is_multiple_of(per_run) {
        bail!("--steps {} must be a multiple of --unroll {per_run}", args.steps);
    }
    let mut runner = ordo::Runner::new(&problem, &planned, options)
        .with_context(|| format!("preparing `{}`", args.target))?;
    let mut predicted = runner.predict().context("simulating the plan")?;
    let params = runner.parameters().len();
    let from_file = runner.parameters_from_file().map(|(loaded, _)| loaded);
    predicted.step_time_us /= per_run as f64;
    let warmup_steps =
        with_spinner("warming up", |_| runner.warm_up(warmup_seconds)).context("warming up")?;
    let mut runs: Vec<StepRun> = Vec::with_capacity(args.steps / per_run);
    let mut losses = Vec::with_capacity(args.steps);
    with_spinner("running", |bar| -> anyhow::Result<()> {
        for step in (per_run..=args.steps).step_by(per_run) {
            let ordo::StepResult { loss, losses: of_run, run } =
                runner.step().with_context(|| format!("step {step}"))?;
            bar.set_message(format!("steps, loss {loss:.4}"));
            crate::progress::set_counts(bar, step, args.steps);
            losses.extend(of_run);
            runs.push(run);
        }
        Ok(())
    })?;
    let mut walls: Vec<f64> = runs.iter().map(|r| r.wall_us / per_run as f64).collect();
    walls.sort_by(f64::total_cmp);
    let measured = walls[walls.len() / 2];
    let last = runs.last().expect("at least one step");
    if let Some(path) = &args.trace {
        crate::format::write_file_io(
            path,
            ordo::chrome_trace_json(plan, &ordo::measured_report(last)),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.predicted_trace {
        crate::format::write_file_io(path, ordo::chrome_trace_json(plan, &predicted))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let value = json!({
            "model": args.target,
            "plan": label,
            "devices": plan.devices,
            "tasks": plan.tasks.len(),
            "losses": losses,
            "step_us": runs.iter().map(|r| r.wall_us / per_run as f64).collect::<Vec<_>>(),
            "measured_step_us": measured,
            "warmup_steps": warmup_steps * per_run,
            "costs": problem.costs,
            "predicted_step_us": predicted.step_time_us,
            "peak_memory_bytes": last.peak_memory_bytes,
            "predicted_peak_memory_bytes": predicted.peak_memory_bytes,
            "parameters": params,
            "parameters_from_file": from_file,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("ran `{}`: {label}, {} tasks, {} step(s)", args.target, plan.tasks.len(), args.steps);
    if params > 0 {
        let start = match from_file {
            None => format!("{params} parameters, seeded"),
            Some(0) => format!("{params} parameters, seeded (the model file holds no values)"),
            Some(n) if n == params => format!("{params} parameters, from the model file"),
            Some(n) => format!("{n} of {params} parameters from the model file, the others seeded"),
        };
        println!("start from    {start}");
    }
    if !args.empty_kernels {
        let shown: Vec<String> = losses.iter().map(|l| format!("{l:.4}")).collect();
        println!("loss          {}", shown.join(" "));
    }
    println!(
        "step time     {:.3} ms measured (median of {} after {} untimed warm-up), {:.3} ms \
         predicted",
        measured / 1e3,
        runs.len() * per_run,
        warmup_steps * per_run,
        predicted.step_time_us / 1e3
    );
    println!("costs         {}", problem.costs);
    if let Some(spread) = problem.cost_spread.filter(|&s| s > ordo::profiling::WIDE_SPREAD) {
        println!(
            "warning: the machine's speed varied by {:.0}% while profiling; the prediction may be \
             off by as much (run again on an idle machine)",
            spread * 100.0
        );
    }
    let mut table = Table::new(&["device", "peak memory", "predicted"]);
    for d in 0..plan.devices {
        table.row(vec![
            d.to_string(),
            bytes(last.peak_memory_bytes[d]),
            bytes(predicted.peak_memory_bytes.get(d).copied().unwrap_or(0)),
        ]);
    }
    print!("{}", table.render());
    for path in args.trace.iter().chain(&args.predicted_trace) {
        println!("wrote {}", path.display());
    }
    Ok(())
}
