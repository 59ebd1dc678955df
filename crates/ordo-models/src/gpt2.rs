//! GPT-2 small as Hugging Face's `GPT2LMHeadModel` (`gpt2` config): 12 pre-norm blocks of width
//! 768 with 12 heads, 1024 positions, vocabulary 50257, LayerNorm eps 1e-5, `gelu_new`, dropout
//! 0.1 (embeddings, attention probabilities, residual branches), causal self-attention, and the
//! language-model head tied to the token embedding.
//!
//! Parameters: `wte` 50257 x 768 + `wpe` 1024 x 768 + 12 x 7,087,872 (blocks) + 1536 (`ln_f`)
//! = 124,439,808; `lm_head` reuses `transformer.wte.weight` and adds none.

use ordo_ir::op::{Linear, Op, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, OutletId};

use crate::ModelConfig;
use crate::sequence::{AttentionCore, token_input, token_loss};

const N_EMBD: usize = 768;
const N_HEAD: usize = 12;
const N_LAYER: usize = 12;
const N_POSITIONS: usize = 1024;
const VOCAB: usize = 50257;
const DROPOUT: f64 = 0.1;
const LN_EPS: f64 = 1e-5;

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
    let (batch, seq) = (config.batch, config.seq_len);
    if seq > N_POSITIONS {
        return Err(IrError::Shape {
            node: "transformer.wpe".into(),
            op: "Embedding",
            message: format!("sequence length {seq} exceeds the {N_POSITIONS} position embeddings"),
        });
    }
    let mut b = GraphBuilder::new("gpt2_small");
    let input_ids = token_input(&mut b, "input_ids", &[batch, seq])?;
    let position_ids = token_input(&mut b, "position_ids", &[1, seq])?;

    let tokens = b.embedding("transformer.wte", input_ids, VOCAB, N_EMBD)?;
    let wte = b.params_of(tokens.node)[0];
    let positions = b.embedding("transformer.wpe", position_ids, N_POSITIONS, N_EMBD)?;
    let x = b.add("transformer.add_position", tokens, positions)?;
    let mut x = b.dropout("transformer.drop", x, DROPOUT)?;
    for i in 0..N_LAYER {
        x = block(&mut b, &format!("transformer.h.{i}"), x)?;
    }
    let x = b.layer_norm("transformer.ln_f", x, LN_EPS)?;
    let logits =
        b.op_with_params("lm_head", Op::Linear(Linear::new(VOCAB).no_bias()), &[x], &[wte])?;
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// One `GPT2Block`: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
fn block(b: &mut GraphBuilder, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    let h = b.layer_norm(&format!("{p}.ln_1"), x, LN_EPS)?;
    let a = attention(b, &format!("{p}.attn"), h)?;
    let x = b.add(&format!("{p}.attn_residual"), x, a)?;
    let h = b.layer_norm(&format!("{p}.ln_2"), x, LN_EPS)?;
    let h = b.linear(&format!("{p}.mlp.c_fc"), h, 4 * N_EMBD)?;
    let h = b.unary(&format!("{p}.mlp.act"), UnaryOp::GeluTanh, h)?;
    let h = b.linear(&format!("{p}.mlp.c_proj"), h, N_EMBD)?;
    let h = b.dropout(&format!("{p}.mlp.dropout"), h, DROPOUT)?;
    b.add(&format!("{p}.mlp_residual"), x, h)
}

/// `GPT2Attention`: one `c_attn` projection split into query, key and value, causal attention,
/// `c_proj` and `resid_dropout`.
fn attention(b: &mut GraphBuilder, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    // HF's Conv1D (c_attn, c_proj, c_fc) stores its weight as [in, out]; our Linear stores
    // [out, in]: the same elements, transposed.
    let qkv = b.linear(&format!("{p}.c_attn"), x, 3 * N_EMBD)?;
    let d = N_EMBD as i64;
    let q = b.slice(&format!("{p}.query"), qkv, -1, 0, d)?;
    let k = b.slice(&format!("{p}.key"), qkv, -1, d, 2 * d)?;
    let v = b.slice(&format!("{p}.value"), qkv, -1, 2 * d, 3 * d)?;
    let dropout = format!("{p}.attn_dropout");
    let core = AttentionCore { heads: N_HEAD, causal: true, dropout: Some((&dropout, DROPOUT)) };
    let context = core.apply(b, p, q, k, v)?;
    let out = b.linear(&format!("{p}.c_proj"), context, N_EMBD)?;
    b.dropout(&format!("{p}.resid_dropout"), out, DROPOUT)
}
