//! `ordo place MODEL|COSTGRAPH --devices N --algo A`.

use std::path::PathBuf;

use ordo::{PlaceOptions, Placement, PlacementFile};

use crate::format::{Table, bytes};
use crate::placing::{ProblemArgs, SearchArgs, mode_label, write_json};

/// Arguments of `ordo place`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Placement algorithm: auto (the best of the others, improved by a search), m-topo,
    /// m-topo-real, m-etf, m-sct, single, round-robin, balanced.
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub algo: String,
    #[command(flatten)]
    pub search: SearchArgs,
    /// m-SCT: an edge is a favorite when its LP value is below this.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0.1)]
    pub sct_threshold: f64,
    /// Place a reduced graph (Baechi's co-placement grouping, then fusion of same-group chains)
    /// and expand the result to every node.
    #[arg(long)]
    pub reduce: bool,
    /// Print the placement as JSON on standard output (`ordo.placement/1`), and nothing else.
    #[arg(long)]
    pub json: bool,
    /// Write the placement as JSON to this file (written whole or not at all).
    #[arg(allow_negative_numbers = true, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Places the graph and prints or writes the result.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let loaded = args.problem.load()?;
    let options =
        PlaceOptions { sct_threshold: args.sct_threshold, reduce: args.reduce, deadline: None };
    let placed = loaded.place(&args.algo, &options, &args.search)?;
    let placement = placed.placement;
    let file = ordo::placement_file(loaded.place_problem(), &placement);
    if let Some(path) = &args.out {
        write_json(path, &file)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&file)?);
        return Ok(());
    }
    print_summary(&loaded, &placement, &file);
    if let Some(auto) = &placed.auto {
        print_auto(auto);
    }
    if let Some(path) = &args.out {
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn print_summary(loaded: &crate::placing::Loaded, placement: &Placement, file: &PlacementFile) {
    let problem = loaded.place_problem();
    println!(
        "placed {} ({} nodes) on {} with {} in {:.1} ms",
        loaded.label,
        problem.len(),
        loaded.devices_label,
        placement.algo,
        placement.placement_seconds * 1e3
    );
    println!("memory model     {}", mode_label(problem.mode));
    println!("costs            {}", loaded.problem.costs);
    let gap = if file.lower_bound_us > 0 {
        (placement.makespan_us as f64 / file.lower_bound_us as f64 - 1.0) * 100.0
    } else {
        0.0
    };
    println!(
        "predicted time   {:.2} ms (lower bound {:.2} ms, gap {gap:.1}%; critical path and \
         work alone {:.2} ms)",
        placement.makespan_us as f64 / 1e3,
        file.lower_bound_us as f64 / 1e3,
        file.simple_lower_bound_us as f64 / 1e3
    );
    if file.baechi_makespan_us != placement.makespan_us {
        println!(
            "Baechi's estimate {:.2} ms (its virtual scheduler on this placement)",
            file.baechi_makespan_us as f64 / 1e3
        );
    }
    let mut table = Table::new(&["device", "nodes", "compute ms", "peak memory", "limit"]);
    for (d, order) in placement.order.iter().enumerate() {
        let compute = order.iter().map(|&v| problem.weights[v]).fold(0, u64::saturating_add);
        let limit = problem.devices.memory[d];
        table.row(vec![
            d.to_string(),
            order.len().to_string(),
            format!("{:.2}", compute as f64 / 1e3),
            bytes(placement.peak_memory_bytes[d]),
            if limit == u64::MAX { "unlimited".into() } else { bytes(limit) },
        ]);
    }
    print!("{}", table.render());
}

/// Which fast placer `auto` started from, what the others gave, and what the search did.
fn print_auto(auto: &ordo::AutoPlacement) {
    let candidates: Vec<String> = auto
        .candidates
        .iter()
        .map(|(algo, result)| match result {
            Ok(us) => format!("{algo} {:.2}", *us as f64 / 1e3),
            Err(_) => format!("{algo} -"),
        })
        .collect();
    println!("fast placers (ms) {}", candidates.join(", "));
    let fewer: Vec<String> = auto
        .fewer_devices
        .iter()
        .filter_map(|(algo, count, result)| {
            result.as_ref().ok().map(|us| format!("{algo} x{count} {:.2}", *us as f64 / 1e3))
        })
        .collect();
    if !fewer.is_empty() {
        println!("on fewer devices  {}", fewer.join(", "));
    }
    println!(
        "auto started from {}, then {} moves in {} simulations ({:.2} s)",
        auto.winner, auto.moves, auto.evaluations, auto.search_seconds
    );
    if let Some(line) = budget_note(auto) {
        println!("{line}");
    }
}

/// What `auto`'s budget cut short, if anything, in one line: placers stopped or not started,
/// a search stopped before its simulation count.
pub fn budget_note(auto: &ordo::AutoPlacement) -> Option<String> {
    let mut parts: Vec<String> = auto
        .stopped
        .iter()
        .map(|(run, seconds)| format!("{run} stopped after {seconds:.2} s"))
        .collect();
    if let Some(first) = auto.skipped.first() {
        parts.push(match auto.skipped.len() {
            1 => format!("{first} not started"),
            n => format!("{n} placer runs not started ({first}, ...)"),
        });
    }
    if let Some((done, planned)) = auto.search_cut {
        parts.push(format!(
            "the search stopped after {done} of {planned} simulations (so the result depends on \
             this machine's speed)"
        ));
    }
    (!parts.is_empty()).then(|| {
        format!("the budget ran out: {}; a larger --budget gives them time", parts.join("; "))
    })
}
