//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn inception_v3(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("inception_v3");
    Ok(b.finish())
}
