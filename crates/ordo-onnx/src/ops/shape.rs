//! Constants and shape ops: `Constant`, `ConstantOfShape`, `Shape`, `Size`, `Identity`, `Cast`,
//! `CastLike`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`, `Slice`, `Concat`, `Expand`.
//!
//! On constants these fold; on wires and parameters the data-movement ops become deferred
//! steps (see [`crate::value`]), emitted as IR `Reshape`, `Transpose` and `Slice` nodes only if
//! something needs them.

use ordo_ir::element::E8m0Rounding;
use ordo_ir::{Op, TensorFact};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::fold;
use crate::node::Node;
use crate::tensor::{
    ConstData, ConstTensor, MAX_FOLD, check_shape, code, dims_to_shape, parse_tensor,
};
use crate::value::{Step, Value, infer_step};

/// `Constant`: the value attribute in any of its forms.
pub(crate) fn constant(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if let Some(fact) = string_constant(node)? {
        // Strings have no constant form here: a buffer of the graph, planned by its handles.
        let name = node.proto.output.first().ok_or_else(|| node.malformed("no output"))?;
        ctx.declare_param(name, fact);
        return one(ctx.get(node, name)?.clone());
    }
    let c = if let Some(t) = node.tensor("value") {
        parse_tensor(t).map_err(|m| node.malformed(m))?
    } else if node.has_attr("value_float") {
        let v = node.float("value_float", 0.0)?;
        ConstTensor { elem: code::FLOAT, shape: vec![], data: ConstData::Float(vec![v]) }
    } else if node.has_attr("value_int") {
        let v = node.int("value_int", 0)?;
        ConstTensor::int_scalar(code::INT64, v)
    } else if let Some(v) = node.ints("value_ints") {
        ConstTensor::ints(v.to_vec())
    } else {
        return Err(node.unsupported("only tensor, float and int constants are supported"));
    };
    one(Value::constant(c))
}

/// The fact of a `Constant` of strings (`value` a string tensor, `value_string`,
/// `value_strings`), checked; `None` for any other constant.
fn string_constant(node: &Node<'_>) -> OnnxResult<Option<TensorFact>> {
    let shape = if let Some(t) = node.tensor("value").filter(|t| t.data_type() == code::STRING) {
        crate::tensor::check_data_length(t).map_err(|m| node.malformed(m))?;
        dims_to_shape(&t.dims).map_err(|m| node.malformed(m))?
    } else if node.has_attr("value_string") {
        vec![]
    } else if let Some(v) = node.strings("value_strings") {
        vec![v.len()]
    } else {
        return Ok(None);
    };
    Ok(Some(TensorFact::new(ordo_ir::DType::String, shape)))
}

/// `ConstantOfShape`: a splat of the value attribute (0.0 by default).
pub(crate) fn constant_of_shape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let shape = shape_input(ctx, node, 0)?;
    let (elem, value) = match node.tensor("value") {
        Some(t) => {
            let c = parse_tensor(t).map_err(|m| node.malformed(m))?;
            (c.elem, c.scalar().ok_or_else(|| node.malformed("value must have one element"))?)
        }
        None => (code::FLOAT, 0.0),
    };
    one(Value::constant(ConstTensor { elem, shape, data: ConstData::Splat(value) }))
}

/// `Shape`: the static shape of any value, optionally sliced by `start` and `end`.
pub(crate) fn shape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let rank = dims.len() as i64;
    let clamp = |i: i64| (if i < 0 { i + rank } else { i }).clamp(0, rank) as usize;
    let (from, to) = (clamp(node.int("start", 0)?), clamp(node.int("end", rank)?));
    let dims = dims.get(from..to.max(from)).unwrap_or_default();
    one(Value::constant(ConstTensor::ints(dims.iter().map(|&d| d as i64).collect())))
}

/// `Size`: the number of elements.
pub(crate) fn size(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let n: u64 = dims_of(ctx, node, 0)?.iter().map(|&d| d as u64).product();
    let c = ConstTensor::int_scalar(code::INT64, n as i64);
    one(Value::constant(c))
}

/// `Identity`: the input itself.
pub(crate) fn identity(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    one(ctx.input(node, 0)?)
}

/// `Cast`: folds on constants; a no-op on a wire of the target type.
pub(crate) fn cast(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let to = i32::try_from(node.int("to", 0)?).map_err(|_| node.malformed("bad `to`"))?;
    cast_to(ctx, node, to)
}

/// `BitCast` (opset 26): the bits of a run-time tensor read as another type of their width.
pub(crate) fn bit_cast(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if matches!(ctx.input(node, 0)?, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let to = i32::try_from(node.int("to", 0)?).map_err(|_| node.malformed("bad `to`"))?;
    let Some(to) = crate::tensor::ir_dtype(to) else {
        return Err(node.unsupported(format!("no bit cast to {}", crate::tensor::elem_name(to))));
    };
    let x = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::BitCast { to }, &[x])?)
}

/// `CastLike`: `Cast` to the element type of the second input.
pub(crate) fn cast_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let like = ctx.input(node, 1)?;
    let to = match &like {
        Value::Const(c) => c.elem,
        wire => crate::tensor::onnx_code(ctx.fact_of(node, wire)?.dtype),
    };
    cast_to(ctx, node, to)
}

/// `Cast` and `CastLike` to ONNX type `to`, with their `saturate` (float8) and `round_mode`
/// (float8 e8m0) attributes.
fn cast_to(ctx: &mut Ctx<'_>, node: &Node<'_>, to: i32) -> OnnxResult<Outputs> {
    let saturate = node.int("saturate", 1)? != 0;
    let round = node.choice(
        "round_mode",
        "up",
        &[
            ("up", E8m0Rounding::Up),
            ("down", E8m0Rounding::Down),
            ("nearest", E8m0Rounding::Nearest),
        ],
    )?;
    let Some(target) = crate::tensor::ir_dtype(to) else {
        return Err(node.unsupported(format!("no cast to {}", crate::tensor::elem_name(to))));
    };
    let input = ctx.input(node, 0)?;
    if let Value::Const(c) = &input {
        return one(Value::constant(fold::cast_with(c, target, saturate, round)));
    }
    if ctx.fact_of(node, &input)?.dtype == target {
        return one(input);
    }
    let x = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Cast { to: target, saturate, round }, &[x])?)
}

/// `Reshape` to a constant shape (0 copies a dim unless `allowzero`, -1 is inferred).
pub(crate) fn reshape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let target = if node.opset < 5 {
        node.ints("shape").map(<[i64]>::to_vec).ok_or_else(|| node.malformed("no shape"))?
    } else {
        ctx.const_ints(node, 1, "the target shape")?
    };
    let allow_zero = node.int("allowzero", 0)? != 0;
    let numel: u64 = dims.iter().map(|&d| d as u64).product();
    let mut shape = Vec::with_capacity(target.len());
    let mut inferred = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            0 if !allow_zero => {
                shape.push(*dims.get(i).ok_or_else(|| node.shape_error("0 past the input rank"))?)
            }
            -1 if inferred.is_none() => {
                inferred = Some(i);
                shape.push(1);
            }
            t if t >= 0 => shape.push(usize::try_from(t).unwrap_or(usize::MAX)),
            _ => return Err(node.shape_error(format!("invalid target shape {target:?}"))),
        }
    }
    check_shape(&shape).map_err(|m| node.shape_error(m))?;
    let known: u64 = shape.iter().map(|&d| d as u64).product();
    if let Some(i) = inferred {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(node.shape_error(format!("cannot reshape {dims:?} to {target:?}")));
        }
        shape[i] = (numel / known) as usize;
    }
    reshape_to(ctx, node, shape)
}

/// `Flatten` at `axis` (default 1) to a matrix.
pub(crate) fn flatten(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let axis = node.int("axis", 1)?;
    let axis =
        if axis == dims.len() as i64 { dims.len() } else { resolve_axis(node, axis, dims.len())? };
    let shape = vec![dims[..axis].iter().product(), dims[axis..].iter().product()];
    reshape_to(ctx, node, shape)
}

/// `Squeeze` of the given axes, or of every dim of size 1.
pub(crate) fn squeeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let axes = axes(ctx, node)?;
    let axes: Vec<usize> = match axes {
        Some(a) => {
            a.iter().map(|&x| resolve_axis(node, x, dims.len())).collect::<OnnxResult<_>>()?
        }
        None => (0..dims.len()).filter(|&d| dims[d] == 1).collect(),
    };
    if axes.iter().any(|&a| dims[a] != 1) {
        return Err(node.shape_error(format!("cannot squeeze axes {axes:?} of {dims:?}")));
    }
    let shape = (0..dims.len()).filter(|d| !axes.contains(d)).map(|d| dims[d]).collect();
    reshape_to(ctx, node, shape)
}

/// `Unsqueeze`: inserts dims of size 1.
pub(crate) fn unsqueeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let axes = axes(ctx, node)?.ok_or_else(|| node.malformed("no axes"))?;
    let rank = dims.len() + axes.len();
    let mut axes: Vec<usize> =
        axes.iter().map(|&a| resolve_axis(node, a, rank)).collect::<OnnxResult<_>>()?;
    axes.sort_unstable();
    axes.dedup();
    if axes.len() + dims.len() != rank {
        return Err(node.malformed("repeated axes"));
    }
    let mut rest = dims.iter();
    let shape =
        (0..rank).map(|d| if axes.contains(&d) { 1 } else { *rest.next().unwrap_or(&1) }).collect();
    reshape_to(ctx, node, shape)
}

/// `Transpose` (reversed dims by default).
pub(crate) fn transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let perm: Vec<usize> = match node.ints("perm") {
        Some(p) => {
            p.iter().map(|&a| resolve_axis(node, a, dims.len())).collect::<OnnxResult<_>>()?
        }
        None => (0..dims.len()).rev().collect(),
    };
    let mut seen = vec![false; dims.len()];
    if perm.len() != dims.len() || perm.iter().any(|&p| std::mem::replace(&mut seen[p], true)) {
        return Err(node.malformed(format!("{perm:?} is not a permutation of {} dims", dims.len())));
    }
    match ctx.input(node, 0)? {
        Value::Const(c) => {
            one(Value::constant(fold::transpose(&c, &perm).map_err(|m| node.unsupported(m))?))
        }
        _ => apply_step(ctx, node, Step::Transpose(perm)),
    }
}

/// `Slice`: positive steps as deferred IR slices, negative ones as a `Gather` of the
/// indices (both fold on constants).
pub(crate) fn slice(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let dims = dims_of(ctx, node, 0)?;
    let list = |ctx: &Ctx<'_>, i: usize, attr: &str| -> OnnxResult<Option<Vec<i64>>> {
        if node.opset < 10 {
            return Ok(node.ints(attr).map(<[i64]>::to_vec));
        }
        match node.input(i) {
            None => Ok(None),
            Some(_) => Ok(ctx.const_input(node, i, attr)?.to_i64s()),
        }
    };
    let starts = list(ctx, 1, "starts")?.ok_or_else(|| node.malformed("no starts"))?;
    let ends = list(ctx, 2, "ends")?.ok_or_else(|| node.malformed("no ends"))?;
    let axes = list(ctx, 3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = list(ctx, 4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(node.malformed("starts, ends, axes and steps differ in length"));
    }
    let mut value = ctx.input(node, 0)?;
    if let Value::View(_) = value {
        value = Value::View(ctx.view_input(node, 0)?);
    }
    for k in 0..starts.len() {
        let axis = resolve_axis(node, axes[k], dims.len())?;
        if steps[k] == 0 {
            return Err(node.malformed(format!("step 0 on axis {}", axes[k])));
        }
        if steps[k] < 0 {
            value =
                reversed_slice(ctx, node, value, axis, dims[axis], [starts[k], ends[k], steps[k]])?;
            continue;
        }
        let (from, to) = bounds(dims[axis], starts[k], ends[k]);
        let step = Step::Slice { axis, start: from as i64, end: to as i64, step: steps[k] };
        value = match value {
            Value::Const(c) => Value::constant(
                fold::slice(&c, axis, from, to, steps[k] as usize)
                    .map_err(|m| node.unsupported(m))?,
            ),
            Value::View(mut v) => {
                v.push(&node.name, step).map_err(|m| node.shape_error(m))?;
                Value::View(v)
            }
            Value::ParamSet { fact, sources } => {
                let fact = infer_step(&step, &fact).map_err(|m| node.shape_error(m))?;
                Value::ParamSet { fact, sources }
            }
        };
    }
    one(value)
}

/// A slice with a negative step along `axis` (of size `len`): ONNX clamps the start to
/// `[0, len - 1]` and the end to `[-1, len - 1]` and takes start, start + step, ... while above
/// the end. Folds on a constant; on a wire it is a `Gather` of those indices.
fn reversed_slice(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    value: Value,
    axis: usize,
    len: usize,
    [start, end, step]: [i64; 3],
) -> OnnxResult<Value> {
    let n = len as i64;
    let wrap = |i: i64| if i < 0 { i.saturating_add(n) } else { i };
    let (from, to) = (wrap(start).clamp(0, n - 1), wrap(end).clamp(-1, n - 1));
    let taken: Vec<usize> = (0..)
        .map(|k: i64| from.saturating_add(k.saturating_mul(step)))
        .take_while(|&i| i > to)
        .map(|i| i as usize)
        .collect();
    match value {
        Value::Const(c) => {
            Ok(Value::constant(fold::take(&c, axis, &taken).map_err(|m| node.unsupported(m))?))
        }
        Value::ParamSet { .. } => Err(node.unsupported("a negative step over combined parameters")),
        view => {
            let x = ctx.realize(node, node.required_input(0)?, view)?;
            let indices = ConstTensor {
                elem: code::INT64,
                shape: vec![taken.len()],
                data: ConstData::Int(taken.iter().map(|&i| i as i64).collect()),
            };
            let indices = ctx.buffer(node, &format!("{}/indices", node.name), &indices)?;
            ctx.emit_value(&node.name, Op::Gather { axis: axis as i64 }, &[x, indices])
        }
    }
}

/// `Concat`: folds constants, combines parameters, concatenates wires.
pub(crate) fn concat(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let axis = node.int("axis", 0)?;
    let inputs: Vec<Value> = (0..node.num_inputs())
        .filter(|&i| node.input(i).is_some())
        .map(|i| ctx.input(node, i))
        .collect::<OnnxResult<_>>()?;
    if inputs.is_empty() {
        return Err(node.malformed("no inputs"));
    }
    let rank = ctx.fact_of(node, &inputs[0]).map(|f| f.rank()).or_else(|_| {
        inputs[0].as_const().map(|c| c.shape.len()).ok_or_else(|| node.malformed("bad input"))
    })?;
    let ax = resolve_axis(node, axis, rank)?;
    if inputs.iter().all(|v| v.as_const().is_some()) {
        let parts: Vec<&ConstTensor> = inputs.iter().filter_map(Value::as_const).collect();
        return one(Value::constant(fold::concat(&parts, ax).map_err(|m| node.shape_error(m))?));
    }
    if inputs.iter().all(Value::is_param) {
        let facts = inputs.iter().map(|v| ctx.fact_of(node, v)).collect::<OnnxResult<Vec<_>>>()?;
        let refs: Vec<&TensorFact> = facts.iter().collect();
        let fact = Op::Concat { axis }.infer(&refs).map_err(|m| node.shape_error(m))?.remove(0);
        let mut sources: Vec<String> = Vec::new();
        for s in inputs.iter().flat_map(Value::param_sources) {
            if !sources.contains(&s) {
                sources.push(s);
            }
        }
        return one(Value::ParamSet { fact, sources });
    }
    let mut wires = Vec::with_capacity(inputs.len());
    for i in (0..node.num_inputs()).filter(|&i| node.input(i).is_some()) {
        wires.push(ctx.wire(node, i)?);
    }
    one(ctx.emit_value(&node.name, Op::Concat { axis }, &wires)?)
}

/// `Expand`: folds constants; a no-op when a wire already has the target shape.
pub(crate) fn expand(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let target = shape_input(ctx, node, 1)?;
    match ctx.input(node, 0)? {
        Value::Const(c) => match fold::expand(&c, &target) {
            Ok(e) => one(Value::constant(e)),
            // A constant of equal elements sized at the file's batch (an LSTM's zero initial
            // state) is a fill of the target in a model imported at another batch.
            Err(_) if ctx.resized && c.shape.len() <= target.len() && uniform(&c).is_some() => {
                let x = uniform(&c).expect("checked");
                one(Value::constant(c.with(target, ConstData::Splat(x))))
            }
            Err(m) => Err(node.shape_error(m)),
        },
        other => {
            let fact = ctx.fact_of(node, &other)?;
            match fold::broadcast(&fact.shape, &target) {
                Some(s) if s == fact.shape => one(other),
                Some(shape) => {
                    let x = ctx.wire(node, 0)?;
                    one(ctx.emit_value(&node.name, Op::Expand { shape }, &[x])?)
                }
                None => Err(node.shape_error(format!("{fact} does not broadcast with {target:?}"))),
            }
        }
    }
}

/// The value of every element of a constant whose elements are all equal.
fn uniform(c: &ConstTensor) -> Option<f64> {
    if let ConstData::Splat(x) = c.data {
        return Some(x);
    }
    let values = c.to_f64s()?;
    let first = *values.first()?;
    values.iter().all(|&x| x == first).then_some(first)
}

/// The dims of input `i`, whatever its kind.
pub(crate) fn dims_of(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<Vec<usize>> {
    match ctx.input(node, i)? {
        Value::Const(c) => Ok(c.shape.clone()),
        other => Ok(ctx.fact_of(node, &other)?.shape),
    }
}

/// A constant shape input (non-negative ints).
fn shape_input(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<Vec<usize>> {
    let c = ctx.const_input(node, i, "the shape")?;
    let dims = c
        .to_i64s()
        .filter(|d| d.len() as u64 <= MAX_FOLD)
        .ok_or_else(|| node.malformed("bad shape"))?;
    dims_to_shape(&dims).map_err(|m| node.shape_error(m))
}

/// Axes from the `axes` attribute (before opset 13) or the optional second input.
fn axes(ctx: &Ctx<'_>, node: &Node<'_>) -> OnnxResult<Option<Vec<i64>>> {
    if node.opset < 13 {
        return Ok(node.ints("axes").map(<[i64]>::to_vec));
    }
    match node.input(1) {
        None => Ok(None),
        Some(_) => Ok(ctx.const_input(node, 1, "axes")?.to_i64s()),
    }
}

/// Python's clamping of `start:end` against a dim of length `len`, for positive steps.
pub(crate) fn bounds(len: usize, start: i64, end: i64) -> (usize, usize) {
    let clamp = |i: i64| {
        let i = if i < 0 { i.saturating_add(len as i64) } else { i };
        i.clamp(0, len as i64) as usize
    };
    (clamp(start), clamp(end))
}

/// Input 0 reshaped to a resolved shape: folded, deferred or combined.
fn reshape_to(ctx: &mut Ctx<'_>, node: &Node<'_>, shape: Vec<usize>) -> OnnxResult<Outputs> {
    match ctx.input(node, 0)? {
        Value::Const(c) => {
            if c.numel() != shape.iter().map(|&d| d as u64).product::<u64>() {
                return Err(node.shape_error(format!("cannot reshape {:?} to {shape:?}", c.shape)));
            }
            one(Value::constant(c.with(shape, c.data.clone())))
        }
        _ => apply_step(ctx, node, Step::Reshape(shape)),
    }
}

/// Applies a data-movement step to input 0, a wire or parameters.
pub(crate) fn apply_step(ctx: &mut Ctx<'_>, node: &Node<'_>, step: Step) -> OnnxResult<Outputs> {
    apply_steps(ctx, node, vec![step])
}

/// Applies data-movement steps to input 0, a wire or parameters.
pub(crate) fn apply_steps(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    steps: Vec<Step>,
) -> OnnxResult<Outputs> {
    match ctx.input(node, 0)? {
        Value::ParamSet { mut fact, sources } => {
            for step in &steps {
                fact = infer_step(step, &fact).map_err(|m| node.shape_error(m))?;
            }
            one(Value::ParamSet { fact, sources })
        }
        Value::Const(_) => Err(node.malformed("constant reached a deferred step")),
        Value::View(_) => {
            let mut view = ctx.view_input(node, 0)?;
            for step in steps {
                view.push(&node.name, step).map_err(|m| node.shape_error(m))?;
            }
            one(Value::View(view))
        }
    }
}

/// `Split` of a run-time tensor: one IR `Slice` per output. The sizes: the `split` attribute
/// (before opset 13) or input, else `num_outputs` (opset 18) or the number of outputs, equal
/// parts with a smaller last one.
pub(crate) fn split(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    let shape = match &x {
        Value::Const(c) => c.shape.clone(),
        other => ctx.fact_of(node, other)?.shape,
    };
    let axis = resolve_axis(node, node.int("axis", 0)?, shape.len())?;
    let total = shape[axis];
    let sizes: Vec<usize> = if let Some(s) = node.ints("split") {
        s.iter().map(|&v| v.max(0) as usize).collect()
    } else if node.input(1).is_some() {
        let split = ctx.const_input(node, 1, "split")?;
        split
            .to_i64s()
            .ok_or_else(|| node.malformed("split sizes must be integers"))?
            .iter()
            .map(|&v| v.max(0) as usize)
            .collect()
    } else {
        let parts = node.int("num_outputs", node.num_outputs() as i64)?.max(1) as usize;
        let each = total.div_ceil(parts);
        (0..parts).map(|i| each.min(total.saturating_sub(i * each))).collect()
    };
    if sizes.iter().sum::<usize>() != total || sizes.len() != node.num_outputs() {
        return Err(node.malformed(format!(
            "split sizes {sizes:?} for {} outputs of an axis of {total}",
            node.num_outputs()
        )));
    }
    // A constant (a shape vector split into its dims) folds, for the nodes after it to fold.
    if let Value::Const(c) = &x {
        let mut start = 0;
        let mut outputs = Vec::with_capacity(sizes.len());
        for size in sizes {
            let part =
                fold::slice(c, axis, start, start + size, 1).map_err(|m| node.shape_error(m))?;
            outputs.push(Some(Value::constant(part)));
            start += size;
        }
        return Ok(outputs);
    }
    let w = ctx.wire(node, 0)?;
    let mut outputs = Vec::with_capacity(sizes.len());
    let mut start = 0i64;
    for (i, size) in sizes.into_iter().enumerate() {
        let end = start + size as i64;
        let op = Op::Slice { axis: axis as i64, start, end, step: 1 };
        outputs.push(Some(ctx.emit_value(&format!("{}:{i}", node.name), op, &[w])?));
        start = end;
    }
    Ok(outputs)
}

/// `Pad` of a run-time tensor with constant pads (attributes before opset 11, inputs after;
/// `axes` from opset 18): the IR's `Pad`.
pub(crate) fn pad(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let rank = ctx.fact_of(node, &x)?.rank();
    use ordo_ir::op::PadMode;
    let mode = node.choice(
        "mode",
        "constant",
        &[
            ("constant", PadMode::Constant),
            ("reflect", PadMode::Reflect),
            ("edge", PadMode::Edge),
            ("wrap", PadMode::Wrap),
        ],
    )?;
    let present = |i: usize| node.input(i).is_some();
    let (given, value) = if node.opset < 11 {
        let pads = node.ints("pads").ok_or_else(|| node.malformed("no pads"))?.to_vec();
        (pads, node.float("value", 0.0)?)
    } else {
        let pads = ctx
            .const_input(node, 1, "pads")?
            .to_i64s()
            .ok_or_else(|| node.malformed("pads must be integers"))?;
        let value = if present(2) {
            ctx.const_input(node, 2, "constant_value")?.scalar().unwrap_or(0.0)
        } else {
            0.0
        };
        (pads, value)
    };
    let axes: Vec<usize> = if node.opset >= 18 && present(3) {
        let axes = ctx
            .const_input(node, 3, "axes")?
            .to_i64s()
            .ok_or_else(|| node.malformed("axes must be integers"))?;
        axes.iter().map(|&a| resolve_axis(node, a, rank)).collect::<OnnxResult<_>>()?
    } else {
        (0..rank).collect()
    };
    if given.len() != 2 * axes.len() {
        return Err(node.malformed(format!("{} pads for {} axes", given.len(), axes.len())));
    }
    let mut pads = vec![0i64; 2 * rank];
    for (k, &a) in axes.iter().enumerate() {
        pads[a] = given[k];
        pads[a + rank] = given[k + axes.len()];
    }
    let w = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Pad { pads, mode, value }, &[w])?)
}

/// `Tile` of a run-time tensor with constant repeats: the IR's `Tile`.
pub(crate) fn tile(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let repeats = ctx
        .const_input(node, 1, "repeats")?
        .to_i64s()
        .ok_or_else(|| node.malformed("repeats must be integers"))?;
    if repeats.iter().any(|&r| r < 0) {
        return Err(node.malformed(format!("negative repeats {repeats:?}")));
    }
    let repeats = repeats.iter().map(|&r| r as usize).collect();
    let w = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Tile { repeats }, &[w])?)
}
