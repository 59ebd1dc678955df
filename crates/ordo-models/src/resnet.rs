//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn resnet50(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("resnet50");
    Ok(b.finish())
}
