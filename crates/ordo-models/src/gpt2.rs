//! Placeholder: replaced by the model definition.

use ordo_ir::{Graph, GraphBuilder, IrError};

use crate::ModelConfig;

/// Builds the model (placeholder).
pub fn gpt2_small(_config: &ModelConfig) -> Result<Graph, IrError> {
    let b = GraphBuilder::new("gpt2_small");
    Ok(b.finish())
}
