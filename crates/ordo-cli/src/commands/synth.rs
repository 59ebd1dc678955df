//! `ordo synth --nodes N --out FILE`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

/// Arguments of `ordo synth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of nodes.
    #[arg(allow_negative_numbers = true, long)]
    pub nodes: usize,
    /// Random seed; the same seed gives the same graph.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write the cost graph.
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.json")]
    pub out: PathBuf,
}

/// Generates and writes a layered random cost graph.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let graph = ordo::files::synthetic_cost_graph(args.nodes, args.seed);
    let generated_ms = start.elapsed().as_secs_f64() * 1e3;
    ordo::files::write_cost_graph(&graph, &args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} ({} nodes, {} links): generated in {generated_ms:.1} ms",
        args.out.display(),
        graph.nodes.len(),
        graph.links.len(),
    );
    Ok(())
}
