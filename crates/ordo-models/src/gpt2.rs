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
use crate::sequence::{AttentionCore, token_input, token_loss};

const DROPOUT: f64 = 0.1;
const LN_EPS: f64 = 1e-5;

/// The sizes a GPT-2 is built from.
struct Dims {
    name: &'static str,
    n_embd: usize,
    n_head: usize,
    n_layer: usize,
    n_positions: usize,
    vocab: usize,
}

const GPT2: Dims = Dims {
    name: "gpt2_small",
    n_embd: 768,
    n_head: 12,
    n_layer: 12,
    n_positions: 1024,
    vocab: 50257,
};

const SMALL: Dims = Dims {
    name: "gpt2_small-small",
    n_embd: 32,
    n_head: 4,
    n_layer: 2,
    n_positions: 64,
    vocab: 100,
};

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
    build(config, &GPT2)
}

/// The small variant of [`gpt2_small`]: 2 blocks of width 32 with 4 heads, 64 positions,
/// vocabulary 100.
///
/// # Errors
/// [`IrError::Shape`] naming `transformer.wpe` when `seq_len` exceeds the 64 positions.
pub fn gpt2_small_small(config: &ModelConfig) -> Result<Graph, IrError> {
    build(config, &SMALL)
}

fn build(config: &ModelConfig, dims: &Dims) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    if seq > dims.n_positions {
        return Err(IrError::Shape {
            node: "transformer.wpe".into(),
            op: "Embedding",
            message: format!(
                "sequence length {seq} exceeds the {} position embeddings",
                dims.n_positions
            ),
        });
    }
    let mut b = GraphBuilder::new(dims.name);
    let input_ids = token_input(&mut b, "input_ids", &[batch, seq])?;
    let position_ids = token_input(&mut b, "position_ids", &[1, seq])?;

    let tokens = b.embedding("transformer.wte", input_ids, dims.vocab, dims.n_embd)?;
    let wte = b.params_of(tokens.node)[0];
    let positions = b.embedding("transformer.wpe", position_ids, dims.n_positions, dims.n_embd)?;
    let x = b.add("transformer.add_position", tokens, positions)?;
    let mut x = b.dropout("transformer.drop", x, DROPOUT)?;
    for i in 0..dims.n_layer {
        x = block(&mut b, dims, &format!("transformer.h.{i}"), x)?;
    }
    let x = b.layer_norm("transformer.ln_f", x, LN_EPS)?;
    let lm_head = Op::Linear(Linear::new(dims.vocab).no_bias());
    let logits = b.op_with_params("lm_head", lm_head, &[x], &[wte])?;
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// One `GPT2Block`: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
fn block(b: &mut GraphBuilder, dims: &Dims, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    let h = b.layer_norm(&format!("{p}.ln_1"), x, LN_EPS)?;
    let a = attention(b, dims, &format!("{p}.attn"), h)?;
    let x = b.add(&format!("{p}.attn_residual"), x, a)?;
    let h = b.layer_norm(&format!("{p}.ln_2"), x, LN_EPS)?;
    let h = b.linear(&format!("{p}.mlp.c_fc"), h, 4 * dims.n_embd)?;
    let h = b.unary(&format!("{p}.mlp.act"), UnaryOp::GeluTanh, h)?;
    let h = b.linear(&format!("{p}.mlp.c_proj"), h, dims.n_embd)?;
    let h = b.dropout(&format!("{p}.mlp.dropout"), h, DROPOUT)?;
    b.add(&format!("{p}.mlp_residual"), x, h)
}

/// `GPT2Attention`: one `c_attn` projection split into query, key and value, causal attention,
/// `c_proj` and `resid_dropout`.
fn attention(b: &mut GraphBuilder, dims: &Dims, p: &str, x: OutletId) -> Result<OutletId, IrError> {
    // HF's Conv1D (c_attn, c_proj, c_fc) stores its weight as [in, out]; our Linear stores
    // [out, in]: the same elements, transposed.
    let qkv = b.linear(&format!("{p}.c_attn"), x, 3 * dims.n_embd)?;
    let d = dims.n_embd as i64;
    let q = b.slice(&format!("{p}.query"), qkv, -1, 0, d)?;
    let k = b.slice(&format!("{p}.key"), qkv, -1, d, 2 * d)?;
    let v = b.slice(&format!("{p}.value"), qkv, -1, 2 * d, 3 * d)?;
    let dropout = format!("{p}.attn_dropout");
    let core =
        AttentionCore { heads: dims.n_head, causal: true, dropout: Some((&dropout, DROPOUT)) };
    let context = core.apply(b, p, q, k, v)?;
    let out = b.linear(&format!("{p}.c_proj"), context, dims.n_embd)?;
    b.dropout(&format!("{p}.resid_dropout"), out, DROPOUT)
}
