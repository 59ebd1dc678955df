//! What a `MODEL|FILE` argument names: a zoo model, an ONNX file or a cost-graph file.

use anyhow::Context;
use clap::Args;
use ordo::Graph;
use ordo::{Model, Size, Variant};

/// Size options shared by every command that builds a zoo model.
#[derive(Args, Debug, Clone)]
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
    /// The size of an ONNX file's symbolic dimension NAME (an export with `dynamic_axes`),
    /// e.g. `--dim past_len=16`; repeatable. `--batch` and `--seq-len` bind dimension 0 of
    /// the data inputs and dimension 1 of the token inputs.
    #[arg(long = "dim", value_name = "NAME=SIZE", value_parser = parse_dim)]
    pub dims: Vec<(String, usize)>,
    /// Import the ONNX file's float initializer NAME as a frozen parameter that does not train
    /// (a file does not record which weights train: every one does unless named); repeatable.
    #[arg(long = "freeze", value_name = "NAME")]
    pub frozen: Vec<String>,
}

/// `NAME=SIZE` of `--dim`.
fn parse_dim(text: &str) -> Result<(String, usize), String> {
    let (name, size) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: expected NAME=SIZE, e.g. batch_size=8"))?;
    if name.is_empty() {
        return Err(format!("`{text}`: the dimension's name is empty"));
    }
    let size: usize =
        size.parse().map_err(|_| format!("`{text}`: the size `{size}` is not a whole number"))?;
    if size == 0 {
        return Err(format!("`{text}`: a dimension of size 0"));
    }
    Ok((name.to_string(), size))
}

impl SizeArgs {
    /// The model variant asked for.
    pub fn variant(&self) -> Variant {
        if self.small { Variant::Small } else { Variant::Full }
    }

    /// The size asked for.
    pub fn size(&self) -> Size {
        let (batch, seq_len, variant) = (self.batch, self.seq_len, self.variant());
        Size { batch, seq_len, variant, tensor_parallel: None }
    }
}

/// Builds the zoo model `name`, or imports it when it names an `.onnx` file.
pub fn build_model(name: &str, size: SizeArgs) -> anyhow::Result<Graph> {
    let model = load(name, size)?;
    model.into_graph().with_context(|| format!("`{name}` is a cost graph, not a model to build"))
}

/// Loads `arg`: an ONNX model if it ends in `.onnx`, a Hugging Face `config.json` or a
/// cost-graph file if it looks like a path, a transformer by its fields
/// (`FAMILY:FIELD=VALUE,...`), a zoo model otherwise. `--dim` and `--freeze` apply to ONNX files only.
pub fn load(arg: &str, size: SizeArgs) -> anyhow::Result<Model> {
    if ordo::is_onnx(arg) {
        let settings = ordo::OnnxSettings {
            dims: size.dims.iter().cloned().collect(),
            frozen: size.frozen.iter().cloned().collect(),
        };
        let model = Model::onnx_with(arg, size.size(), &settings)?;
        for note in model.notes() {
            eprintln!("note: {note}");
        }
        return Ok(model);
    }
    if let Some((name, _)) = size.dims.first() {
        anyhow::bail!(
            "--dim {name}=...: sizes symbolic dimensions of ONNX files; `{arg}` is not one"
        );
    }
    if let Some(name) = size.frozen.first() {
        anyhow::bail!("--freeze {name}: freezes weights of ONNX files; `{arg}` is not one");
    }
    // A file, or a transformer by its fields (`llama:layers=16`): no zoo name has a colon.
    if ordo::is_file(arg) || arg.contains(':') {
        Ok(Model::load(arg, size.size())?)
    } else {
        Model::zoo(arg, size.size()).with_context(|| format!("building `{arg}`"))
    }
}
