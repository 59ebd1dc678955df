//! What a `MODEL|FILE` argument names: a zoo model, an ONNX file or a cost-graph file.

use anyhow::Context;
use clap::Args;
use ordo::{Model, Size, Variant};
use ordo_ir::Graph;

/// Size options shared by every command that builds a zoo model.
#[derive(Args, Debug, Clone, Copy)]
pub struct SizeArgs {
    /// Batch size (default: the model's; for an ONNX file, dimension 0 of its data inputs).
    #[arg(allow_negative_numbers = true, long)]
    pub batch: Option<usize>,
    /// Sequence length for sequence models (default: the model's; for an ONNX file, dimension
    /// 1 of its integer token inputs).
    #[arg(allow_negative_numbers = true, long)]
    pub seq_len: Option<usize>,
    /// The model's small variant: same structure, small sizes (batch 2; `--batch` and
    /// `--seq-len` still apply).
    #[arg(long)]
    pub small: bool,
}

impl SizeArgs {
    /// The model variant asked for.
    pub fn variant(&self) -> Variant {
        if self.small { Variant::Small } else { Variant::Full }
    }

    /// The size asked for.
    pub fn size(&self) -> Size {
        Size { batch: self.batch, seq_len: self.seq_len, variant: self.variant() }
    }
}

/// Builds the zoo model `name`, or imports it when it names an `.onnx` file.
pub fn build_model(name: &str, size: SizeArgs) -> anyhow::Result<Graph> {
    let model = if ordo::is_onnx(name) {
        Model::onnx(name, size.size())?
    } else {
        Model::zoo(name, size.size()).with_context(|| format!("building `{name}`"))?
    };
    Ok(model.into_graph().expect("a zoo model or an ONNX import has a graph"))
}

/// Loads `arg`: an ONNX model if it ends in `.onnx`, a cost-graph file if it looks like a
/// path, a zoo model otherwise.
pub fn load(arg: &str, size: SizeArgs) -> anyhow::Result<Model> {
    if ordo::is_onnx(arg) || ordo::is_file(arg) {
        Ok(Model::load(arg, size.size())?)
    } else {
        Model::zoo(arg, size.size()).with_context(|| format!("building `{arg}`"))
    }
}
