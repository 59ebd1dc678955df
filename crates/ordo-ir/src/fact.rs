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
    /// An 8-bit float (any of ONNX's float8 formats: planned by size, no kernels).
    F8,
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
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I64 | DType::F64 | DType::U64 => 8,
            DType::Bool | DType::F8 | DType::I8 | DType::U8 => 1,
        }
    }

    /// Whether values of this type are floating point.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::F8)
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
            DType::F8 => "f8",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
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
