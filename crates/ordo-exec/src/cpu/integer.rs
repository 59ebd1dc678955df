//! Integer arithmetic: `Add`, `Mul`, `Div`, `Max`, `Min` and `Pow` of two integer tensors,
//! `Scale` by an integer, `Clip` and the bit operations (`Bitwise`), on the `i64` storage. Sums, products and powers wrap
//! (two's complement); [`super::run`] then wraps each output to its node's type. Division
//! truncates toward zero (ONNX's and C's rule); a u64 input divides and compares as unsigned
//! ([`reads_unsigned`]). Integer tensors carry no gradient.

use ordo_ir::Op;
use ordo_ir::op::BitwiseKind;

use super::element::{reads_unsigned, u64_order};
use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, binary_layout, for_each_broadcast, numel};

/// Why an integer op has no value for a pair of operands.
#[derive(Clone, Copy)]
enum Undefined {
    DivisionByZero,
    NegativePower,
}

/// `op` of `a` and `b` (`unsigned`: both hold u64 bit patterns).
fn apply(op: &Op, a: i64, b: i64, unsigned: bool) -> Result<i64, Undefined> {
    let order = |x: i64| if unsigned { u64_order(x) } else { x };
    Ok(match op {
        Op::Add => a.wrapping_add(b),
        Op::Mul => a.wrapping_mul(b),
        Op::Div if b == 0 => return Err(Undefined::DivisionByZero),
        Op::Div if unsigned => ((a as u64) / (b as u64)) as i64,
        Op::Div => a.wrapping_div(b),
        Op::Max => {
            if order(a) >= order(b) {
                a
            } else {
                b
            }
        }
        Op::Min => {
            if order(a) <= order(b) {
                a
            } else {
                b
            }
        }
        // Pow: a non-negative exponent (any u64); past u32::MAX every base but 0, 1 and -1
        // has long wrapped to 0, which the capped exponent gives too.
        _ if b < 0 && !unsigned => return Err(Undefined::NegativePower),
        _ => a.wrapping_pow(u32::try_from(b as u64).unwrap_or(u32::MAX)),
    })
}

/// `Add`, `Mul`, `Div`, `Max`, `Min` or `Pow` of the call's two integer inputs, broadcast to
/// `out` with the inputs' strides `sa` and `sb`.
pub(crate) fn binary(
    op: &Op,
    c: &Call,
    out: &[usize],
    sa: &[usize],
    sb: &[usize],
) -> KernelResult<Tensor> {
    let (a, b) = (c.input_i64(0)?, c.input_i64(1)?);
    let unsigned = reads_unsigned(c);
    let mut y = vec![0i64; numel(out)];
    let mut undefined = None;
    for_each_broadcast(out, sa, sb, |o, i, j| match apply(op, a[i], b[j], unsigned) {
        Ok(v) => y[o] = v,
        Err(why) => undefined = Some((why, a[i], b[j])),
    });
    match undefined {
        Some((Undefined::DivisionByZero, x, _)) => {
            Err(c.value_err(format!("integer division of {x} by zero")))
        }
        Some((Undefined::NegativePower, x, p)) => {
            Err(c.value_err(format!("an integer to a negative power ({x} ^ {p})")))
        }
        None => Tensor::from_i64(out, y),
    }
}

/// `x * factor` of an integer tensor (the IR allows integer factors only), wrapping.
pub(crate) fn scale(factor: f64, c: &Call) -> KernelResult<Tensor> {
    let x = c.input_i64(0)?;
    if factor.fract() != 0.0 || factor.abs() >= 2f64.powi(63) {
        return Err(c.value_err(format!("an integer tensor scaled by {factor}")));
    }
    let k = factor as i64;
    Tensor::from_i64(c.inputs[0].shape(), x.iter().map(|&v| v.wrapping_mul(k)).collect())
}

/// `Clip` of an integer tensor: the bounds rounded inwards (an infinite one is no bound),
/// `max` everywhere when `min > max` (ONNX's rule).
pub(crate) fn clip(min: f64, max: f64, c: &Call) -> KernelResult<Tensor> {
    let x = c.input_i64(0)?;
    // `as` saturates: -inf and +inf become i64's extremes.
    let (lo, hi) = (min.ceil() as i64, max.floor() as i64);
    Tensor::from_i64(c.inputs[0].shape(), x.iter().map(|&v| v.max(lo).min(hi)).collect())
}

/// A bit operation of the call's integer inputs (one for `Not`, else two broadcast), on their
/// bits as held in `i64`; [`super::run`] then wraps the output to its type, which keeps the
/// bits that type has (a u8's `Not` of 5 is 250).
pub(crate) fn bitwise(op: &Op, kind: BitwiseKind, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(kind.arity())?;
    let a = c.input_i64(0)?;
    if kind.arity() == 1 {
        c.expect_params(0)?;
        let out = c.infer(op, &c.input_facts())?.shape;
        return Ok(vec![Tensor::from_i64(&out, a.iter().map(|&x| kind.apply(x, 0)).collect())?]);
    }
    let (out, sa, sb) = binary_layout(op, &c)?;
    let b = c.input_i64(1)?;
    let mut y = vec![0i64; numel(&out)];
    for_each_broadcast(&out, &sa, &sb, |o, i, j| y[o] = kind.apply(a[i], b[j]));
    Ok(vec![Tensor::from_i64(&out, y)?])
}
