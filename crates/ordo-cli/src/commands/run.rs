//! `ordo run MODEL --devices cpu:N`: place, schedule and execute training steps on CPU
//! devices with real kernels, next to the simulator's prediction of the same plan.

use std::path::PathBuf;

use anyhow::{Context, bail};
use ordo_cost::StepMode;
use ordo_exec::{EngineOptions, Executable, Feeds, Program, RunSettings, StepRun, TrainState};
use ordo_place::{Devices, PlaceOptions, PlaceProblem, Placement};
use ordo_sched::{DataParallel, Plan};
use serde_json::json;

use crate::commands::simulate::ScheduleArg;
use crate::format::{Table, bytes};
use crate::placing::{Loaded, OptimizerArg, SearchArgs};
use crate::source::{self, SizeArgs, Source};

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
    #[arg(long, default_value = "cpu:1")]
    pub devices: String,
    /// Placement algorithm (see `ordo place --help`).
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// `--budget` of `--algo auto`; `--seed` also seeds the initial parameters, the synthetic
    /// inputs and dropout.
    #[command(flatten)]
    pub search: SearchArgs,
    /// Run training steps (forward, backward, update) instead of forward passes.
    #[arg(long)]
    pub train: bool,
    /// Number of steps.
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// With `--train` on one device: `inorder` or `ooo` (dW and updates on a sub-stream)
    /// instead of a placement; with `--data-parallel`, each replica's schedule.
    #[arg(long, value_enum, requires = "train")]
    pub schedule: Option<ScheduleArg>,
    /// With `--train`: one replica per device, gradients all-reduced (`--batch` is each
    /// replica's).
    #[arg(long, value_name = "N", requires = "train", conflicts_with = "devices")]
    pub data_parallel: Option<usize>,
    /// Cross-stream synchronisation.
    #[arg(long, value_enum, default_value = "events")]
    pub sync: SyncArg,
    /// Order of each device's tasks.
    #[arg(long, value_enum, default_value = "plan")]
    pub order: OrderArg,
    /// Worker threads per device.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Memory budget of each device, e.g. `512MiB` (default: unlimited).
    #[arg(long)]
    pub memory: Option<String>,
    /// With `--train` on a forward graph without a loss (an ONNX export): the loss to add.
    #[arg(long, value_enum, requires = "train")]
    pub loss: Option<crate::onnx::LossArg>,
    /// Optimizer of the updates.
    #[arg(long, value_enum, default_value = "momentum")]
    pub optimizer: OptimizerArg,
    /// Learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub lr: f32,
    /// Run no kernel and move no data: measures the runtime's own overhead.
    #[arg(long)]
    pub empty_kernels: bool,
    /// Node compute times from a profile written by `ordo profile` of the same graph (default:
    /// the shipped `cpu` cluster's roofline), for placing and for the prediction.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Write the last step as a Chrome trace, in the simulator's format.
    #[arg(long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Write the simulator's prediction of the step as a Chrome trace, to lay beside `--trace`.
    #[arg(long, value_name = "OUT.json")]
    pub predicted_trace: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The number of devices in `cpu:N` or `N`.
fn parse_devices(text: &str) -> anyhow::Result<usize> {
    let count = text.strip_prefix("cpu:").unwrap_or(text);
    match count.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("--devices {text}: expected `cpu:N` with N at least 1"),
    }
}

/// What is executed: the program, its plan and how it was made.
struct Prepared {
    program: Program,
    plan: Plan,
    replicas: usize,
    label: String,
    /// What the runtime spends on a step outside its tasks, as the profile measured it.
    step_overhead_us: f64,
    /// Each device's memory budget (`--memory`).
    budget: Option<u64>,
}

fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    if args.order == OrderArg::Model && (args.data_parallel.is_some() || args.schedule.is_some()) {
        bail!("--order model applies to placed plans, not to --schedule or --data-parallel");
    }
    let devices = match args.data_parallel {
        Some(n) => n,
        None => parse_devices(&args.devices)?,
    };
    let forward = match source::load(&args.target, args.size)? {
        Source::Model(graph) => *graph,
        Source::CostGraph { path, .. } => {
            bail!("ordo run needs a model with kernels; {} is a cost graph", path.display())
        }
    };
    // The runtime runs the graph itself: its memory as the graph says (a training graph's
    // updates in place), or the forward pass alone.
    let mode = if args.train { StepMode::TrainingGraph } else { StepMode::ForwardOnly };
    let mut graph = if args.train {
        crate::placing::training_graph(&forward, args.optimizer.into(), args.loss)?
    } else {
        forward.clone()
    };
    let profile = args.profile.as_deref().map(ordo_cost::Profile::read).transpose()?;
    let cpu = ordo_cost::Cluster::builtin("cpu").context("the shipped `cpu` cluster")?;
    let budget = match &args.memory {
        Some(text) => {
            Some(ordo_cost::parse_bytes(text).with_context(|| format!("--memory {text}"))?)
        }
        None => None,
    };
    let memory = budget.unwrap_or(u64::MAX);
    let comm = profile.as_ref().and_then(ordo_cost::Profile::comm).unwrap_or(cpu.comm(0, 1));
    let problem_on = |n: usize| -> anyhow::Result<PlaceProblem> {
        let mut cost = ordo_cost::costgraph_for_cluster(&graph, &cpu);
        if let (Some(profile), Some(path)) = (&profile, &args.profile) {
            ordo_cost::apply_profile(&mut cost, profile)
                .with_context(|| format!("costing `{}` with {}", graph.name, path.display()))?;
        }
        let devices = Devices { memory: vec![memory; n], comm };
        PlaceProblem::new(&cost, devices, mode)
            .with_context(|| format!("preparing `{}`", graph.name))
    };
    let one_device = |schedule: Option<ScheduleArg>| -> anyhow::Result<_> {
        Ok(schedule
            .map(ScheduleArg::one_device)
            .transpose()?
            .unwrap_or(ordo_sched::OneDeviceSchedule::InOrder))
    };
    let (plan, replicas, label) = if let Some(replicas) = args.data_parallel {
        let schedule = one_device(args.schedule)?;
        let config =
            DataParallel { replicas, network: comm, bucket_bytes: 0, first_k: 0, schedule };
        let plan = ordo_sched::data_parallel_plan(&problem_on(1)?, &config, 1)?;
        ordo_exec::scale_backward_seed(&mut graph, 1.0 / replicas as f64);
        (plan, replicas, format!("{replicas} data-parallel replicas, {}", schedule.name()))
    } else if let Some(schedule) = args.schedule {
        if devices != 1 {
            bail!("--schedule {schedule:?} runs on one device; give --devices cpu:1");
        }
        let schedule = schedule.one_device()?;
        let plan = ordo_sched::one_device_plan(&problem_on(1)?, schedule)?;
        (plan, 1, format!("one device, {}", schedule.name()))
    } else {
        let loaded = Loaded {
            problem: problem_on(devices)?,
            label: graph.name.clone(),
            devices_label: format!("{devices} CPU devices"),
        };
        let mut placement =
            loaded.place(&args.algo, &PlaceOptions::default(), &args.search)?.placement;
        if args.order == OrderArg::Model {
            in_model_order(&mut placement);
        }
        let plan = ordo_sched::build_plan(&loaded.problem, &placement)
            .with_context(|| format!("scheduling `{}`", loaded.label))?;
        (plan, 1, format!("placed with {} on {devices} CPU devices", placement.algo))
    };
    let program = Program::new(graph).with_context(|| format!("preparing `{}`", args.target))?;
    let step_overhead_us = profile.and_then(|p| p.step_overhead_us).unwrap_or(0.0);
    Ok(Prepared { program, plan, replicas, label, step_overhead_us, budget })
}

/// Each device runs its nodes in the model's order (node ids, a topological order), and the
/// transfers in the order that follows from it.
fn in_model_order(placement: &mut Placement) {
    for order in &mut placement.order {
        order.sort_unstable();
    }
    placement.transfers = None;
}

/// Places, schedules, runs the steps and reports.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let Prepared { program, plan, replicas, label, step_overhead_us, budget } = prepare(args)?;
    let mut predicted = predict(&plan, args.workers).context("simulating the plan")?;
    // What the runtime spends on a step outside its tasks, where the profile measured it.
    predicted.step_time_us += step_overhead_us;
    let settings = RunSettings {
        seed: args.search.seed,
        hyper: ordo_exec::cpu::Hyper { lr: args.lr, ..Default::default() },
        training: true,
    };
    let options = EngineOptions {
        sync: match args.sync {
            SyncArg::Events => ordo_exec::Sync::Events,
            SyncArg::DeviceWait => ordo_exec::Sync::DeviceWait,
        },
        workers_per_device: args.workers,
        memory_budget: vec![budget; plan.devices],
        empty_kernels: args.empty_kernels,
        settings,
    };
    let exe = Executable::new(program.clone(), &plan, options).context("binding the plan")?;
    let mut state = TrainState::new(&program, args.search.seed)?;
    let feeds: Vec<Feeds> = (0..replicas)
        .map(|r| ordo_exec::synthetic_feeds(program.graph(), args.search.seed + r as u64))
        .collect::<Result<_, _>>()?;
    let mut runs: Vec<StepRun> = Vec::with_capacity(args.steps);
    let mut losses = Vec::with_capacity(args.steps);
    crate::progress::with_spinner("running", |bar| -> anyhow::Result<()> {
        for step in 1..=args.steps {
            let run = exe.run_step(&mut state, &feeds).with_context(|| format!("step {step}"))?;
            let loss = mean_loss(&run);
            bar.set_message(format!("step {step}/{}, loss {loss:.4}", args.steps));
            losses.push(loss);
            runs.push(run);
        }
        Ok(())
    })?;
    let mut walls: Vec<f64> = runs.iter().map(|r| r.wall_us).collect();
    walls.sort_by(f64::total_cmp);
    let measured = walls[walls.len() / 2];
    let last = runs.last().expect("at least one step");
    if let Some(path) = &args.trace {
        std::fs::write(path, ordo_sim::chrome_trace_json(&plan, &measured_report(last)))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.predicted_trace {
        std::fs::write(path, ordo_sim::chrome_trace_json(&plan, &predicted))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let value = json!({
            "model": args.target,
            "plan": label,
            "devices": plan.devices,
            "tasks": plan.tasks.len(),
            "losses": losses,
            "step_us": runs.iter().map(|r| r.wall_us).collect::<Vec<_>>(),
            "measured_step_us": measured,
            "predicted_step_us": predicted.step_time_us,
            "peak_memory_bytes": last.peak_memory_bytes,
            "predicted_peak_memory_bytes": predicted.peak_memory_bytes,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("ran `{}`: {label}, {} tasks, {} step(s)", args.target, plan.tasks.len(), args.steps);
    if !args.empty_kernels {
        let shown: Vec<String> = losses.iter().map(|l| format!("{l:.4}")).collect();
        println!("loss          {}", shown.join(" "));
    }
    println!(
        "step time     {:.3} ms measured (median), {:.3} ms predicted",
        measured / 1e3,
        predicted.step_time_us / 1e3
    );
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

/// The simulator's prediction of `plan` run with `workers` compute threads per device: each
/// kernel or copy then keeps one thread, `1 / workers` of its device, busy, and tasks of
/// different streams run side by side up to `workers` at a time (the simulator's concurrent
/// kernels, sharing by occupancy); a transfer is a copy made by a worker of the sending device
/// (the simulator's host channel).
fn predict(plan: &Plan, workers: usize) -> Result<ordo_sim::Report, ordo_sim::SimError> {
    let mut plan = plan.clone();
    if workers > 1 {
        for task in &mut plan.tasks {
            if let ordo_sched::TaskKind::Compute { .. } | ordo_sched::TaskKind::Transfer { .. } =
                task.kind
            {
                task.occupancy = 1.0 / workers as f64;
            }
        }
    }
    let options =
        ordo_sim::SimOptions { concurrent_kernels: workers > 1, channel: ordo_sim::Channel::Host };
    ordo_sim::simulate(&plan, &options)
}

/// The mean of the replicas' losses (NaN when the step computed none).
fn mean_loss(run: &StepRun) -> f32 {
    let losses: Vec<f32> = run.outputs.iter().filter_map(|o| o.loss()).collect();
    if losses.is_empty() {
        return f32::NAN;
    }
    losses.iter().sum::<f32>() / losses.len() as f32
}

/// A measured step in the simulator's report form, so that it draws as the same trace.
fn measured_report(run: &StepRun) -> ordo_sim::Report {
    ordo_sim::Report {
        step_time_us: run.wall_us,
        lower_bound_us: 0.0,
        peak_memory_bytes: run.peak_memory_bytes.clone(),
        busy_fraction: ordo_sim::BusyFraction {
            devices: Vec::new(),
            links: Vec::new(),
            collectives: 0.0,
        },
        tasks: run
            .tasks
            .iter()
            .map(|t| ordo_sim::TaskTiming {
                name: String::new(),
                start_us: t.start_us,
                finish_us: t.finish_us,
            })
            .collect(),
        memory_timeline: Vec::new(),
        critical_path: Vec::new(),
    }
}
