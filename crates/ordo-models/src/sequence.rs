//! Pieces shared by the sequence models: token inputs, the multi-head attention core and the
//! token-level loss.

use ordo_ir::op::{TensorParallel, TensorParallelKind};
use ordo_ir::{DType, GraphBuilder, IrError, Op, OutletId, TensorFact};

use crate::configured::TransformerConfig;

/// Adds an integer (i64) graph input of the given shape.
pub(crate) fn token_input(
    b: &mut GraphBuilder,
    name: &str,
    shape: &[usize],
) -> Result<OutletId, IrError> {
    b.input(name, TensorFact::new(DType::I64, shape))
}

/// How the attention core treats its scores.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttentionCore<'a> {
    /// Number of heads; the model width must be divisible by it.
    pub heads: usize,
    /// Whether a position may only attend to itself and earlier positions.
    pub causal: bool,
    /// Dropout on the attention probabilities: full node name and drop probability.
    pub dropout: Option<(&'a str, f64)>,
}

impl AttentionCore<'_> {
    /// Scaled dot-product attention over already projected `q [B, Tq, D]`, `k, v [B, Tk, D]`,
    /// returning the merged context `[B, Tq, D]` for the output projection.
    ///
    /// Nodes, all under `prefix`: `{q,k,v}_reshape` to `[B, T, H, D/H]`; `q_transpose` and
    /// `v_transpose` to `[B, H, T, D/H]`; `k_transpose` straight to the transposed key
    /// `[B, H, D/H, Tk]`; `scores` (MatMul), `scale` (by `1/sqrt(D/H)`), `causal_mask` when
    /// causal, `softmax`, the dropout node when asked for, `context` (MatMul with v), then
    /// `context_transpose` and `context_reshape` back to `[B, Tq, D]`.
    pub(crate) fn apply(
        &self,
        b: &mut GraphBuilder,
        prefix: &str,
        q: OutletId,
        k: OutletId,
        v: OutletId,
    ) -> Result<OutletId, IrError> {
        let [batch, tq, d] = dims3(b, q);
        let tk = b.fact(k).shape[1] as i64;
        let h = self.heads as i64;
        let dh = d / h;
        let name = |n: &str| format!("{prefix}.{n}");

        let q = b.reshape(&name("q_reshape"), q, &[batch, tq, h, dh])?;
        let q = b.transpose(&name("q_transpose"), q, &[0, 2, 1, 3])?;
        let k = b.reshape(&name("k_reshape"), k, &[batch, tk, h, dh])?;
        let k = b.transpose(&name("k_transpose"), k, &[0, 2, 3, 1])?;
        let v = b.reshape(&name("v_reshape"), v, &[batch, tk, h, dh])?;
        let v = b.transpose(&name("v_transpose"), v, &[0, 2, 1, 3])?;

        let scores = b.matmul(&name("scores"), q, k)?;
        let mut scores = b.scale(&name("scale"), scores, 1.0 / (dh as f64).sqrt())?;
        if self.causal {
            scores = b.op(&name("causal_mask"), ordo_ir::Op::CausalMask, &[scores])?;
        }
        let mut probs = b.softmax(&name("softmax"), scores, -1)?;
        if let Some((dropout, p)) = self.dropout {
            probs = b.dropout(dropout, probs, p)?;
        }
        let context = b.matmul(&name("context"), probs, v)?;
        let context = b.transpose(&name("context_transpose"), context, &[0, 2, 1, 3])?;
        b.reshape(&name("context_reshape"), context, &[batch, tq, d])
    }
}

/// Adds the integer `labels` input (the logits' shape without the class dimension) and the
/// mean cross-entropy `loss`, marked as a graph output.
pub(crate) fn token_loss(b: &mut GraphBuilder, logits: OutletId) -> Result<OutletId, IrError> {
    let shape = b.fact(logits).shape.clone();
    let labels = token_input(b, "labels", &shape[..shape.len() - 1])?;
    let loss = b.cross_entropy("loss", logits, labels)?;
    b.output(loss);
    Ok(loss)
}

/// The three dimensions of a rank-3 wire, as reshape targets.
pub(crate) fn dims3(b: &GraphBuilder, x: OutletId) -> [i64; 3] {
    let s = &b.fact(x).shape;
    [s[0] as i64, s[1] as i64, s[2] as i64]
}

/// Megatron-LM's `f` under sequence parallelism, before the column-parallel products that
/// read its input: the ranks' slices of the sequence all-gathered forward, the gradients of the
/// ranks' shards reduce-scattered backward.
pub(crate) const TO_RANKS: TensorParallelKind = TensorParallelKind::GatherSequence;

/// Megatron-LM's `g` under sequence parallelism, after a row-parallel product (or the
/// vocabulary-parallel embedding): the ranks' partial sums reduce-scattered into slices of the
/// sequence forward, the gradient all-gathered backward.
pub(crate) const FROM_RANKS: TensorParallelKind = TensorParallelKind::ScatterSequence;

/// `kind`'s collective ([`TO_RANKS`], [`FROM_RANKS`]) on `x`, named `name`, over the
/// tensor-parallel group the graph is one rank of; `x` itself when the graph is the whole model
/// ([`TransformerConfig::tensor_parallel`] 1).
pub(crate) fn tensor_parallel(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    (name, kind): (&str, TensorParallelKind),
    x: OutletId,
) -> Result<OutletId, IrError> {
    if dims.tensor_parallel == 1 {
        return Ok(x);
    }
    let op = Op::TensorParallel(TensorParallel { kind, ranks: dims.tensor_parallel });
    b.op(name, op, &[x])
}
