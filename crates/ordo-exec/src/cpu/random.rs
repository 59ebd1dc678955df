//! `Cast` between the runtime's element types, and the random ops (`RandomUniformLike`,
//! `RandomNormalLike`, `Bernoulli`) drawn from the node's seed by the counter-based generator
//! that dropout uses: element `i` of a node's output at a step is a function of
//! `(seed, i)` alone, so every placement and schedule draws the same values.

use ordo_ir::DType;
use ordo_ir::element::{E8m0Rounding, FloatFormat, e8m0_round};
use ordo_ir::op::{Distribution, Op};

use super::element::{held_as, is_u64};
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
    let unsigned = is_u64(&c, 0);
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
    if let Some(v) = y.as_f32_mut() {
        let float8 =
            matches!(to, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ);
        if let (true, true, Some(format)) = (float8, saturate, FloatFormat::of(to)) {
            // ONNX's reference clamps every value, infinities included, to the range.
            let max = format.max() as f32;
            v.iter_mut().filter(|x| !x.is_nan()).for_each(|x| *x = x.clamp(-max, max));
        }
        if to == DType::F8E8M0 {
            v.iter_mut().for_each(|x| *x = e8m0_round(*x, saturate, round));
        }
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
