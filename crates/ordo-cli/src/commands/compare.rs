//! `ordo compare MODEL|COSTGRAPH --devices N`: every algorithm side by side.

use std::path::PathBuf;

use ordo::PlaceOptions;
use serde_json::json;

use crate::commands::data_parallel::{self, DataParallelArgs};
use crate::commands::pipeline::{self, PipelineArgs};
use crate::commands::simulate::ChannelArg;
use crate::format::{Table, bytes};
use crate::placing::{ProblemArgs, mode_label};
use crate::progress::with_spinner;

/// Arguments of `ordo compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Transfer contention model of the simulated step time.
    #[arg(allow_negative_numbers = true, long, value_enum, default_value = "tf")]
    pub channel: ChannelArg,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the comparison as an SVG bar chart: step time and peak memory per
    /// algorithm (or per pipeline schedule), with the lower bound and the memory limit.
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
    /// With `--train`: compare the one-device training schedules (inorder, ooo) on device 0
    /// instead of the placers.
    #[arg(long, requires = "train")]
    pub schedules: bool,
    /// With `--schedules`: let kernels of different streams of the device run at once.
    #[arg(long, requires = "schedules")]
    pub concurrent_kernels: bool,
    #[command(flatten)]
    pub data_parallel: DataParallelArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub search: crate::placing::SearchArgs,
}

/// One compared algorithm, as the table and the JSON show it.
struct Row {
    algo: String,
    placement: Result<ordo::Placement, String>,
    simulated: Result<f64, String>,
    note: String,
}

impl Row {
    fn of(result: ordo::PlacerResult) -> Self {
        let ordo::PlacerResult { placer, outcome } = result;
        match outcome {
            Ok((placed, simulated)) => Row {
                algo: placer,
                simulated: simulated.map_err(|e| e.to_string()),
                note: placed.auto.as_ref().map_or_else(String::new, |auto| {
                    format!(
                        "from {}, {} moves, search {:.2} s",
                        auto.winner, auto.moves, auto.search_seconds
                    )
                }),
                placement: Ok(placed.placement),
            },
            Err(e) => Row {
                algo: placer,
                placement: Err(e.to_string()),
                simulated: Err(e.to_string()),
                note: String::new(),
            },
        }
    }
}

/// Runs every algorithm and prints one row each.
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(stages) = args.pipeline.pipeline {
        let dp = &args.data_parallel;
        let loaded = args.pipeline.micro_batch_problem(&args.problem, dp.data_parallel)?.load()?;
        let replicas = dp.pipeline_replicas(&loaded, stages)?;
        let options = ordo::SimOptions { channel: args.channel.into(), ..Default::default() };
        return pipeline::compare(
            &loaded,
            &args.pipeline,
            replicas.as_ref(),
            &options,
            args.json,
            args.svg.as_deref(),
        );
    }
    let loaded = args.data_parallel.replica_problem(&args.problem).load()?;
    if args.schedules {
        return crate::commands::schedules::run(&loaded, args.concurrent_kernels, args.json);
    }
    let options = ordo::SimOptions { channel: args.channel.into(), ..Default::default() };
    if let Some(replicas) = args.data_parallel.data_parallel {
        return data_parallel::compare(&loaded, &args.data_parallel, replicas, &options, args.json);
    }
    let problem = loaded.place_problem();
    let auto_options = ordo::AutoOptions {
        budget_seconds: args.search.budget_seconds()?,
        seed: args.search.seed,
        place: PlaceOptions::default(),
        reproducible: args.search.reproducible,
    };
    let results: Vec<Row> = with_spinner("comparing placers", |bar| {
        let mut progress = |progress: ordo::CompareProgress<'_>| match progress {
            ordo::CompareProgress::Placing { algo, index, of } => {
                bar.set_message(format!("placing with {algo}"));
                crate::progress::set_counts(bar, index, of);
            }
            ordo::CompareProgress::Auto(p) => crate::progress::show_auto(bar, p),
        };
        ordo::compare_placers(&loaded.problem, &auto_options, &options, &mut progress)
    })
    .into_iter()
    .map(Row::of)
    .collect();
    let lower_bound = loaded.problem.lower_bound_us();
    let written = match &args.svg {
        Some(path) => {
            let bars: Vec<ordo::CompareBar> = results
                .iter()
                .map(|row| ordo::CompareBar {
                    name: row.algo.clone(),
                    result: row.placement.clone().and_then(|p| {
                        let peak = p.peak_memory_bytes.iter().copied().max().unwrap_or(0);
                        row.simulated.clone().map(|us| (us, peak))
                    }),
                })
                .collect();
            let title = format!(
                "{} on {}: simulated step and peak memory per placer",
                loaded.label, loaded.devices_label
            );
            let limit = problem.devices.memory.iter().copied().min();
            let svg = ordo::compare_svg(&title, &bars, lower_bound as f64, limit);
            crate::format::write_file(path, svg.as_bytes())?;
            Some(path)
        }
        None => None,
    };
    if args.json {
        let rows: Vec<_> = results
            .iter()
            .map(|row| match &row.placement {
                Ok(p) => {
                    let mut out = serde_json::to_value(ordo::placement_file(problem, p))
                        .expect("a placement serialises");
                    out["simulated_step_us"] = match &row.simulated {
                        Ok(us) => json!(us),
                        Err(e) => json!({ "error": e }),
                    };
                    if !row.note.is_empty() {
                        out["note"] = json!(row.note);
                    }
                    out
                }
                Err(e) => json!({"algo": row.algo, "error": e}),
            })
            .collect();
        let out = json!({
            "target": loaded.label,
            "costs": loaded.problem.costs,
            "devices": problem.devices.count(),
            "lower_bound_us": lower_bound,
            "simple_lower_bound_us": problem.simple_lower_bound_us(),
            "results": rows,
        });
        println!("{out:#}");
        return some_placed(&results, &loaded.label);
    }
    println!("{} ({} nodes) on {}", loaded.label, problem.len(), loaded.devices_label);
    println!("memory model  {}", mode_label(problem.mode));
    println!("costs         {}", loaded.problem.costs);
    println!(
        "lower bound   {:.2} ms (critical path and work alone {:.2} ms)",
        lower_bound as f64 / 1e3,
        problem.simple_lower_bound_us() as f64 / 1e3
    );
    let mut table = Table::new(&[
        "algorithm",
        "place ms",
        "step ms",
        "simulated ms",
        "vs bound",
        "max peak memory",
        "note",
    ]);
    for Row { algo, placement, simulated, note } in &results {
        match placement {
            Ok(p) => table.row(vec![
                algo.clone(),
                format!("{:.1}", p.placement_seconds * 1e3),
                format!("{:.2}", p.makespan_us as f64 / 1e3),
                simulated
                    .as_ref()
                    .map_or_else(|e| format!("error: {e}"), |us| format!("{:.2}", us / 1e3)),
                format!("{:.2}x", p.makespan_us as f64 / lower_bound.max(1) as f64),
                bytes(p.peak_memory_bytes.iter().copied().max().unwrap_or(0)),
                note.clone(),
            ]),
            Err(e) => table.row(vec![
                algo.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                e.to_string(),
            ]),
        }
    }
    print!("{}", table.render());
    if let Some(path) = written {
        println!("wrote {}", path.display());
    }
    some_placed(&results, &loaded.label)
}

/// An error (the command fails) when no placer placed `label`, with the first one's reason:
/// the table says why each failed, and the exit status says that nothing was placed.
fn some_placed(results: &[Row], label: &str) -> anyhow::Result<()> {
    if let Some(Err(first)) = results.first().map(|row| &row.placement)
        && results.iter().all(|row| row.placement.is_err())
    {
        anyhow::bail!("no placer placed `{label}`: {first}");
    }
    Ok(())
}
