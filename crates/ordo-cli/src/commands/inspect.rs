//! `ordo inspect MODEL|FILE`.

use std::path::Path;
use std::time::Instant;

use ordo::CostGraph;
use ordo::{Graph, graph_stats, node_stats};
use serde_json::json;

use crate::format::{Table, bytes, gflops, thousands};
use ordo::ModelKind;

use crate::source::{self, SizeArgs};

/// Arguments of `ordo inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A zoo model name (see `ordo models`), an ONNX model (`.onnx`) or a cost-graph JSON file.
    pub target: String,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print only the summary, without the per-node table.
    #[arg(long)]
    pub summary: bool,
}

/// Loads the target and prints its summary and node table.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let loaded = source::load(&args.target, args.size.clone())?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    match loaded.kind() {
        ModelKind::Graph(graph) => inspect_model(graph, load_ms, args),
        ModelKind::CostGraph(graph) => {
            inspect_costgraph(Path::new(loaded.name()), graph, load_ms, args)
        }
    }
    Ok(())
}

fn inspect_model(graph: &Graph, build_ms: f64, args: &Args) {
    let stats = graph_stats(graph);
    let per_node = node_stats(graph);
    if args.json {
        let nodes: Vec<_> = graph
            .nodes
            .iter()
            .zip(&per_node)
            .map(|(n, s)| {
                json!({
                    "name": n.name,
                    "op": n.op.label(),
                    "outputs": n.outputs.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "params": s.params,
                    "flops": s.flops,
                    "activation_bytes": s.activation_bytes,
                })
            })
            .collect();
        let out = json!({
            "model": graph.name,
            "nodes": stats.nodes,
            "params": stats.params,
            "param_bytes": stats.param_bytes,
            "flops": stats.flops,
            "activation_bytes": stats.activation_bytes,
            "inputs": graph.input_nodes().map(|n| json!({"name": n.name, "fact": n.outputs[0].to_string()})).collect::<Vec<_>>(),
            "build_ms": build_ms,
            "per_node": nodes,
        });
        println!("{out:#}");
        return;
    }
    println!("model        {}", graph.name);
    for input in graph.input_nodes() {
        println!("input        {} {}", input.name, input.outputs[0]);
    }
    println!("nodes        {}", stats.nodes);
    println!(
        "parameters   {} ({} with buffers)",
        thousands(stats.params),
        bytes(stats.param_bytes)
    );
    println!("forward      {} GFLOP", gflops(stats.flops));
    println!("activations  {} (all node outputs)", bytes(stats.activation_bytes));
    println!("built in     {build_ms:.2} ms");
    if args.summary {
        return;
    }
    println!();
    let mut table = Table::new(&["id", "name", "op", "output", "params", "MFLOP", "act"]);
    for (node, s) in graph.nodes.iter().zip(&per_node) {
        let outputs: Vec<String> = node.outputs.iter().map(ToString::to_string).collect();
        table.row(vec![
            node.id.0.to_string(),
            node.name.clone(),
            node.op.label().to_string(),
            outputs.join(" "),
            thousands(s.params),
            format!("{:.1}", s.flops as f64 / 1e6),
            bytes(s.activation_bytes),
        ]);
    }
    print!("{}", table.render());
}

fn inspect_costgraph(path: &Path, graph: &CostGraph, read_ms: f64, args: &Args) {
    let compute_us = graph.nodes.iter().map(|n| n.weight).fold(0, u64::saturating_add);
    let persistent = graph.nodes.iter().map(|n| n.persistent_memory).fold(0, u64::saturating_add);
    let output = graph
        .nodes
        .iter()
        .flat_map(|n| n.output_memory.iter().copied())
        .fold(0, u64::saturating_add);
    let flops: Option<u64> = graph.nodes.iter().map(|n| n.flops).sum();
    let comm_us = graph.links.iter().map(|l| l.weight).fold(0, u64::saturating_add);
    if args.json {
        let out = json!({
            "nodes": graph.nodes.len(),
            "links": graph.links.len(),
            "params": serde_json::Value::Null,
            "flops": flops,
            "compute_us": compute_us,
            "comm_us_if_all_cut": comm_us,
            "persistent_memory_bytes": persistent,
            "output_memory_bytes": output,
            "read_ms": read_ms,
        });
        println!("{out:#}");
        return;
    }
    println!("cost graph   {}", path.display());
    println!("size         {} nodes, {} links", graph.nodes.len(), graph.links.len());
    println!("compute      {} us (sum of node weights)", thousands(compute_us));
    println!("transfers    {} us if every link crossed devices", thousands(comm_us));
    println!("persistent   {}", bytes(persistent));
    println!("outputs      {}", bytes(output));
    if let Some(f) = flops {
        println!("forward      {} GFLOP", gflops(f));
    }
    println!("read in      {read_ms:.2} ms");
    if args.summary {
        return;
    }
    println!();
    let mut table = Table::new(&["id", "name", "op", "us", "persistent", "output"]);
    for node in &graph.nodes {
        table.row(vec![
            node.id.to_string(),
            node.name.clone(),
            node.op_type.clone().unwrap_or_default(),
            node.weight.to_string(),
            bytes(node.persistent_memory),
            bytes(node.output_memory.iter().sum()),
        ]);
    }
    print!("{}", table.render());
}
