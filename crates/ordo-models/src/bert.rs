//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn bert_base(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("bert_base");
    Ok(b.finish())
}
