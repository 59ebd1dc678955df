//! GNMT v2 as in NVIDIA's PyTorch GNMT (`seq2seq/models/{gnmt,encoder,decoder,attention}.py`),
//! sized as in Baechi's benchmark: hidden size 512, 4 encoder and 4 decoder LSTM layers,
//! vocabulary 30000, dropout 0.2, sequence-first tensors (`batch_first=False`); and its small
//! variant.
//!
//! - The embedding is shared between encoder and decoder, the reference's default
//!   (`share_embedding=True`): `encoder.embedder` owns `encoder.embedder.weight` and
//!   `decoder.embedder` reads the same parameter.
//! - Encoder: dropout before each LSTM layer (the module `encoder.dropout`, applied four times:
//!   nodes `dropout`, `dropout_1`, ...); `rnn_layers.0` bidirectional LSTM(512 -> 2 x 512),
//!   `rnn_layers.1` LSTM(1024 -> 512), `rnn_layers.2` and `.3` LSTM(512 -> 512), each added
//!   to its input (`add`, `add_1`).
//! - Decoder: `att_rnn.dropout` then `att_rnn.rnn` LSTM(512 -> 512), normalized Bahdanau
//!   attention `att_rnn.attn` over the encoder output, then three LSTM(1024 -> 512) layers
//!   `rnn_layers.{0,1,2}` whose input is `cat(x, context)` followed by dropout, with residual
//!   adds from the second on, and `classifier.classifier` Linear(512 -> 30000).
//! - The attention score is `tanh(linear_q(q) + linear_k(k) + normalize_bias) . w` with
//!   `w = normalize_scalar * linear_att / |linear_att|`; softmax over the source; the context
//!   is the probability-weighted sum of the (unprojected) encoder outputs.
//! - All sequences are taken as full length, so the packing of the first encoder layer and the
//!   attention's padding mask are identities and are left out. The loss is plain
//!   cross-entropy (the reference trains with label smoothing, which costs the same).
//!
//! Parameters, with H = 512, V = 30000 and an LSTM(I -> H) holding 4H(I + H) + 8H:
//! - shared embedding V x H = 15,360,000;
//! - encoder: 2 x 2,101,248 (bidirectional, I = H) + 3,149,824 (I = 2H)
//!   + 2 x 2,101,248 (I = H) = 11,554,816;
//! - decoder: 2,101,248 (`att_rnn.rnn`, I = H) + attention (2 H^2 + H + 1 + H = 525,313)
//!   + 3 x 3,149,824 (I = 2H) + classifier (H V + V = 15,390,000) = 27,466,033;
//! - total 54,380,849.

use ordo_ir::op::{Embedding, Lstm, Op, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId, TensorFact};

use crate::ModelConfig;
use crate::sequence::{dims3, token_input, token_loss};

const DROPOUT: f64 = 0.2;

/// The sizes a GNMT is built from.
struct Dims {
    name: &'static str,
    hidden: usize,
    vocab: usize,
    /// LSTM layers of the encoder and of the decoder (at least 3 for the residual adds).
    layers: usize,
}

const GNMT: Dims = Dims { name: "gnmt", hidden: 512, vocab: 30000, layers: 4 };

const SMALL: Dims = Dims { name: "gnmt-small", hidden: 16, vocab: 64, layers: 3 };

/// Builds GNMT v2 with a token-level cross-entropy loss.
///
/// Inputs, sequence-first like the reference: `src` and `tgt`, i64 `[seq_len, batch]`, and
/// `labels`, i64 `[seq_len, batch]`. The graph output is `loss`.
///
/// # Errors
/// Only on a bug in the definition; every batch size and sequence length builds.
pub fn gnmt(config: &ModelConfig) -> Result<Graph, IrError> {
    build(config, &GNMT)
}

/// The small variant of [`gnmt`]: hidden size 16, 3+3 LSTM layers (the first bidirectional, a
/// residual add in each stack), vocabulary 64.
///
/// # Errors
/// Only on a bug in the definition; every batch size and sequence length builds.
pub fn gnmt_small(config: &ModelConfig) -> Result<Graph, IrError> {
    build(config, &SMALL)
}

fn build(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    let mut b = GraphBuilder::new(dims.name);
    let src = token_input(&mut b, "src", &[seq, batch])?;
    let tgt = token_input(&mut b, "tgt", &[seq, batch])?;

    let x = b.embedding("encoder.embedder", src, dims.vocab, dims.hidden)?;
    let embedder = b.params_of(x.node)[0];
    let context = encoder(&mut b, dims, x)?;

    let embedding = Op::Embedding(Embedding::new(dims.vocab, dims.hidden));
    let y = b.op_with_params("decoder.embedder", embedding, &[tgt], &[embedder])?;
    let logits = decoder(&mut b, dims, y, context)?;
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// `ResidualRecurrentEncoder` after the embedding.
fn encoder(b: &mut GraphBuilder, dims: &Dims, x: OutletId) -> Result<OutletId, IrError> {
    let x = b.dropout("encoder.dropout", x, DROPOUT)?;
    let x = b.lstm("encoder.rnn_layers.0", x, Lstm::bidirectional(dims.hidden))?;
    let x = b.dropout("encoder.dropout_1", x, DROPOUT)?;
    let mut x = b.lstm("encoder.rnn_layers.1", x, Lstm::new(dims.hidden))?;
    for i in 2..dims.layers {
        let residual = x;
        let h = b.dropout(&format!("encoder.dropout_{i}"), x, DROPOUT)?;
        let h = b.lstm(&format!("encoder.rnn_layers.{i}"), h, Lstm::new(dims.hidden))?;
        x = b.add(&format!("encoder.{}", suffixed("add", i - 2)), h, residual)?;
    }
    Ok(x)
}

/// `ResidualRecurrentDecoder` after the embedding.
fn decoder(
    b: &mut GraphBuilder,
    dims: &Dims,
    y: OutletId,
    context: OutletId,
) -> Result<OutletId, IrError> {
    let y = b.dropout("decoder.att_rnn.dropout", y, DROPOUT)?;
    let y = b.lstm("decoder.att_rnn.rnn", y, Lstm::new(dims.hidden))?;
    let attn = bahdanau_attention(b, dims, "decoder.att_rnn.attn", y, context)?;

    let mut x = y;
    for i in 0..dims.layers - 1 {
        let residual = x;
        let h = b.concat(&format!("decoder.{}", suffixed("cat", i)), &[x, attn], 2)?;
        let h = b.dropout(&format!("decoder.{}", suffixed("dropout", i)), h, DROPOUT)?;
        let h = b.lstm(&format!("decoder.rnn_layers.{i}"), h, Lstm::new(dims.hidden))?;
        x = if i == 0 {
            h
        } else {
            b.add(&format!("decoder.{}", suffixed("add", i - 1)), h, residual)?
        };
    }
    b.linear("decoder.classifier.classifier", x, dims.vocab)
}

/// Normalized `BahdanauAttention` of the decoder states `query [Tq, B, H]` over the encoder
/// outputs `keys [Tk, B, H]`, returning the context `[Tq, B, H]`.
fn bahdanau_attention(
    b: &mut GraphBuilder,
    dims: &Dims,
    p: &str,
    query: OutletId,
    keys: OutletId,
) -> Result<OutletId, IrError> {
    let n = |s: &str| format!("{p}.{s}");
    let h = dims.hidden as i64;
    let query = b.transpose(&n("query_transpose"), query, &[1, 0, 2])?;
    let keys = b.transpose(&n("keys_transpose"), keys, &[1, 0, 2])?;
    let [batch, tq, _] = dims3(b, query);
    let tk = b.fact(keys).shape[1] as i64;

    let pq = b.linear_no_bias(&n("linear_q"), query, dims.hidden)?;
    let pk = b.linear_no_bias(&n("linear_k"), keys, dims.hidden)?;
    // unsqueeze + expand + add: a broadcasting add of [B, Tq, 1, H] and [B, 1, Tk, H].
    let pq = b.reshape(&n("query_unsqueeze"), pq, &[batch, tq, 1, h])?;
    let pk = b.reshape(&n("keys_unsqueeze"), pk, &[batch, 1, tk, h])?;
    let sum_qk = b.add(&n("sum_qk"), pq, pk)?;
    let bias = b.parameter(&n("normalize_bias"), TensorFact::f32([dims.hidden]))?;
    let sum_qk = b.add(&n("add_normalize_bias"), sum_qk, bias)?;
    let energy = b.unary(&n("tanh"), UnaryOp::Tanh, sum_qk)?;

    let att = normalized_linear_att(b, dims, p)?;
    let scores = b.matmul(&n("scores"), energy, att)?;
    let scores = b.reshape(&n("scores_squeeze"), scores, &[batch, tq, tk])?;
    let probs = b.softmax(&n("softmax"), scores, -1)?;
    let context = b.matmul(&n("context"), probs, keys)?;
    b.transpose(&n("context_transpose"), context, &[1, 0, 2])
}

/// `normalize_scalar * linear_att / linear_att.norm()`, as a column `[H, 1]`.
fn normalized_linear_att(b: &mut GraphBuilder, dims: &Dims, p: &str) -> Result<OutletId, IrError> {
    let n = |s: &str| format!("{p}.{s}");
    let h = dims.hidden as i64;
    let att = b.parameter(&n("linear_att"), TensorFact::f32([dims.hidden]))?;
    let row = b.reshape(&n("linear_att_row"), att, &[1, h])?;
    let col = b.reshape(&n("linear_att_column"), att, &[h, 1])?;
    let square_norm = b.matmul(&n("linear_att_square_norm"), row, col)?;
    let inverse_norm = b.unary(&n("linear_att_inverse_norm"), UnaryOp::Rsqrt, square_norm)?;
    let unit = b.mul(&n("linear_att_normalized"), col, inverse_norm)?;
    let scalar = b.parameter(&n("normalize_scalar"), TensorFact::f32([1]))?;
    b.mul(&n("linear_att_scaled"), unit, scalar)
}

/// `name` for the first use of a module, `name_i` for the later ones (as exporters name them).
fn suffixed(name: &str, i: usize) -> String {
    if i == 0 { name.to_string() } else { format!("{name}_{i}") }
}
