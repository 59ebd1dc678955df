//! BERT-base as Hugging Face's `BertModel` with its pooler (`bert-base-uncased` config:
//! vocabulary 30522, 12 post-norm layers of width 768 with 12 heads, intermediate 3072, 512
//! positions, 2 token types, LayerNorm eps 1e-12, exact GELU, dropout 0.1), trained with a
//! masked-LM style loss whose decoder reuses the word embeddings; and its small variant.
//!
//! Node names are the module paths of `BertModel`; functional steps get names under their
//! module (`embeddings.add_position`, `encoder.layer.0.attention.output.residual`). No padding
//! mask is applied: every token attends to every token.
//!
//! Parameters: embeddings 23,837,184 (word 30522 x 768, position 512 x 768, token type
//! 2 x 768, LayerNorm) + 12 x 7,087,872 (layers) + 590,592 (pooler) = 109,482,240. The MLM
//! decoder `cls.predictions.decoder` has no bias and reads
//! `embeddings.word_embeddings.weight`, so it adds none.

use ordo_ir::op::{Linear, Op, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId, ParamId};

use crate::ModelConfig;
use crate::configured::{TransformerConfig, check_positions};
use crate::sequence::{AttentionCore, token_input, token_loss};

const DROPOUT: f64 = 0.1;

/// Builds BERT-base with pooler and the tied masked-LM loss.
///
/// Inputs: `input_ids` and `token_type_ids`, i64 `[batch, seq_len]`; `position_ids`, i64
/// `[1, seq_len]` (the model's position buffer, broadcast over the batch); `labels`, i64
/// `[batch, seq_len]`. Graph outputs: `loss`, then the pooler output `pooler.activation`
/// `[batch, 768]`.
///
/// # Errors
/// [`IrError::Shape`] naming `embeddings.position_embeddings` when `seq_len` exceeds the 512
/// positions.
pub fn bert_base(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::bert_base().build(config)
}

/// The small variant of [`bert_base`]: 2 layers of width 32 with 4 heads, intermediate 64,
/// vocabulary 100, 64 positions.
///
/// # Errors
/// [`IrError::Shape`] naming `embeddings.position_embeddings` when `seq_len` exceeds the 64
/// positions.
pub fn bert_base_small(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::bert_base().small().build(config)
}

/// The BERT architecture at `dims`' sizes (checked by [`TransformerConfig::build`]).
pub(crate) fn build(config: &ModelConfig, dims: &TransformerConfig) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    check_positions(seq, dims, ("embeddings.position_embeddings", "Embedding"), "positions")?;
    let mut b = GraphBuilder::new(&dims.name);
    let input_ids = token_input(&mut b, "input_ids", &[batch, seq])?;
    let token_type_ids = token_input(&mut b, "token_type_ids", &[batch, seq])?;
    let position_ids = token_input(&mut b, "position_ids", &[1, seq])?;

    let (mut x, word_embeddings) =
        embeddings(&mut b, dims, input_ids, token_type_ids, position_ids)?;
    for i in 0..dims.layers {
        x = layer(&mut b, dims, &format!("encoder.layer.{i}"), x)?;
    }
    let pooled = pooler(&mut b, dims, x)?;

    let decoder = Op::Linear(Linear::new(dims.vocab).no_bias());
    let logits = b.op_with_params("cls.predictions.decoder", decoder, &[x], &[word_embeddings])?;
    token_loss(&mut b, logits)?;
    b.output(pooled);
    Ok(b.finish())
}

/// `BertEmbeddings`: word + token type + position, LayerNorm, dropout. Also returns the word
/// embedding table, for the tied decoder.
fn embeddings(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    input_ids: OutletId,
    token_type_ids: OutletId,
    position_ids: OutletId,
) -> Result<(OutletId, ParamId), IrError> {
    // Created in module order, so the parameters follow the state dict.
    let words = b.embedding("embeddings.word_embeddings", input_ids, dims.vocab, dims.hidden)?;
    let positions = b.embedding(
        "embeddings.position_embeddings",
        position_ids,
        dims.max_positions,
        dims.hidden,
    )?;
    let types = b.embedding(
        "embeddings.token_type_embeddings",
        token_type_ids,
        dims.type_vocab,
        dims.hidden,
    )?;
    let x = b.add("embeddings.add_token_type", words, types)?;
    let x = b.add("embeddings.add_position", x, positions)?;
    let x = b.layer_norm("embeddings.LayerNorm", x, dims.norm_eps)?;
    let x = b.dropout("embeddings.dropout", x, DROPOUT)?;
    Ok((x, b.params_of(words.node)[0]))
}

/// `BertLayer`: self-attention with its output block, intermediate, output.
fn layer(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let s = format!("{p}.attention.self");
    let q = b.linear(&format!("{s}.query"), x, dims.hidden)?;
    let k = b.linear(&format!("{s}.key"), x, dims.hidden)?;
    let v = b.linear(&format!("{s}.value"), x, dims.hidden)?;
    let dropout = format!("{s}.dropout");
    let core =
        AttentionCore { heads: dims.heads, causal: false, dropout: Some((&dropout, DROPOUT)) };
    let context = core.apply(b, &s, q, k, v)?;
    let x = dense_residual_norm(
        b,
        &format!("{p}.attention.output"),
        context,
        x,
        (dims.hidden, dims.norm_eps),
    )?;

    let h = b.linear(&format!("{p}.intermediate.dense"), x, dims.intermediate)?;
    let h = b.unary(&format!("{p}.intermediate.intermediate_act_fn"), UnaryOp::Gelu, h)?;
    dense_residual_norm(b, &format!("{p}.output"), h, x, (dims.hidden, dims.norm_eps))
}

/// `BertSelfOutput` / `BertOutput`: `LayerNorm(dropout(dense(h)) + x)`.
fn dense_residual_norm(
    b: &mut GraphBuilder,
    p: &str,
    h: OutletId,
    x: OutletId,
    (width, eps): (usize, f64),
) -> Result<OutletId, IrError> {
    let h = b.linear(&format!("{p}.dense"), h, width)?;
    let h = b.dropout(&format!("{p}.dropout"), h, DROPOUT)?;
    let sum = b.add(&format!("{p}.residual"), h, x)?;
    b.layer_norm(&format!("{p}.LayerNorm"), sum, eps)
}

/// `BertPooler`: the first token's hidden state through `dense` and `tanh`.
fn pooler(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let batch = b.fact(x).shape[0] as i64;
    let first = b.slice("pooler.first_token", x, 1, 0, 1)?;
    let first = b.reshape("pooler.first_token_squeeze", first, &[batch, dims.hidden as i64])?;
    let h = b.linear("pooler.dense", first, dims.hidden)?;
    b.unary("pooler.activation", UnaryOp::Tanh, h)
}
