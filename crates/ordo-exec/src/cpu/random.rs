//! `Cast` and `BitCast` between the runtime's element types, and the random ops (`RandomUniformLike`,
//! `RandomNormalLike`, `Bernoulli`) drawn from the node's seed by the counter-based generator
//! that dropout uses: element `i` of a node's output at a step is a function of
//! `(seed, i)` alone, so every placement and schedule draws the same values.

use ordo_ir::element::{E8m0Rounding, cast_float, wrap_integer};
use ordo_ir::op::{Distribution, Op};
use ordo_ir::{DType, TensorFact};

use super::element::{held_as, reads_unsigned};
use super::elementwise::uniform;
use super::error::KernelResult;
use super::tensor::{Data, Tensor};
use super::util::Call;

/// `Cast` between storages: a float to an integer rounds toward zero (saturating; NaN becomes
/// 0), to bool is "not zero", bool to a number is 0 or 1, a u64 input converts as unsigned.
/// Within one storage the values pass through, and [`super::run`] then narrows them to the
/// target type (an f32 rounded to f16, an i64 wrapped to u8). To a float8 format with
/// `saturate`, values are first clamped to its range; to e8m0, rounded by `round` here.
pub(crate) fn cast(
    op: &Op,
    (to, saturate, round): (DType, bool, E8m0Rounding),
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let x = &c.inputs[0];
    let unsigned = reads_unsigned(&c);
    let mut y = match (x.data(), held_as(to)) {
        (Data::F32(v), DType::I64) => Tensor::from_i64(&out, v.iter().map(|&f| f as i64).collect()),
        (Data::F32(v), DType::Bool) => {
            Tensor::from_bool(&out, v.iter().map(|&f| f != 0.0).collect())
        }
        (Data::I64(v), DType::F32) if unsigned => {
            Tensor::from_f32(&out, v.iter().map(|&i| i as u64 as f32).collect())
        }
        (Data::I64(v), DType::F32) => Tensor::from_f32(&out, v.iter().map(|&i| i as f32).collect()),
        (Data::I64(v), DType::Bool) => Tensor::from_bool(&out, v.iter().map(|&i| i != 0).collect()),
        (Data::Bool(v), DType::F32) => {
            Tensor::from_f32(&out, v.iter().map(|&b| f32::from(u8::from(b))).collect())
        }
        (Data::Bool(v), DType::I64) => {
            Tensor::from_i64(&out, v.iter().map(|&b| i64::from(b)).collect())
        }
        // Within one storage (f32 to f16, i64 to u8): the values, narrowed after the kernel.
        _ => Ok(Tensor::clone(x)),
    }?;
    // What the cast's options change before the narrowing (float8's saturation, e8m0's
    // rounding mode); the same function folds constant casts.
    if let Some(v) = y.as_f32_mut().filter(|_| to.is_float()) {
        v.iter_mut().for_each(|x| *x = cast_float(f64::from(*x), to, saturate, round) as f32);
    }
    Ok(vec![y])
}

/// Element `i` of a draw from `distribution` under `seed`. A normal is the Box-Muller
/// transform of the uniforms at `2i` and `2i + 1`.
pub(crate) fn draw(distribution: &Distribution, seed: u64, i: u64) -> f64 {
    match *distribution {
        Distribution::Uniform { low, high } => low + (high - low) * uniform(seed, i),
        Distribution::Normal { mean, scale } => {
            // 1 - u is in (0, 1]: its logarithm is finite.
            let (u, v) = (1.0 - uniform(seed, 2 * i), uniform(seed, 2 * i + 1));
            mean + scale * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }
}

/// `RandomUniformLike`, `RandomNormalLike`: f32 values shaped like the input.
pub(crate) fn random_like(
    op: &Op,
    distribution: &Distribution,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let seed = c.ctx.seed;
    let n = c.inputs[0].numel() as u64;
    let values = (0..n).map(|i| draw(distribution, seed, i) as f32).collect();
    Ok(vec![Tensor::from_f32(&out, values)?])
}

/// `Bernoulli`: element `i` is 1 where the uniform draw `i` is below the probability.
pub(crate) fn bernoulli(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let p = c.inputs[0].as_f32().ok_or_else(|| c.value_err("the probabilities must be f32"))?;
    if let Some(bad) = p.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(c.value_err(format!("probability {bad} is outside [0, 1]")));
    }
    let seed = c.ctx.seed;
    let values = p
        .iter()
        .enumerate()
        .map(|(i, &q)| f32::from(u8::from(uniform(seed, i as u64) < f64::from(q))));
    Ok(vec![Tensor::from_f32(&out, values.collect())?])
}

/// `BitCast`: each element's bits read as `to`, a type of the same width. The storage gives a
/// held value's bits back exactly for the integers, bool, f32, f16 and bf16; f64 (held in
/// f32) and the float8 and float4 formats are refused.
pub(crate) fn bit_cast(op: &Op, to: DType, c: Call) -> KernelResult<Vec<Tensor>> {
    use half::{bf16, f16};
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let x = c.inputs[0];
    // The declared type, whose width the IR checked (the storage's may be wider).
    let from = c.ctx.inputs.first().map_or(x.dtype(), |f| f.dtype);
    let out = c.infer(op, &[TensorFact::new(from, x.shape().to_vec())])?.shape;
    let mask = |v: i64| (v as u64) & (u64::MAX >> (64 - from.bits()));
    let bits: Vec<u64> = match (x.data(), from) {
        (Data::F32(v), DType::F32) => v.iter().map(|&f| u64::from(f.to_bits())).collect(),
        (Data::F32(v), DType::F16) => {
            v.iter().map(|&f| u64::from(f16::from_f32(f).to_bits())).collect()
        }
        (Data::F32(v), DType::BF16) => {
            v.iter().map(|&f| u64::from(bf16::from_f32(f).to_bits())).collect()
        }
        (Data::I64(v), _) => v.iter().map(|&i| mask(i)).collect(),
        (Data::Bool(v), _) => v.iter().map(|&b| u64::from(b)).collect(),
        _ => return Err(c.value_err(format!("no bit cast of {from}: its bits are not held"))),
    };
    Ok(vec![match to {
        DType::F32 => {
            Tensor::from_f32(&out, bits.iter().map(|&b| f32::from_bits(b as u32)).collect())
        }
        DType::F16 => Tensor::from_f32(
            &out,
            bits.iter().map(|&b| f16::from_bits(b as u16).to_f32()).collect(),
        ),
        DType::BF16 => Tensor::from_f32(
            &out,
            bits.iter().map(|&b| bf16::from_bits(b as u16).to_f32()).collect(),
        ),
        DType::Bool => Tensor::from_bool(&out, bits.iter().map(|&b| b != 0).collect()),
        // Wrapping to the type reads the sign bit of a narrow signed integer.
        t if t.is_integer() => {
            Tensor::from_i64(&out, bits.iter().map(|&b| wrap_integer(b as i64, t)).collect())
        }
        _ => return Err(c.value_err(format!("no bit cast to {to}"))),
    }?])
}
