//! `ordo simulate MODEL|COSTGRAPH|PLAN`: predict a step's time, utilisation and memory.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ordo::PlaceOptions;
use ordo::{Channel, Report, SimOptions};
use ordo::{OneDeviceSchedule, PipelineSchedule, Plan};

use crate::commands::data_parallel::{self, DataParallelArgs};
use crate::commands::pipeline::{self, PipelineArgs};
use crate::format::{Table, bytes};
use crate::placing::ProblemArgs;
use crate::progress::with_spinner;
use ordo::Strategy;

/// Transfer contention model.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ChannelArg {
    /// One channel per device shared by sends and receives (Baechi's TensorFlow simulator).
    Tf,
    /// Independent tx and rx, no contention (Baechi's PyTorch simulator).
    Pytorch,
    /// Full duplex per link, receptions at one device serialised.
    Duplex,
    /// CPU devices: a transfer is a copy that holds the sending device like a kernel.
    Host,
}

impl From<ChannelArg> for Channel {
    fn from(arg: ChannelArg) -> Self {
        match arg {
            ChannelArg::Tf => Channel::BaechiTf,
            ChannelArg::Pytorch => Channel::BaechiPytorch,
            ChannelArg::Duplex => Channel::Duplex,
            ChannelArg::Host => Channel::Host,
        }
    }
}

/// A training schedule: one device's (or each data-parallel replica's), or a pipeline's; the
/// facade's schedules by their names, with their descriptions as help.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleArg(pub ordo::Schedule);

impl clap::ValueEnum for ScheduleArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ScheduleArg; 7] = {
            let all = ordo::Schedule::ALL;
            [
                ScheduleArg(all[0]),
                ScheduleArg(all[1]),
                ScheduleArg(all[2]),
                ScheduleArg(all[3]),
                ScheduleArg(all[4]),
                ScheduleArg(all[5]),
                ScheduleArg(all[6]),
            ]
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name()).help(self.0.description()))
    }
}

/// Arguments of `ordo simulate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model, a cost-graph file, or a plan file written by `ordo plan --json`.
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// With a plan file: check that the plan runs this graph (a zoo model or a cost-graph
    /// file, sized by `--batch` and `--seq-len`) before simulating it.
    #[arg(allow_negative_numbers = true, long, value_name = "MODEL|COSTGRAPH")]
    pub graph: Option<String>,
    /// With `--train`: run the training graph on device 0 with this schedule (`inorder`,
    /// `ooo`) instead of placing it; with `--data-parallel`, how each replica runs its weight
    /// gradients; with `--pipeline`, the pipeline's schedule (default `fast-forward`).
    #[arg(allow_negative_numbers = true, long, value_enum, requires = "train")]
    pub schedule: Option<ScheduleArg>,
    /// With `--schedule inorder|ooo`: report the steady state (what one more step of a long
    /// run adds: step 3 minus step 2 of a three-step plan, as `compare --schedules` does)
    /// instead of one step from an empty start.
    #[arg(long, requires = "schedule")]
    pub steady_state: bool,
    #[command(flatten)]
    pub data_parallel: DataParallelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Placement algorithm when the target is not a plan.
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub algo: String,
    #[command(flatten)]
    pub search: crate::placing::SearchArgs,
    /// How transfers contend.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "tf")]
    pub channel: ChannelArg,
    /// Let kernels of different streams of one device run at once, sharing it by occupancy:
    /// kernels that together fill at most the whole device run at full speed.
    #[arg(long)]
    pub concurrent_kernels: bool,
    /// Write a Chrome trace (open it in Perfetto or chrome://tracing).
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.json")]
    pub trace: Option<PathBuf>,
    /// Write an SVG Gantt chart, and `<stem>-memory-<device>.svg` memory plots beside it.
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Places (unless given a plan), schedules, simulates and reports.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let options =
        SimOptions { concurrent_kernels: args.concurrent_kernels, channel: args.channel.into() };
    let drawings = Drawings { trace: args.trace.clone(), svg: args.svg.clone() };
    if let Some(replicas) = args.data_parallel.data_parallel
        && args.pipeline.pipeline.is_none()
    {
        let loaded = args.data_parallel.replica_problem(&args.problem).load()?;
        let schedule = match args.schedule {
            Some(schedule) => schedule.0.one_device()?,
            None => OneDeviceSchedule::InOrder,
        };
        let dp = &args.data_parallel;
        return data_parallel::simulate(
            &loaded, dp, replicas, schedule, &options, args.json, &drawings,
        );
    }
    if args.pipeline.pipeline.is_some() {
        let schedule =
            args.schedule.map_or(Ok(PipelineSchedule::FastForward), |arg| arg.0.pipeline())?;
        let dp = &args.data_parallel;
        let loaded = args.pipeline.micro_batch_problem(&args.problem, dp.data_parallel)?.load()?;
        let stages = args.pipeline.pipeline.unwrap_or(0);
        let replicas = dp.pipeline_replicas(&loaded, stages)?;
        return pipeline::simulate(
            &loaded,
            &args.pipeline,
            schedule,
            replicas.as_ref(),
            &options,
            args.json,
            &drawings,
        );
    }
    if args.steady_state {
        return steady_state(args, &options);
    }
    let Loaded { plan, label, placer_estimate, limit, limits, costs } = load_plan(args)?;
    let report = with_spinner("simulating", |_| ordo::simulate_plan(&plan, &options))
        .with_context(|| format!("simulating `{label}`"))?;
    if let Some(limit) = limit
        && report.peak_memory_bytes[0] > limit
    {
        anyhow::bail!(
            "{label} needs {} at its peak, more than device 0's {}",
            bytes(report.peak_memory_bytes[0]),
            bytes(limit)
        );
    }
    let written = drawings.draw(&plan, &report, &label, &limits)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("simulated {label}: {} tasks on {} devices", plan.tasks.len(), plan.devices);
    print_summary(&report, placer_estimate);
    if let Some(costs) = costs {
        println!("costs         {costs}");
    }
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Where to draw a simulated step: a Chrome trace, an SVG Gantt chart (with memory plots
/// beside it).
pub struct Drawings {
    /// The Chrome trace's path.
    pub trace: Option<PathBuf>,
    /// The Gantt chart's path; `<stem>-memory-<device>.svg` beside it.
    pub svg: Option<PathBuf>,
}

impl Drawings {
    /// Whether any drawing is asked for.
    pub fn any(&self) -> bool {
        self.trace.is_some() || self.svg.is_some()
    }

    /// Draws `report` of `plan` as asked, `title` on the chart, each device's memory limit
    /// (`limits`, where known) on its memory plot; every file written.
    pub fn draw(
        &self,
        plan: &Plan,
        report: &Report,
        title: &str,
        limits: &[u64],
    ) -> anyhow::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        if let Some(path) = &self.trace {
            crate::format::write_file_io(path, ordo::chrome_trace_json(plan, report))
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path.clone());
        }
        if let Some(path) = &self.svg {
            written.extend(write_svgs(path, plan, report, title, limits)?);
        }
        Ok(written)
    }
}

/// The plan to simulate and what is known about it.
struct Loaded {
    plan: Plan,
    /// What the plan runs, for messages.
    label: String,
    /// The placer's own estimate, when placed here.
    placer_estimate: Option<u64>,
    /// Device 0's memory, which a one-device schedule must fit.
    limit: Option<u64>,
    /// Every device's memory, where known (drawn on the memory plots).
    limits: Vec<u64>,
    /// Where the node times came from, where known.
    costs: Option<String>,
}

fn load_plan(args: &Args) -> anyhow::Result<Loaded> {
    let target = &args.problem.target;
    if is_plan_file(Path::new(target)) {
        refuse_model_options(args)?;
        let plan = ordo::files::read_plan(target)?;
        if let Some(graph) = &args.graph {
            let devices = args.problem.devices.or(Some(plan.devices.max(1)));
            let problem = ProblemArgs { target: graph.clone(), devices, ..args.problem.clone() };
            let loaded = problem.load()?;
            loaded
                .problem
                .check_plan(&plan)
                .with_context(|| format!("checking plan {target} against `{graph}`"))?;
        }
        return Ok(Loaded {
            plan,
            label: target.clone(),
            placer_estimate: None,
            limit: None,
            limits: Vec::new(),
            costs: None,
        });
    }
    if args.graph.is_some() {
        anyhow::bail!("--graph checks a plan file, but `{target}` is not one");
    }
    let schedule = args.schedule.map(|arg| arg.0.one_device()).transpose()?;
    let loaded = match schedule {
        Some(_) => one_device_problem(&args.problem).load()?,
        None => args.problem.load()?,
    };
    let strategy = match schedule {
        Some(schedule) => Strategy::OneDevice(schedule),
        None => Strategy::placed(args.search.placer(&args.algo, &PlaceOptions::default())?),
    };
    let planned = with_spinner("planning", |_| ordo::plan(&loaded.problem, &strategy))
        .with_context(|| format!("planning `{}`", loaded.label))?;
    Ok(match schedule {
        Some(schedule) => Loaded {
            label: format!(
                "{} on one device, {}, one step from an empty start (`compare --schedules` \
                 reports the steady state)",
                loaded.label,
                schedule.name()
            ),
            placer_estimate: None,
            limit: Some(loaded.place_problem().devices.memory[0]),
            limits: loaded.place_problem().devices.memory.clone(),
            costs: Some(loaded.problem.costs.clone()),
            plan: planned.plan,
        },
        None => {
            let placement = planned.placed.as_ref().map(|placed| &placed.placement);
            Loaded {
                label: format!(
                    "{} placed with {} on {}",
                    loaded.label,
                    placement.map_or("", |p| p.algo.as_str()),
                    loaded.devices_label
                ),
                placer_estimate: placement.map(|p| p.makespan_us),
                limit: None,
                limits: loaded.place_problem().devices.memory.clone(),
                costs: Some(loaded.problem.costs.clone()),
                plan: planned.plan,
            }
        }
    })
}

/// The problem of a one-device schedule: one device when neither --devices nor --cluster
/// says otherwise (it runs on one, so it needs neither).
fn one_device_problem(problem: &ProblemArgs) -> ProblemArgs {
    match (problem.devices, &problem.cluster) {
        (None, None) => ProblemArgs { devices: Some(1), ..problem.clone() },
        _ => problem.clone(),
    }
}

/// `--steady-state`: the one-device schedule's steady state, as `compare --schedules` reports it.
fn steady_state(args: &Args, options: &SimOptions) -> anyhow::Result<()> {
    if args.trace.is_some() || args.svg.is_some() {
        anyhow::bail!("--trace and --svg show one step; --steady-state reports a long run's");
    }
    let schedule = match args.schedule {
        Some(schedule) => schedule.0.one_device()?,
        None => anyhow::bail!("--steady-state applies to --schedule inorder or ooo"),
    };
    let loaded = one_device_problem(&args.problem).load()?;
    let steady = ordo::one_device_steady(&loaded.problem, schedule, options)
        .with_context(|| format!("simulating the steady state of `{}`", loaded.label))?;
    if args.json {
        let value = serde_json::json!({
            "model": loaded.label,
            "schedule": schedule.name(),
            "measures": "steady state",
            "step_time_us": steady.step_time_us,
            "peak_memory_bytes": steady.peak_memory_bytes,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!(
        "simulated {} on one device, {}, steady state (step 3 minus step 2 of a three-step plan)",
        loaded.label,
        schedule.name()
    );
    println!("step time     {:.2} ms", steady.step_time_us / 1e3);
    println!("peak memory   {}", bytes(steady.peak_memory_bytes));
    Ok(())
}

/// A plan fixes its devices, placement and schedule: the options that make them for a model
/// would be ignored, so they are refused (those that size the `--graph` a plan is checked
/// against stay).
fn refuse_model_options(args: &Args) -> anyhow::Result<()> {
    let p = &args.problem;
    let given = [
        ("--devices", p.devices.is_some() && args.graph.is_none()),
        ("--memory", p.memory.is_some()),
        ("--cluster", p.cluster.is_some()),
        ("--profile", p.profile.is_some()),
        ("--train", p.train && args.graph.is_none()),
        ("--forward-only", p.forward_only && args.graph.is_none()),
        ("--algo", args.algo != "auto"),
        ("--schedule", args.schedule.is_some()),
        ("--budget", args.search.budget != "2s"),
        ("--seed", args.search.seed != 0),
        ("--batch", p.size.batch.is_some() && args.graph.is_none()),
        ("--seq-len", p.size.seq_len.is_some() && args.graph.is_none()),
        ("--small", p.size.small && args.graph.is_none()),
    ];
    let ignored: Vec<&str> = given.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    if !ignored.is_empty() {
        anyhow::bail!(
            "{} would be ignored: `{}` is a plan, whose devices, placement and schedule are \
             fixed (simulate the model itself to place it, or give --graph to check the plan \
             against a model of that size)",
            ignored.join(", "),
            p.target
        );
    }
    Ok(())
}

/// Whether `path` is to be read as a plan: a JSON file that is neither a cost graph (which has
/// `nodes`) nor a Hugging Face configuration (which has a `model_type`). A broken or empty file that may have been a plan is then refused by the plan
/// reader, which names the file and the field, rather than taken for a model.
fn is_plan_file(path: &Path) -> bool {
    #[derive(serde::Deserialize)]
    struct Header {
        format: Option<String>,
        nodes: Option<serde::de::IgnoredAny>,
        model_type: Option<serde::de::IgnoredAny>,
    }
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    match serde_json::from_str::<Header>(&text) {
        // A Hugging Face `config.json` (a `model_type`) is a model, as a cost graph is.
        Ok(header) => {
            header.format.is_some_and(|f| f.starts_with("ordo.plan/"))
                || (header.nodes.is_none() && header.model_type.is_none())
        }
        Err(_) => path.extension().is_some_and(|e| e == "json") && !text.contains("\"nodes\""),
    }
}

/// The Gantt chart at `path` and a memory plot per device beside it (`limits`: each device's
/// memory, where known); the files written.
fn write_svgs(
    path: &Path,
    plan: &Plan,
    report: &Report,
    title: &str,
    limits: &[u64],
) -> anyhow::Result<Vec<PathBuf>> {
    crate::format::write_file_io(path, ordo::gantt_svg(plan, report, title))
        .with_context(|| format!("writing {}", path.display()))?;
    let mut written = vec![path.to_path_buf()];
    let stem = path.with_extension("");
    for device in 0..plan.devices {
        if let Some(svg) = ordo::memory_svg(report, device, limits.get(device).copied()) {
            let memory_path = PathBuf::from(format!("{}-memory-{device}.svg", stem.display()));
            crate::format::write_file_io(&memory_path, svg)
                .with_context(|| format!("writing {}", memory_path.display()))?;
            written.push(memory_path);
        }
    }
    Ok(written)
}

fn print_summary(report: &Report, placer_estimate: Option<u64>) {
    let gap = (report.step_time_us / report.lower_bound_us.max(1.0) - 1.0) * 100.0;
    println!(
        "step time     {:.2} ms (lower bound {:.2} ms, gap {gap:.1}%)",
        report.step_time_us / 1e3,
        report.lower_bound_us / 1e3
    );
    if let Some(estimate) = placer_estimate {
        println!("placer said   {:.2} ms", estimate as f64 / 1e3);
    }
    println!(
        "critical path {} tasks, from `{}` to `{}`",
        report.critical_path.len(),
        report.critical_path.first().map_or("", String::as_str),
        report.critical_path.last().map_or("", String::as_str)
    );
    let mut table = Table::new(&["device", "busy", "peak memory"]);
    for (device, busy) in report.busy_fraction.devices.iter().enumerate() {
        table.row(vec![
            device.to_string(),
            format!("{:.1}%", busy * 100.0),
            bytes(report.peak_memory_bytes.get(device).copied().unwrap_or(0)),
        ]);
    }
    print!("{}", table.render());
}
