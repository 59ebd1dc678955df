//! Pieces shared by the image models: the image input, conv-norm-activation stacks, flattening
//! and the classification loss.

use ordo_ir::op::{BatchNorm, Conv2d, UnaryOp};
use ordo_ir::{DType, GraphBuilder, IrError, OutletId, TensorFact};

/// Adds the graph input `input`, f32 `[batch, 3, size, size]`.
pub(crate) fn image_input(
    b: &mut GraphBuilder,
    batch: usize,
    size: usize,
) -> Result<OutletId, IrError> {
    b.input("input", TensorFact::f32([batch, 3, size, size]))
}

/// Convolution, batch norm and an optional activation, as three nodes `<prefix>.<names[i]>`
/// (the activation node is skipped when `act` is `None`).
pub(crate) fn conv_bn_act(
    b: &mut GraphBuilder,
    prefix: &str,
    names: [&str; 3],
    x: OutletId,
    conv: Conv2d,
    bn: BatchNorm,
    act: Option<UnaryOp>,
) -> Result<OutletId, IrError> {
    let x = b.conv2d(&join(prefix, names[0]), x, conv)?;
    let x = b.batch_norm_with(&join(prefix, names[1]), x, bn)?;
    match act {
        Some(func) => b.unary(&join(prefix, names[2]), func, x),
        None => Ok(x),
    }
}

/// `torch.flatten(x, 1)`: `[N, C, 1, 1] -> [N, C]`.
pub(crate) fn flatten(b: &mut GraphBuilder, name: &str, x: OutletId) -> Result<OutletId, IrError> {
    let batch = b.fact(x).shape[0] as i64;
    b.reshape(name, x, &[batch, -1])
}

/// Adds the integer `labels` input and the mean cross-entropy `loss`, marked as the output.
pub(crate) fn classification_loss(
    b: &mut GraphBuilder,
    logits: OutletId,
) -> Result<OutletId, IrError> {
    let batch = b.fact(logits).shape[0];
    let labels = b.input("labels", TensorFact::new(DType::I64, [batch]))?;
    let loss = b.cross_entropy("loss", logits, labels)?;
    b.output(loss);
    Ok(loss)
}

/// `prefix.name`, or `name` at the top level.
pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}
