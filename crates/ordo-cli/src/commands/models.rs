//! `ordo models`.

use ordo::graph_stats;

use crate::format::{Table, gflops, thousands};

/// Prints the zoo table.
pub fn run() -> anyhow::Result<()> {
    let mut table =
        Table::new(&["model", "batch", "seq", "nodes", "params", "fwd GFLOP", "description"]);
    for spec in ordo::zoo() {
        let model = ordo::Model::zoo(spec.name, ordo::Size::default())?;
        let stats = graph_stats(model.graph().expect("a zoo model is a graph"));
        table.row(vec![
            spec.name.to_string(),
            spec.default_batch.to_string(),
            spec.default_seq_len.map_or(String::new(), |s| s.to_string()),
            stats.nodes.to_string(),
            thousands(stats.params),
            gflops(stats.flops),
            spec.description.to_string(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
