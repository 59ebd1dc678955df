//! Transformer base (6 encoder + 6 decoder layers, d=512, 8 heads, ff=2048, vocabulary 32000),
//! node for node the PyTorch encoder-decoder Transformer the project compares against; and its
//! small variant.
//!
//! The reference is a plain post-norm Transformer without the extras of the paper:
//! - separate source and target embeddings `se` and `te`, not scaled by `sqrt(d)`, with no
//!   positional encoding (so there is no positional buffer) and no dropout on the embeddings;
//! - every sub-layer is `x = norm(x + drop(sublayer(x)))` (post-norm, LayerNorm eps 1e-5),
//!   dropout 0.1 on each sub-layer output and none on the attention probabilities;
//! - encoder layer `enc.{i}`: self-attention `att.{q,k,v,o}`, `n1`, feed-forward
//!   `ff.0` (Linear 512->2048), `ff.1` (ReLU), `ff.2` (Linear 2048->512), `n2`; the layer's
//!   dropout module `drop` is applied twice, so its nodes are `drop` and `drop_1`;
//! - decoder layer `dec.{i}`: causal self-attention `att` then `n1`, cross-attention `cross`
//!   (query from the decoder, keys and values from the last encoder layer) then `n3`, the
//!   feed-forward then `n2`; dropouts `drop`, `drop_1`, `drop_2`;
//! - the projection `out` (Linear 512->32000, with bias) on the last decoder layer.
//!
//! Parameters: 2 x 32000 x 512 (embeddings) + 6 x 3,152,384 (encoder layers)
//! + 6 x 4,204,032 (decoder layers) + 16,416,000 (`out`) = 93,322,496.

use ordo_ir::op::UnaryOp;
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::sequence::{AttentionCore, token_input, token_loss};

const DROPOUT: f64 = 0.1;
const LN_EPS: f64 = 1e-5;

/// The sizes a Transformer is built from.
struct Dims {
    name: &'static str,
    d_model: usize,
    heads: usize,
    d_ff: usize,
    vocab: usize,
    layers: usize,
}

const BASE: Dims =
    Dims { name: "transformer", d_model: 512, heads: 8, d_ff: 2048, vocab: 32000, layers: 6 };

const SMALL: Dims =
    Dims { name: "transformer-small", d_model: 32, heads: 4, d_ff: 64, vocab: 64, layers: 2 };

/// Builds the Transformer base with a token-level cross-entropy loss.
///
/// Inputs: `src` and `tgt`, i64 `[batch, seq_len]` (both sides use `seq_len`), and `labels`,
/// i64 `[batch, seq_len]`. The graph output is `loss`.
///
/// # Errors
/// Only on a bug in the definition; every batch size and sequence length builds.
pub fn transformer(config: &ModelConfig) -> Result<Graph, IrError> {
    build(config, &BASE)
}

/// The small variant of [`transformer`]: 2+2 layers, d=32, 4 heads, ff=64, vocabulary 64.
///
/// # Errors
/// Only on a bug in the definition; every batch size and sequence length builds.
pub fn transformer_small(config: &ModelConfig) -> Result<Graph, IrError> {
    build(config, &SMALL)
}

fn build(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    let mut b = GraphBuilder::new(dims.name);
    let src = token_input(&mut b, "src", &[batch, seq])?;
    let tgt = token_input(&mut b, "tgt", &[batch, seq])?;

    let mut x = b.embedding("se", src, dims.vocab, dims.d_model)?;
    for i in 0..dims.layers {
        x = encoder_layer(&mut b, dims, &format!("enc.{i}"), x)?;
    }
    let memory = x;

    let mut y = b.embedding("te", tgt, dims.vocab, dims.d_model)?;
    for i in 0..dims.layers {
        y = decoder_layer(&mut b, dims, &format!("dec.{i}"), y, memory)?;
    }
    let logits = b.linear("out", y, dims.vocab)?;
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

fn encoder_layer(
    b: &mut GraphBuilder,
    dims: &Dims,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let a = attention(b, dims, &format!("{p}.att"), x, x, false)?;
    let x = residual_norm(b, p, "drop", "add", "n1", x, a)?;
    let f = feed_forward(b, dims, &format!("{p}.ff"), x)?;
    residual_norm(b, p, "drop_1", "add_1", "n2", x, f)
}

fn decoder_layer(
    b: &mut GraphBuilder,
    dims: &Dims,
    p: &str,
    y: OutletId,
    memory: OutletId,
) -> Result<OutletId, IrError> {
    let a = attention(b, dims, &format!("{p}.att"), y, y, true)?;
    let y = residual_norm(b, p, "drop", "add", "n1", y, a)?;
    let c = attention(b, dims, &format!("{p}.cross"), y, memory, false)?;
    let y = residual_norm(b, p, "drop_1", "add_1", "n3", y, c)?;
    let f = feed_forward(b, dims, &format!("{p}.ff"), y)?;
    residual_norm(b, p, "drop_2", "add_2", "n2", y, f)
}

/// Multi-head attention `prefix.{q,k,v,o}` with queries from `x` and keys/values from `kv`.
fn attention(
    b: &mut GraphBuilder,
    dims: &Dims,
    prefix: &str,
    x: OutletId,
    kv: OutletId,
    causal: bool,
) -> Result<OutletId, IrError> {
    let q = b.linear(&format!("{prefix}.q"), x, dims.d_model)?;
    let k = b.linear(&format!("{prefix}.k"), kv, dims.d_model)?;
    let v = b.linear(&format!("{prefix}.v"), kv, dims.d_model)?;
    let core = AttentionCore { heads: dims.heads, causal, dropout: None };
    let context = core.apply(b, prefix, q, k, v)?;
    b.linear(&format!("{prefix}.o"), context, dims.d_model)
}

/// `ff.0` (Linear), `ff.1` (ReLU), `ff.2` (Linear).
fn feed_forward(
    b: &mut GraphBuilder,
    dims: &Dims,
    prefix: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let h = b.linear(&format!("{prefix}.0"), x, dims.d_ff)?;
    let h = b.unary(&format!("{prefix}.1"), UnaryOp::Relu, h)?;
    b.linear(&format!("{prefix}.2"), h, dims.d_model)
}

/// Post-norm residual: `norm(x + dropout(sub))`, nodes `p.{drop}`, `p.{add}`, `p.{norm}`.
fn residual_norm(
    b: &mut GraphBuilder,
    p: &str,
    drop: &str,
    add: &str,
    norm: &str,
    x: OutletId,
    sub: OutletId,
) -> Result<OutletId, IrError> {
    let sub = b.dropout(&format!("{p}.{drop}"), sub, DROPOUT)?;
    let sum = b.add(&format!("{p}.{add}"), x, sub)?;
    b.layer_norm(&format!("{p}.{norm}"), sum, LN_EPS)
}
