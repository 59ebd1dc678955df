//! `ordo plan MODEL|COSTGRAPH --devices N --algo A`: place, then schedule streams.

use std::path::PathBuf;

use anyhow::Context;
use ordo::PlaceOptions;
use ordo::{Plan, StreamKind, TaskKind};

use crate::format::Table;
use crate::placing::{ProblemArgs, write_json};

/// Arguments of `ordo plan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Placement algorithm (see `ordo place --help`).
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub algo: String,
    #[command(flatten)]
    pub search: crate::placing::SearchArgs,
    /// Print the plan as JSON on standard output (`ordo.plan/1`), and nothing else.
    #[arg(long)]
    pub json: bool,
    /// Write the plan as JSON to this file (written whole or not at all).
    #[arg(allow_negative_numbers = true, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Places the graph, builds the plan, and prints or writes it.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let loaded = args.problem.load()?;
    let placement = loaded.place(&args.algo, &PlaceOptions::default(), &args.search)?.placement;
    let plan = ordo::plan(&loaded.problem, &ordo::Strategy::Given(placement.clone()))
        .map(|planned| planned.plan)
        .with_context(|| format!("scheduling `{}`", loaded.label))?;
    if let Some(path) = &args.out {
        write_json(path, &plan)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    println!(
        "plan for {} ({} nodes) on {}, placed with {}",
        loaded.label,
        loaded.problem.place.len(),
        loaded.devices_label,
        placement.algo
    );
    print!("{}", summary(&plan));
    if let Some(path) = &args.out {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Per device: streams, compute tasks, transfers sent and received, collectives, buffers.
fn summary(plan: &Plan) -> String {
    let mut table = Table::new(&[
        "device",
        "streams",
        "compute",
        "sends",
        "receives",
        "collectives",
        "buffers",
    ]);
    for device in 0..plan.devices {
        let streams = plan.streams.iter().filter(|s| s.device == device);
        let (mut count, mut compute, mut sends, mut receives, mut collectives) = (0, 0, 0, 0, 0);
        for stream in streams {
            count += 1;
            match stream.kind {
                StreamKind::Compute | StreamKind::SubCompute => compute += stream.tasks.len(),
                StreamKind::Tx { .. } => sends += stream.tasks.len(),
                StreamKind::Rx { .. } => receives += stream.tasks.len(),
                StreamKind::Collective => collectives += stream.tasks.len(),
            }
        }
        let buffers = plan.buffers.iter().filter(|b| b.device == device).count();
        table.row(
            [device, count, compute, sends, receives, collectives, buffers]
                .map(|n| n.to_string())
                .to_vec(),
        );
    }
    let transfers =
        plan.tasks.iter().filter(|t| matches!(t.kind, TaskKind::Transfer { .. })).count();
    format!(
        "{} tasks ({transfers} transfers), {} streams, {} events, {} buffers\n{}",
        plan.tasks.len(),
        plan.streams.len(),
        plan.events.len(),
        plan.buffers.len(),
        table.render()
    )
}
