//! Small graphs for examples and tests.

use crate::builder::GraphBuilder;
use crate::fact::{DType, TensorFact};
use crate::graph::Graph;
use crate::ids::OutletId;

/// `x [4, 8] -> fc1 (8 -> 16) -> relu -> fc2 (16 -> 3) -> loss`, the mean cross-entropy
/// against integer `labels [4]`: the graph and its loss, which is also its output.
pub fn mlp() -> (Graph, OutletId) {
    let build = || -> crate::IrResult<(Graph, OutletId)> {
        let mut b = GraphBuilder::new("mlp");
        let x = b.input("x", TensorFact::f32([4, 8]))?;
        let h = b.linear("fc1", x, 16)?;
        let h = b.relu("relu", h)?;
        let logits = b.linear("fc2", h, 3)?;
        let labels = b.input("labels", TensorFact::new(DType::I64, [4]))?;
        let loss = b.cross_entropy("loss", logits, labels)?;
        b.output(loss);
        Ok((b.finish(), loss))
    };
    build().expect("the sample MLP is well formed")
}
