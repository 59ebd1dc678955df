//! What is known about a tensor before it exists: its element type and shape.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// 64-bit signed integer (token ids, class labels).
    I64,
    /// 32-bit signed integer.
    I32,
    /// Boolean, one byte per element.
    Bool,
    /// 64-bit IEEE float.
    F64,
    /// float8 e4m3fn: 4 exponent bits, 3 mantissa bits, no infinities (NaN all ones).
    F8E4M3FN,
    /// float8 e4m3fnuz: as e4m3fn with bias 8, no negative zero (NaN in its place).
    F8E4M3FNUZ,
    /// float8 e5m2: 5 exponent bits, 2 mantissa bits, IEEE's infinities and NaNs.
    F8E5M2,
    /// float8 e5m2fnuz: as e5m2 with bias 16, no infinities, no negative zero.
    F8E5M2FNUZ,
    /// float8 e8m0: an unsigned power of two (a scale), `2^(bits - 127)`.
    F8E8M0,
    /// float4 e2m1: 2 exponent bits, 1 mantissa bit, finite values only.
    F4E2M1,
    /// 4-bit signed integer.
    I4,
    /// 4-bit unsigned integer.
    U4,
    /// 2-bit signed integer.
    I2,
    /// 2-bit unsigned integer.
    U2,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit signed integer.
    I16,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// A string (ONNX's `string` tensors: text pipelines). Planned as one 8-byte handle per
    /// element, as runtimes hold them (the characters' own bytes are not known before the
    /// data, so memory plans count the handles only); planning-only: no kernel reads or
    /// writes strings.
    String,
}

impl DType {
    /// Bits per element (a bool's byte counts 8).
    pub fn bits(self) -> u64 {
        match self {
            DType::I64 | DType::F64 | DType::U64 | DType::String => 64,
            DType::F32 | DType::I32 | DType::U32 => 32,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 16,
            DType::Bool
            | DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::I8
            | DType::U8 => 8,
            DType::F4E2M1 | DType::I4 | DType::U4 => 4,
            DType::I2 | DType::U2 => 2,
        }
    }

    /// Bytes per element. The 4- and 2-bit types count a whole byte: ONNX packs them two
    /// and four to a byte, so the planner over-counts their memory rather than under.
    pub fn size_bytes(self) -> u64 {
        self.bits().div_ceil(8)
    }

    /// Whether this is a 16-bit float (bf16 or fp16): mixed precision's weights and
    /// activations.
    pub fn is_half_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// Whether values of this type are floating point.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F16
                | DType::BF16
                | DType::F64
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// Whether values of this type are integers (usable as indices).
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I64
                | DType::I32
                | DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::U32
                | DType::U64
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::Bool => "bool",
            DType::F64 => "f64",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::F4E2M1 => "f4e2m1",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::String => "string",
        };
        f.write_str(name)
    }
}

/// Static type of a tensor: element type and shape. Never holds values.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorFact {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first. Empty for a scalar.
    pub shape: Vec<usize>,
}

impl TensorFact {
    /// A fact from a dtype and any shape-like value.
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Self {
        Self { dtype, shape: shape.into() }
    }

    /// An f32 tensor of the given shape.
    pub fn f32(shape: impl Into<Vec<usize>>) -> Self {
        Self::new(DType::F32, shape)
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.numel() * self.dtype.size_bytes()
    }

    /// The same shape with another element type.
    pub fn with_dtype(&self, dtype: DType) -> Self {
        Self { dtype, shape: self.shape.clone() }
    }
}

impl fmt::Debug for TensorFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for TensorFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
