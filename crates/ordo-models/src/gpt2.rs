//! GPT-2 small as Hugging Face's `GPT2LMHeadModel` (`gpt2` config): 12 pre-norm blocks of width
//! 768 with 12 heads, 1024 positions, vocabulary 50257, LayerNorm eps 1e-5, `gelu_new`, dropout
//! 0.1 (embeddings, attention probabilities, residual branches), causal self-attention, and the
//! language-model head tied to the token embedding; and its small variant.
//!
//! Parameters: `wte` 50257 x 768 + `wpe` 1024 x 768 + 12 x 7,087,872 (blocks) + 1536 (`ln_f`)
//! = 124,439,808; `lm_head` reuses `transformer.wte.weight` and adds none.

use ordo_ir::op::{Linear, Op, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::configured::{TransformerConfig, check_positions};
use crate::sequence::{
    AttentionCore, FROM_RANKS, TO_RANKS, tensor_parallel, token_input, token_loss,
};

const DROPOUT: f64 = 0.1;

/// Builds GPT-2 small with the causal-LM cross-entropy loss.
///
/// Inputs: `input_ids` i64 `[batch, seq_len]`; `position_ids` i64 `[1, seq_len]` (the
/// `arange` the model makes itself, broadcast over the batch); `labels` i64
/// `[batch, seq_len]`, the next-token targets, already shifted by one position (Hugging Face
/// shifts them inside its loss). The graph output is `loss`.
///
/// # Errors
/// [`IrError::Shape`] naming `transformer.wpe` when `seq_len` exceeds the 1024 positions.
pub fn gpt2_small(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::gpt2_small().build(config)
}

/// The small variant of [`gpt2_small`]: 2 blocks of width 32 with 4 heads, 64 positions,
/// vocabulary 100.
///
/// # Errors
/// [`IrError::Shape`] naming `transformer.wpe` when `seq_len` exceeds the 64 positions.
pub fn gpt2_small_small(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::gpt2_small().small().build(config)
}

/// GPT-3 175B ([`TransformerConfig::gpt3_175b`]): GPT-2's architecture at 96 blocks of width
/// 12288 with 96 heads and 2048 positions; 174,604,259,328 parameters.
///
/// # Errors
/// As [`gpt2_small`], at 2048 positions.
pub fn gpt3_175b(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::gpt3_175b().build(config)
}

/// The small variant of [`gpt3_175b`] (that of [`gpt2_small`], named `gpt3_175b-small`).
///
/// # Errors
/// As [`gpt2_small_small`].
pub fn gpt3_175b_small(config: &ModelConfig) -> Result<Graph, IrError> {
    TransformerConfig::gpt3_175b().small().build(config)
}

/// The GPT-2 architecture at `dims`' sizes (checked by [`TransformerConfig::build`]); an
/// untied configuration gets an `lm_head` weight of its own.
pub(crate) fn build(config: &ModelConfig, dims: &TransformerConfig) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    check_positions(seq, dims, ("transformer.wpe", "Embedding"), "position embeddings")?;
    let mut b = GraphBuilder::new(&dims.name);
    let input_ids = token_input(&mut b, "input_ids", &[batch, seq])?;
    // Under sequence parallelism a rank adds the positions of its slice of the sequence.
    let slice = seq / dims.tensor_parallel;
    let position_ids = token_input(&mut b, "position_ids", &[1, slice.max(1)])?;

    let tokens = b.embedding("transformer.wte", input_ids, dims.vocab_per_rank(), dims.hidden)?;
    let wte = b.params_of(tokens.node)[0];
    let tokens =
        tensor_parallel(&mut b, dims, ("transformer.wte.reduce_scatter", FROM_RANKS), tokens)?;
    let positions =
        b.embedding("transformer.wpe", position_ids, dims.max_positions, dims.hidden)?;
    let x = b.add("transformer.add_position", tokens, positions)?;
    let mut x = b.dropout("transformer.drop", x, DROPOUT)?;
    for i in 0..dims.layers {
        x = block(&mut b, dims, &format!("transformer.h.{i}"), x)?;
    }
    let x = b.layer_norm("transformer.ln_f", x, dims.norm_eps)?;
    let x = tensor_parallel(&mut b, dims, ("lm_head.all_gather", TO_RANKS), x)?;
    let vocab = dims.vocab_per_rank();
    let logits = if dims.tied_embeddings {
        let lm_head = Op::Linear(Linear::new(vocab).no_bias());
        b.op_with_params("lm_head", lm_head, &[x], &[wte])?
    } else {
        b.linear_no_bias("lm_head", x, vocab)?
    };
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// One `GPT2Block`: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
fn block(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let h = b.layer_norm(&format!("{p}.ln_1"), x, dims.norm_eps)?;
    let h = tensor_parallel(b, dims, (&format!("{p}.attn.all_gather"), TO_RANKS), h)?;
    let a = attention(b, dims, &format!("{p}.attn"), h)?;
    let x = b.add(&format!("{p}.attn_residual"), x, a)?;
    let h = b.layer_norm(&format!("{p}.ln_2"), x, dims.norm_eps)?;
    let h = tensor_parallel(b, dims, (&format!("{p}.mlp.all_gather"), TO_RANKS), h)?;
    let h = b.linear(&format!("{p}.mlp.c_fc"), h, dims.intermediate_per_rank())?;
    let h = b.unary(&format!("{p}.mlp.act"), UnaryOp::GeluTanh, h)?;
    let h = b.linear(&format!("{p}.mlp.c_proj"), h, dims.hidden)?;
    let h = tensor_parallel(b, dims, (&format!("{p}.mlp.reduce_scatter"), FROM_RANKS), h)?;
    let h = b.dropout(&format!("{p}.mlp.dropout"), h, DROPOUT)?;
    b.add(&format!("{p}.mlp_residual"), x, h)
}

/// `GPT2Attention`: one `c_attn` projection split into query, key and value, causal attention,
/// `c_proj` and `resid_dropout`.
fn attention(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    // HF's Conv1D (c_attn, c_proj, c_fc) stores its weight as [in, out]; our Linear stores
    // [out, in]: the same elements, transposed.
    let width = dims.heads_per_rank() * dims.head_dim();
    let qkv = b.linear(&format!("{p}.c_attn"), x, 3 * width)?;
    let d = width as i64;
    let q = b.slice(&format!("{p}.query"), qkv, -1, 0, d)?;
    let k = b.slice(&format!("{p}.key"), qkv, -1, d, 2 * d)?;
    let v = b.slice(&format!("{p}.value"), qkv, -1, 2 * d, 3 * d)?;
    let dropout = format!("{p}.attn_dropout");
    let core = AttentionCore {
        heads: dims.heads_per_rank(),
        causal: true,
        dropout: Some((&dropout, DROPOUT)),
    };
    let context = core.apply(b, p, q, k, v)?;
    let out = b.linear(&format!("{p}.c_proj"), context, dims.hidden)?;
    let out = tensor_parallel(b, dims, (&format!("{p}.reduce_scatter"), FROM_RANKS), out)?;
    b.dropout(&format!("{p}.resid_dropout"), out, DROPOUT)
}
