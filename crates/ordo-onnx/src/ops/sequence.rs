//! Sequence ops: `Gather` (embedding lookups, and selections that fold or become slices) and
//! `LSTM`.

use ordo_ir::op::{Embedding, Lstm, ScatterReduction};
use ordo_ir::{DType, Op, TensorFact};

use super::common::{Outputs, one, resolve_axis};
use super::shape::apply_steps;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::fold;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};
use crate::value::{Step, Value};

/// `Gather`: folds on constants, is an `Embedding` for a `[rows, dim]` parameter indexed by
/// run-time ids, and a slice for constant indices into a run-time tensor.
pub(crate) fn gather(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (data, indices) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let data_fact = match &data {
        Value::Const(c) => c.shape.clone(),
        other => ctx.fact_of(node, other)?.shape,
    };
    let axis = resolve_axis(node, node.int("axis", 0)?, data_fact.len())?;
    match (&data, &indices) {
        (Value::Const(c), Value::Const(i)) => {
            one(Value::constant(fold::gather(c, i, axis).map_err(|m| node.shape_error(m))?))
        }
        (Value::View(v), Value::View(_)) if v.plain_param().is_some() => {
            let table = v.fact().clone();
            if axis != 0 || table.rank() != 2 || table.dtype != DType::F32 {
                return Err(node.unsupported(format!(
                    "gathering from parameter {table} (only [rows, dim] f32 tables along axis 0)"
                )));
            }
            let weight = v.plain_param().unwrap_or_default().to_string();
            let op = Op::Embedding(Embedding::new(table.shape[0], table.shape[1]));
            let ids = ctx.wire(node, 1)?;
            let out = ctx.emit_with_params(node, op, &[ids], &[weight])?[0];
            let fact = ctx.graph.fact(out).cloned().expect("emitted");
            one(Value::wire(out, fact))
        }
        (_, Value::Const(i)) => {
            let len = data_fact[axis];
            let idx: Vec<i64> = i
                .to_i64s()
                .unwrap_or_default()
                .iter()
                .map(|&k| if k < 0 { k + len as i64 } else { k })
                .collect();
            if idx.iter().any(|&k| k < 0 || k >= len as i64) {
                return Err(node.shape_error(format!("indices {idx:?} out of range for {len}")));
            }
            let step = idx.get(1).map_or(1, |&b| b - idx[0]);
            let regular =
                !idx.is_empty() && step >= 1 && idx.windows(2).all(|w| w[1] - w[0] == step);
            if !regular || i.shape.len() > 1 {
                // Irregular or multi-dimensional: the IR's Gather, with the indices a buffer.
                return gather_op(ctx, node, axis);
            }
            let end = idx[idx.len() - 1] + 1;
            let mut steps = vec![Step::Slice { axis, start: idx[0], end, step }];
            if i.shape.is_empty() {
                let mut shape = data_fact.clone();
                shape.remove(axis);
                steps.push(Step::Reshape(shape));
            }
            apply_steps(ctx, node, steps)
        }
        (Value::Const(_), _) => {
            Err(node.unsupported("gathering from a constant at run-time indices"))
        }
        _ => gather_op(ctx, node, axis),
    }
}

/// The IR's `Gather` (or `GatherElements`) of run-time data; constant indices become a
/// buffer.
fn gather_op(ctx: &mut Ctx<'_>, node: &Node<'_>, axis: usize) -> OnnxResult<Outputs> {
    let data = ctx.wire(node, 0)?;
    let indices = match ctx.input(node, 1)? {
        Value::Const(c) => {
            let name = node.required_input(1)?.to_string();
            ctx.buffer(node, &name, &c)?
        }
        _ => ctx.wire(node, 1)?,
    };
    let op = if node.op_type() == "GatherElements" {
        Op::GatherElements { axis: axis as i64 }
    } else {
        Op::Gather { axis: axis as i64 }
    };
    one(ctx.emit_value(&node.name, op, &[data, indices])?)
}

/// `GatherElements` of run-time data (constants fold through the generic rule).
pub(crate) fn gather_elements(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let data = ctx.input(node, 0)?;
    if matches!(data, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let rank = ctx.fact_of(node, &data)?.rank();
    let axis = resolve_axis(node, node.int("axis", 0)?, rank)?;
    gather_op(ctx, node, axis)
}

/// `ScatterND` and `ScatterElements` onto run-time data or updates, with any `reduction` (none,
/// add, mul, max, min; gradients for none and add). `ScatterND` of constants folds through
/// the generic rule.
pub(crate) fn scatter_nd(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let inputs = (0..3).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    if inputs.iter().all(|v| matches!(v, Value::Const(_))) {
        return Err(node.unsupported("constants: imported by the generic rule"));
    }
    use ScatterReduction as R;
    let reduction = node.choice(
        "reduction",
        "none",
        &[("none", R::None), ("add", R::Add), ("mul", R::Mul), ("max", R::Max), ("min", R::Min)],
    )?;
    // `Scatter` (opsets 9 and 10) is `ScatterElements` under its first name.
    let op = if matches!(node.op_type(), "ScatterElements" | "Scatter") {
        Op::ScatterElements { axis: node.int("axis", 0)?, reduction }
    } else {
        Op::ScatterNd { reduction }
    };
    let wires = (0..3).map(|i| ctx.wire(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    one(ctx.emit_value(&node.name, op, &wires)?)
}

/// `GatherND` without batch dims of run-time data (constants import by the generic rule).
pub(crate) fn gather_nd(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if matches!(ctx.input(node, 0)?, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let (data, mut indices) = (ctx.wire(node, 0)?, ctx.wire(node, 1)?);
    let fact = |ctx: &Ctx<'_>, o| ctx.graph.fact(o).cloned().expect("emitted");
    if fact(ctx, indices).dtype != DType::I64 {
        indices = ctx.emit_part(node, "i64", Op::cast(DType::I64), &[indices])?;
    }
    let batch_dims = node.int("batch_dims", 0)?;
    if batch_dims == 0 {
        return one(ctx.emit_value(&node.name, Op::GatherNd, &[data, indices])?);
    }
    gather_nd_batched(ctx, node, data, indices, batch_dims)
}

/// `GatherND` with `b` batch dims: the batch dims flattened into one, `B`, and each index row
/// prefixed with its batch's number, so that a `GatherND` without batch dims of the data
/// `[B, ...]` reads the same slices; the result reshaped to `indices[..-1] ++ data[b + k..]`.
fn gather_nd_batched(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    data: ordo_ir::OutletId,
    indices: ordo_ir::OutletId,
    batch_dims: i64,
) -> OnnxResult<Outputs> {
    let fact = |ctx: &Ctx<'_>, o| ctx.graph.fact(o).cloned().expect("emitted");
    let (d, i) = (fact(ctx, data).shape, fact(ctx, indices).shape);
    let b = usize::try_from(batch_dims).unwrap_or(usize::MAX);
    let k = i.last().copied().unwrap_or(0);
    if b >= i.len() || b + k > d.len() || d[..b] != i[..b] {
        return Err(node.malformed(format!(
            "batch_dims {batch_dims} for data {d:?} and indices {i:?}: the first batch_dims \
             dimensions must agree and leave the indices a last dimension"
        )));
    }
    let reshape = |s: &[usize]| Op::Reshape { shape: s.iter().map(|&n| n as i64).collect() };
    let batches: usize = d[..b].iter().product();
    let rows: usize = i[b..i.len() - 1].iter().product();
    let flat_data: Vec<usize> = std::iter::once(batches).chain(d[b..].iter().copied()).collect();
    let data = ctx.emit_part(node, "data", reshape(&flat_data), &[data])?;
    let indices = ctx.emit_part(node, "rows", reshape(&[batches, rows, k]), &[indices])?;
    let numbers: Vec<i64> =
        (0..batches as i64).flat_map(|n| std::iter::repeat_n(n, rows)).collect();
    let numbers = ConstTensor {
        elem: code::INT64,
        shape: vec![batches, rows, 1],
        data: ConstData::Int(numbers),
    };
    let numbers = ctx.buffer(node, &format!("{}.batch", node.name), &numbers)?;
    let prefixed = ctx.emit_part(node, "prefixed", Op::Concat { axis: 2 }, &[numbers, indices])?;
    let gathered = ctx.emit_part(node, "gathered", Op::GatherNd, &[data, prefixed])?;
    let out: Vec<usize> = i[..i.len() - 1].iter().chain(&d[b + k..]).copied().collect();
    one(ctx.emit_value(&node.name, reshape(&out), &[gathered])?)
}

/// `LSTM`: the IR's own op where it takes the node ([`ir_lstm`]) and only `Y` is read, else
/// unrolled over time as IR ops ([`super::recurrent::unrolled`]).
pub(crate) fn lstm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if (1..node.num_outputs()).any(|k| super::common::output_read(ctx, node, k)) {
        return super::recurrent::unrolled(ctx, node);
    }
    let before = ctx.graph.nodes.len();
    match ir_lstm(ctx, node) {
        Err(crate::error::OnnxError::Unsupported { .. }) if ctx.graph.nodes.len() == before => {
            super::recurrent::unrolled(ctx, node)
        }
        result => result,
    }
}

/// `LSTM`, forward or bidirectional, with default activations, zero initial states and no
/// sequence lengths. Its weights may be parameters used directly (`W [dirs, 4H, I]`, ...) or
/// slices and concatenations of per-direction parameters (PyTorch's export reorders the gates
/// that way); they become the IR's per-direction `weight_ih`, `weight_hh`, `bias_ih` and
/// `bias_hh`. Output `Y` is `[T, dirs, B, H]` as in ONNX.
fn ir_lstm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if x.rank() != 3 || node.int("layout", 0)? != 0 {
        return Err(node.unsupported(format!("input {x}: only sequence-first [T, B, I] input")));
    }
    let hidden = usize::try_from(node.int("hidden_size", 0)?)
        .ok()
        .filter(|&h| h > 0 && h <= 1 << 20)
        .ok_or_else(|| node.malformed("hidden_size must be positive"))?;
    let bidirectional = match node.string("direction", "forward")?.as_str() {
        "forward" => false,
        "bidirectional" => true,
        other => return Err(node.unsupported(format!("direction {other}"))),
    };
    let dirs = if bidirectional { 2 } else { 1 };
    if let Some(acts) = node.strings("activations") {
        let default = ["Sigmoid", "Tanh", "Tanh"];
        if acts.iter().enumerate().any(|(k, a)| !a.eq_ignore_ascii_case(default[k % 3])) {
            return Err(node.unsupported(format!("activations {acts:?}")));
        }
    }
    if node.has_attr("clip") || node.int("input_forget", 0)? != 0 {
        return Err(node.unsupported("clip or input_forget"));
    }
    if node.input(4).is_some() || node.input(7).is_some() {
        return Err(node.unsupported("sequence lengths or peepholes"));
    }
    for i in [5, 6] {
        if node.input(i).is_some() {
            let zero = match ctx.input(node, i)? {
                Value::Const(c) => {
                    c.to_f64s().is_none_or(|v| v.iter().all(|&x| x == 0.0))
                        && c.scalar().is_none_or(|s| s == 0.0)
                }
                _ => false,
            };
            if !zero {
                return Err(node.unsupported("a non-zero initial state"));
            }
        }
    }
    if node.input(3).is_none() {
        return Err(node.unsupported("no bias (the IR's LSTM has biases)"));
    }
    let (i_size, h4) = (x.shape[2], 4 * hidden);
    let w = split(ctx, node, 1, dirs, &[h4, i_size], &["weight_ih_l0", "weight_ih_l0_reverse"])?;
    let r = split(ctx, node, 2, dirs, &[h4, hidden], &["weight_hh_l0", "weight_hh_l0_reverse"])?;
    let names = ["bias_ih_l0", "bias_hh_l0", "bias_ih_l0_reverse", "bias_hh_l0_reverse"];
    let b = split(ctx, node, 3, 2 * dirs, &[h4], &names)?;
    let mut params = Vec::new();
    for d in 0..dirs {
        params.extend([w[d].clone(), r[d].clone(), b[2 * d].clone(), b[2 * d + 1].clone()]);
    }
    let input = ctx.wire(node, 0)?;
    let op = Op::Lstm(Lstm { hidden, bidirectional });
    let out = ctx.emit_with_params(node, op, &[input], &params)?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    let (t, batch) = (x.shape[0], x.shape[1]);
    let mut y = crate::value::View::new(crate::value::Base::Wire(out), fact);
    let name = format!("{}.y", node.name);
    let err = |m: String| node.shape_error(m);
    if bidirectional {
        y.push(&name, Step::Reshape(vec![t, batch, 2, hidden])).map_err(err)?;
        y.push(&name, Step::Transpose(vec![0, 2, 1, 3])).map_err(err)?;
    } else {
        y.push(&name, Step::Reshape(vec![t, 1, batch, hidden])).map_err(err)?;
    }
    let mut outputs = vec![Some(Value::View(y))];
    outputs.resize(node.num_outputs().max(1), None);
    Ok(outputs)
}

/// The `count` parameters of shape `shape` that input `i` is made of: its sources when they
/// have that shape, or new parameters cut from a single source of the right size.
fn split(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    count: usize,
    shape: &[usize],
    suffixes: &[&str],
) -> OnnxResult<Vec<String>> {
    let value = ctx.input(node, i)?;
    let sources = value.param_sources();
    if sources.is_empty() {
        return Err(node.unsupported(format!("input {i} must be made of parameters")));
    }
    let want = TensorFact::f32(shape.to_vec());
    if sources.len() == count && sources.iter().all(|s| ctx.param_fact(s) == Some(&want)) {
        return Ok(sources);
    }
    let numel: u64 = shape.iter().map(|&d| d as u64).product::<u64>() * count as u64;
    match sources.as_slice() {
        [single]
            if ctx
                .param_fact(single)
                .is_some_and(|f| f.numel() == numel && f.dtype == DType::F32) =>
        {
            let names: Vec<String> =
                suffixes.iter().take(count).map(|s| format!("{single}.{s}")).collect();
            for (chunk, n) in names.iter().enumerate() {
                let source = crate::tensor_io::ParamSource::LstmGates {
                    tensor: single.clone(),
                    chunk,
                    chunks: count,
                };
                ctx.declare_derived_param(n, want.clone(), source);
            }
            Ok(names)
        }
        _ => Err(node.shape_error(format!(
            "input {i} is made of {sources:?}, which do not split into {count} parameters of {want}"
        ))),
    }
}
