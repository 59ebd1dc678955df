//! Models: a zoo model, an imported ONNX file or a cost-graph file, and the training graph
//! of a model.

use std::collections::HashMap;
use std::path::Path;

use ordo_cost::{CostGraph, Optimizer};
use ordo_ir::Graph;
use ordo_ir::transform::Recompute;
pub use ordo_models::Variant;
use ordo_models::{ModelSpec, TransformerConfig};

use crate::error::{Error, Result, usage};
use crate::loss::{Loss, with_loss};
use crate::parameter::{Parameter, ParameterError, refuse};

/// The size a model is built or imported at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Size {
    /// Batch size (default: the model's; for an ONNX file, dimension 0 of its data inputs).
    pub batch: Option<usize>,
    /// Sequence length of sequence models (default: the model's; for an ONNX file, dimension
    /// 1 of its integer token inputs).
    pub seq_len: Option<usize>,
    /// The zoo model's full or small variant (same structure, small sizes).
    pub variant: Variant,
    /// Build one rank of a tensor-parallel group of this many ranks
    /// ([`TransformerConfig::with_tensor_parallel`]: GPT and LLaMA decoders); `None` or 1: the
    /// whole model.
    pub tensor_parallel: Option<usize>,
}

impl Size {
    /// The small variant at its default sizes.
    pub fn small() -> Self {
        Self { variant: Variant::Small, ..Self::default() }
    }

    /// This size at batch `batch`.
    pub fn with_batch(self, batch: usize) -> Self {
        Self { batch: Some(batch), ..self }
    }

    /// The size of one of `micro_batches` micro-batches of zoo model `model` at this size (the
    /// global batch): a pipeline plans and runs the model built at `batch / micro_batches`.
    ///
    /// # Errors
    /// [`Error::Parameter`] for zero micro-batches, an ONNX file (imported at one batch), or a
    /// batch that the micro-batches do not divide; [`Error::Model`] for an unknown model.
    pub fn micro_batch(self, model: &str, micro_batches: usize) -> Result<Self> {
        let splitting = (Parameter::Stages, "into micro-batches");
        self.divided(model, micro_batches, Parameter::MicroBatches, splitting)
    }

    /// The size of one of `replicas` data-parallel replicas' share of zoo model `model`'s batch
    /// at this size (the global batch).
    ///
    /// # Errors
    /// As [`Size::micro_batch`], naming [`Parameter::Replicas`].
    pub fn replica_share(self, model: &str, replicas: usize) -> Result<Self> {
        self.divided(model, replicas, Parameter::Replicas, (Parameter::Replicas, "among replicas"))
    }

    /// The batch divided into `parts`, which `parameter` sets; an ONNX model's fixed batch
    /// refused naming `splitting` (what asks for the split, and how it splits).
    fn divided(
        self,
        model: &str,
        parts: usize,
        parameter: Parameter,
        (splitting, how): (Parameter, &str),
    ) -> Result<Self> {
        if parts == 0 {
            refuse!(parameter, " must be at least 1");
        }
        if is_onnx(model) {
            refuse!(
                splitting,
                format!(
                    " splits the batch of a zoo model {how}; {model} fixes its batch (an ONNX \
                     model is imported at one batch, the file's or --batch)"
                )
            );
        }
        let batch = match self.batch {
            Some(batch) => batch,
            None => ordo_models::spec(model)?.config(self.variant).batch,
        };
        if batch % parts != 0 {
            let error = ParameterError::about(
                parameter,
                format!("the batch ({batch}) must be a multiple of "),
            );
            let error = error.then(parameter).text(format!(" ({parts})"));
            return Err(Error::Parameter(error));
        }
        Ok(self.with_batch(batch / parts))
    }
}

/// What ordo plans for: a dataflow graph with kernels (a zoo model or an ONNX import), or a
/// cost graph read from a file (placement and simulation only; it has no kernels to run).
#[derive(Clone, Debug)]
pub struct Model {
    kind: ModelKind,
    name: String,
    /// For an ONNX import: the file and where each parameter's value comes from, read when a
    /// run starts (planning never needs the values).
    weights: Option<std::sync::Arc<FileWeights>>,
    /// What the import approximated, for the user to know (outputs whose size depends on the
    /// data, planned at their largest).
    notes: Vec<String>,
    /// Why each node of an op ordo runs was imported for planning only (a use its kernels
    /// cannot express), for a run's error to say.
    planned_only: Vec<String>,
}

/// Where an imported model's parameter values are: the file, and per parameter (by name) its
/// source in it.
#[derive(Debug)]
struct FileWeights {
    path: std::path::PathBuf,
    sources: Vec<(String, Vec<usize>, ordo_onnx::ParamSource)>,
}

/// Why the model `arg` names cannot be split over tensor-parallel ranks.
fn not_split(arg: &str) -> String {
    format!(
        "`{arg}` is not a transformer ordo splits; tensor parallelism builds GPT and LLaMA \
         decoders from their configuration (a zoo transformer, a Hugging Face config.json or \
         FAMILY:FIELDS)"
    )
}

/// What a [`Model`] holds.
#[derive(Clone, Debug)]
pub enum ModelKind {
    /// A dataflow graph with kernels.
    Graph(Box<Graph>),
    /// A cost graph: nodes with times and memory, no kernels.
    CostGraph(Box<CostGraph>),
}

/// What an ONNX file does not say by itself: the sizes of its symbolic dimensions and which
/// of its weights stay frozen.
#[derive(Clone, Debug, Default)]
pub struct OnnxSettings {
    /// Sizes of symbolic dimensions by name (an export with `dynamic_axes`; see
    /// [`ordo_onnx::ImportOptions::dims`]).
    pub dims: std::collections::BTreeMap<String, usize>,
    /// Float initializers imported as frozen, non-trainable parameters (see
    /// [`ordo_onnx::ImportOptions::frozen`]).
    pub frozen: std::collections::BTreeSet<String>,
}

impl Model {
    /// Builds the zoo model `name` (see `ordo models` or [`ordo_models::spec`]) at `size`.
    ///
    /// # Errors
    /// [`Error::Model`] for an unknown name or a size the model cannot take.
    pub fn zoo(name: &str, size: Size) -> Result<Self> {
        if let Some(ranks) = size.tensor_parallel {
            let spec = ordo_models::spec(name)?;
            let Some(config) = ordo_models::zoo_transformer(name, size.variant) else {
                refuse!(Parameter::TensorParallel => ranks, format!(": {}", not_split(name)));
            };
            let defaults = spec.config(size.variant);
            let size = Size {
                batch: Some(size.batch.unwrap_or(defaults.batch)),
                seq_len: Some(size.seq_len.unwrap_or(defaults.seq_len)),
                variant: Variant::Full,
                tensor_parallel: Some(ranks),
            };
            return Self::transformer(&config, size);
        }
        let graph = ordo_models::build_variant(name, size.variant, size.batch, size.seq_len)?;
        Ok(Self::from_graph(graph))
    }

    /// Imports an ONNX file, at `size.batch` (dimension 0 of the data inputs) and
    /// `size.seq_len` (dimension 1 of the token inputs) when given instead of the file's.
    ///
    /// # Errors
    /// [`Error::Usage`] for the small variant (a file has one size), [`Error::Onnx`] for a file
    /// that cannot be imported.
    pub fn onnx(path: impl AsRef<Path>, size: Size) -> Result<Self> {
        Self::onnx_with(path, size, &OnnxSettings::default())
    }

    /// [`Model::onnx`], with the sizes of the file's symbolic dimensions and the parameters
    /// to freeze that `settings` gives.
    ///
    /// # Errors
    /// As [`Model::onnx`]; a symbolic dimension without a size names them all; a name to
    /// freeze that is no float initializer is an error with the closest one.
    pub fn onnx_with(path: impl AsRef<Path>, size: Size, settings: &OnnxSettings) -> Result<Self> {
        let path = path.as_ref();
        if size.variant == Variant::Small {
            let error = ParameterError::about(Parameter::Small, format!("{}: ", path.display()));
            let text = " selects a zoo model's small variant; an ONNX file has one size";
            return Err(Error::Parameter(error.then(Parameter::Small).text(text)));
        }
        let options = ordo_onnx::ImportOptions {
            batch: size.batch,
            seq_len: size.seq_len,
            dims: settings.dims.clone(),
            frozen: settings.frozen.clone(),
            ..Default::default()
        };
        let import = ordo_onnx::import_file_with(path, &options)
            .map_err(|source| Error::Onnx { path: path.to_path_buf(), source })?;
        let sources = import
            .graph
            .params
            .iter()
            .zip(import.sources)
            .map(|(p, source)| (p.name.clone(), p.fact.shape.clone(), source))
            .collect();
        let weights = FileWeights { path: path.to_path_buf(), sources };
        let bounded = import.report.bounded.iter().map(|node| {
            format!(
                "node `{node}`: its output's size depends on the data; planned at its largest \
                 (every size after it is an upper bound; it has no kernel)"
            )
        });
        let by_file = import.report.sized_by_file.iter().map(|node| {
            format!(
                "node `{node}`: its output's size depends on the data; planned at the size the \
                 file declares (a run checks it where the op has a kernel)"
            )
        });
        let both = import.report.both_branches.iter().map(|node| {
            format!(
                "node `{node}`: an If whose condition is known only at run time; both branches \
                 are computed and each output chosen by a Where (the plan counts both)"
            )
        });
        let planned_only = import.report.planned_only_reasons();
        let planned = planned_only
            .iter()
            .map(|why| format!("node {why}; imported for planning only (no kernel runs it)"));
        let f64_note = (!import.report.f64_tensors.is_empty()).then(|| {
            format!(
                "f64 tensors ({}) are computed in f32: their precision and range are f32's",
                import.report.f64_tensors.join(", ")
            )
        });
        let notes = bounded.chain(by_file).chain(both).chain(planned).chain(f64_note).collect();
        let weights = Some(std::sync::Arc::new(weights));
        Ok(Self { weights, notes, planned_only, ..Self::from_graph(import.graph) })
    }

    /// Reads a cost-graph file (`ordo.costgraph`, Baechi's attribute names).
    ///
    /// # Errors
    /// [`Error::CostGraph`] for a file that cannot be read or is not a valid cost graph.
    pub fn cost_graph(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let graph = ordo_cost::read_costgraph(path)?;
        Ok(Self {
            kind: ModelKind::CostGraph(Box::new(graph)),
            name: path.display().to_string(),
            weights: None,
            notes: Vec::new(),
            planned_only: Vec::new(),
        })
    }

    /// What a command-line `MODEL` argument names: an ONNX file if it ends in `.onnx`; a
    /// Hugging Face `config.json` or a cost-graph file if it looks like a path (ends in
    /// `.json`, contains `/`, or is a file); a transformer by its fields if it reads
    /// `FAMILY:FIELD=VALUE,...` ([`TransformerConfig::from_fields`]); a zoo model otherwise.
    ///
    /// # Errors
    /// Those of [`Model::onnx`], [`Model::cost_graph`] and [`Model::zoo`].
    pub fn load(arg: &str, size: Size) -> Result<Self> {
        // An ONNX file or a cost graph is whole: it cannot be built as one rank.
        let whole = || match size.tensor_parallel {
            Some(ranks) if ranks != 1 => {
                refuse!(Parameter::TensorParallel => ranks, format!(": {}", not_split(arg)))
            }
            _ => Ok(()),
        };
        if is_onnx(arg) {
            whole()?;
            Self::onnx(arg, size)
        } else if is_file(arg) {
            match hugging_face_config(Path::new(arg))? {
                Some(config) => Self::transformer(&config, size),
                None => whole().and_then(|()| Self::cost_graph(arg)),
            }
        } else if let Some(config) = TransformerConfig::from_fields(arg) {
            match config {
                Ok(config) => Self::transformer(&config, size),
                Err(message) => usage!("{message}"),
            }
        } else {
            Self::zoo(arg, size)
        }
    }

    /// The transformer `config` describes, its training step on `size.batch` sequences (8 by
    /// default) of `size.seq_len` tokens (by default all the positions it takes), or its small
    /// variant ([`TransformerConfig::small`], batch 2 and 8 tokens by default).
    ///
    /// # Errors
    /// [`Error::Usage`] for sizes of 0; [`Error::Model`] for a configuration that does not
    /// build, naming what is wrong.
    pub fn transformer(config: &TransformerConfig, size: Size) -> Result<Self> {
        let (config, batch, seq) = match size.variant {
            Variant::Full => (config.clone(), 8, config.max_positions),
            Variant::Small => (config.small(), ordo_models::SMALL_BATCH, 8),
        };
        let batch = size.batch.unwrap_or(batch);
        let seq_len = size.seq_len.unwrap_or(seq);
        if batch == 0 || seq_len == 0 {
            usage!("{}: the batch and the sequence length must be at least 1", config.name);
        }
        let config = match size.tensor_parallel {
            Some(ranks) => match config.with_tensor_parallel(ranks) {
                Ok(split) => split,
                Err(message) => refuse!(Parameter::TensorParallel => ranks, format!(": {message}")),
            },
            None => config,
        };
        let graph =
            config.build(&ordo_models::ModelConfig { batch, seq_len }).map_err(|source| {
                ordo_models::ModelError::Build { name: config.name.clone(), source }
            })?;
        Ok(Self::from_graph(graph))
    }

    /// A model from a graph built by hand.
    pub fn from_graph(graph: Graph) -> Self {
        let name = graph.name.clone();
        Self {
            name,
            kind: ModelKind::Graph(Box::new(graph)),
            weights: None,
            notes: Vec::new(),
            planned_only: Vec::new(),
        }
    }

    /// A model from a cost graph, named `name` in messages.
    pub fn from_cost_graph(graph: CostGraph, name: impl Into<String>) -> Self {
        let kind = ModelKind::CostGraph(Box::new(graph));
        Self { kind, name: name.into(), weights: None, notes: Vec::new(), planned_only: Vec::new() }
    }

    /// A cost graph given as JSON text (the NetworkX node-link format of
    /// [`ordo_cost::parse_costgraph`]), named `name` in messages.
    ///
    /// # Errors
    /// [`Error::CostGraph`] for text that is not a valid cost graph.
    pub fn from_cost_graph_json(text: &str, name: &str) -> Result<Self> {
        Ok(Self::from_cost_graph(ordo_cost::parse_costgraph(text, name)?, name))
    }

    /// The names of the built-in models, in the zoo's order.
    pub fn zoo_names() -> Vec<&'static str> {
        ordo_models::zoo().iter().map(|spec| spec.name).collect()
    }

    /// What the import approximated (an ONNX output whose size depends on the data, planned
    /// at its largest), one sentence each; empty for most models.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Checks that the CPU kernels can run every op of the model's graph, before anything is
    /// measured or planned for a run.
    ///
    /// # Errors
    /// [`Error::Usage`] for a cost graph; [`Error::Exec`] naming every op without a kernel,
    /// and for a node the import planned only (a use its op's kernels cannot express), why.
    pub fn check_kernels(&self) -> Result<()> {
        let graph = self.require_graph("running a plan needs a model with kernels")?;
        match ordo_exec::missing_kernels(graph) {
            None => Ok(()),
            Some(message) => Err(self
                .explain_missing_kernels(Error::Exec(ordo_exec::ExecError::Unsupported(message)))),
        }
    }

    /// `error` with, where it is a missing kernel and the import planned nodes of ops ordo
    /// runs without one, why each was.
    pub(crate) fn explain_missing_kernels(&self, error: Error) -> Error {
        use ordo_exec::ExecError::Unsupported;
        match error {
            Error::Exec(Unsupported(message)) => Error::Exec(Unsupported(
                ordo_onnx::explain_missing_kernels(&message, &self.planned_only),
            )),
            other => other,
        }
    }

    /// The model's name: the graph's, or the cost graph's file.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dataflow graph, or `None` for a cost graph.
    pub fn graph(&self) -> Option<&Graph> {
        match &self.kind {
            ModelKind::Graph(graph) => Some(graph),
            ModelKind::CostGraph(_) => None,
        }
    }

    /// What the model holds.
    pub fn kind(&self) -> &ModelKind {
        &self.kind
    }

    /// The dataflow graph itself, or `None` for a cost graph.
    pub fn into_graph(self) -> Option<Graph> {
        match self.kind {
            ModelKind::Graph(graph) => Some(*graph),
            ModelKind::CostGraph(_) => None,
        }
    }

    /// The cost graph read from a file, or `None` for a model with kernels.
    pub fn as_cost_graph(&self) -> Option<&CostGraph> {
        match &self.kind {
            ModelKind::Graph(_) => None,
            ModelKind::CostGraph(graph) => Some(graph),
        }
    }

    /// The dataflow graph, or an error saying that `purpose` (e.g. `profiling needs kernels`)
    /// needs one.
    ///
    /// # Errors
    /// [`Error::Usage`] for a cost graph.
    pub fn require_graph(&self, purpose: &str) -> Result<&Graph> {
        match &self.kind {
            ModelKind::Graph(graph) => Ok(graph),
            ModelKind::CostGraph(_) => usage!("{purpose}; {} is a cost graph", self.name),
        }
    }

    /// The model's cost graph: `cost`'s for a model with kernels, the file's as read.
    pub(crate) fn costed(&self, cost: impl FnOnce(&Graph) -> CostGraph) -> CostGraph {
        match &self.kind {
            ModelKind::Graph(graph) => cost(graph),
            ModelKind::CostGraph(graph) => (**graph).clone(),
        }
    }

    /// The training graph: forward, dX, dW and `optimizer`'s update nodes, from the model's
    /// loss (the node named `loss`, or an output that is one float scalar) or from the loss
    /// `add` adds; named `<model> (training graph)`.
    ///
    /// # Errors
    /// [`Error::Usage`] for a cost graph, a model without a loss (or with one and `add`);
    /// [`Error::Ir`] when the training graph cannot be built.
    pub fn training(&self, optimizer: Optimizer, add: Option<Loss>) -> Result<Self> {
        let forward = self.require_graph("a training graph is built from a model with kernels")?;
        let (forward, loss) = with_loss(forward, add)?;
        let mut graph = ordo_ir::training::training_graph(&forward, loss, optimizer)?;
        graph.name = format!("{} (training graph)", forward.name);
        // The training graph keeps the forward graph's parameters, so the file's values, and
        // its nodes imported for planning only.
        Ok(Self {
            weights: self.weights.clone(),
            planned_only: self.planned_only.clone(),
            ..Self::from_graph(graph)
        })
    }

    /// The model in `precision`: [`Precision::Fp32`] as it is; bf16 or fp16 with every fp32
    /// weight and activation in that type (mixed precision: the cost model charges fp32
    /// master weights and optimizer states, and runs matrix products at the tensor cores'
    /// rate). Such a model is planned and simulated; the CPU kernels compute in fp32 only.
    ///
    /// # Errors
    /// [`Error::Usage`] for a cost graph in another precision than fp32 (its sizes are bytes,
    /// not types).
    pub fn in_precision(&self, precision: Precision) -> Result<Self> {
        let Some(dtype) = precision.dtype() else { return Ok(self.clone()) };
        let graph = self.require_graph("a cost graph's sizes are bytes: its precision is fixed")?;
        let mut graph = ordo_ir::transform::in_precision(graph, dtype)?;
        graph.name = format!("{} ({})", graph.name, precision.name());
        // The file's values, notes and planned-only nodes are the model's still; its old graph
        // is not cloned to be dropped.
        Ok(Self {
            weights: self.weights.clone(),
            notes: self.notes.clone(),
            planned_only: self.planned_only.clone(),
            ..Self::from_graph(graph)
        })
    }

    /// The training model with `recompute`'s activations recomputed in each block's backward
    /// pass ([`ordo_ir::transform::recompute`]; blocks as a pipeline's units: the nodes under
    /// a numbered module, `model.layers.3`), named `<name> (recompute <choice>)`; itself for
    /// [`Recompute::None`]. For planning: recomputed dropout draws its own random numbers.
    ///
    /// # Errors
    /// [`Error::Usage`] for a cost graph (no ops to recompute); [`Error::Ir`] for a graph
    /// without a backward pass.
    pub fn with_recompute(&self, recompute: Recompute) -> Result<Self> {
        if recompute == Recompute::None {
            return Ok(self.clone());
        }
        let graph = self.require_graph("a cost graph has no ops to recompute")?;
        let block_of = |name: &str| ordo_sched::block_of(name).map(str::to_string);
        let mut graph = ordo_ir::transform::recompute(graph, recompute, &block_of)?.graph;
        graph.name = format!("{} (recompute {})", graph.name, recompute.name());
        Ok(Self { notes: self.notes.clone(), ..Self::from_graph(graph) })
    }

    /// Whether the model's weights are 16-bit floats (mixed precision).
    pub fn is_mixed_precision(&self) -> bool {
        self.graph().is_some_and(|g| g.params.iter().any(|p| p.fact.dtype.is_half_float()))
    }

    /// The parameter values an imported file holds, by parameter name (`None` for a model
    /// that is not an import). A parameter the file gives no value (a graph input taken as a
    /// parameter, with no initializer) is left out.
    ///
    /// # Errors
    /// [`Error::Onnx`] when the file cannot be read again or a value does not fit its
    /// parameter.
    pub fn file_weights(&self) -> Result<Option<HashMap<String, ordo_exec::cpu::Tensor>>> {
        let Some(weights) = &self.weights else { return Ok(None) };
        let onnx = |source| Error::Onnx { path: weights.path.clone(), source };
        let tensors = ordo_onnx::initializers_in_file(&weights.path).map_err(onnx)?;
        let mut values = HashMap::new();
        for (name, shape, source) in &weights.sources {
            let one = ordo_onnx::param_values(
                std::slice::from_ref(source),
                std::slice::from_ref(shape),
                &tensors,
            );
            let value = match one {
                Ok(mut v) => v.remove(0),
                Err(ordo_onnx::OnnxError::UnknownTensor { .. }) => continue,
                Err(e) => return Err(onnx(e)),
            };
            let tensor = match value.values {
                ordo_onnx::Values::F32(v) => ordo_exec::cpu::Tensor::from_f32(&value.shape, v),
                ordo_onnx::Values::I64(v) => ordo_exec::cpu::Tensor::from_i64(&value.shape, v),
                ordo_onnx::Values::Bool(v) => ordo_exec::cpu::Tensor::from_bool(&value.shape, v),
            };
            let tensor = tensor.map_err(|e| {
                onnx(ordo_onnx::OnnxError::Shape {
                    node: name.clone(),
                    op: "parameter".into(),
                    message: e.to_string(),
                })
            })?;
            values.insert(name.clone(), tensor);
        }
        Ok(Some(values))
    }

    /// Whether this is the graph of a training step (it has update nodes).
    pub fn is_training(&self) -> bool {
        self.graph().is_some_and(|g| g.nodes.iter().any(|n| n.role == ordo_ir::Role::Update))
    }
}

impl From<Graph> for Model {
    fn from(graph: Graph) -> Self {
        Self::from_graph(graph)
    }
}

/// Whether a `MODEL` argument names an ONNX file.
pub fn is_onnx(arg: &str) -> bool {
    arg.to_ascii_lowercase().ends_with(".onnx")
}

/// Whether an argument names a file rather than a zoo model.
pub fn is_file(arg: &str) -> bool {
    arg.ends_with(".json") || arg.contains('/') || Path::new(arg).is_file()
}

/// The type of a model's weights and activations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Everything in fp32.
    #[default]
    Fp32,
    /// Mixed precision with bf16 weights and activations.
    Bf16,
    /// Mixed precision with fp16 weights and activations.
    Fp16,
}

impl Precision {
    /// Every precision, in the order the shells list them.
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Bf16, Precision::Fp16];

    /// Its name: `fp32`, `bf16`, `fp16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }

    /// The weights' and activations' type in mixed precision; `None` for fp32.
    fn dtype(self) -> Option<ordo_ir::DType> {
        match self {
            Precision::Fp32 => None,
            Precision::Bf16 => Some(ordo_ir::DType::BF16),
            Precision::Fp16 => Some(ordo_ir::DType::F16),
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        match Precision::ALL.into_iter().find(|p| p.name() == name) {
            Some(precision) => Ok(precision),
            None => usage!("precision `{name}`: expected fp32, bf16 or fp16"),
        }
    }
}

/// The zoo's models: names, default sizes and descriptions.
pub fn zoo() -> &'static [ModelSpec] {
    ordo_models::zoo()
}

/// The batch size of zoo model `name` at `variant`, or `None` for a name not in the zoo.
pub fn zoo_batch(name: &str, variant: Variant) -> Option<usize> {
    ordo_models::spec(name).ok().map(|spec| spec.config(variant).batch)
}

/// The transformer configuration in `path` when it is a Hugging Face `config.json` (a small
/// JSON object with a `model_type`), `None` for any other file (a cost graph).
///
/// # Errors
/// [`Error::Usage`] for a Hugging Face configuration that ordo cannot build, naming the file
/// and the field.
fn hugging_face_config(path: &Path) -> Result<Option<TransformerConfig>> {
    // A configuration is a few hundred bytes; a cost graph is read by its own reader.
    const MOST: u64 = 1 << 20;
    if std::fs::metadata(path).map_or(true, |m| m.len() > MOST) {
        return Ok(None);
    }
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(None) };
    if json.get("model_type").is_none() {
        return Ok(None);
    }
    let name = path.file_stem().map_or("model".into(), |stem| stem.to_string_lossy());
    let name = match name.as_ref() {
        // `config.json` is named after its folder, as a downloaded model is.
        "config" => path
            .parent()
            .and_then(Path::file_name)
            .map_or("model".into(), |dir| dir.to_string_lossy().into_owned()),
        other => other.to_string(),
    };
    match TransformerConfig::from_hugging_face_json(&json, &name) {
        Ok(config) => Ok(Some(config)),
        Err(message) => usage!("{}: {message}", path.display()),
    }
}
