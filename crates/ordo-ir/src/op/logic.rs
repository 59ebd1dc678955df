//! Comparisons, logic and selection: the ops that build masks (ONNX's `Equal`, `Less`, ...,
//! `And`, `Or`, `Xor`, `Not`, `Where`). Comparisons and logic have no gradient; `Where`
//! passes its upstream gradient to the value each element was selected from.

use serde::{Deserialize, Serialize};

use crate::fact::{DType, TensorFact};
use crate::op::elementwise::broadcast_shapes;
use crate::op::expect_inputs;

/// An elementwise comparison of two tensors of one element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompareKind {
    /// `a == b`.
    Equal,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessOrEqual,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterOrEqual,
}

impl CompareKind {
    /// ONNX's name of the comparison.
    pub fn onnx_name(self) -> &'static str {
        match self {
            CompareKind::Equal => "Equal",
            CompareKind::Less => "Less",
            CompareKind::LessOrEqual => "LessOrEqual",
            CompareKind::Greater => "Greater",
            CompareKind::GreaterOrEqual => "GreaterOrEqual",
        }
    }

    /// The comparison ONNX names `name`, if any.
    pub fn from_onnx_name(name: &str) -> Option<Self> {
        use CompareKind::*;
        [Equal, Less, LessOrEqual, Greater, GreaterOrEqual]
            .into_iter()
            .find(|k| k.onnx_name() == name)
    }

    /// Whether `a` compares true to `b` (false when either is NaN, except that NaN is not
    /// equal to itself either: IEEE's rules).
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareKind::Equal => a == b,
            CompareKind::Less => a < b,
            CompareKind::LessOrEqual => a <= b,
            CompareKind::Greater => a > b,
            CompareKind::GreaterOrEqual => a >= b,
        }
    }
}

/// An elementwise logical operation of two bool tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogicKind {
    /// `a && b`.
    And,
    /// `a || b`.
    Or,
    /// `a != b`.
    Xor,
}

impl LogicKind {
    /// ONNX's name of the operation.
    pub fn onnx_name(self) -> &'static str {
        match self {
            LogicKind::And => "And",
            LogicKind::Or => "Or",
            LogicKind::Xor => "Xor",
        }
    }

    /// The operation ONNX names `name`, if any.
    pub fn from_onnx_name(name: &str) -> Option<Self> {
        use LogicKind::*;
        [And, Or, Xor].into_iter().find(|k| k.onnx_name() == name)
    }

    /// The operation on two truth values.
    pub fn apply(self, a: bool, b: bool) -> bool {
        match self {
            LogicKind::And => a && b,
            LogicKind::Or => a || b,
            LogicKind::Xor => a != b,
        }
    }
}

/// An elementwise bit operation of integer tensors (ONNX's `BitwiseAnd`, `BitwiseOr`,
/// `BitwiseXor`, `BitwiseNot` and `BitShift`), on the two's-complement bits of the element
/// type. No gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BitwiseKind {
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a ^ b`.
    Xor,
    /// `!a` (one input).
    Not,
    /// `a << b`: bits shifted past the type's width are lost; a shift by the width or more
    /// gives 0.
    ShiftLeft,
    /// `a >> b`, logical (ONNX shifts unsigned types only); a shift by the width or more
    /// gives 0.
    ShiftRight,
}

impl BitwiseKind {
    /// ONNX's name of the operation (`BitShift` for both directions).
    pub fn onnx_name(self) -> &'static str {
        match self {
            BitwiseKind::And => "BitwiseAnd",
            BitwiseKind::Or => "BitwiseOr",
            BitwiseKind::Xor => "BitwiseXor",
            BitwiseKind::Not => "BitwiseNot",
            BitwiseKind::ShiftLeft | BitwiseKind::ShiftRight => "BitShift",
        }
    }

    /// How many inputs it takes.
    pub fn arity(self) -> usize {
        if self == BitwiseKind::Not { 1 } else { 2 }
    }

    /// The operation on two integers held in `i64` (an unsigned type's value, a u64's bit
    /// pattern; `b` is ignored by `Not`); the caller wraps the result to the element type,
    /// which keeps the bits it has.
    pub fn apply(self, a: i64, b: i64) -> i64 {
        // A shift count as unsigned: a u64 count past i64::MAX is a shift by 64 or more.
        let count = u32::try_from(b as u64).ok().filter(|&n| n < 64);
        match self {
            BitwiseKind::And => a & b,
            BitwiseKind::Or => a | b,
            BitwiseKind::Xor => a ^ b,
            BitwiseKind::Not => !a,
            BitwiseKind::ShiftLeft => count.map_or(0, |n| ((a as u64) << n) as i64),
            BitwiseKind::ShiftRight => count.map_or(0, |n| ((a as u64) >> n) as i64),
        }
    }
}

fn broadcast(a: &TensorFact, b: &TensorFact) -> Result<Vec<usize>, String> {
    broadcast_shapes(&a.shape, &b.shape)
        .ok_or_else(|| format!("shapes {a} and {b} do not broadcast"))
}

fn expect_bool(what: &str, t: &TensorFact) -> Result<(), String> {
    if t.dtype == DType::Bool { Ok(()) } else { Err(format!("{what} must be bool, got {t}")) }
}

/// A comparison: two inputs of one element type, broadcast; a bool output.
pub(crate) fn infer_compare(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    if a.dtype != b.dtype {
        return Err(format!("input dtypes differ: {a} and {b}"));
    }
    Ok(vec![TensorFact::new(DType::Bool, broadcast(a, b)?)])
}

/// `And`, `Or`, `Xor`: two bool inputs, broadcast.
pub(crate) fn infer_logic(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 2)?;
    expect_bool("input 0", inputs[0])?;
    expect_bool("input 1", inputs[1])?;
    Ok(vec![TensorFact::new(DType::Bool, broadcast(inputs[0], inputs[1])?)])
}

/// A bit operation: integer inputs of one element type (`kind.arity()` of them), broadcast;
/// an output of that type.
pub(crate) fn infer_bitwise(
    kind: BitwiseKind,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, kind.arity())?;
    let a = inputs[0];
    if !a.dtype.is_integer() {
        return Err(format!("{} takes integers, got {a}", kind.onnx_name()));
    }
    let Some(b) = inputs.get(1) else { return Ok(vec![a.clone()]) };
    if a.dtype != b.dtype {
        return Err(format!("input dtypes differ: {a} and {b}"));
    }
    Ok(vec![TensorFact::new(a.dtype, broadcast(a, b)?)])
}

/// `Not`: one bool input.
pub(crate) fn infer_not(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    expect_bool("input", inputs[0])?;
    Ok(vec![inputs[0].clone()])
}

/// `Where(condition, x, y)`: a bool condition and two values of one element type, all three
/// broadcast together.
pub(crate) fn infer_where(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 3)?;
    let (c, x, y) = (inputs[0], inputs[1], inputs[2]);
    expect_bool("the condition", c)?;
    if x.dtype != y.dtype {
        return Err(format!("the values' dtypes differ: {x} and {y}"));
    }
    let values = broadcast(x, y)?;
    let shape = broadcast_shapes(&c.shape, &values).ok_or_else(|| {
        format!("the condition {c} does not broadcast with the values {values:?}")
    })?;
    Ok(vec![TensorFact::new(x.dtype, shape)])
}
