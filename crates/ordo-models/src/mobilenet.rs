//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn mobilenet_v3_large(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("mobilenet_v3_large");
    Ok(b.finish())
}
