//! Elementwise ops, softmax, the causal mask and dropout, with their gradients.

use ordo_ir::Op;
use ordo_ir::op::{ActivationKind, Grad, UnaryOp};

use super::error::KernelResult;
use super::integer;
use super::tensor::{Data, Tensor};
use super::util::{
    Call, binary_layout, broadcast_shapes, broadcast_strides, erf, for_each_broadcast,
    for_each_lane, reduce_to, resolve_axis, split_at_axis, tensor,
};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_TANH_C: f64 = 0.044_715;

/// `f(x)` of a unary function, in f64.
pub(crate) fn unary_value(func: UnaryOp, x: f64) -> f64 {
    match func {
        // `f64::max` would take NaN to 0: NaN stays NaN, as `torch.relu` keeps it.
        UnaryOp::Relu if x.is_nan() => x,
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::GeluTanh => {
            0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).tanh())
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::HardSwish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        UnaryOp::HardSigmoid => (x + 3.0).clamp(0.0, 6.0) / 6.0,
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Erf => erf(x),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Reciprocal => 1.0 / x,
        // ln(1 + e^x) without overflow for large x.
        UnaryOp::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        UnaryOp::Softsign => x / (1.0 + x.abs()),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        UnaryOp::Mish => x * (x.max(0.0) + (-x.abs()).exp().ln_1p()).tanh(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sign => {
            if x == 0.0 || x.is_nan() {
                x
            } else {
                x.signum()
            }
        }
    }
}

/// `f'` of a unary function at the saved value `s`: the output where
/// [`UnaryOp::grad_reads_output`], else the input (as the training rules save them). Kinks
/// follow PyTorch (`|x|'` is 0 at 0).
fn unary_derivative(func: UnaryOp, s: f64) -> f64 {
    match func {
        UnaryOp::Relu => f64::from(u8::from(s > 0.0)),
        UnaryOp::Sigmoid => s * (1.0 - s),
        UnaryOp::Tanh => 1.0 - s * s,
        UnaryOp::Rsqrt => -0.5 * s * s * s,
        UnaryOp::Gelu => {
            let cdf = 0.5 * (1.0 + erf(s / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * s * s).exp() / (2.0 * std::f64::consts::PI).sqrt();
            cdf + s * pdf
        }
        UnaryOp::GeluTanh => {
            let inner = SQRT_2_OVER_PI * (s + GELU_TANH_C * s * s * s);
            let t = inner.tanh();
            let dinner = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * s * s);
            0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * dinner
        }
        UnaryOp::HardSwish if s < -3.0 => 0.0,
        UnaryOp::HardSwish if s <= 3.0 => s / 3.0 + 0.5,
        UnaryOp::HardSwish => 1.0,
        UnaryOp::HardSigmoid if s > -3.0 && s < 3.0 => 1.0 / 6.0,
        UnaryOp::HardSigmoid => 0.0,
        UnaryOp::Erf => std::f64::consts::FRAC_2_SQRT_PI * (-s * s).exp(),
        UnaryOp::Exp => s,
        UnaryOp::Log => 1.0 / s,
        UnaryOp::Sqrt => 0.5 / s,
        UnaryOp::Abs => s.signum() * f64::from(u8::from(s != 0.0)),
        UnaryOp::Sin => s.cos(),
        UnaryOp::Cos => -s.sin(),
        UnaryOp::Reciprocal => -s * s,
        UnaryOp::Softplus => 1.0 / (1.0 + (-s).exp()),
        UnaryOp::Softsign => 1.0 / ((1.0 + s.abs()) * (1.0 + s.abs())),
        UnaryOp::Tan => 1.0 / (s.cos() * s.cos()),
        UnaryOp::Asin => 1.0 / (1.0 - s * s).sqrt(),
        UnaryOp::Acos => -1.0 / (1.0 - s * s).sqrt(),
        UnaryOp::Atan => 1.0 / (1.0 + s * s),
        UnaryOp::Sinh => s.cosh(),
        UnaryOp::Cosh => s.sinh(),
        UnaryOp::Asinh => 1.0 / (s * s + 1.0).sqrt(),
        UnaryOp::Acosh => 1.0 / (s * s - 1.0).sqrt(),
        UnaryOp::Atanh => 1.0 / (1.0 - s * s),
        UnaryOp::Mish => {
            let sp = s.max(0.0) + (-s.abs()).exp().ln_1p();
            let t = sp.tanh();
            t + s * (1.0 - t * t) / (1.0 + (-s).exp())
        }
        UnaryOp::Floor => 0.0,
        UnaryOp::Ceil => 0.0,
        UnaryOp::Round => 0.0,
        UnaryOp::Sign => 0.0,
    }
}

/// Checks one float input of the forward op's shape rule and returns its data.
fn single_input<'c>(op: &Op, c: &'c Call) -> KernelResult<&'c [f32]> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    c.infer(op, &c.input_facts())?;
    c.input_f32(0)
}

/// Checks a gradient's inputs `[dy, saved...]`: `n` of them, all shaped like its product.
fn same_shaped<'c>(g: &Grad, n: usize, c: &'c Call) -> KernelResult<&'c [f32]> {
    c.expect_inputs(n)?;
    let shape = &c.produced(g, 0)?.shape;
    for i in 0..n {
        c.expect_input_shape(i, shape)?;
    }
    c.input_f32(0)
}

pub(crate) fn unary(op: &Op, func: UnaryOp, c: Call) -> KernelResult<Vec<Tensor>> {
    map_input(op, c, |v| unary_value(func, v))
}

pub(crate) fn unary_grad(of: &Op, func: UnaryOp, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    map_saved_input_grad(of, g, c, |v| unary_derivative(func, v))
}

/// An activation with constant parameters, in f64.
pub(crate) fn activation(
    op: &Op,
    (kind, alpha, beta): (ActivationKind, f64, f64),
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    map_input(op, c, |v| kind.value(alpha, beta, v))
}

/// The gradient of an activation with constant parameters (reads the input).
pub(crate) fn activation_grad(
    of: &Op,
    (kind, alpha, beta): (ActivationKind, f64, f64),
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    map_saved_input_grad(of, g, c, |v| kind.derivative(alpha, beta, v))
}

/// `y = f(x)` element by element, in f64, of one float input checked against the op's shape
/// rule.
fn map_input(op: &Op, c: Call, f: impl Fn(f64) -> f64) -> KernelResult<Vec<Tensor>> {
    let x = single_input(op, &c)?;
    let y = x.iter().map(|&v| f(f64::from(v)) as f32).collect();
    Ok(vec![tensor(c.inputs[0].shape(), y)?])
}

/// `dx = dy * f'(x)` element by element, in f64, for a gradient of inputs `[dy, x]` where
/// `derivative` is `f'` and `x` the forward op's saved input.
fn map_saved_input_grad(
    of: &Op,
    g: &Grad,
    c: Call,
    derivative: impl Fn(f64) -> f64,
) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 2, &c)?;
    c.infer(of, &[c.inputs[1].fact()])?;
    let x = c.input_f32(1)?;
    let dx = dy.iter().zip(x).map(|(&d, &v)| (f64::from(d) * derivative(f64::from(v))) as f32);
    Ok(vec![tensor(c.inputs[0].shape(), dx.collect())?])
}

pub(crate) fn scale(op: &Op, factor: f64, c: Call) -> KernelResult<Vec<Tensor>> {
    if c.inputs.first().is_some_and(|x| x.as_i64().is_some()) {
        c.expect_inputs(1)?;
        c.expect_params(0)?;
        c.infer(op, &c.input_facts())?;
        return Ok(vec![integer::scale(factor, &c)?]);
    }
    let x = single_input(op, &c)?;
    let f = factor as f32;
    Ok(vec![tensor(c.inputs[0].shape(), x.iter().map(|&v| v * f).collect())?])
}

pub(crate) fn scale_grad(of: &Op, factor: f64, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 1, &c)?;
    c.infer(of, &[c.inputs[0].fact()])?;
    let f = factor as f32;
    Ok(vec![tensor(c.inputs[0].shape(), dy.iter().map(|&v| v * f).collect())?])
}

/// `Add`, `Mul`, `Div`, `Max`, `Min` or `Pow` with NumPy broadcasting.
pub(crate) fn binary(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let (out, sa, sb) = binary_layout(op, &c)?;
    if c.inputs[0].as_i64().is_some() {
        return Ok(vec![integer::binary(op, &c, &out, &sa, &sb)?]);
    }
    let (a, b) = (c.input_f32(0)?, c.input_f32(1)?);
    let mut y = vec![0.0f32; out.iter().product()];
    match op {
        Op::Mul => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = a[i] * b[j]),
        Op::Div => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = a[i] / b[j]),
        Op::Max => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = nan_max(a[i], b[j])),
        Op::Min => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = -nan_max(-a[i], -b[j])),
        Op::Pow => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = a[i].powf(b[j])),
        _ => for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = a[i] + b[j]),
    }
    Ok(vec![tensor(&out, y)?])
}

/// The larger of `a` and `b`, NaN if either is (NumPy's `maximum`; `f32::max` drops NaNs).
fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) }
}

/// The derivatives of `Max`, `Min` and `Pow` with respect to each operand at `(a, b)`.
/// An extreme's gradient goes to the operand that is it, half to each on a tie (PyTorch's
/// `maximum`); the power's: `b a^(b-1)` and `a^b ln a` (0 where `a^b` is 0, as PyTorch).
fn pair_derivatives(op: &Op, a: f32, b: f32) -> (f32, f32) {
    let pick = |first: bool| match a.partial_cmp(&b) {
        Some(std::cmp::Ordering::Equal) => (0.5, 0.5),
        Some(std::cmp::Ordering::Greater) => {
            if first {
                (1.0, 0.0)
            } else {
                (0.0, 1.0)
            }
        }
        Some(std::cmp::Ordering::Less) => {
            if first {
                (0.0, 1.0)
            } else {
                (1.0, 0.0)
            }
        }
        None => (f32::NAN, f32::NAN),
    };
    match op {
        Op::Max => pick(true),
        Op::Min => pick(false),
        _ => {
            let (a, b) = (f64::from(a), f64::from(b));
            let y = a.powf(b);
            let db = if y == 0.0 { 0.0 } else { y * a.ln() };
            let da = if b == 0.0 { 0.0 } else { b * a.powf(b - 1.0) };
            (da as f32, db as f32)
        }
    }
}

/// The gradient of `Max`, `Min` or `Pow` with respect to input `k` (reads both operands),
/// summed down to that input's shape.
pub(crate) fn pair_grad(of: &Op, k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    let shape = c.produced(g, 0)?.shape.clone();
    let (a_shape, b_shape) = (c.inputs[1].shape(), c.inputs[2].shape());
    check_broadcast(&c, a_shape, b_shape)?;
    c.expect_input_shape(1 + k, &shape)?;
    let dy_shape = c.inputs[0].shape().to_vec();
    let (dy, a, b) = (c.input_f32(0)?, c.input_f32(1)?, c.input_f32(2)?);
    let (sa, sb) = (broadcast_strides(a_shape, &dy_shape), broadcast_strides(b_shape, &dy_shape));
    let mut t = vec![0.0f32; dy.len()];
    for_each_broadcast(&dy_shape, &sa, &sb, |o, i, j| {
        let (da, db) = pair_derivatives(of, a[i], b[j]);
        t[o] = dy[o] * if k == 0 { da } else { db };
    });
    Ok(vec![tensor(&shape, reduce_to(&t, &dy_shape, &shape, None))?])
}

/// `Clip`: `x` clamped to `[min, max]`, `max` everywhere when `min > max` (ONNX's rule); NaN
/// stays NaN.
pub(crate) fn clip(op: &Op, min: f64, max: f64, c: Call) -> KernelResult<Vec<Tensor>> {
    if c.inputs.first().is_some_and(|x| x.as_i64().is_some()) {
        c.expect_inputs(1)?;
        c.expect_params(0)?;
        c.infer(op, &c.input_facts())?;
        return Ok(vec![integer::clip(min, max, &c)?]);
    }
    let x = single_input(op, &c)?;
    let (lo, hi) = (min as f32, max as f32);
    let y = x.iter().map(|&v| if v.is_nan() { v } else { v.max(lo).min(hi) }).collect();
    Ok(vec![tensor(c.inputs[0].shape(), y)?])
}

/// The gradient of `Clip`: `dy` where `min <= x <= max` (bounds included, as PyTorch's
/// `clamp`), else 0.
pub(crate) fn clip_grad(
    of: &Op,
    min: f64,
    max: f64,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 2, &c)?;
    c.infer(of, &[c.inputs[1].fact()])?;
    let (lo, hi) = (min as f32, max as f32);
    let x = c.input_f32(1)?;
    let dx = dy.iter().zip(x).map(|(&d, &v)| if v >= lo && v <= hi { d } else { 0.0 }).collect();
    Ok(vec![tensor(c.inputs[0].shape(), dx)?])
}

/// The gradient of `Div` with respect to input `k`: `dy / b` for the dividend (reads `b`),
/// `-dy * a / b^2` for the divisor (reads `a`, `b`), each summed down to the input's shape.
pub(crate) fn div_grad(k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let shape = c.produced(g, 0)?.shape.clone();
    let dy_shape = c.inputs[0].shape().to_vec();
    let dy = c.input_f32(0)?;
    let quotient: Vec<f32> = if k == 0 {
        c.expect_inputs(2)?;
        let b_shape = c.inputs[1].shape();
        check_broadcast(&c, &shape, b_shape)?;
        let b = c.input_f32(1)?;
        let (sd, sb) =
            (broadcast_strides(&dy_shape, &dy_shape), broadcast_strides(b_shape, &dy_shape));
        let mut t = vec![0.0f32; dy.len()];
        for_each_broadcast(&dy_shape, &sd, &sb, |o, i, j| t[o] = dy[i] / b[j]);
        t
    } else {
        c.expect_inputs(3)?;
        let (a_shape, b_shape) = (c.inputs[1].shape(), c.inputs[2].shape());
        check_broadcast(&c, &shape, a_shape)?;
        let (a, b) = (c.input_f32(1)?, c.input_f32(2)?);
        let sa = broadcast_strides(a_shape, &dy_shape);
        let sb = broadcast_strides(b_shape, &dy_shape);
        let mut t = vec![0.0f32; dy.len()];
        for_each_broadcast(&dy_shape, &sa, &sb, |o, i, j| t[o] = -dy[o] * a[i] / (b[j] * b[j]));
        t
    };
    Ok(vec![tensor(&shape, reduce_to(&quotient, &dy_shape, &shape, None))?])
}

/// Checks that the product's shape broadcasts (with `other`) to the upstream gradient's.
fn check_broadcast(c: &Call, shape: &[usize], other: &[usize]) -> KernelResult<()> {
    let dy = c.inputs[0].shape();
    if broadcast_shapes(shape, other).as_deref() != Some(dy) {
        return Err(c.shape_err(format!(
            "an input of shape {shape:?} with {other:?} does not broadcast to {dy:?}"
        )));
    }
    Ok(())
}

/// The gradient of `Add` with respect to either input: the upstream gradient summed down to
/// the input's shape.
pub(crate) fn add_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let shape = &c.produced(g, 0)?.shape;
    check_broadcast(&c, shape, c.inputs[0].shape())?;
    let dy = c.input_f32(0)?;
    Ok(vec![tensor(shape, reduce_to(dy, c.inputs[0].shape(), shape, None))?])
}

/// The gradient of `Mul` with respect to either input: `dy * other`, summed down to the
/// input's shape.
pub(crate) fn mul_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = &c.produced(g, 0)?.shape;
    let other_shape = c.inputs[1].shape();
    check_broadcast(&c, shape, other_shape)?;
    let (dy, other) = (c.input_f32(0)?, c.input_f32(1)?);
    let dx = reduce_to(dy, c.inputs[0].shape(), shape, Some((other, other_shape)));
    Ok(vec![tensor(shape, dx)?])
}

pub(crate) fn softmax(op: &Op, axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    map_lanes(op, axis, c, |x, y, at, len| {
        let max = lane_max(x, at, len);
        let mut sum = 0.0f64;
        for j in 0..len {
            let e = (x[at(j)] - max).exp();
            y[at(j)] = e;
            sum += f64::from(e);
        }
        let inv = (1.0 / sum) as f32;
        (0..len).for_each(|j| y[at(j)] *= inv);
    })
}

/// `x - max - log(sum(exp(x - max)))` along the axis.
pub(crate) fn log_softmax(op: &Op, axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    map_lanes(op, axis, c, |x, y, at, len| {
        let max = lane_max(x, at, len);
        let sum: f64 = (0..len).map(|j| f64::from((x[at(j)] - max).exp())).sum();
        let log_sum = sum.ln() as f32;
        (0..len).for_each(|j| y[at(j)] = x[at(j)] - max - log_sum);
    })
}

/// The output of `op`'s single input's shape, each lane along `axis` (its elements at
/// `at(0..len)`) written by `lane(x, y, at, len)`.
fn map_lanes(
    op: &Op,
    axis: i64,
    c: Call,
    mut lane: impl FnMut(&[f32], &mut [f32], &dyn Fn(usize) -> usize, usize),
) -> KernelResult<Vec<Tensor>> {
    let x = single_input(op, &c)?;
    let shape = c.inputs[0].shape();
    let layout = split_at_axis(shape, resolve_axis(&c, axis, shape.len())?);
    let len = layout.1;
    let mut y = vec![0.0f32; x.len()];
    for_each_lane(layout, |at| lane(x, &mut y, at, len));
    Ok(vec![tensor(shape, y)?])
}

/// The largest element of a lane (`f32::max` passes over NaN).
fn lane_max(x: &[f32], at: &dyn Fn(usize) -> usize, len: usize) -> f32 {
    (0..len).map(|j| x[at(j)]).fold(f32::NEG_INFINITY, f32::max)
}

/// Log-softmax's gradient from its output: `dy - exp(y) * sum(dy)` along the axis.
pub(crate) fn log_softmax_grad(axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    map_grad_lanes(axis, c, |dy, y, dx, at, len| {
        let total: f64 = (0..len).map(|j| f64::from(dy[at(j)])).sum();
        for j in 0..len {
            dx[at(j)] = dy[at(j)] - y[at(j)].exp() * total as f32;
        }
    })
}

/// The gradient `dx` of a softmax-like op from `(dy, y)` (the upstream gradient and the
/// op's output, of one shape), each lane along `axis` written by `lane(dy, y, dx, at, len)`.
fn map_grad_lanes(
    axis: i64,
    c: Call,
    mut lane: impl FnMut(&[f32], &[f32], &mut [f32], &dyn Fn(usize) -> usize, usize),
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let shape = c.inputs[1].shape();
    c.expect_input_shape(0, shape)?;
    let (dy, y) = (c.input_f32(0)?, c.input_f32(1)?);
    let layout = split_at_axis(shape, resolve_axis(&c, axis, shape.len())?);
    let len = layout.1;
    let mut dx = vec![0.0f32; y.len()];
    for_each_lane(layout, |at| lane(dy, y, &mut dx, at, len));
    Ok(vec![tensor(shape, dx)?])
}

/// Whether the element at (`row`, `col`) of the last two dims is in the triangle.
fn in_triangle(row: usize, col: usize, k: i64, upper: bool) -> bool {
    let offset = col as i64 - row as i64;
    if upper { offset >= k } else { offset <= k }
}

/// `Trilu`: the triangle kept, other entries 0 (any element type).
pub(crate) fn trilu(op: &Op, k: i64, upper: bool, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let r = out.len();
    let (rows, cols) = (out[r - 2], out[r - 1]);
    let keep = |i: usize| in_triangle((i / cols.max(1)) % rows.max(1), i % cols.max(1), k, upper);
    Ok(vec![match c.inputs[0].data() {
        Data::F32(x) => tensor(
            &out,
            x.iter().enumerate().map(|(i, &v)| if keep(i) { v } else { 0.0 }).collect(),
        )?,
        Data::I64(x) => Tensor::from_i64(
            &out,
            x.iter().enumerate().map(|(i, &v)| if keep(i) { v } else { 0 }).collect(),
        )?,
        Data::Bool(x) => {
            Tensor::from_bool(&out, x.iter().enumerate().map(|(i, &v)| keep(i) && v).collect())?
        }
    }])
}

/// The gradient of `Trilu`: the same triangle of the upstream gradient.
pub(crate) fn trilu_grad(
    of: &Op,
    k: i64,
    upper: bool,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 1, &c)?;
    c.infer(of, &[c.produced(g, 0)?.clone()])?;
    let shape = c.inputs[0].shape();
    let r = shape.len();
    let (rows, cols) = (shape[r - 2], shape[r - 1]);
    let dx = dy
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            if in_triangle((i / cols.max(1)) % rows.max(1), i % cols.max(1), k, upper) {
                d
            } else {
                0.0
            }
        })
        .collect();
    Ok(vec![tensor(shape, dx)?])
}

/// `ArgMax` / `ArgMin` along an axis of a float or integer tensor.
pub(crate) fn arg_extreme(
    op: &Op,
    (max, axis, select_last): (bool, i64, bool),
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let shape = c.inputs[0].shape();
    let layout = split_at_axis(shape, resolve_axis(&c, axis, shape.len())?);
    let y = match c.inputs[0].data() {
        Data::F32(x) => arg_along(x, layout, max, select_last, f32::is_nan),
        Data::I64(x) => arg_along(x, layout, max, select_last, |_| false),
        Data::Bool(_) => return Err(c.value_err("ArgMax/ArgMin of bools")),
    };
    Ok(vec![Tensor::from_i64(&out, y)?])
}

/// The index of the extreme along the middle dimension of `(outer, len, inner)`. Ties: the
/// first index, the last with `last`. NaN is the extreme (NumPy's rule): the first NaN, the
/// last with `last`.
fn arg_along<T: PartialOrd + Copy>(
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
    max: bool,
    last: bool,
    is_nan: impl Fn(T) -> bool,
) -> Vec<i64> {
    let better = |v: T, best: T| {
        if is_nan(best) {
            return last && is_nan(v);
        }
        if is_nan(v) {
            return true;
        }
        match (max, last) {
            (true, false) => v > best,
            (true, true) => v >= best,
            (false, false) => v < best,
            (false, true) => v <= best,
        }
    };
    let mut y = Vec::with_capacity(outer * inner);
    for_each_lane((outer, len, inner), |at| {
        let mut best = 0usize;
        for j in 1..len {
            if better(x[at(j)], x[at(best)]) {
                best = j;
            }
        }
        y.push(best as i64);
    });
    y
}

/// Softmax's gradient from its output: `y * (dy - sum(dy * y))` along the axis.
pub(crate) fn softmax_grad(axis: i64, c: Call) -> KernelResult<Vec<Tensor>> {
    map_grad_lanes(axis, c, |dy, y, dx, at, len| {
        let dot: f64 = (0..len).map(|j| f64::from(dy[at(j)]) * f64::from(y[at(j)])).sum();
        for j in 0..len {
            dx[at(j)] = y[at(j)] * (dy[at(j)] - dot as f32);
        }
    })
}

/// Calls `f(index, masked)` for every element of a tensor of `shape` (rank >= 2): masked
/// when its column in the last two dimensions is above the diagonal.
fn for_each_causal(shape: &[usize], mut f: impl FnMut(usize, bool)) {
    let r = shape.len();
    let (rows, cols) = (shape[r - 2], shape[r - 1]);
    let n: usize = shape.iter().product();
    for idx in 0..n {
        let (row, col) = ((idx / cols) % rows, idx % cols);
        f(idx, col > row);
    }
}

pub(crate) fn causal_mask(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    let x = single_input(op, &c)?;
    let mut y = x.to_vec();
    for_each_causal(c.inputs[0].shape(), |i, masked| {
        if masked {
            y[i] = f32::NEG_INFINITY;
        }
    });
    Ok(vec![tensor(c.inputs[0].shape(), y)?])
}

/// The causal mask's gradient: the upstream gradient, zero where the mask was applied.
pub(crate) fn causal_mask_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 1, &c)?;
    let shape = c.inputs[0].shape();
    if shape.len() < 2 {
        return Err(c.shape_err(format!("input must have rank >= 2, got {shape:?}")));
    }
    let mut dx = dy.to_vec();
    for_each_causal(shape, |i, masked| {
        if masked {
            dx[i] = 0.0;
        }
    });
    Ok(vec![tensor(shape, dx)?])
}

/// SplitMix64's finaliser: a bijective 64-bit mix.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether dropout keeps element `index` under `seed` with drop probability `p`: a uniform
/// `[0, 1)` number from a hash of `(seed, index)` is at least `p`. Independent of execution
/// order.
pub(crate) fn dropout_keep(seed: u64, index: u64, p: f64) -> bool {
    uniform(seed, index) >= p
}

/// A uniform `[0, 1)` number from a hash of `(seed, index)` (53 random bits): the counter-based
/// generator of every random op, independent of execution order.
pub(crate) fn uniform(seed: u64, index: u64) -> f64 {
    (mix(seed ^ mix(index)) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Applies dropout's mask and scale to `v` (input or upstream gradient) in training mode.
fn apply_dropout(c: &Call, p: f64, v: &[f32]) -> KernelResult<Vec<f32>> {
    if !(0.0..=1.0).contains(&p) {
        return Err(c.value_err(format!("drop probability {p} is outside [0, 1]")));
    }
    if !c.ctx.training {
        return Ok(v.to_vec());
    }
    let scale = if p < 1.0 { (1.0 / (1.0 - p)) as f32 } else { 0.0 };
    let seed = c.ctx.seed;
    Ok(v.iter()
        .enumerate()
        .map(|(i, &x)| if dropout_keep(seed, i as u64, p) { x * scale } else { 0.0 })
        .collect())
}

pub(crate) fn dropout(op: &Op, p: f64, c: Call) -> KernelResult<Vec<Tensor>> {
    let x = single_input(op, &c)?;
    Ok(vec![tensor(c.inputs[0].shape(), apply_dropout(&c, p, x)?)?])
}

/// Dropout's gradient: the mask recomputed from the seed, applied to the upstream gradient.
/// The saved output is read for its shape only (a kept zero input would look dropped).
pub(crate) fn dropout_grad(p: f64, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let dy = same_shaped(g, 2, &c)?;
    Ok(vec![tensor(c.inputs[0].shape(), apply_dropout(&c, p, dy)?)?])
}
