//! Elementwise ops: activations, arithmetic, `Softmax`, `Dropout`, `Trilu`.
//!
//! Arithmetic folds on constants; with a run-time operand it maps to the IR's `Add`, `Mul` and
//! `Scale`: `a - b` is `a + (-1) * b`, division by a constant is a product, adding a causal
//! mask (0 on and below the diagonal, -inf above) is `CausalMask`, `x^2` is `x * x` and
//! `x^-0.5` is `Rsqrt`.

use ordo_ir::op::{ActivationKind, CompareKind, Distribution, UnaryOp};
use ordo_ir::{Op, OutletId};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::fold;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code};
use crate::value::Value;

/// Activations.
pub(crate) fn unary(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let func = match node.op_type() {
        "Relu" => UnaryOp::Relu,
        "Sigmoid" => UnaryOp::Sigmoid,
        "Tanh" => UnaryOp::Tanh,
        "HardSwish" => UnaryOp::HardSwish,
        "HardSigmoid" => {
            let (alpha, beta) = (node.float("alpha", 0.2)?, node.float("beta", 0.5)?);
            if (alpha - 1.0 / 6.0).abs() > 1e-6 || (beta - 0.5).abs() > 1e-6 {
                return activation(ctx, node, ActivationKind::HardSigmoid, alpha, beta);
            }
            UnaryOp::HardSigmoid
        }
        "Elu" => return activation(ctx, node, ActivationKind::Elu, node.float("alpha", 1.0)?, 0.0),
        "Selu" => {
            let (alpha, gamma) = (
                node.float("alpha", 1.673_263_192_176_818_8)?,
                node.float("gamma", 1.050_701_022_148_132_3)?,
            );
            return activation(ctx, node, ActivationKind::Selu, alpha, gamma);
        }
        "LeakyRelu" => {
            return activation(
                ctx,
                node,
                ActivationKind::LeakyRelu,
                node.float("alpha", 0.01)?,
                0.0,
            );
        }
        "ThresholdedRelu" => {
            let alpha = node.float("alpha", 1.0)?;
            return activation(ctx, node, ActivationKind::ThresholdedRelu, alpha, 0.0);
        }
        "Celu" => {
            return activation(ctx, node, ActivationKind::Celu, node.float("alpha", 1.0)?, 0.0);
        }
        "Shrink" => {
            let (lambd, bias) = (node.float("lambd", 0.5)?, node.float("bias", 0.0)?);
            return activation(ctx, node, ActivationKind::Shrink, lambd, bias);
        }
        "Erf" => UnaryOp::Erf,
        "Exp" => UnaryOp::Exp,
        "Log" => UnaryOp::Log,
        "Abs" => UnaryOp::Abs,
        "Sin" => UnaryOp::Sin,
        "Cos" => UnaryOp::Cos,
        "Reciprocal" => UnaryOp::Reciprocal,
        "Softplus" => UnaryOp::Softplus,
        "Softsign" => UnaryOp::Softsign,
        "Tan" => UnaryOp::Tan,
        "Asin" => UnaryOp::Asin,
        "Acos" => UnaryOp::Acos,
        "Atan" => UnaryOp::Atan,
        "Sinh" => UnaryOp::Sinh,
        "Cosh" => UnaryOp::Cosh,
        "Asinh" => UnaryOp::Asinh,
        "Acosh" => UnaryOp::Acosh,
        "Atanh" => UnaryOp::Atanh,
        "Mish" => UnaryOp::Mish,
        "Floor" => UnaryOp::Floor,
        "Ceil" => UnaryOp::Ceil,
        "Round" => UnaryOp::Round,
        "Sign" => UnaryOp::Sign,

        "Gelu" => match node.string("approximate", "none")?.as_str() {
            "none" => UnaryOp::Gelu,
            "tanh" => UnaryOp::GeluTanh,
            other => return Err(node.unsupported(format!("approximate = {other}"))),
        },
        other => return Err(node.unsupported(format!("no activation {other}"))),
    };
    if let Value::Const(_) = ctx.input(node, 0)? {
        // Index arithmetic (`Abs` of relative positions, `Floor`, `Sign`): folded by the
        // generic rule, which also holds integers.
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let x = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Unary { func }, &[x])?)
}

/// `Neg` and `Sqrt`: fold on constants; `Neg` of a wire is a `Scale` by -1, `Sqrt` of one the
/// IR's `Sqrt`.
pub(crate) fn const_unary(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let neg = node.op_type() == "Neg";
    if let Value::Const(c) = ctx.input(node, 0)? {
        let zero = ConstTensor { elem: c.elem, shape: vec![], data: ConstData::Float(vec![0.0]) };
        let folded = if neg {
            fold::binary(&zero, &c, |_, b| -b, |_, b| b.checked_neg())
        } else {
            fold::binary(&zero, &c, |_, b| b.sqrt(), |_, _| None)
        };
        return one(Value::constant(folded.map_err(|m| node.unsupported(m))?));
    }
    let x = ctx.wire(node, 0)?;
    let op = if neg { Op::Scale { factor: -1.0 } } else { Op::Unary { func: UnaryOp::Sqrt } };
    one(ctx.emit_value(&node.name, op, &[x])?)
}

/// `Add`, `Sub`, `Mul`, `Div`, `Pow`.
pub(crate) fn binary(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let op = node.op_type().to_string();
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    if let (Value::Const(x), Value::Const(y)) = (&a, &b) {
        let folded = match op.as_str() {
            "Add" => fold::binary(x, y, |p, q| p + q, i64::checked_add),
            "Sub" => fold::binary(x, y, |p, q| p - q, i64::checked_sub),
            "Mul" => fold::binary(x, y, |p, q| p * q, i64::checked_mul),
            "Div" => fold::binary(x, y, |p, q| p / q, i64::checked_div),
            _ => fold::binary(x, y, f64::powf, |p, q| p.checked_pow(u32::try_from(q).ok()?)),
        };
        return one(Value::constant(folded.map_err(|m| node.unsupported(m))?));
    }
    match op.as_str() {
        "Add" => add(ctx, node, 0, 1),
        "Sub" => {
            let neg = negate(ctx, node, 1)?;
            let x = operand(ctx, node, 0, Some(&neg))?;
            let y = operand_value(ctx, node, &neg, &format!("{}.neg", node.name), Some(x))?;
            one(ctx.emit_value(&node.name, Op::Add, &[x, y])?)
        }
        "Mul" => mul(ctx, node),
        "Div" => match &b {
            // A float divided by a constant: times its inverse.
            Value::Const(c) if ctx.fact_of(node, &a)?.dtype.is_float() => {
                let one_c = ConstTensor {
                    elem: code::FLOAT,
                    shape: vec![],
                    data: ConstData::Float(vec![1.0]),
                };
                let inv = fold::binary(&one_c, c, |p, q| p / q, |_, _| None)
                    .map_err(|m| node.unsupported(m))?;
                scale_or_mul(ctx, node, 0, inv)
            }
            _ => {
                // The IR's Div: of floats, or of integers truncating toward zero.
                let x = operand(ctx, node, 0, Some(&b))?;
                let y = operand(ctx, node, 1, Some(&a))?;
                one(ctx.emit_value(&node.name, Op::Div, &[x, y])?)
            }
        },
        _ => pow(ctx, node, &b),
    }
}

/// `a + b` where at most one is constant.
fn add(ctx: &mut Ctx<'_>, node: &Node<'_>, i: usize, j: usize) -> OnnxResult<Outputs> {
    for (x, c) in [(i, j), (j, i)] {
        if let Value::Const(mask) = ctx.input(node, c)? {
            let fact = ctx.fact_of(node, &ctx.input(node, x)?)?;
            if mask.scalar() == Some(0.0)
                && fold::broadcast(&fact.shape, &mask.shape) == Some(fact.shape.clone())
            {
                return one(ctx.input(node, x)?);
            }
            if is_causal_mask(&mask, &fact.shape) {
                let w = ctx.wire(node, x)?;
                return one(ctx.emit_value(&node.name, Op::CausalMask, &[w])?);
            }
        }
    }
    let (a, b) = (ctx.input(node, i)?, ctx.input(node, j)?);
    let x = operand(ctx, node, i, Some(&b))?;
    let y = operand(ctx, node, j, Some(&a))?;
    one(ctx.emit_value(&node.name, Op::Add, &[x, y])?)
}

/// `a * b`: a `Scale` when one side is a constant scalar.
fn mul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    for (x, c) in [(0, 1), (1, 0)] {
        if let Value::Const(k) = ctx.input(node, c)? {
            return scale_or_mul(ctx, node, x, (*k).clone());
        }
    }
    let x = ctx.wire(node, 0)?;
    let y = ctx.wire(node, 1)?;
    one(ctx.emit_value(&node.name, Op::Mul, &[x, y])?)
}

/// Input `x` times a constant.
fn scale_or_mul(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: usize,
    k: ConstTensor,
) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, x)?)?;
    let keeps_shape = fold::broadcast(&fact.shape, &k.shape) == Some(fact.shape.clone());
    match k.scalar() {
        Some(f) if keeps_shape && f == 1.0 => one(ctx.input(node, x)?),
        Some(factor) if keeps_shape => {
            let w = ctx.wire(node, x)?;
            one(ctx.emit_value(&node.name, Op::Scale { factor }, &[w])?)
        }
        _ => {
            let w = ctx.wire(node, x)?;
            let k = operand_value(
                ctx,
                node,
                &Value::constant(k),
                &format!("{}.k", node.name),
                Some(w),
            )?;
            one(ctx.emit_value(&node.name, Op::Mul, &[w, k])?)
        }
    }
}

/// `x ^ p` with a run-time operand: 1, 2 and -0.5 as cheaper ops, else the IR's `Pow`.
fn pow(ctx: &mut Ctx<'_>, node: &Node<'_>, p: &Value) -> OnnxResult<Outputs> {
    let scalar = p.as_const().and_then(ConstTensor::scalar);
    let base = ctx.input(node, 0)?;
    // The shortcuts keep the base's type: integer bases (and 1) only where that is right.
    let float_base = ctx.fact_of(node, &base)?.dtype.is_float();
    match scalar.filter(|&s| float_base || s == 1.0 || s == 2.0) {
        Some(1.0) => return one(base),
        Some(2.0) => {
            let x = ctx.wire(node, 0)?;
            return one(ctx.emit_value(&node.name, Op::Mul, &[x, x])?);
        }
        Some(-0.5) => {
            let x = ctx.wire(node, 0)?;
            return one(ctx.emit_value(&node.name, Op::Unary { func: UnaryOp::Rsqrt }, &[x])?);
        }
        _ => {}
    }
    // Any other power: the IR's Pow, of operands of one type (a constant exponent becomes a
    // buffer of the base's type). ONNX lets the exponent's type differ: an exponent of
    // another type is cast to the base's, except an integer base to a float power, which
    // NumPy computes in floats and casts back (truncating).
    let x = operand(ctx, node, 0, Some(p))?;
    let y = operand(ctx, node, 1, Some(&base))?;
    let fact = |ctx: &Ctx<'_>, o| ctx.graph.fact(o).map(|f| f.dtype);
    let (xt, yt) = (fact(ctx, x), fact(ctx, y));
    if xt == yt {
        return one(ctx.emit_value(&node.name, Op::Pow, &[x, y])?);
    }
    let (Some(xt), Some(yt)) = (xt, yt) else {
        return Err(node.malformed("an operand without a type"));
    };
    let cast = |ctx: &mut Ctx<'_>, suffix: &str, w, to| {
        ctx.emit(&format!("{}.{suffix}", node.name), Op::cast(to), &[w], Vec::new()).map(|o| o[0])
    };
    if xt.is_integer() && yt.is_float() {
        let xf = cast(ctx, "base", x, yt)?;
        let pf = ctx.emit(&format!("{}.pow", node.name), Op::Pow, &[xf, y], Vec::new())?[0];
        return one(ctx.emit_value(&node.name, Op::cast(xt), &[pf])?);
    }
    let yc = cast(ctx, "exponent", y, xt)?;
    one(ctx.emit_value(&node.name, Op::Pow, &[x, yc])?)
}

/// An activation with constant parameters, of a run-time float tensor.
fn activation(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    kind: ActivationKind,
    alpha: f64,
    beta: f64,
) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) || !ctx.fact_of(node, &x)?.dtype.is_float() {
        return Err(node.unsupported("the IR's activations take run-time float tensors"));
    }
    let w = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Activation { kind, alpha, beta }, &[w])?)
}

/// `Max`, `Min`, `Sum` and `Mean` of one or more float tensors (broadcasting): a chain of the
/// IR's `Max`, `Min` or `Add` in input order (then a `Scale` by 1/n for the mean). All-constant
/// inputs fold (the generic fallback).
pub(crate) fn extreme(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let op = match node.op_type() {
        "Max" => Op::Max,
        "Min" => Op::Min,
        _ => Op::Add,
    };
    let mean = node.op_type() == "Mean" && node.num_inputs() > 1;
    let inputs =
        (0..node.num_inputs()).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    let Some(like) = inputs.iter().find(|v| !matches!(v, Value::Const(_))).cloned() else {
        return Err(node.unsupported("constants only (folded)"));
    };
    if inputs.len() == 1 {
        return one(like);
    }
    let mut acc = operand(ctx, node, 0, Some(&like))?;
    for i in 1..inputs.len() {
        let w = operand(ctx, node, i, Some(&like))?;
        let last = i + 1 == inputs.len() && !mean;
        let name = if last { node.name.clone() } else { format!("{}.{i}", node.name) };
        acc = ctx.emit(&name, op.clone(), &[acc, w], Vec::new())?[0];
    }
    if mean {
        let factor = 1.0 / inputs.len() as f64;
        acc = ctx.emit(&node.name, Op::Scale { factor }, &[acc], Vec::new())?[0];
    }
    let fact = ctx.graph.fact(acc).cloned().expect("emitted");
    one(Value::wire(acc, fact))
}

/// `Clip` of a float tensor (bounds: attributes before opset 11, optional inputs after; an
/// absent bound is none). Constant bounds: the IR's `Clip` (PyTorch's `clamp`: the gradient
/// passes where `min <= x <= max`). Run-time bounds: `Min(Max(x, min), max)` (an element
/// equal to a bound gets half the gradient there, `torch.maximum`'s rule).
pub(crate) fn clip(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) || ctx.fact_of(node, &x)?.dtype == ordo_ir::DType::Bool {
        return Err(node.unsupported("the IR clips run-time numbers"));
    }
    // Each bound: absent (its default), a constant, or a run-time input.
    enum Bound {
        Const(f64),
        RunTime,
    }
    let mut bounds = Vec::new();
    for (i, attr, default) in [(1, "min", f64::NEG_INFINITY), (2, "max", f64::INFINITY)] {
        bounds.push(if node.opset < 11 {
            Bound::Const(node.float(attr, default)?)
        } else {
            match node.input(i) {
                Some(name) if !name.is_empty() => {
                    match ctx.input(node, i)? {
                        Value::Const(c) => Bound::Const(c.scalar().ok_or_else(|| {
                            node.unsupported(format!("`{attr}` must be a scalar"))
                        })?),
                        _ => Bound::RunTime,
                    }
                }
                _ => Bound::Const(default),
            }
        });
    }
    let w = ctx.wire(node, 0)?;
    if let [Bound::Const(min), Bound::Const(max)] = bounds[..] {
        return one(ctx.emit_value(&node.name, Op::Clip { min, max }, &[w])?);
    }
    let mut acc = w;
    for (k, op) in [(0, Op::Max), (1, Op::Min)] {
        let bound = match bounds[k] {
            Bound::Const(v) if v.is_infinite() => continue,
            Bound::Const(_) | Bound::RunTime => {
                let like = Value::wire(acc, ctx.graph.fact(acc).cloned().expect("emitted"));
                operand(ctx, node, k + 1, Some(&like))?
            }
        };
        let last = k == 1 || matches!(bounds[1], Bound::Const(v) if v.is_infinite());
        let name = if last { node.name.clone() } else { format!("{}.min", node.name) };
        acc = ctx.emit(&name, op, &[acc, bound], Vec::new())?[0];
    }
    let fact = ctx.graph.fact(acc).cloned().expect("emitted");
    one(Value::wire(acc, fact))
}

/// `-input(i)`: folded for a constant, a `Scale` node otherwise.
fn negate(ctx: &mut Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<Value> {
    match ctx.input(node, i)? {
        Value::Const(c) => {
            let zero = ConstTensor::int_scalar(c.elem, 0);
            let neg = fold::binary(&zero, &c, |_, b| -b, |_, b| b.checked_neg())
                .map_err(|m| node.unsupported(m))?;
            Ok(Value::constant(neg))
        }
        _ => {
            let w = ctx.wire(node, i)?;
            ctx.emit_value(&format!("{}.neg", node.name), Op::Scale { factor: -1.0 }, &[w])
        }
    }
}

/// The wire of input `i`; a constant becomes a buffer of the other operand's type.
pub(super) fn operand(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    other: Option<&Value>,
) -> OnnxResult<OutletId> {
    let v = ctx.input(node, i)?;
    if let (Value::Const(_), Some(o)) = (&v, other)
        && !matches!(o, Value::Const(_))
    {
        let tensor = node.required_input(i)?.to_string();
        let like = ctx.fact_of(node, o)?;
        return operand_value_typed(ctx, node, &v, &tensor, like.dtype);
    }
    ctx.wire(node, i)
}

/// The wire of a value that is not a named tensor (a folded constant or a computed wire).
fn operand_value(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    v: &Value,
    name: &str,
    like: Option<OutletId>,
) -> OnnxResult<OutletId> {
    match v {
        Value::Const(_) => {
            let dtype =
                like.and_then(|o| ctx.graph.fact(o)).map_or(ordo_ir::DType::F32, |f| f.dtype);
            operand_value_typed(ctx, node, v, name, dtype)
        }
        Value::View(view) => match view.base {
            crate::value::Base::Wire(o) if view.steps.is_empty() => Ok(o),
            _ => Err(node.malformed("unexpected deferred value")),
        },
        Value::ParamSet { .. } => {
            Err(node.unsupported("a combination of parameters used as a value"))
        }
    }
}

/// The wire of constant input `i` as a bool buffer (a `Where` condition beside run-time
/// values).
pub(super) fn bool_operand(ctx: &mut Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<OutletId> {
    let v = ctx.input(node, i)?;
    let tensor = node.required_input(i)?.to_string();
    operand_value_typed(ctx, node, &v, &tensor, ordo_ir::DType::Bool)
}

fn operand_value_typed(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    v: &Value,
    name: &str,
    dtype: ordo_ir::DType,
) -> OnnxResult<OutletId> {
    let Value::Const(c) = v else { return Err(node.malformed("not a constant")) };
    ctx.buffer(node, name, &fold::cast(c, dtype))
}

/// Whether a constant is 0 on and below the diagonal and -inf (or below -1e9) above it, and
/// broadcasts to `shape` without changing it.
fn is_causal_mask(c: &ConstTensor, shape: &[usize]) -> bool {
    let r = c.shape.len();
    if r < 2 || shape.len() < 2 || fold::broadcast(shape, &c.shape).as_deref() != Some(shape) {
        return false;
    }
    let (rows, cols) = (c.shape[r - 2], c.shape[r - 1]);
    if rows != shape[shape.len() - 2] || cols != shape[shape.len() - 1] || rows != cols {
        return false;
    }
    let Some(values) = c.to_f64s() else { return false };
    values.iter().enumerate().all(|(i, &v)| {
        let (row, col) = ((i / cols) % rows, i % cols);
        if col > row { v <= -1e9 } else { v == 0.0 }
    })
}

/// `Softmax` and `LogSoftmax` along one axis (before opset 13: over the dims from `axis` on,
/// flattened, which is a reshape around the last axis).
pub(crate) fn softmax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let log = node.op_type() == "LogSoftmax";
    along_axis(ctx, node, |axis| if log { Op::LogSoftmax { axis } } else { Op::Softmax { axis } })
}

/// The op `op(axis)` over input 0 along `axis` (default -1; before opset 13, default 1 and
/// over the dims from `axis` on, flattened: a reshape to 2-D around the op on its last dim).
fn along_axis(ctx: &mut Ctx<'_>, node: &Node<'_>, op: impl Fn(i64) -> Op) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let axis = node.int("axis", if node.opset < 13 { 1 } else { -1 })?;
    let resolved = resolve_axis(node, axis, fact.rank())?;
    let x = ctx.wire(node, 0)?;
    if node.opset >= 13 || resolved + 1 == fact.rank() {
        return one(ctx.emit_value(&node.name, op(resolved as i64), &[x])?);
    }
    let rows: usize = fact.shape[..resolved].iter().product();
    let cols: usize = fact.shape[resolved..].iter().product();
    let flat = Op::Reshape { shape: vec![rows as i64, cols as i64] };
    let flat = ctx.emit(&format!("{}.flatten", node.name), flat, &[x], Vec::new())?[0];
    let y = ctx.emit(&format!("{}.flat", node.name), op(1), &[flat], Vec::new())?[0];
    let back = super::common::reshape_op(&fact.shape);
    one(ctx.emit_value(&node.name, back, &[y])?)
}

/// `ArgMax` and `ArgMin` of a run-time tensor (constants fold through the generic rule).
pub(crate) fn arg_extreme(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let op = Op::ArgExtreme {
        max: node.op_type() == "ArgMax",
        axis: node.int("axis", 0)?,
        keepdims: node.int("keepdims", 1)? != 0,
        select_last: node.int("select_last_index", 0)? != 0,
    };
    let w = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, op, &[w])?)
}

/// `Dropout`: the IR's `Dropout` in training mode, the identity otherwise. The mask output is
/// not imported in training mode; in inference mode it is a constant of trues.
pub(crate) fn dropout(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let given = |i: usize| node.input(i).is_some_and(|name| !name.is_empty());
    // Before opset 12 there is no training flag: PyTorch writes a training-mode dropout with
    // its mask output.
    let training = if node.opset < 12 {
        node.num_outputs() > 1
    } else if given(2) {
        ctx.const_input(node, 2, "training_mode")?.scalar().unwrap_or(0.0) != 0.0
    } else {
        false
    };
    if !training {
        // The ratio does not matter (it may even be a run-time input).
        let x = ctx.input(node, 0)?;
        let shape = ctx.fact_of(node, &x)?.shape;
        let mask = ConstTensor { elem: code::BOOL, shape, data: ConstData::Splat(1.0) };
        return Ok(vec![Some(x), Some(Value::constant(mask))]);
    }
    let p = if node.opset < 12 {
        node.float("ratio", 0.5)?
    } else if given(1) {
        ctx.const_input(node, 1, "the ratio")?.scalar().unwrap_or(0.5)
    } else {
        0.5
    };
    if !(0.0..1.0).contains(&p) {
        return Err(node.malformed(format!("ratio {p}: expected at least 0 and below 1")));
    }
    if p == 0.0 {
        // Nothing dropped: the input, and a mask of every element kept.
        let x = ctx.input(node, 0)?;
        let shape = ctx.fact_of(node, &x)?.shape;
        let mask = ConstTensor { elem: code::BOOL, shape, data: ConstData::Splat(1.0) };
        return Ok(vec![Some(x), Some(Value::constant(mask))]);
    }
    let x = ctx.wire(node, 0)?;
    if !super::common::output_read(ctx, node, 1) {
        return Ok(vec![Some(ctx.emit_value(&node.name, Op::Dropout { p }, &[x])?), None]);
    }
    // The mask is read: the draws as ops of their own, as ONNX defines the operator (keep an
    // element where a uniform draw in [0, 1) is at least the ratio; scale what is kept by
    // 1 / (1 - ratio)), from the same counter-based generator as the IR's Dropout.
    let mut parts = super::parts::Parts::of(node);
    let uniform = Distribution::Uniform { low: 0.0, high: 1.0 };
    let draws = parts.op(ctx, "draws", Op::RandomLike(uniform), &[x])?;
    let keep = parts.compare(ctx, draws, CompareKind::GreaterOrEqual, p)?;
    let scaled = parts.op(ctx, "kept", Op::Scale { factor: 1.0 / (1.0 - p) }, &[x])?;
    let zero = parts.constant(ctx, 0.0)?;
    let y = parts.select(ctx, keep, scaled, zero)?;
    Ok(vec![Some(ctx.wire_value(y)), Some(ctx.wire_value(keep))])
}

/// `Trilu` of a constant (a mask), folded.
pub(crate) fn trilu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let k = match node.input(1) {
        Some(name) if !name.is_empty() => {
            ctx.const_input(node, 1, "k")?
                .scalar()
                .ok_or_else(|| node.malformed("k must be a scalar"))? as i64
        }
        _ => 0,
    };
    let upper = node.int("upper", 1)? != 0;
    if let Value::Const(c) = ctx.input(node, 0)? {
        return one(Value::constant(fold::trilu(&c, k, upper).map_err(|m| node.unsupported(m))?));
    }
    let x = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, Op::Trilu { k, upper }, &[x])?)
}

/// `Hardmax` (before opset 13 over the dims from `axis` on, flattened, as `Softmax`).
pub(crate) fn hardmax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if !fact.dtype.is_float() {
        return Err(node.unsupported("the IR's Hardmax takes float tensors"));
    }
    along_axis(ctx, node, |axis| Op::Hardmax { axis })
}

/// `CumSum` and `CumProd` of a run-time tensor along a constant axis.
pub(crate) fn cum_sum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let rank = ctx.fact_of(node, &x)?.rank();
    let axis = ctx
        .const_input(node, 1, "axis")?
        .scalar()
        .ok_or_else(|| node.malformed("axis must be a scalar"))?;
    let axis = resolve_axis(node, axis as i64, rank)? as i64;
    let (exclusive, reverse) = (node.int("exclusive", 0)? != 0, node.int("reverse", 0)? != 0);
    let op = match node.op_type() {
        "CumProd" => Op::CumProd { axis, exclusive, reverse },
        _ => Op::CumSum { axis, exclusive, reverse },
    };
    let w = ctx.wire(node, 0)?;
    one(ctx.emit_value(&node.name, op, &[w])?)
}

/// `Mod` of run-time tensors (floats with `fmod = 1`; integers either way).
pub(crate) fn modulo(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    if matches!((&a, &b), (Value::Const(_), Value::Const(_))) {
        return Err(node.unsupported("constants: folded by the generic rule"));
    }
    let fmod = node.int("fmod", 0)? != 0;
    let like = if matches!(a, Value::Const(_)) { &b } else { &a };
    let dtype = ctx.fact_of(node, like)?.dtype;
    let supported = if dtype.is_float() { fmod } else { dtype.is_integer() };
    if !supported {
        return Err(node.unsupported(format!("Mod of {dtype} with fmod = {}", u8::from(fmod))));
    }
    let x = operand(ctx, node, 0, Some(&b))?;
    let y = operand(ctx, node, 1, Some(&a))?;
    one(ctx.emit_value(&node.name, Op::Mod { fmod }, &[x, y])?)
}

/// `TopK` of a run-time float or integer tensor with a constant K: one IR `TopK` per output read (the
/// values, the indices). Sorted output serves `sorted = 0` too (its order is unspecified).
pub(crate) fn top_k(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    let dtype = ctx.fact_of(node, &x)?.dtype;
    if matches!(x, Value::Const(_)) || !(dtype.is_float() || dtype.is_integer()) {
        return Err(node.unsupported("the IR's TopK takes run-time float or integer tensors"));
    }
    let rank = ctx.fact_of(node, &x)?.rank();
    let k = if node.opset < 10 {
        node.int("k", 0)?
    } else {
        ctx.const_input(node, 1, "K")?
            .scalar()
            .ok_or_else(|| node.malformed("K must be a scalar"))? as i64
    };
    let k = usize::try_from(k).map_err(|_| node.malformed(format!("K = {k}")))?;
    let axis = resolve_axis(node, node.int("axis", -1)?, rank)? as i64;
    let largest = node.int("largest", 1)? != 0;
    let w = ctx.wire(node, 0)?;
    let mut outputs = Vec::new();
    for (slot, indices) in [(0, false), (1, true)] {
        if node.output_named(slot) {
            let op = Op::TopK { k, axis, largest, indices };
            outputs.push(Some(ctx.emit_value(&format!("{}:{slot}", node.name), op, &[w])?));
        } else {
            outputs.push(None);
        }
    }
    Ok(outputs)
}
