//! What a `MODEL|FILE` argument names: a zoo model, an ONNX file or a cost-graph file.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use ordo_cost::CostGraph;
use ordo_ir::Graph;

/// Size options shared by every command that builds a zoo model.
#[derive(Args, Debug, Clone, Copy)]
pub struct SizeArgs {
    /// Batch size (default: the model's; for an ONNX file, dimension 0 of its data inputs).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Sequence length for sequence models (default: the model's; for an ONNX file, dimension 1
    /// of its integer token inputs).
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// The model's small variant: same structure, small sizes (batch 2; `--batch` and
    /// `--seq-len` still apply).
    #[arg(long)]
    pub small: bool,
}

impl SizeArgs {
    /// The model variant asked for.
    pub fn variant(&self) -> ordo_models::Variant {
        if self.small { ordo_models::Variant::Small } else { ordo_models::Variant::Full }
    }
}

/// A loaded model or cost graph.
pub enum Source {
    /// A zoo model, built, or an imported ONNX file.
    Model(Box<Graph>),
    /// A cost graph read from a file.
    CostGraph { path: PathBuf, graph: Box<CostGraph> },
}

/// Whether an argument names a file rather than a zoo model.
pub fn is_file(arg: &str) -> bool {
    arg.ends_with(".json") || arg.contains('/') || Path::new(arg).is_file()
}

/// Builds the zoo model `name`, or imports it when it names an `.onnx` file.
pub fn build_model(name: &str, size: SizeArgs) -> anyhow::Result<Graph> {
    if crate::onnx::is_onnx(name) {
        if size.small {
            anyhow::bail!(
                "{name}: --small selects a zoo model's small variant; an ONNX file has one size"
            );
        }
        return crate::onnx::load(name, size.batch, size.seq_len);
    }
    ordo_models::build_variant(name, size.variant(), size.batch, size.seq_len)
        .with_context(|| format!("building `{name}`"))
}

/// Loads `arg`: an ONNX model if it ends in `.onnx`, a cost-graph file if it looks like a
/// path, a zoo model otherwise.
pub fn load(arg: &str, size: SizeArgs) -> anyhow::Result<Source> {
    if crate::onnx::is_onnx(arg) {
        Ok(Source::Model(Box::new(build_model(arg, size)?)))
    } else if is_file(arg) {
        let graph = ordo_cost::read_costgraph(Path::new(arg))?;
        Ok(Source::CostGraph { path: PathBuf::from(arg), graph: Box::new(graph) })
    } else {
        Ok(Source::Model(Box::new(build_model(arg, size)?)))
    }
}
