//! `Attention` (opset 23) as IR ops, following onnx's reference: 3-D inputs split into heads,
//! `Q * sqrt(scale)` and `K * sqrt(scale)`, the past keys and values concatenated before the
//! new ones (`present_key`, `present_value`), grouped-query heads repeated in order
//! (`h0, h0, h1, h1, ...`), `Q K^T`, the soft cap `c * tanh(s / c)`, the bias (a float mask, a
//! bool mask as 0 or -inf, padded with -inf to the key length; the causal mask as -inf above
//! the diagonal shifted by the past length), a softmax over the keys and the product with `V`.
//! The fourth output is the scores after the soft cap (mode 0), with the bias (2) or after
//! the softmax (3). `nonpad_kv_seqlen` (opset 24) is not imported.

use ordo_ir::{DType, Op, OutletId};

use super::common::Outputs;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};

struct Builder<'n, 'a> {
    node: &'n Node<'a>,
}

impl Builder<'_, '_> {
    fn shape(&self, ctx: &Ctx<'_>, w: OutletId) -> Vec<usize> {
        ctx.graph.fact(w).expect("emitted").shape.clone()
    }

    fn constant(
        &self,
        ctx: &mut Ctx<'_>,
        part: &str,
        shape: Vec<usize>,
        values: Vec<f64>,
    ) -> OnnxResult<OutletId> {
        let c = ConstTensor { elem: code::FLOAT, shape, data: ConstData::Float(values) };
        ctx.buffer(self.node, &format!("{}.{part}", self.node.name), &c)
    }

    fn reshape(
        &self,
        ctx: &mut Ctx<'_>,
        part: &str,
        x: OutletId,
        shape: &[usize],
    ) -> OnnxResult<OutletId> {
        ctx.emit_part(self.node, part, super::common::reshape_op(shape), &[x])
    }

    /// `[B, S, H * D]` to `[B, H, S, D]`.
    fn heads(
        &self,
        ctx: &mut Ctx<'_>,
        part: &str,
        x: OutletId,
        heads: usize,
    ) -> OnnxResult<OutletId> {
        let s = self.shape(ctx, x);
        if heads == 0 || !s[2].is_multiple_of(heads) {
            return Err(self
                .node
                .shape_error(format!("{part} {s:?} does not split into {heads} heads")));
        }
        let split =
            self.reshape(ctx, &format!("{part}_heads"), x, &[s[0], s[1], heads, s[2] / heads])?;
        ctx.emit_part(
            self.node,
            &format!("{part}_bhsd"),
            Op::Transpose { perm: vec![0, 2, 1, 3] },
            &[split],
        )
    }
}

/// `Attention` of float Q, K, V.
pub(crate) fn attention(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let b = Builder { node };
    let given = |i: usize| node.input(i).is_some();
    if given(6) {
        return Err(node.unsupported("nonpad_kv_seqlen"));
    }
    let (mut q, mut k, mut v) = (ctx.wire(node, 0)?, ctx.wire(node, 1)?, ctx.wire(node, 2)?);
    let dtype = ctx.graph.fact(q).expect("emitted").dtype;
    for w in [q, k, v] {
        let fact = ctx.graph.fact(w).expect("emitted");
        if fact.dtype != dtype || !fact.dtype.is_float() || !(3..=4).contains(&fact.rank()) {
            return Err(node.unsupported(format!("input {fact}: floats of rank 3 or 4")));
        }
    }
    // A narrower float type computes in f32, its outputs rounded back to it.
    let widen = |ctx: &mut Ctx<'_>, part: &str, w: OutletId| match dtype {
        DType::F32 => Ok(w),
        _ => ctx.emit_part(node, &format!("{part}_f32"), Op::cast(DType::F32), &[w]),
    };
    (q, k, v) = (widen(ctx, "q", q)?, widen(ctx, "k", k)?, widen(ctx, "v", v)?);
    let three_d = b.shape(ctx, q).len() == 3;
    let count = |name: &str| -> OnnxResult<Option<usize>> {
        Ok(match node.has_attr(name) {
            true => Some(usize::try_from(node.int(name, 0)?).unwrap_or(0)),
            false => None,
        })
    };
    let (q_heads, kv_heads) = (count("q_num_heads")?, count("kv_num_heads")?);
    if three_d {
        let (Some(qh), Some(kvh)) = (q_heads, kv_heads) else {
            return Err(node.malformed("3-D inputs need q_num_heads and kv_num_heads"));
        };
        q = b.heads(ctx, "q", q, qh)?;
        k = b.heads(ctx, "k", k, kvh)?;
        v = b.heads(ctx, "v", v, kvh)?;
    }
    let (qs, ks) = (b.shape(ctx, q), b.shape(ctx, k));
    let scale = match node.has_attr("scale") {
        true => node.float("scale", 1.0)?,
        false => 1.0 / (qs[3] as f64).sqrt(),
    };
    if !(scale.is_finite() && scale > 0.0) {
        return Err(node.malformed(format!("scale {scale}: expected a positive number")));
    }
    let root = scale.sqrt();
    let q = ctx.emit_part(node, "q_scaled", Op::Scale { factor: root }, &[q])?;
    // The caches: past then new along the sequence.
    let mut past_len = 0;
    let (present_k, present_v) = match (given(4), given(5)) {
        (true, true) => {
            let (pk, pv) = (ctx.wire(node, 4)?, ctx.wire(node, 5)?);
            let (pk, pv) = (widen(ctx, "past_key", pk)?, widen(ctx, "past_value", pv)?);
            past_len = b.shape(ctx, pk)[2];
            let concat = Op::Concat { axis: 2 };
            (
                ctx.emit_part(node, "present_key", concat.clone(), &[pk, k])?,
                ctx.emit_part(node, "present_value", concat, &[pv, v])?,
            )
        }
        (false, false) => (k, v),
        _ => return Err(node.malformed("past_key and past_value go together")),
    };
    let mut k_all = ctx.emit_part(node, "k_scaled", Op::Scale { factor: root }, &[present_k])?;
    let mut v_all = present_v;
    // Grouped-query attention: each key/value head repeated for its group of query heads.
    let (hq, hk) = (qs[1], ks[1]);
    if hq != hk {
        if hk == 0 || hq % hk != 0 {
            return Err(node.shape_error(format!("{hq} query heads for {hk} key/value heads")));
        }
        for (part, w) in [("k_groups", &mut k_all), ("v_groups", &mut v_all)] {
            let s = b.shape(ctx, *w);
            let one =
                b.reshape(ctx, &format!("{part}_unsqueeze"), *w, &[s[0], s[1], 1, s[2], s[3]])?;
            let wide = ctx.emit_part(
                node,
                &format!("{part}_expand"),
                Op::Expand { shape: vec![s[0], s[1], hq / hk, s[2], s[3]] },
                &[one],
            )?;
            *w = b.reshape(ctx, part, wide, &[s[0], hq, s[2], s[3]])?;
        }
    }
    let kt = ctx.emit_part(node, "k_t", Op::Transpose { perm: vec![0, 1, 3, 2] }, &[k_all])?;
    let mut scores = ctx.emit_part(node, "scores", Op::MatMul, &[q, kt])?;
    let softcap = node.float("softcap", 0.0)?;
    if softcap > 0.0 {
        let s =
            ctx.emit_part(node, "softcap_in", Op::Scale { factor: 1.0 / softcap }, &[scores])?;
        let t = ctx.emit_part(
            node,
            "softcap_tanh",
            Op::Unary { func: ordo_ir::op::UnaryOp::Tanh },
            &[s],
        )?;
        scores = ctx.emit_part(node, "softcapped", Op::Scale { factor: softcap }, &[t])?;
    }
    let (sq, skv) = (qs[2], b.shape(ctx, k_all)[2]);
    let mut bias: Option<OutletId> = None;
    if given(3) {
        let mut mask = ctx.wire(node, 3)?;
        let fact = ctx.graph.fact(mask).cloned().expect("emitted");
        if fact.dtype == DType::Bool {
            let zero = b.constant(ctx, "mask_zero", vec![], vec![0.0])?;
            let neg = b.constant(ctx, "mask_neg_inf", vec![], vec![f64::NEG_INFINITY])?;
            mask = ctx.emit_part(node, "mask_bias", Op::Where, &[mask, zero, neg])?;
        } else if fact.dtype == dtype {
            mask = widen(ctx, "mask", mask)?;
        } else {
            return Err(node.unsupported(format!("attn_mask {fact}")));
        }
        let last = *fact.shape.last().unwrap_or(&0);
        if last < skv {
            let rank = fact.rank();
            let mut pads = vec![0i64; 2 * rank];
            pads[2 * rank - 1] = (skv - last) as i64;
            let pad =
                Op::Pad { pads, mode: ordo_ir::op::PadMode::Constant, value: f64::NEG_INFINITY };
            mask = ctx.emit_part(node, "mask_padded", pad, &[mask])?;
        }
        bias = Some(mask);
    }
    if node.int("is_causal", 0)? != 0 {
        let values = (0..sq)
            .flat_map(|i| {
                (0..skv).map(move |j| {
                    if j >= past_len && j - past_len > i { f64::NEG_INFINITY } else { 0.0 }
                })
            })
            .collect();
        let causal = b.constant(ctx, "causal", vec![sq, skv], values)?;
        bias = Some(match bias {
            Some(m) => ctx.emit_part(node, "bias", Op::Add, &[m, causal])?,
            None => causal,
        });
    }
    let biased = match bias {
        Some(m) => ctx.emit_part(node, "biased", Op::Add, &[scores, m])?,
        None => scores,
    };
    let probs = ctx.emit_part(node, "probs", Op::Softmax { axis: -1 }, &[biased])?;
    let mut y = ctx.emit_part(node, "context", Op::MatMul, &[probs, v_all])?;
    if three_d {
        let s = b.shape(ctx, y);
        let t =
            ctx.emit_part(node, "context_bshd", Op::Transpose { perm: vec![0, 2, 1, 3] }, &[y])?;
        y = b.reshape(ctx, "context_merged", t, &[s[0], s[2], s[1] * s[3]])?;
    }
    let qk = match node.int("qk_matmul_output_mode", 0)? {
        0 | 1 => scores,
        2 => biased,
        3 => probs,
        m => return Err(node.malformed(format!("qk_matmul_output_mode {m}"))),
    };
    let mut outputs = Vec::new();
    let names = ["y", "present_key", "present_value", "qk"];
    for (w, name) in
        [y, present_k, present_v, qk].into_iter().zip(names).take(node.num_outputs().max(1))
    {
        let w = match dtype {
            DType::F32 => w,
            _ => ctx.emit_part(node, &format!("{name}_{dtype}"), Op::cast(dtype), &[w])?,
        };
        outputs.push(Some(ctx.wire_value(w)));
    }
    Ok(outputs)
}
