//! Errors of ONNX import. Every variant that concerns a node names it.

use std::fmt;
use std::path::PathBuf;

/// An ONNX node the importer has no mapping for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedNode {
    /// The node's name (or `<op type>_<index>` for an unnamed node).
    pub node: String,
    /// Its op type, prefixed by its domain when that is not the default one.
    pub op_type: String,
}

impl fmt::Display for UnsupportedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({})", self.node, self.op_type)
    }
}

/// Everything that can go wrong while importing an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file cannot be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a protobuf `ModelProto` (garbage or a truncated file).
    #[error("not an ONNX model (protobuf decoding failed): {0}")]
    Decode(String),
    /// The model has no graph, or a graph with no nodes and no outputs.
    #[error("the model has no graph (empty or truncated file?)")]
    NoGraph,
    /// The model imports no version of the default ONNX operator set, or one outside the range
    /// the importer knows.
    #[error("unsupported opset: {0}")]
    Opset(String),
    /// Nodes whose op type has no mapping, all of them.
    #[error("{} unsupported op(s): {}", .0.len(), list(.0))]
    UnsupportedOps(Vec<UnsupportedNode>),
    /// A known op used in a way the IR cannot express (an attribute value, a run-time operand
    /// where a constant is needed, an output that is read).
    #[error("node `{node}` ({op_type}): {message}")]
    Unsupported {
        /// The node.
        node: String,
        /// Its op type.
        op_type: String,
        /// What is not supported.
        message: String,
    },
    /// A malformed node: a missing input or attribute, an attribute of the wrong type, a bad
    /// tensor.
    #[error("node `{node}`: {message}")]
    Malformed {
        /// The node (or tensor) concerned.
        node: String,
        /// What is wrong.
        message: String,
    },
    /// A graph input or initializer without a static shape and element type.
    #[error("tensor `{tensor}`: {message}")]
    MissingShape {
        /// The tensor.
        tensor: String,
        /// What is missing.
        message: String,
    },
    /// Shapes that do not fit: the IR's shape rules rejected a node, or a parameter's shape is
    /// not the one the op needs.
    #[error("node `{node}` ({op}): {message}")]
    Shape {
        /// The node.
        node: String,
        /// The IR op or ONNX op type.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// A shape the file declares (graph output or value info) differs from the inferred one.
    #[error("tensor `{tensor}`: the file declares {declared}, inference gives {inferred}")]
    DeclaredShape {
        /// The tensor.
        tensor: String,
        /// Shape and type in the file.
        declared: String,
        /// Shape and type inferred.
        inferred: String,
    },
    /// A node reads a tensor that no node, input or initializer produces.
    #[error("node `{node}` reads `{tensor}`, which nothing produces")]
    UnknownTensor {
        /// The reading node (or `graph output`).
        node: String,
        /// The missing tensor.
        tensor: String,
    },
    /// A parameter to freeze is not a float initializer of the model.
    #[error("cannot freeze `{name}`: the model has no float initializer of that name{hint}")]
    UnknownFrozen {
        /// The name given.
        name: String,
        /// A close initializer name, as ` (did you mean `...`?)`, or empty.
        hint: String,
    },
    /// Two nodes write the same tensor.
    #[error("tensor `{tensor}` is produced twice (by `{first}` and `{second}`)")]
    DuplicateTensor {
        /// The tensor.
        tensor: String,
        /// The first producer.
        first: String,
        /// The second producer.
        second: String,
    },
    /// The nodes form a cycle.
    #[error("the graph has a cycle through node `{node}`")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
    /// The model cannot be imported at the batch size or sequence length asked for (see
    /// [`crate::ImportOptions::batch`]): it has no input to resize, or it fixes its size in a
    /// constant.
    #[error("importing at {size}: {message}")]
    Resize {
        /// The sizes asked for, with the file's (`batch 2 (the file has 32)`).
        size: String,
        /// What is wrong, naming the node and the constant where one is at fault.
        message: String,
    },
    /// A symbolic dimension without a size, or a size for a name the file does not have; the
    /// message lists every symbolic dimension of the inputs and the option that binds it.
    #[error("{message}")]
    SymbolicDims {
        /// What is wrong, and the listing.
        message: String,
    },
    /// The imported graph failed the IR's final validation (a bug in a mapping).
    #[error("the imported graph is invalid: {0}")]
    Ir(#[from] ordo_ir::IrError),
}

fn list(nodes: &[UnsupportedNode]) -> String {
    nodes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Result type of this crate.
pub type OnnxResult<T> = Result<T, OnnxError>;
