//! `ordo export MODEL --costgraph OUT.json`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use crate::source::{self, SizeArgs};

/// Arguments of `ordo export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model name (see `ordo models`) or an ONNX model (`.onnx`).
    pub model: String,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Where to write the cost graph (NetworkX node-link JSON, Baechi attribute names).
    #[arg(allow_negative_numbers = true, long, value_name = "OUT.json")]
    pub costgraph: PathBuf,
}

/// Builds the model, costs it with the default roofline and writes the cost graph.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let graph = source::build_model(&args.model, args.size.clone())?;
    let cost_graph = ordo::files::roofline_cost_graph(&graph);
    ordo::files::write_cost_graph(&cost_graph, &args.costgraph)
        .with_context(|| format!("writing {}", args.costgraph.display()))?;
    println!(
        "wrote {} ({} nodes, {} links) in {:.1} ms",
        args.costgraph.display(),
        cost_graph.nodes.len(),
        cost_graph.links.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
