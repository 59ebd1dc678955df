//! Errors of the IR crate.

use crate::ids::{NodeId, OutletId, ParamId};

/// Everything that can go wrong while building or checking a graph. Every variant names the
/// node it is about.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum IrError {
    /// Shape or dtype inference rejected a node's inputs.
    #[error("node `{node}` ({op}): {message}")]
    Shape {
        /// Name of the offending node.
        node: String,
        /// Op name, e.g. `Conv2d`.
        op: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A node reads an outlet that does not exist.
    #[error("node `{node}` reads {input}, which does not exist")]
    DanglingInput {
        /// Name of the reading node.
        node: String,
        /// The missing outlet.
        input: OutletId,
    },
    /// A node references a parameter that does not exist.
    #[error("node `{node}` references parameter {param:?}, which does not exist")]
    DanglingParam {
        /// Name of the node.
        node: String,
        /// The missing parameter.
        param: ParamId,
    },
    /// The graph has a cycle through the named node.
    #[error("the graph has a cycle through node `{node}`")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
    /// Two nodes or two parameters share a name.
    #[error("duplicate {kind} name `{name}`")]
    DuplicateName {
        /// `"node"` or `"parameter"`.
        kind: &'static str,
        /// The name used twice.
        name: String,
    },
    /// A stored fact disagrees with what inference computes.
    #[error("node `{node}` output {slot}: stored {stored}, inferred {inferred}")]
    FactMismatch {
        /// Name of the node.
        node: String,
        /// Output port.
        slot: u32,
        /// Fact found in the graph.
        stored: String,
        /// Fact computed by shape inference.
        inferred: String,
    },
    /// A node's ids are inconsistent with its position.
    #[error("node at index {index} has id {id:?}")]
    BadId {
        /// Position in the node list.
        index: usize,
        /// The id it carries.
        id: NodeId,
    },
    /// The training graph cannot be built, or a gradient disagrees with its forward node.
    #[error("training graph of `{model}`: {message}")]
    Training {
        /// The model.
        model: String,
        /// What is wrong, naming the node or loss.
        message: String,
    },
    /// A step-structure pass ([`crate::transform`]) cannot copy the graph as asked.
    #[error("transforming `{model}`: {message}")]
    Transform {
        /// The model.
        model: String,
        /// What is wrong, naming the node.
        message: String,
    },
    /// A graph output names a missing outlet.
    #[error("graph output {output:?} does not exist")]
    DanglingOutput {
        /// The missing outlet.
        output: OutletId,
    },
}

/// Result type of this crate.
pub type IrResult<T> = Result<T, IrError>;
