//! Element types, static shapes and constant tensors read from the protobuf.

use ordo_ir::element::{FloatFormat, e8m0_decode, wrap_integer};
use ordo_ir::{DType, TensorFact};

use crate::error::{OnnxError, OnnxResult};
use crate::proto::{TensorProto, TypeProto, tensor_shape_proto::dimension, type_proto};

/// Largest dimension accepted (2^40): keeps every product of a few dims far from overflow.
pub(crate) const MAX_DIM: u64 = 1 << 40;
/// Largest number of elements of a tensor (2^48).
pub(crate) const MAX_NUMEL: u64 = 1 << 48;
/// Largest constant kept as a tensor of the graph (2^28 elements, 1 GiB of `f32`): its values
/// are materialised at import.
pub(crate) const MAX_CONSTANT: u64 = 1 << 28;
/// Largest constant the importer folds element by element.
pub(crate) const MAX_FOLD: u64 = 1 << 22;

/// ONNX element type codes.
pub(crate) mod code {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
    pub const FLOAT8E4M3FN: i32 = 17;
    pub const FLOAT8E4M3FNUZ: i32 = 18;
    pub const FLOAT8E5M2: i32 = 19;
    pub const FLOAT8E5M2FNUZ: i32 = 20;
    pub const UINT4: i32 = 21;
    pub const INT4: i32 = 22;
    pub const FLOAT4E2M1: i32 = 23;
    pub const FLOAT8E8M0: i32 = 24;
    pub const UINT2: i32 = 25;
    pub const INT2: i32 = 26;
}

/// The IR element type of an ONNX element type code, for tensors that become wires.
pub(crate) fn ir_dtype(elem: i32) -> Option<DType> {
    Some(match elem {
        code::FLOAT => DType::F32,
        code::FLOAT16 => DType::F16,
        code::BFLOAT16 => DType::BF16,
        code::INT64 => DType::I64,
        code::INT32 => DType::I32,
        code::BOOL => DType::Bool,
        code::DOUBLE => DType::F64,
        code::FLOAT8E4M3FN => DType::F8E4M3FN,
        code::FLOAT8E4M3FNUZ => DType::F8E4M3FNUZ,
        code::FLOAT8E5M2 => DType::F8E5M2,
        code::FLOAT8E5M2FNUZ => DType::F8E5M2FNUZ,
        code::FLOAT8E8M0 => DType::F8E8M0,
        code::FLOAT4E2M1 => DType::F4E2M1,
        code::INT4 => DType::I4,
        code::UINT4 => DType::U4,
        code::INT2 => DType::I2,
        code::UINT2 => DType::U2,
        code::INT8 => DType::I8,
        code::UINT8 => DType::U8,
        code::INT16 => DType::I16,
        code::UINT16 => DType::U16,
        code::UINT32 => DType::U32,
        code::UINT64 => DType::U64,
        code::STRING => DType::String,
        _ => return None,
    })
}

/// Whether ONNX element type `elem` is a float type (f16 to f64, the float8 and float4
/// formats).
pub(crate) fn is_float_code(elem: i32) -> bool {
    ir_dtype(elem).is_some_and(DType::is_float)
}

/// The ONNX element type code of an IR element type.
pub(crate) fn onnx_code(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => code::FLOAT,
        DType::F16 => code::FLOAT16,
        DType::BF16 => code::BFLOAT16,
        DType::I64 => code::INT64,
        DType::I32 => code::INT32,
        DType::Bool => code::BOOL,
        DType::F64 => code::DOUBLE,
        DType::F8E4M3FN => code::FLOAT8E4M3FN,
        DType::F8E4M3FNUZ => code::FLOAT8E4M3FNUZ,
        DType::F8E5M2 => code::FLOAT8E5M2,
        DType::F8E5M2FNUZ => code::FLOAT8E5M2FNUZ,
        DType::F8E8M0 => code::FLOAT8E8M0,
        DType::F4E2M1 => code::FLOAT4E2M1,
        DType::I4 => code::INT4,
        DType::U4 => code::UINT4,
        DType::I2 => code::INT2,
        DType::U2 => code::UINT2,
        DType::I8 => code::INT8,
        DType::U8 => code::UINT8,
        DType::I16 => code::INT16,
        DType::U16 => code::UINT16,
        DType::U32 => code::UINT32,
        DType::U64 => code::UINT64,
        DType::String => code::STRING,
    }
}

/// Checks that a shape is within the importer's limits.
pub(crate) fn check_shape(dims: &[usize]) -> Result<(), String> {
    let mut numel: u64 = 1;
    for &d in dims {
        if d as u64 > MAX_DIM {
            return Err(format!("dimension {d} is too large"));
        }
        // Zeros are left out: with them, a product taken in another order (`[2^40, 2^40, 0]`)
        // could overflow on the way to 0.
        if d != 0 {
            numel = numel.saturating_mul(d as u64);
        }
    }
    if numel > MAX_NUMEL {
        return Err(format!("shape {dims:?} has too many elements"));
    }
    Ok(())
}

/// Converts ONNX dims (`i64`) to a checked static shape.
pub(crate) fn dims_to_shape(dims: &[i64]) -> Result<Vec<usize>, String> {
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    check_shape(&shape)?;
    Ok(shape)
}

/// The static fact of a value info's type: element type and shape with every dim known.
pub(crate) fn fact_of_type(name: &str, ty: Option<&TypeProto>) -> OnnxResult<TensorFact> {
    let missing = |message: &str| OnnxError::MissingShape {
        tensor: name.to_string(),
        message: message.to_string(),
    };
    let t = match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t,
        Some(type_proto::Value::SequenceType(_)) => {
            return Err(missing(
                "is a sequence: ordo's graphs take and give tensors (a sequence the graph builds \
                 and reads inside is imported)",
            ));
        }
        Some(type_proto::Value::OptionalType(_)) => {
            return Err(missing(
                "is an optional: ordo's graphs take and give tensors (an optional the graph \
                 builds and reads inside is imported)",
            ));
        }
        _ => return Err(missing("has no tensor type")),
    };
    let dtype = ir_dtype(t.elem_type()).ok_or_else(|| {
        missing(&format!("element type {} is not supported", elem_name(t.elem_type())))
    })?;
    let shape = t.shape.as_ref().ok_or_else(|| missing("has no shape"))?;
    let mut dims = Vec::with_capacity(shape.dim.len());
    for d in &shape.dim {
        match &d.value {
            Some(dimension::Value::DimValue(v)) => dims.push(*v),
            Some(dimension::Value::DimParam(p)) => {
                return Err(missing(&format!("has a symbolic dimension `{p}`; give it a size")));
            }
            None => return Err(missing("has a dimension of unknown size")),
        }
    }
    let shape = dims_to_shape(&dims).map_err(|m| missing(&m))?;
    Ok(TensorFact::new(dtype, shape))
}

/// The declared shape of a value info where it is fully known, `None` otherwise.
pub(crate) fn declared_fact(ty: Option<&TypeProto>) -> Option<TensorFact> {
    fact_of_type("", ty).ok()
}

/// Name of an element type code, for messages.
pub(crate) fn elem_name(elem: i32) -> String {
    crate::proto::tensor_proto::DataType::try_from(elem)
        .map_or_else(|_| format!("#{elem}"), |t| t.as_str_name().to_lowercase())
}

/// The values of a constant tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ConstData {
    /// Integer or boolean elements.
    Int(Vec<i64>),
    /// Floating-point elements.
    Float(Vec<f64>),
    /// Every element equal to this value (a large constant that is never spelled out).
    Splat(f64),
}

/// A tensor whose value is known at import time.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConstTensor {
    /// ONNX element type code.
    pub elem: i32,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values.
    pub data: ConstData,
}

impl ConstTensor {
    /// A 1-D `int64` tensor.
    pub fn ints(values: Vec<i64>) -> Self {
        Self { elem: code::INT64, shape: vec![values.len()], data: ConstData::Int(values) }
    }

    /// A scalar of integer (or bool) type `elem`.
    pub fn int_scalar(elem: i32, value: i64) -> Self {
        Self { elem, shape: vec![], data: ConstData::Int(vec![value]) }
    }

    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Whether the elements are integers (or booleans).
    pub fn is_int(&self) -> bool {
        !is_float_code(self.elem)
    }

    /// Element `i` as a float.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match &self.data {
            ConstData::Int(v) => v.get(i).map(|&x| x as f64),
            ConstData::Float(v) => v.get(i).copied(),
            ConstData::Splat(x) => ((i as u64) < self.numel()).then_some(*x),
        }
    }

    /// All elements as integers (floats truncated), `None` for a splat that is too large.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        match &self.data {
            ConstData::Int(v) => Some(v.clone()),
            ConstData::Float(v) => Some(v.iter().map(|&x| x as i64).collect()),
            ConstData::Splat(x) => {
                (self.numel() <= MAX_FOLD).then(|| vec![*x as i64; self.numel() as usize])
            }
        }
    }

    /// All elements as floats, `None` for a splat that is too large.
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        match &self.data {
            ConstData::Int(v) => Some(v.iter().map(|&x| x as f64).collect()),
            ConstData::Float(v) => Some(v.clone()),
            ConstData::Splat(x) => {
                (self.numel() <= MAX_FOLD).then(|| vec![*x; self.numel() as usize])
            }
        }
    }

    /// The single value of a one-element tensor or a splat.
    pub fn scalar(&self) -> Option<f64> {
        match &self.data {
            ConstData::Splat(x) => Some(*x),
            _ if self.numel() == 1 => self.get_f64(0),
            _ => None,
        }
    }

    /// The same values with another shape and the given element data.
    pub fn with(&self, shape: Vec<usize>, data: ConstData) -> Self {
        Self { elem: self.elem, shape, data }
    }

    /// The IR fact of the tensor, when its element type has one.
    pub fn fact(&self) -> Option<TensorFact> {
        Some(TensorFact::new(ir_dtype(self.elem)?, self.shape.clone()))
    }
}

/// Reads the shape and element type of an initializer without touching its data.
pub(crate) fn tensor_fact(t: &TensorProto) -> Result<(i32, Vec<usize>), String> {
    Ok((t.data_type(), dims_to_shape(&t.dims)?))
}

/// Reads a constant tensor, values included.
pub(crate) fn parse_tensor(t: &TensorProto) -> Result<ConstTensor, String> {
    parse_tensor_limited(t, MAX_FOLD)
}

/// Reads a tensor of at most `limit` elements, values included.
pub(crate) fn parse_tensor_limited(t: &TensorProto, limit: u64) -> Result<ConstTensor, String> {
    if crate::external::is_external(t) {
        return Err("constant with external data: only initializers may keep their data \
                    outside the model file"
            .into());
    }
    parse_tensor_raw(t, limit, t.raw_data.as_deref())
}

/// Reads a tensor of at most `limit` elements whose raw bytes are `raw` (the tensor's own
/// `raw_data`, or its external data), or its typed fields when `raw` is `None`.
pub(crate) fn parse_tensor_raw(
    t: &TensorProto,
    limit: u64,
    raw: Option<&[u8]>,
) -> Result<ConstTensor, String> {
    let (elem, shape) = tensor_fact(t)?;
    let numel: u64 = shape.iter().map(|&d| d as u64).product();
    if numel > limit {
        return Err(format!("constant of shape {shape:?} is too large to read"));
    }
    let n = numel as usize;
    let data = match raw {
        Some(raw) => parse_raw(elem, raw, n)?,
        None => parse_typed(t, elem, n)?,
    };
    let len = match &data {
        ConstData::Int(v) => v.len(),
        ConstData::Float(v) => v.len(),
        ConstData::Splat(_) => n,
    };
    if len != n {
        return Err(format!("tensor of shape {shape:?} holds {len} values"));
    }
    Ok(ConstTensor { elem, shape, data })
}

fn parse_raw(elem: i32, raw: &[u8], n: usize) -> Result<ConstData, String> {
    let Some(bits) = elem_bits(elem) else {
        return Err(format!("element type {} cannot be read", elem_name(elem)));
    };
    let expected = (n * bits).div_ceil(8);
    if raw.len() != expected {
        return Err(format!("raw data has {} bytes, expected {expected}", raw.len()));
    }
    if bits < 8 {
        return Ok(parse_packed(elem, raw, n, bits));
    }
    if let Some(dtype) = ir_dtype(elem).filter(|_| bits == 8 && elem != code::BOOL) {
        if let Some(format) = FloatFormat::of(dtype) {
            return Ok(ConstData::Float(
                raw.iter().map(|&b| format.decode(u32::from(b))).collect(),
            ));
        }
        if dtype == DType::F8E8M0 {
            return Ok(ConstData::Float(raw.iter().map(|&b| f64::from(e8m0_decode(b))).collect()));
        }
    }
    let size = bits / 8;
    let chunks = raw.chunks_exact(size);
    let arr = |c: &[u8]| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..c.len()].copy_from_slice(c);
        a
    };
    Ok(match elem {
        code::FLOAT => ConstData::Float(
            chunks.map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        ),
        code::DOUBLE => ConstData::Float(chunks.map(|c| f64::from_le_bytes(arr(c))).collect()),
        code::FLOAT16 => ConstData::Float(chunks.map(|c| f16_to_f64(c[0], c[1])).collect()),
        code::BFLOAT16 => ConstData::Float(
            chunks
                .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16) as f64)
                .collect(),
        ),
        code::INT8 => ConstData::Int(chunks.map(|c| i64::from(c[0] as i8)).collect()),
        code::INT16 => {
            ConstData::Int(chunks.map(|c| i64::from(i16::from_le_bytes([c[0], c[1]]))).collect())
        }
        code::INT32 => ConstData::Int(
            chunks.map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        ),
        code::INT64 | code::UINT64 => {
            ConstData::Int(chunks.map(|c| i64::from_le_bytes(arr(c))).collect())
        }
        _ => ConstData::Int(chunks.map(|c| u64::from_le_bytes(arr(c)) as i64).collect()),
    })
}

fn parse_typed(t: &TensorProto, elem: i32, n: usize) -> Result<ConstData, String> {
    Ok(match elem {
        // One byte per `int32_data` entry: a float8 value, or two 4-bit or four 2-bit values.
        code::FLOAT8E4M3FN
        | code::FLOAT8E4M3FNUZ
        | code::FLOAT8E5M2
        | code::FLOAT8E5M2FNUZ
        | code::FLOAT8E8M0
        | code::UINT4
        | code::INT4
        | code::FLOAT4E2M1
        | code::UINT2
        | code::INT2 => {
            let bytes: Vec<u8> = t.int32_data.iter().map(|&x| x as u8).collect();
            return parse_raw(elem, &bytes, n);
        }
        code::FLOAT => ConstData::Float(t.float_data.iter().map(|&x| f64::from(x)).collect()),
        code::DOUBLE => ConstData::Float(t.double_data.clone()),
        code::INT64 => ConstData::Int(t.int64_data.clone()),
        code::UINT32 | code::UINT64 => {
            ConstData::Int(t.uint64_data.iter().map(|&x| x as i64).collect())
        }
        code::FLOAT16 => ConstData::Float(
            t.int32_data.iter().map(|&x| f16_to_f64(x as u8, (x >> 8) as u8)).collect(),
        ),
        code::BFLOAT16 => ConstData::Float(
            t.int32_data
                .iter()
                .map(|&x| f32::from_bits((x as u32 & 0xffff) << 16) as f64)
                .collect(),
        ),
        code::INT32 | code::INT16 | code::INT8 | code::UINT16 | code::UINT8 | code::BOOL => {
            // Whether a writer sign-extends a narrow value or keeps its bits, wrapping to the
            // type reads it back.
            let dtype = ir_dtype(elem).expect("an IR type");
            ConstData::Int(
                t.int32_data.iter().map(|&x| wrap_integer(i64::from(x), dtype)).collect(),
            )
        }
        other => return Err(format!("element type {} cannot be read", elem_name(other))),
    })
}

/// Bits of one element of a type the readers understand (those with an IR type).
fn elem_bits(elem: i32) -> Option<usize> {
    // A string's planned handle has no bytes in a file to read.
    ir_dtype(elem).filter(|&d| d != DType::String).map(|d| d.bits() as usize)
}

/// The `n` elements of a 4- or 2-bit type packed in `raw`, the first in the lowest bits of
/// each byte (ONNX's packing).
fn parse_packed(elem: i32, raw: &[u8], n: usize, bits: usize) -> ConstData {
    let field = |k: usize| u32::from(raw[k * bits / 8] >> (k * bits % 8)) & ((1 << bits) - 1);
    let dtype = ir_dtype(elem).expect("a packed type");
    match FloatFormat::of(dtype) {
        Some(format) => ConstData::Float((0..n).map(|k| format.decode(field(k))).collect()),
        None => ConstData::Int((0..n).map(|k| wrap_integer(i64::from(field(k)), dtype)).collect()),
    }
}

/// Checks, without reading the values, that an initializer holds as many values as its shape
/// says (data stored outside the file is not checked here).
pub(crate) fn check_data_length(t: &TensorProto) -> Result<(), String> {
    if t.data_location() == crate::proto::tensor_proto::DataLocation::External {
        return Ok(());
    }
    let (elem, shape) = tensor_fact(t)?;
    let numel = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .ok_or_else(|| format!("shape {shape:?} has more elements than a tensor can"))?;
    if elem == code::STRING {
        // One `string_data` entry per element (strings have no raw form).
        let held = t.string_data.len() as u64;
        return match (t.raw_data.is_some(), held == numel) {
            (false, true) => Ok(()),
            (true, _) => Err("a string tensor cannot hold raw data".into()),
            (false, false) => {
                Err(format!("shape {shape:?} needs {numel} strings, but the tensor holds {held}"))
            }
        };
    }
    let Some(bits) = elem_bits(elem).map(|s| s as u64) else { return Ok(()) };
    let (held, unit) = match t.raw_data.as_deref() {
        Some(raw) => (raw.len() as u64, "bytes of raw data"),
        // Typed values of the packed 4- and 2-bit types: one byte per `int32_data` entry
        // (parse_typed reads them so).
        None if bits < 8 => (t.int32_data.len() as u64, "packed bytes of values"),
        None => {
            let values = match elem {
                code::FLOAT => t.float_data.len(),
                code::DOUBLE => t.double_data.len(),
                code::INT64 => t.int64_data.len(),
                code::UINT32 | code::UINT64 => t.uint64_data.len(),
                _ => t.int32_data.len(),
            };
            (values as u64 * bits / 8, "bytes of values")
        }
    };
    match numel.checked_mul(bits).map(|b| b.div_ceil(8)) {
        Some(expected) if expected == held => Ok(()),
        expected => Err(format!(
            "shape {shape:?} needs {} bytes, but the tensor holds {held} {unit}",
            expected.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string())
        )),
    }
}

/// IEEE half precision (little-endian bytes) to f64.
fn f16_to_f64(lo: u8, hi: u8) -> f64 {
    let half = FloatFormat::of(DType::F16).expect("f16 is a float format");
    half.decode(u32::from(u16::from_le_bytes([lo, hi])))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Typed values of a 4-bit type are one packed byte per `int32_data` entry: five
    /// elements need three, and two are too few (checked before the values are read).
    #[test]
    fn packed_typed_values_are_counted_in_bytes() {
        let int4 = |entries: Vec<i32>| TensorProto {
            dims: vec![5],
            data_type: Some(code::INT4),
            int32_data: entries,
            ..TensorProto::default()
        };
        assert_eq!(check_data_length(&int4(vec![0x21, 0x43, 0x05])), Ok(()));
        let short = check_data_length(&int4(vec![0x21, 0x43])).unwrap_err();
        assert!(short.contains("needs 3 bytes") && short.contains("holds 2"), "{short}");
        let values = parse_tensor(&int4(vec![0x21, 0x43, 0x05])).unwrap();
        assert_eq!(values.to_i64s(), Some(vec![1, 2, 3, 4, 5]));
    }
}
