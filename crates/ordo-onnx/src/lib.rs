//! ONNX import into ordo's graph IR.
//!
//! [`import_file`] and [`import_bytes`] read an ONNX model (a protobuf `ModelProto`) and return
//! an [`ordo_ir::Graph`] whose shapes come from the IR's own shape rules. [`import`] also returns
//! an [`ImportReport`] (parameter counts, how many ONNX nodes were folded or fused).
//!
//! - **Op registry.** Each ONNX op type maps to IR ops through one function, one file per op
//!   family (see [`supported_ops`]: the runnable ones). Every other operator of the default
//!   domain with a shape rule imports as `Opaque` IR ops (its inferred outputs and a FLOP
//!   estimate: plannable, not runnable), as does a use of a runnable op that the IR cannot
//!   express. A model with ops outside both fails with one [`OnnxError::UnsupportedOps`] that
//!   lists every such node.
//! - **Parameters.** Weights may be initializers or graph inputs (models exported without their
//!   weights). A graph input is a parameter when it is a float tensor listed after the first
//!   input that feeds a weight slot (a `Conv` weight, a `BatchNormalization` statistic, a
//!   `Gather` table...), as exporters list the model's own inputs first; [`ImportOptions`]
//!   overrides this. IR parameters keep their ONNX names; IR nodes keep their ONNX node names.
//! - **Folding.** Shape subgraphs (`Shape`, `Gather` on shapes, `Constant`, `Unsqueeze`,
//!   `Concat`, arithmetic on constants) are evaluated at import time and leave no node.
//!   Reshapes and transposes are deferred, so chains that cancel out vanish and a transposed
//!   weight feeding a `MatMul` (plus the bias `Add`) becomes a `Linear`.
//! - **Training exports.** `BatchNormalization` with running-statistics outputs and `Dropout`
//!   with a mask output map to the IR's `BatchNorm` and `Dropout`; reading one of those extra
//!   outputs is an error.
//! - **Values.** The graph is structure only; [`Import::sources`] says where each parameter's
//!   value comes from, and [`initializers`], [`read_tensor`] and [`param_values`] read them, so
//!   that the graph can be run (`ordo conformance` runs ONNX's own node tests this way).
//! - **Other sizes.** [`ImportOptions::batch`] and [`ImportOptions::seq_len`] import a model at
//!   another batch size or sequence length than the file's; a model that writes its size into
//!   a constant fails with [`OnnxError::Resize`] rather than giving a graph that mixes samples.
//! - **Robustness.** Garbage, truncated files, unknown opsets, missing or inconsistent shapes
//!   and cycles are errors, never panics.
//!
//! ```no_run
//! let graph = ordo_onnx::import_file("resnet50.onnx")?;
//! println!("{} nodes", graph.nodes.len());
//! # Ok::<(), ordo_onnx::OnnxError>(())
//! ```

mod control;
mod ctx;
mod error;
mod external;
mod fold;
mod import;
mod legacy;
mod node;
mod ops;
mod order;
mod proto;
mod resize;
mod symbolic;
mod synth;
mod tensor;
mod tensor_io;
mod value;

use std::path::Path;

use ordo_ir::Graph;
use prost::bytes::Bytes;

pub use error::{OnnxError, OnnxResult, UnsupportedNode};
pub use import::OPSETS;
pub use ops::supported_ops;
pub use tensor_io::{
    ModelInfo, ParamSource, StringTensor, TensorValue, Values, initializers, initializers_in_file,
    model_info, param_values, read_string_tensor, read_tensor, read_tensor_shape,
};

/// Options of [`import`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportOptions {
    /// Names of the graph inputs that are data (every other non-initializer float input is a
    /// parameter). `None` guesses as described in the crate documentation.
    pub data_inputs: Option<Vec<String>>,
    /// Import at this batch size instead of the file's: dimension 0 of every data input is
    /// replaced, and shape subgraphs recompute with it. The model is imported at its own size
    /// too, and must have the same shapes with the batch scaled; a file that writes its batch
    /// into a constant fails with [`OnnxError::Resize`] naming the node.
    pub batch: Option<usize>,
    /// Import at this sequence length: dimension 1 of every token input (integers of rank 2
    /// or more, `[batch, sequence, ...]`), checked like [`ImportOptions::batch`].
    pub seq_len: Option<usize>,
    /// Sizes of symbolic dimensions (an export with `dynamic_axes`), by name. A data input's
    /// symbolic dimension 0 takes [`ImportOptions::batch`] and a token input's dimension 1
    /// [`ImportOptions::seq_len`] unless named here; any other must be named here.
    pub dims: std::collections::BTreeMap<String, usize>,
    /// Integer graph inputs given their values at import: constants, as an exporter would have
    /// written them (a shape, axes or sizes fed as an input), so that the shapes that depend
    /// on them are known.
    pub constant_inputs: std::collections::BTreeMap<String, ConstantInput>,
    /// Float initializers imported as frozen (non-trainable) parameters: an ONNX file does not
    /// say which weights train (a fine-tuned model's frozen layers, Whisper's fixed position
    /// embeddings), so every float initializer trains unless named here.
    pub frozen: std::collections::BTreeSet<String>,
}

/// The value of a graph input given at import ([`ImportOptions::constant_inputs`]): integers,
/// or floats where a float input sets a shape (`Resize`'s scales).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConstantInput {
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub values: Vec<i64>,
    /// Float elements instead of `values` (an `f32` input).
    pub floats: Option<Vec<f64>>,
}

/// What an import produced, beyond the graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The exporter, as the file names it (`pytorch 2.1.0`).
    pub producer: String,
    /// Version of the default ONNX opset.
    pub opset: i64,
    /// Nodes in the ONNX graph.
    pub onnx_nodes: usize,
    /// Nodes in the imported graph (inputs and parameter nodes included).
    pub ir_nodes: usize,
    /// ONNX nodes that emitted no IR node when mapped: constants, shape arithmetic,
    /// identities, and reshapes, transposes and slices that were deferred (cancelled, or emitted
    /// later under their own name when something read them).
    pub folded: usize,
    /// ONNX nodes fused into the IR node of an earlier one (bias additions into `Linear`).
    pub fused: usize,
    /// Trainable parameter elements.
    pub params: u64,
    /// Elements of non-trainable buffers (running statistics, constants kept as tensors).
    pub buffers: u64,
    /// The graph inputs taken as data, in order.
    pub data_inputs: Vec<String>,
    /// ONNX nodes whose output size depends on the data (`NonZero`, `Unique`,
    /// `NonMaxSuppression`, `Compress` of a run-time condition), planned at the largest size
    /// it can have: every size after them is an upper bound. They have no kernel.
    pub bounded: Vec<String>,
    /// ONNX nodes whose output size depends on the data, planned at the size the file
    /// declares for it (a value info or graph output, no larger than the largest it can
    /// have): right for the data the file was made with.
    pub sized_by_file: Vec<String>,
    /// `If` nodes whose condition is known only at run time: both branches are computed and
    /// each output chosen by a `Where`, so the plan counts the work of both.
    pub both_branches: Vec<String>,
    /// ONNX nodes of an op that ordo runs, in a use its mapping cannot express (a
    /// `RoiAlign` grid sized by the data, a convolution with uneven padding the IR lacks...),
    /// imported for planning only: `(node, op type, why)`; not those in `bounded`.
    pub planned_only: Vec<(String, String, String)>,
    /// Tensors of type f64 (inputs, parameters, node outputs; up to the first few by name):
    /// ordo computes them in f32, so their precision and range are f32's.
    pub f64_tensors: Vec<String>,
}

impl ImportReport {
    /// Why each node of [`Self::planned_only`] is planned only: `` `node` (Op): why `` each.
    pub fn planned_only_reasons(&self) -> Vec<String> {
        self.planned_only.iter().map(|(node, op, why)| format!("`{node}` ({op}): {why}")).collect()
    }
}

/// `message` (what the CPU kernels lack) followed by `reasons`, why the import planned nodes
/// only ([`ImportReport::planned_only_reasons`]); `message` alone when there are none.
pub fn explain_missing_kernels(message: &str, reasons: &[String]) -> String {
    match reasons {
        [] => message.to_string(),
        _ => format!("{message} (why: {})", reasons.join("; ")),
    }
}

/// An imported model: the graph and the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The graph.
    pub graph: Graph,
    /// What the import did.
    pub report: ImportReport,
    /// Where each parameter's value comes from, one per `graph.params` (see [`param_values`]).
    pub sources: Vec<ParamSource>,
}

/// Imports an ONNX file; the graph is named after the file stem.
///
/// # Errors
/// [`OnnxError::Io`] when the file cannot be read, otherwise as [`import`].
pub fn import_file(path: impl AsRef<Path>) -> Result<Graph, OnnxError> {
    import_file_with(path, &ImportOptions::default()).map(|i| i.graph)
}

/// Imports an ONNX file with options, returning the report too.
///
/// # Errors
/// [`OnnxError::Io`] when the file cannot be read, otherwise as [`import`].
pub fn import_file_with(
    path: impl AsRef<Path>,
    options: &ImportOptions,
) -> Result<Import, OnnxError> {
    let path = path.as_ref();
    let bytes =
        std::fs::read(path).map_err(|source| OnnxError::Io { path: path.to_path_buf(), source })?;
    let stem = path.file_stem().and_then(|s| s.to_str());
    import_named(&Bytes::from(bytes), stem, options)
}

/// Imports an ONNX model from memory; the graph takes the ONNX graph's name.
///
/// # Errors
/// As [`import`].
pub fn import_bytes(bytes: &[u8]) -> Result<Graph, OnnxError> {
    import(bytes, &ImportOptions::default()).map(|i| i.graph)
}

/// Imports an ONNX model from memory with options, returning the report too.
///
/// # Errors
/// [`OnnxError::Decode`] for bytes that are not a model, [`OnnxError::Opset`] for an unknown
/// opset, [`OnnxError::UnsupportedOps`] listing every node without a mapping, and the other
/// variants of [`OnnxError`] for missing or inconsistent shapes, cycles and malformed nodes.
pub fn import(bytes: &[u8], options: &ImportOptions) -> Result<Import, OnnxError> {
    import_named(&Bytes::copy_from_slice(bytes), None, options)
}

fn import_named(
    bytes: &Bytes,
    name: Option<&str>,
    options: &ImportOptions,
) -> Result<Import, OnnxError> {
    if let Some((bound, rest)) = symbolic::bind(bytes, options)? {
        return import_named(&Bytes::from(bound), name, &rest);
    }
    if options.batch.is_some() || options.seq_len.is_some() {
        resize::import_resized(bytes, name, options)
    } else {
        import::import(bytes, name, options)
    }
}
