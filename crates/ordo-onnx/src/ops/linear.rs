//! Dense layers: `Gemm` and `MatMul`.
//!
//! `Gemm` with a `[out, in]` weight (`transB = 1`) and `MatMul` by a transposed `[out, in]`
//! weight become the IR's `Linear`; a bias added right after such a `MatMul` (the
//! `Transpose`/`MatMul`/`Add` of exporters that write `nn.Linear` that way) is fused into it.
//! Anything else is a `MatMul` (and an `Add`) of wires.

use ordo_ir::Op;
use ordo_ir::op::Linear;

use super::common::{Outputs, one};
use super::conv::param_name;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::{Base, Step, Value};

/// `Gemm`: `alpha * A' B' + beta * C`, with `alpha = beta = 1` and `A` not transposed.
pub(crate) fn gemm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (alpha, beta) = (node.float("alpha", 1.0)?, node.float("beta", 1.0)?);
    let trans_a = node.int("transA", 0)? != 0;
    let plain = alpha == 1.0 && (node.input(2).is_none() || beta == 1.0) && !trans_a;
    if !plain {
        return general_gemm(ctx, node, trans_a, alpha, beta);
    }
    let trans_b = node.int("transB", 0)? != 0;
    let b = ctx.input(node, 1)?;
    let bias_is_param = match node.input(2) {
        None => true,
        Some(_) => matches!(ctx.input(node, 2)?, Value::View(ref v) if v.plain_param().is_some()),
    };
    if trans_b
        && bias_is_param
        && let Value::View(v) = &b
        && let Some(weight) = v.plain_param()
    {
        let out_features = v.fact().shape.first().copied().unwrap_or(0);
        let bias = node.input(2).map(|_| param_name(ctx, node, 2, "bias")).transpose()?;
        let op = Linear { out_features, bias: bias.is_some() };
        let x = ctx.wire(node, 0)?;
        let params: Vec<String> = std::iter::once(weight.to_string()).chain(bias).collect();
        let out = ctx.emit_with_params(node, Op::Linear(op), &[x], &params)?[0];
        let fact = ctx.graph.fact(out).cloned().expect("emitted");
        return one(Value::wire(out, fact));
    }
    let x = ctx.wire(node, 0)?;
    let w = match b {
        Value::View(mut v) if trans_b => {
            v.push(&format!("{}.transB", node.name), Step::Transpose(vec![1, 0]))
                .map_err(|m| node.shape_error(m))?;
            let name = node.required_input(1)?;
            ctx.realize(node, name, Value::View(v))?
        }
        _ if trans_b => return Err(node.unsupported("a transposed constant B")),
        _ => ctx.wire(node, 1)?,
    };
    if node.input(2).is_none() {
        return one(ctx.emit_value(&node.name, Op::MatMul, &[x, w])?);
    }
    let y = ctx.emit(&format!("{}.matmul", node.name), Op::MatMul, &[x, w], Vec::new())?[0];
    let c = ctx.wire(node, 2)?;
    one(ctx.emit_value(&node.name, Op::Add, &[y, c])?)
}

/// `alpha * op(A) op(B) + beta * C` as IR ops: transposes, a `MatMul`, `Scale`s and an `Add`.
fn general_gemm(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    trans_a: bool,
    alpha: f64,
    beta: f64,
) -> OnnxResult<Outputs> {
    let part = |p: &str| format!("{}.{p}", node.name);
    let operand = |ctx: &mut Ctx<'_>, i: usize, transposed: bool| -> OnnxResult<_> {
        let w = ctx.wire(node, i)?;
        if !transposed {
            return Ok(w);
        }
        let name = part(if i == 0 { "transA" } else { "transB" });
        Ok(ctx.emit(&name, Op::Transpose { perm: vec![1, 0] }, &[w], Vec::new())?[0])
    };
    let a = operand(ctx, 0, trans_a)?;
    let b = operand(ctx, 1, node.int("transB", 0)? != 0)?;
    let has_c = node.input(2).is_some_and(|c| !c.is_empty());
    // The last node takes the ONNX node's name.
    let (last_product, scaled) = match (has_c, alpha != 1.0) {
        (true, _) => (part("matmul"), part("alpha")),
        (false, true) => (part("matmul"), node.name.clone()),
        (false, false) => (node.name.clone(), String::new()),
    };
    let mut y = ctx.emit(&last_product, Op::MatMul, &[a, b], Vec::new())?[0];
    if alpha != 1.0 {
        y = ctx.emit(&scaled, Op::Scale { factor: alpha }, &[y], Vec::new())?[0];
    }
    if !has_c {
        return one(Value::wire(y, ctx.graph.fact(y).cloned().expect("emitted")));
    }
    let mut c = ctx.wire(node, 2)?;
    if beta != 1.0 {
        c = ctx.emit(&part("beta"), Op::Scale { factor: beta }, &[c], Vec::new())?[0];
    }
    one(ctx.emit_value(&node.name, Op::Add, &[y, c])?)
}

/// `MatMul`: a `Linear` when the right side is a transposed weight, else a `MatMul` of wires.
pub(crate) fn matmul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if let Value::View(v) = ctx.input(node, 1)?
        && let Base::Param(weight) = &v.base
        && v.base_fact.rank() == 2
        && v.steps.len() == 1
        && v.steps[0].step == Step::Transpose(vec![1, 0])
    {
        let out_features = v.base_fact.shape[0];
        let (bias, add) = fusable_bias(ctx, node, out_features);
        let op = Linear { out_features, bias: bias.is_some() };
        let x = ctx.wire(node, 0)?;
        let params: Vec<String> = std::iter::once(weight.clone()).chain(bias).collect();
        let out = ctx.emit_with_params(node, Op::Linear(op), &[x], &params)?[0];
        let fact = ctx.graph.fact(out).cloned().expect("emitted");
        let value = Value::wire(out, fact);
        return match add {
            Some((index, output)) => {
                ctx.skip.insert(index);
                ctx.set(&output, value);
                Ok(vec![None])
            }
            None => one(value),
        };
    }
    let mut x = ctx.wire(node, 0)?;
    let mut w = ctx.wire(node, 1)?;
    let shape = |ctx: &Ctx<'_>, o| ctx.graph.fact(o).map(|f| f.shape.clone()).unwrap_or_default();
    let (a, b) = (shape(ctx, x), shape(ctx, w));
    if a.len() >= 2 && b.len() >= 2 {
        return one(ctx.emit_value(&node.name, Op::MatMul, &[x, w])?);
    }
    // NumPy's rule for a vector: a 1-D left operand is a row `[1, k]`, a 1-D right one a
    // column `[k, 1]`, and that dimension is dropped from the product.
    let reshape = super::common::reshape_op;
    let mut product_shape_drops = Vec::new();
    if a.len() == 1 {
        x = ctx.emit_part(node, "row", reshape(&[1, a[0]]), &[x])?;
        product_shape_drops.push(2);
    }
    if b.len() == 1 {
        w = ctx.emit_part(node, "column", reshape(&[b[0], 1]), &[w])?;
        product_shape_drops.push(1);
    }
    let product = ctx.emit_part(node, "product", Op::MatMul, &[x, w])?;
    let mut out = shape(ctx, product);
    // Counted from the end: the column's 1 is last, the row's 1 second to last.
    for from_end in product_shape_drops {
        out.remove(out.len() - from_end.min(out.len()));
    }
    one(ctx.emit_value(&node.name, reshape(&out), &[product])?)
}

/// The bias parameter and the `Add` node (index, output) that adds it to this `MatMul`'s
/// output, when the `Add` is the output's only reader and the bias a `[out]` parameter.
fn fusable_bias(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    out: usize,
) -> (Option<String>, Option<(usize, String)>) {
    let Some(y) = node.proto.output.first() else { return (None, None) };
    let Some(&[index]) = ctx.readers.get(y).map(Vec::as_slice) else { return (None, None) };
    let add = ctx.onnx_node(index);
    if ctx.graph_outputs.contains(y)
        || add.op_type() != "Add"
        || add.input.len() != 2
        || add.output.len() != 1
    {
        return (None, None);
    }
    let other = if add.input[0] == *y { &add.input[1] } else { &add.input[0] };
    let Some(Value::View(v)) = ctx.peek(other) else { return (None, None) };
    match v.plain_param() {
        Some(bias) if v.fact().shape == [out] && other != y => {
            (Some(bias.to_string()), Some((index, add.output[0].clone())))
        }
        _ => (None, None),
    }
}
