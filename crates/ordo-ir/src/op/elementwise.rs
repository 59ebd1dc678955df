//! Elementwise ops, softmax and masking.

use serde::{Deserialize, Serialize};

use super::{expect_float, expect_inputs, resolve_axis};
use crate::fact::TensorFact;

/// Elementwise functions of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `max(x, 0)`.
    Relu,
    /// Exact GELU, `x * Phi(x)`.
    Gelu,
    /// GELU with the tanh approximation (GPT-2's `gelu_new`).
    GeluTanh,
    /// Logistic sigmoid.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `x * relu6(x + 3) / 6`.
    HardSwish,
    /// `relu6(x + 3) / 6`.
    HardSigmoid,
    /// `1 / sqrt(x)` (the inverse of a norm, e.g. in weight normalisation).
    Rsqrt,
    /// The error function (exact GELU written out, as exporters do).
    Erf,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `|x|`.
    Abs,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// `1 / x`.
    Reciprocal,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// Tangent.
    Tan,
    /// Arcsine.
    Asin,
    /// Arccosine.
    Acos,
    /// Arctangent.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// Rounding down (its gradient is 0).
    Floor,
    /// Rounding up (its gradient is 0).
    Ceil,
    /// Rounding half to even (its gradient is 0).
    Round,
    /// The sign: -1, 0 or 1 (its gradient is 0).
    Sign,
}

impl UnaryOp {
    /// Name as shown in tables.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "Relu",
            UnaryOp::Gelu => "Gelu",
            UnaryOp::GeluTanh => "GeluTanh",
            UnaryOp::Sigmoid => "Sigmoid",
            UnaryOp::Tanh => "Tanh",
            UnaryOp::HardSwish => "HardSwish",
            UnaryOp::HardSigmoid => "HardSigmoid",
            UnaryOp::Rsqrt => "Rsqrt",
            UnaryOp::Erf => "Erf",
            UnaryOp::Exp => "Exp",
            UnaryOp::Log => "Log",
            UnaryOp::Sqrt => "Sqrt",
            UnaryOp::Abs => "Abs",
            UnaryOp::Sin => "Sin",
            UnaryOp::Cos => "Cos",
            UnaryOp::Reciprocal => "Reciprocal",
            UnaryOp::Softplus => "Softplus",
            UnaryOp::Softsign => "Softsign",
            UnaryOp::Tan => "Tan",
            UnaryOp::Asin => "Asin",
            UnaryOp::Acos => "Acos",
            UnaryOp::Atan => "Atan",
            UnaryOp::Sinh => "Sinh",
            UnaryOp::Cosh => "Cosh",
            UnaryOp::Asinh => "Asinh",
            UnaryOp::Acosh => "Acosh",
            UnaryOp::Atanh => "Atanh",
            UnaryOp::Mish => "Mish",
            UnaryOp::Floor => "Floor",
            UnaryOp::Ceil => "Ceil",
            UnaryOp::Round => "Round",
            UnaryOp::Sign => "Sign",
        }
    }

    /// Whether its gradient reads the forward output (`f'` is a function of `y`: ReLU,
    /// sigmoid, tanh, and the functions whose derivative is their value's), else the input.
    /// The training graph's rules and the gradient kernels both follow this.
    pub fn grad_reads_output(self) -> bool {
        matches!(
            self,
            UnaryOp::Relu
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh
                | UnaryOp::Rsqrt
                | UnaryOp::Exp
                | UnaryOp::Sqrt
                | UnaryOp::Reciprocal
        )
    }

    /// FLOPs charged per output element (cost-graph converter rules).
    pub fn flops_per_element(self) -> u64 {
        match self {
            UnaryOp::Relu | UnaryOp::Abs => 1,
            UnaryOp::Sigmoid
            | UnaryOp::HardSigmoid
            | UnaryOp::HardSwish
            | UnaryOp::Rsqrt
            | UnaryOp::Sqrt
            | UnaryOp::Reciprocal
            | UnaryOp::Softsign => 4,
            UnaryOp::Gelu
            | UnaryOp::GeluTanh
            | UnaryOp::Tanh
            | UnaryOp::Erf
            | UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Softplus => 8,
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Sign => 1,
            UnaryOp::Tan
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Atan
            | UnaryOp::Sinh
            | UnaryOp::Cosh
            | UnaryOp::Asinh
            | UnaryOp::Acosh
            | UnaryOp::Atanh => 8,
            UnaryOp::Mish => 12,
        }
    }
}

/// An activation with constant parameters (ONNX's attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActivationKind {
    /// `x` if `x > 0`, else `alpha * (e^x - 1)`.
    Elu,
    /// `beta * elu_alpha(x)` (ONNX's `gamma` as `beta`).
    Selu,
    /// `x` if `x >= 0`, else `alpha * x`.
    LeakyRelu,
    /// `x` if `x > alpha`, else 0.
    ThresholdedRelu,
    /// `max(0, x) + min(0, alpha * (e^(x / alpha) - 1))`.
    Celu,
    /// `max(0, min(1, alpha * x + beta))`.
    HardSigmoid,
    /// `x - beta` if `x > alpha`, `x + beta` if `x < -alpha`, else 0 (ONNX's `lambd` as
    /// `alpha`, `bias` as `beta`).
    Shrink,
}

impl ActivationKind {
    /// ONNX's name.
    pub fn name(self) -> &'static str {
        match self {
            ActivationKind::Elu => "Elu",
            ActivationKind::Selu => "Selu",
            ActivationKind::LeakyRelu => "LeakyRelu",
            ActivationKind::ThresholdedRelu => "ThresholdedRelu",
            ActivationKind::Celu => "Celu",
            ActivationKind::HardSigmoid => "HardSigmoid",
            ActivationKind::Shrink => "Shrink",
        }
    }

    /// `f(x)`.
    pub fn value(self, alpha: f64, beta: f64, x: f64) -> f64 {
        let elu = |a: f64| if x > 0.0 { x } else { a * x.exp_m1() };
        match self {
            ActivationKind::Elu => elu(alpha),
            ActivationKind::Selu => beta * elu(alpha),
            ActivationKind::LeakyRelu => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            ActivationKind::ThresholdedRelu => {
                if x > alpha {
                    x
                } else {
                    0.0
                }
            }
            // `f64::max` and `min` would take NaN to 0: NaN stays NaN, as ONNX's reference
            // (`np.maximum`, `np.minimum`) keeps it.
            ActivationKind::Celu if x.is_nan() => x,
            ActivationKind::Celu => x.max(0.0) + (alpha * (x / alpha).exp_m1()).min(0.0),
            ActivationKind::HardSigmoid => (alpha * x + beta).clamp(0.0, 1.0),
            ActivationKind::Shrink if x > alpha => x - beta,
            ActivationKind::Shrink if x < -alpha => x + beta,
            ActivationKind::Shrink => 0.0,
        }
    }

    /// `f'(x)` (at a kink, PyTorch's side: the right one for ELU-like functions at 0).
    pub fn derivative(self, alpha: f64, beta: f64, x: f64) -> f64 {
        match self {
            ActivationKind::Elu => {
                if x > 0.0 {
                    1.0
                } else {
                    alpha * x.exp()
                }
            }
            ActivationKind::Selu => beta * if x > 0.0 { 1.0 } else { alpha * x.exp() },
            ActivationKind::LeakyRelu => {
                if x > 0.0 {
                    1.0
                } else {
                    alpha
                }
            }
            ActivationKind::ThresholdedRelu => f64::from(u8::from(x > alpha)),
            ActivationKind::Celu => {
                if x > 0.0 {
                    1.0
                } else {
                    (x / alpha).exp()
                }
            }
            ActivationKind::HardSigmoid => {
                let z = alpha * x + beta;
                if z > 0.0 && z < 1.0 { alpha } else { 0.0 }
            }
            ActivationKind::Shrink => f64::from(u8::from(x.abs() > alpha)),
        }
    }
}

pub(crate) fn infer_unary(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_float("input", inputs[0])?;
    Ok(vec![inputs[0].clone()])
}

/// `Scale`: any float tensor, or an integer one when the factor is an integer (`Sub` of
/// integers imports as an `Add` of a `Scale` by -1).
pub(crate) fn infer_scale(factor: f64, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    if x.dtype.is_integer() && factor.fract() == 0.0 && factor.abs() < 2f64.powi(63) {
        return Ok(vec![x.clone()]);
    }
    expect_float("input", x)?;
    Ok(vec![x.clone()])
}

/// `Clip`: a float or an integer tensor (its bounds then rounded inwards).
pub(crate) fn infer_clip(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    if !inputs[0].dtype.is_integer() {
        expect_float("input", inputs[0])?;
    }
    Ok(vec![inputs[0].clone()])
}

pub(crate) fn infer_binary(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    if a.dtype != b.dtype {
        return Err(format!("input dtypes differ: {a} and {b}"));
    }
    let shape = broadcast_shapes(&a.shape, &b.shape)
        .ok_or_else(|| format!("shapes {a} and {b} do not broadcast"))?;
    Ok(vec![TensorFact::new(a.dtype, shape)])
}

pub(crate) fn infer_softmax(axis: i64, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_float("input", inputs[0])?;
    resolve_axis(axis, inputs[0].rank())?;
    Ok(vec![inputs[0].clone()])
}

pub(crate) fn infer_trilu(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    if inputs[0].rank() < 2 {
        return Err(format!("input must have rank >= 2, got {}", inputs[0]));
    }
    Ok(vec![inputs[0].clone()])
}

pub(crate) fn infer_arg_extreme(
    axis: i64,
    keepdims: bool,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    let a = resolve_axis(axis, x.rank())?;
    let mut shape = x.shape.clone();
    if keepdims {
        shape[a] = 1;
    } else {
        shape.remove(a);
    }
    Ok(vec![TensorFact::new(crate::fact::DType::I64, shape)])
}

pub(crate) fn infer_causal_mask(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_float("input", inputs[0])?;
    if inputs[0].rank() < 2 {
        return Err(format!("input must have rank >= 2, got {}", inputs[0]));
    }
    Ok(vec![inputs[0].clone()])
}

/// NumPy broadcasting of two shapes, `None` when they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i < rank - s.len() { 1 } else { s[i - (rank - s.len())] }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}
