//! LLaMA as Hugging Face's `LlamaForCausalLM`: pre-norm decoder layers of RMSNorm,
//! grouped-query self-attention with rotary positions and a SwiGLU MLP, no biases, no
//! dropout; the final RMSNorm and an untied (or tied) LM head. Node names are the module paths
//! (`model.layers.0.self_attn.q_proj`); functional steps get names under their module.
//!
//! Parameters of LLaMA-2 7B: embeddings 32000 x 4096 + 32 x 202,383,360 (layers: q, k, v, o
//! 4096 x 4096 each, gate, up, down 4096 x 11008 each, two norms) + 4096 (final norm) + LM head
//! 32000 x 4096 = 6,738,415,616.
//!
//! Rotary positions rotate each head's query and key by the position's angles: `x * cos +
//! rotate_half(x) * sin`, with `cos` and `sin` (`[1, seq, 1, head_dim]`) as the model's
//! non-trained buffers; grouped-query attention repeats each key/value head for its
//! `heads / kv_heads` query heads (Hugging Face's `repeat_kv`).

use ordo_ir::op::{Reduce, ReduceKind, UnaryOp};
use ordo_ir::{Graph, GraphBuilder, IrError, Op, OutletId, ParamInit, TensorFact};

use crate::ModelConfig;
use crate::configured::{TransformerConfig, check_positions};
use crate::sequence::{
    AttentionCore, FROM_RANKS, TO_RANKS, tensor_parallel, token_input, token_loss,
};

/// LLaMA-2 at `billions` (7, 13 or 70; [`TransformerConfig::llama2`]), or its small variant
/// ([`TransformerConfig::small`]: 2 layers, 64 positions; 70B's keeps grouped-query attention,
/// 4 query heads sharing one key/value head).
///
/// # Errors
/// [`IrError::Shape`] when `seq_len` exceeds the positions (4096, or 64 small).
pub(crate) fn llama2(billions: usize, small: bool, config: &ModelConfig) -> Result<Graph, IrError> {
    let dims = TransformerConfig::llama2(billions).expect("a LLaMA-2 size");
    if small { dims.small().build(config) } else { dims.build(config) }
}

/// The LLaMA architecture at `dims`' sizes (checked by [`TransformerConfig::build`]).
pub(crate) fn build(config: &ModelConfig, dims: &TransformerConfig) -> Result<Graph, IrError> {
    let (batch, seq) = (config.batch, config.seq_len);
    check_positions(seq, dims, ("model.rotary_emb", "Rotary"), "positions")?;
    let mut b = GraphBuilder::new(&dims.name);
    let input_ids = token_input(&mut b, "input_ids", &[batch, seq])?;
    let tokens =
        b.embedding("model.embed_tokens", input_ids, dims.vocab_per_rank(), dims.hidden)?;
    let embed = b.params_of(tokens.node)[0];
    let tokens =
        tensor_parallel(&mut b, dims, ("model.embed_tokens.reduce_scatter", FROM_RANKS), tokens)?;
    let shared = Shared {
        eps: buffer(&mut b, "model.norm_eps", &[], ParamInit::Constant(dims.norm_eps))?,
        cos: rotary_table(&mut b, "model.rotary_emb.cos", seq, dims.head_dim(), false)?,
        sin: rotary_table(&mut b, "model.rotary_emb.sin", seq, dims.head_dim(), true)?,
    };
    let mut x = tokens;
    for i in 0..dims.layers {
        x = layer(&mut b, dims, &shared, &format!("model.layers.{i}"), x)?;
    }
    let x = rms_norm(&mut b, dims, &shared, "model.norm", x)?;
    let x = tensor_parallel(&mut b, dims, ("lm_head.all_gather", TO_RANKS), x)?;
    let vocab = dims.vocab_per_rank();
    let logits = if dims.tied_embeddings {
        let lm_head = Op::Linear(ordo_ir::op::Linear::new(vocab).no_bias());
        b.op_with_params("lm_head", lm_head, &[x], &[embed])?
    } else {
        b.linear_no_bias("lm_head", x, vocab)?
    };
    token_loss(&mut b, logits)?;
    Ok(b.finish())
}

/// The rotary positions' base (LLaMA's `rope_theta`).
const ROPE_BASE: f64 = 10000.0;

/// A buffer called `name` of `shape`, initialised as `init` says.
fn buffer(
    b: &mut GraphBuilder,
    name: &str,
    shape: &[usize],
    init: ParamInit,
) -> Result<OutletId, IrError> {
    let out = b.buffer(name, TensorFact::f32(shape))?;
    let param = b.params_of(out.node)[0];
    b.set_init(param, init);
    Ok(out)
}

/// The rotary `cos` (or `sin`) table `[1, seq, 1, head_dim]`.
fn rotary_table(
    b: &mut GraphBuilder,
    name: &str,
    seq: usize,
    head_dim: usize,
    sine: bool,
) -> Result<OutletId, IrError> {
    buffer(b, name, &[1, seq, 1, head_dim], ParamInit::Rotary { base: ROPE_BASE, sine })
}

/// The buffers every layer reads: the norms' epsilon and the rotary angles.
struct Shared {
    eps: OutletId,
    cos: OutletId,
    sin: OutletId,
}

/// `LlamaDecoderLayer`: `x + attn(norm(x))`, then `x + mlp(norm(x))`.
fn layer(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    shared: &Shared,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let h = rms_norm(b, dims, shared, &format!("{p}.input_layernorm"), x)?;
    let h = tensor_parallel(b, dims, (&format!("{p}.self_attn.all_gather"), TO_RANKS), h)?;
    let a = attention(b, dims, shared, &format!("{p}.self_attn"), h)?;
    let a = tensor_parallel(b, dims, (&format!("{p}.self_attn.reduce_scatter"), FROM_RANKS), a)?;
    let x = b.add(&format!("{p}.attn_residual"), x, a)?;
    let h = rms_norm(b, dims, shared, &format!("{p}.post_attention_layernorm"), x)?;
    let m = format!("{p}.mlp");
    let h = tensor_parallel(b, dims, (&format!("{m}.all_gather"), TO_RANKS), h)?;
    let gate = b.linear_no_bias(&format!("{m}.gate_proj"), h, dims.intermediate_per_rank())?;
    let up = b.linear_no_bias(&format!("{m}.up_proj"), h, dims.intermediate_per_rank())?;
    let sigmoid = b.unary(&format!("{m}.act_fn.sigmoid"), UnaryOp::Sigmoid, gate)?;
    let silu = b.mul(&format!("{m}.act_fn"), gate, sigmoid)?;
    let h = b.mul(&format!("{m}.gated"), silu, up)?;
    let h = b.linear_no_bias(&format!("{m}.down_proj"), h, dims.hidden)?;
    let h = tensor_parallel(b, dims, (&format!("{m}.reduce_scatter"), FROM_RANKS), h)?;
    b.add(&format!("{p}.mlp_residual"), x, h)
}

/// `LlamaRMSNorm`: `x / sqrt(mean(x^2) + eps) * weight` over the last axis.
fn rms_norm(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    shared: &Shared,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let last = b.fact(x).rank() - 1;
    let square = b.mul(&format!("{p}.square"), x, x)?;
    let mean = Op::Reduce(Reduce { kind: ReduceKind::Mean, axes: vec![last], keepdims: true });
    let variance = b.op(&format!("{p}.variance"), mean, &[square])?;
    let shifted = b.add(&format!("{p}.variance_eps"), variance, shared.eps)?;
    let inv = b.unary(&format!("{p}.rsqrt"), UnaryOp::Rsqrt, shifted)?;
    let normed = b.mul(&format!("{p}.normed"), x, inv)?;
    let weight = b.parameter(&format!("{p}.weight"), TensorFact::f32([dims.hidden]))?;
    let param = b.params_of(weight.node)[0];
    b.set_init(param, ParamInit::Constant(1.0));
    b.mul(p, normed, weight)
}

/// `LlamaAttention`: query, key and value projections (`kv_heads` key/value heads), rotary
/// positions on the query and key, each key/value head repeated for its query heads, causal
/// attention and the output projection.
fn attention(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    shared: &Shared,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let (hd, heads, kv_heads) = (dims.head_dim(), dims.heads_per_rank(), dims.kv_heads_per_rank());
    let q = b.linear_no_bias(&format!("{p}.q_proj"), x, heads * hd)?;
    let k = b.linear_no_bias(&format!("{p}.k_proj"), x, kv_heads * hd)?;
    let v = b.linear_no_bias(&format!("{p}.v_proj"), x, kv_heads * hd)?;
    let q = rotary(b, shared, &format!("{p}.q_rotary"), q, heads, hd)?;
    let k = rotary(b, shared, &format!("{p}.k_rotary"), k, kv_heads, hd)?;
    let k = repeat_kv(b, dims, &format!("{p}.k_repeat"), k)?;
    let v = repeat_kv(b, dims, &format!("{p}.v_repeat"), v)?;
    let core = AttentionCore { heads, causal: true, dropout: None };
    let context = core.apply(b, p, q, k, v)?;
    b.linear_no_bias(&format!("{p}.o_proj"), context, dims.hidden)
}

/// `x * cos + rotate_half(x) * sin` per head of `x` (`[B, T, heads * hd]`), where
/// `rotate_half` of a head `(x1, x2)` is `(-x2, x1)`.
fn rotary(
    b: &mut GraphBuilder,
    shared: &Shared,
    p: &str,
    x: OutletId,
    heads: usize,
    hd: usize,
) -> Result<OutletId, IrError> {
    let shape = b.fact(x).shape.clone();
    let (batch, seq) = (shape[0] as i64, shape[1] as i64);
    let (heads, hd) = (heads as i64, hd as i64);
    let per_head = b.reshape(&format!("{p}.heads"), x, &[batch, seq, heads, hd])?;
    let x1 = b.slice(&format!("{p}.first_half"), per_head, -1, 0, hd / 2)?;
    let x2 = b.slice(&format!("{p}.second_half"), per_head, -1, hd / 2, hd)?;
    let minus_x2 = b.scale(&format!("{p}.negate"), x2, -1.0)?;
    let rotated = b.concat(&format!("{p}.rotate_half"), &[minus_x2, x1], -1)?;
    let cos = b.mul(&format!("{p}.cos"), per_head, shared.cos)?;
    let sin = b.mul(&format!("{p}.sin"), rotated, shared.sin)?;
    let sum = b.add(p, cos, sin)?;
    b.reshape(&format!("{p}.merge"), sum, &[batch, seq, heads * hd])
}

/// Each of `x`'s `kv_heads` heads (`[B, T, kv_heads * hd]`) repeated for the
/// `heads / kv_heads` query heads that share it: `[B, T, heads * hd]`, head `h` reading
/// key/value head `h / (heads / kv_heads)` as `repeat_kv` does. Nothing for multi-head
/// attention.
fn repeat_kv(
    b: &mut GraphBuilder,
    dims: &TransformerConfig,
    p: &str,
    x: OutletId,
) -> Result<OutletId, IrError> {
    let (heads, kv_heads) = (dims.heads_per_rank(), dims.kv_heads_per_rank());
    let repeats = heads / kv_heads;
    if repeats == 1 {
        return Ok(x);
    }
    let shape = b.fact(x).shape.clone();
    let (batch, seq, hd) = (shape[0], shape[1], dims.head_dim());
    let grouped = b.reshape(
        &format!("{p}.groups"),
        x,
        &[batch as i64, seq as i64, kv_heads as i64, 1, hd as i64],
    )?;
    let expand = Op::Expand { shape: vec![batch, seq, kv_heads, repeats, hd] };
    let expanded = b.op(&format!("{p}.expand"), expand, &[grouped])?;
    b.reshape(p, expanded, &[batch as i64, seq as i64, (heads * hd) as i64])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_ir::DType;

    #[test]
    fn the_rms_norm_eps_buffer_is_a_scalar_and_no_parameter() {
        let config = ModelConfig { batch: 2, seq_len: 8 };
        let graph = llama2(70, true, &config).unwrap();
        let eps = graph.params.iter().find(|p| p.name == "model.norm_eps").unwrap();
        assert!(!eps.trainable && eps.fact.shape.is_empty());
        assert_eq!(eps.fact.dtype, DType::F32);
        assert_eq!(eps.init, ParamInit::Constant(1e-5));
    }
}
