//! Source ops: graph inputs, parameters used as values, constants.

use ordo_ir::op::Grad;

use super::element::{held_as, narrow};
use super::error::{KernelError, KernelResult};
use super::tensor::Tensor;
use super::util::Call;

/// `Input`: passes the fed tensor (the one input) through, checked against the node's output
/// fact when the context has it. The engine feeds the data; [`Tensor::random`] and
/// [`Tensor::random_ids`] make synthetic data.
pub(crate) fn input(c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    c.expect_params(0)?;
    let fed = c.inputs[0];
    if let Some(fact) = c.ctx.outputs.first() {
        if fact.shape != fed.shape() || held_as(fact.dtype) != fed.dtype() {
            return Err(c.shape_err(format!("fed {}, the input is {fact}", fed.fact())));
        }
        // A narrow integer type's values must be in its range: wrapping them would change
        // the data silently.
        let mut narrowed = fed.clone();
        narrow(&mut narrowed, fact.dtype);
        if fact.dtype.is_integer()
            && let (Some(got), Some(held)) = (fed.as_i64(), narrowed.as_i64())
            && let Some(v) = got.iter().zip(held).find(|(a, b)| a != b).map(|(a, _)| a)
        {
            return Err(c.value_err(format!("fed value {v} is not a {}", fact.dtype)));
        }
        return Ok(vec![narrowed]);
    }
    Ok(vec![fed.clone()])
}

/// `Parameter`: its one parameter, as a value.
pub(crate) fn parameter(c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(0)?;
    c.expect_params(1)?;
    Ok(vec![c.params[0].clone()])
}

/// The gradient of `Parameter`: the upstream gradient itself.
pub(crate) fn parameter_grad(g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let fact = c.produced(g, 0)?;
    c.expect_input_shape(0, &fact.shape)?;
    c.input_f32(0)?;
    Ok(vec![c.inputs[0].clone()])
}

/// `Fill`: a tensor of the node's output fact (from the context) filled with `value`.
pub(crate) fn fill(value: f64, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(0)?;
    c.expect_params(0)?;
    let Some(fact) = c.ctx.outputs.first() else {
        return Err(KernelError::Context {
            op: c.label,
            message: "needs its output fact in the context".into(),
        });
    };
    if !fact.dtype.is_float() {
        return Err(KernelError::UnsupportedDType { op: c.label, dtype: fact.dtype });
    }
    let mut t = Tensor::zeros(fact)?;
    if let Some(v) = t.as_f32_mut() {
        v.fill(value as f32);
    }
    Ok(vec![t])
}
