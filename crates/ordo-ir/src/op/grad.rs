//! The ops of the backward pass and the optimizer step, made by the training-graph builder
//! ([`crate::training`]).

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;
use crate::op::Op;

/// Which gradient a [`Grad`] node computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Wrt {
    /// The gradient with respect to the forward op's input `k` (a "dX" node).
    Input(usize),
    /// The gradients with respect to the forward op's trainable parameters, in parameter order
    /// (a "dW" node).
    Params,
}

/// A forward tensor a [`Grad`] node reads besides the upstream gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Saved {
    /// The forward op's input `k`.
    Input(usize),
    /// The forward op's output.
    Output,
}

/// A gradient of a forward op.
///
/// Inputs: the upstream gradient (the gradient of the loss with respect to the forward op's
/// output, shaped like it), then the forward tensors listed in `saved`, in that order. The
/// node's parameters, if any, are the forward op's (the weights a dX node multiplies by).
/// Outputs: `produces`, the gradient's facts, which the builder takes from the forward input
/// or parameters and [`crate::training::check_gradients`] checks again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Grad {
    /// The forward op.
    pub of: Box<Op>,
    /// Which gradient.
    pub wrt: Wrt,
    /// The forward tensors read after the upstream gradient.
    pub saved: Vec<Saved>,
    /// Facts of the gradients produced.
    pub produces: Vec<TensorFact>,
    /// FLOPs of the gradient computation (the builder's rules, from the forward op's FLOPs).
    pub flops: u64,
}

impl Grad {
    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        crate::op::expect_inputs(inputs, 1 + self.saved.len())?;
        crate::op::expect_float("the upstream gradient", inputs[0])?;
        Ok(self.produces.clone())
    }
}

/// An optimizer: how parameters are updated from their gradients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// Plain SGD: no state.
    Sgd,
    /// SGD with momentum: one velocity per parameter.
    #[default]
    SgdMomentum,
    /// Adam: first and second moments per parameter.
    Adam,
}

impl Optimizer {
    /// Copies of the parameters the optimizer keeps.
    pub fn state_slots(self) -> u64 {
        match self {
            Optimizer::Sgd => 0,
            Optimizer::SgdMomentum => 1,
            Optimizer::Adam => 2,
        }
    }

    /// FLOPs per parameter element of one update.
    pub fn flops_per_element(self) -> u64 {
        match self {
            Optimizer::Sgd => 2,
            Optimizer::SgdMomentum => 4,
            Optimizer::Adam => 12,
        }
    }
}

/// The optimizer step of one parameter: reads the parameter's gradient (the input) and the
/// parameter (the node's one parameter), and outputs the parameter's new value (its next
/// version, shaped like it). Optimizer state is persistent memory of the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    /// The optimizer.
    pub optimizer: Optimizer,
}

impl Update {
    pub(crate) fn infer(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        crate::op::expect_inputs(inputs, 1)?;
        crate::op::expect_float("the gradient", inputs[0])?;
        Ok(vec![inputs[0].clone()])
    }
}
