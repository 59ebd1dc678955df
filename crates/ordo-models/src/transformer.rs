//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn transformer(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("transformer");
    Ok(b.finish())
}
