//! Element types beyond the three storages of [`Tensor`]: which storage holds each type, and
//! how a kernel's output becomes a value of its node's declared type. Strings are held as ids
//! that the caller assigns ([`reads_strings`]).
//!
//! Kernels compute in the storage: `f32` for every float type, `i64` for every integer type,
//! `bool` for bool. After a kernel, [`super::run`] narrows each output to the type its node
//! declares ([`narrow`]):
//!
//! - f16 and bf16 round to the nearest value of the type (ties to even, the `half` crate's
//!   IEEE conversion), so each op's result is what the narrow type holds, as a framework
//!   computing in f32 and storing f16 has it; the float8 and float4 formats likewise
//!   ([`ordo_ir::element::FloatFormat`]: an overflow is infinity or NaN as the format has
//!   them), float8 e8m0 to a power of two (rounding up, saturating: ONNX's defaults), all
//!   by [`ordo_ir::element::round_float`], which the import's constant folding uses too;
//! - f64 is computed in f32: its values keep f32's precision and range (a documented
//!   approximation; ONNX exports use f64 for few, small tensors);
//! - integers of 32 bits and fewer wrap to their type (two's complement, NumPy's and
//!   PyTorch's rule for overflow);
//! - u64 is held as its bit pattern in `i64`. Addition, subtraction, multiplication and data
//!   movement give the same bits either way; the kernels whose result depends on the sign
//!   (division, remainder, extremes, comparisons, casts) read the declared input types from
//!   [`super::KernelContext::inputs`] ([`reads_unsigned`]), and every other op refuses a u64 input
//!   ([`reads_u64`]).

use half::{bf16, f16};
use ordo_ir::element::{round_float, wrap_integer};
use ordo_ir::{DType, Op};

use super::tensor::Tensor;
use super::util::Call;

/// The storage type that holds values of `dtype`: [`DType::F32`], [`DType::I64`] or
/// [`DType::Bool`]. Strings are held as `i64` ids (see [`reads_strings`]).
pub fn held_as(dtype: DType) -> DType {
    if dtype == DType::Bool {
        DType::Bool
    } else if dtype.is_integer() || dtype == DType::String {
        DType::I64
    } else {
        DType::F32
    }
}

/// Makes `t`'s elements values of `dtype`, which its storage holds (see the module
/// documentation); a tensor of another storage is left as it is (the caller's checks name
/// that mismatch).
pub(crate) fn narrow(t: &mut Tensor, dtype: DType) {
    if dtype.is_integer() {
        if let Some(v) = t.as_i64_mut() {
            v.iter_mut().for_each(|x| *x = wrap_integer(*x, dtype));
        }
        return;
    }
    let Some(v) = t.as_f32_mut() else { return };
    match dtype {
        // Values already f32 (f64 is computed in f32).
        DType::F32 | DType::F64 => {}
        // The `half` crate's conversions: bitwise the generic rounding's, faster.
        DType::F16 => v.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
        DType::BF16 => v.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
        _ => v.iter_mut().for_each(|x| *x = round_float(f64::from(*x), dtype) as f32),
    }
}

/// Whether an input of the call is declared u64 (held as its bit pattern in `i64`): the
/// sign-dependent kernels then read their integers as unsigned (the IR gives an op's integer
/// operands one type).
pub(crate) fn reads_unsigned(c: &Call) -> bool {
    c.ctx.inputs.iter().any(|f| f.dtype == DType::U64)
}

/// Whether `op`'s kernel reads u64 inputs right: data movement and wrapping arithmetic, which
/// give the same bits for a u64 and the `i64` holding it, and the sign-dependent kernels that
/// read the declared input types from [`KernelContext::inputs`](super::KernelContext::inputs).
pub fn reads_u64(op: &Op) -> bool {
    matches!(
        op,
        Op::Input
            | Op::Parameter
            | Op::Add
            | Op::Mul
            | Op::Scale { .. }
            | Op::Div
            | Op::Max
            | Op::Min
            | Op::Mod { .. }
            | Op::Compare(_)
            | Op::Bitwise(_)
            | Op::TopK { .. }
            | Op::Where
            | Op::Cast { .. }
            | Op::BitCast { .. }
    ) || moves_elements(op)
}

/// Whether `op` only moves elements to other places (or copies), their bits unchanged, so its
/// kernel is right for any values its storage holds.
fn moves_elements(op: &Op) -> bool {
    use ordo_ir::op::ScatterReduction;
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Expand { .. }
            | Op::Concat { .. }
            | Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::GatherNd
            | Op::Tile { .. }
            | Op::ScatterNd { reduction: ScatterReduction::None }
            | Op::ScatterElements { reduction: ScatterReduction::None, .. }
    )
}

/// Whether `op`'s kernel computes right on strings held as `i64` ids, one id per distinct
/// string: equality and data movement, whose results on the ids are the ids of the results on
/// the strings. The ids come from the caller that feeds the graph (which interns every string
/// it feeds, and the strings it compares the outputs with, in one table), so a string may
/// enter the graph only as an input: a string constant or parameter would need that table.
pub fn reads_strings(op: &Op) -> bool {
    use ordo_ir::op::CompareKind;
    matches!(op, Op::Input | Op::Compare(CompareKind::Equal) | Op::Where) || moves_elements(op)
}

/// Whether the storage gives back the bits of a `dtype` value, which a `BitCast` reads: not for
/// f64 (held in f32) nor the float8 and float4 formats.
pub fn bits_held(dtype: DType) -> bool {
    dtype.is_integer() || matches!(dtype, DType::Bool | DType::F32 | DType::F16 | DType::BF16)
}

/// `x` held as a u64's bit pattern, mapped so that `i64`'s order is u64's (the sign bit
/// flipped): comparisons and extremes of u64 values compare these.
pub(crate) fn u64_order(x: i64) -> i64 {
    x ^ i64::MIN
}
