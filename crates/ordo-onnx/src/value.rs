//! What an ONNX tensor is during import: a constant, a wire of the IR graph or a parameter,
//! possibly seen through data-movement steps that are not emitted until something needs them.
//!
//! Deferring reshapes and transposes lets chains that cancel out (the layout changes around an
//! LSTM, a squeeze after an unsqueeze) vanish, and lets a transposed weight feeding a `MatMul`
//! become the weight of a `Linear`.

use std::rc::Rc;

use ordo_ir::{Op, OutletId, TensorFact};

use crate::tensor::ConstTensor;

/// One deferred data-movement step.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// Reshape to a fully resolved shape.
    Reshape(Vec<usize>),
    /// Permutation of dimensions.
    Transpose(Vec<usize>),
    /// Slice along one axis.
    Slice {
        /// The axis (non-negative).
        axis: usize,
        /// First index.
        start: i64,
        /// One past the last index.
        end: i64,
        /// Step, at least 1.
        step: i64,
    },
}

impl Step {
    /// The IR op that performs the step.
    pub fn op(&self) -> Op {
        match self {
            Step::Reshape(shape) => crate::ops::common::reshape_op(shape),
            Step::Transpose(perm) => Op::Transpose { perm: perm.clone() },
            Step::Slice { axis, start, end, step } => {
                Op::Slice { axis: *axis as i64, start: *start, end: *end, step: *step }
            }
        }
    }
}

/// A deferred step, the name of the ONNX node it comes from and the fact it produces.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PendingStep {
    /// Name for the IR node, when emitted.
    pub name: String,
    /// The step.
    pub step: Step,
    /// Fact after the step.
    pub fact: TensorFact,
}

/// What a view starts from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Base {
    /// A wire of the IR graph.
    Wire(OutletId),
    /// A parameter (ONNX graph input or initializer), by its ONNX name.
    Param(String),
}

/// A wire or parameter seen through deferred steps.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct View {
    /// The start.
    pub base: Base,
    /// Fact of the start.
    pub base_fact: TensorFact,
    /// Steps not yet emitted.
    pub steps: Vec<PendingStep>,
}

impl View {
    /// A view of `base` with no steps.
    pub fn new(base: Base, fact: TensorFact) -> Self {
        Self { base, base_fact: fact, steps: Vec::new() }
    }

    /// The fact of the viewed tensor.
    pub fn fact(&self) -> &TensorFact {
        self.steps.last().map_or(&self.base_fact, |s| &s.fact)
    }

    /// The parameter's ONNX name when this is a parameter with no pending steps.
    pub fn plain_param(&self) -> Option<&str> {
        match &self.base {
            Base::Param(name) if self.steps.is_empty() => Some(name),
            _ => None,
        }
    }

    /// Appends a step, merging it with the previous one where they compose and dropping steps
    /// that do nothing.
    ///
    /// # Errors
    /// The IR's message when the step does not fit the current fact.
    pub fn push(&mut self, name: &str, step: Step) -> Result<(), String> {
        let fact = infer_step(&step, self.fact())?;
        match step {
            Step::Reshape(shape) => {
                if fact == *self.fact() {
                    return Ok(());
                }
                if matches!(self.steps.last(), Some(PendingStep { step: Step::Reshape(_), .. })) {
                    self.steps.pop();
                }
                if self.fact().shape == shape {
                    return Ok(());
                }
                self.steps.push(PendingStep {
                    name: name.to_string(),
                    step: Step::Reshape(shape),
                    fact,
                });
            }
            Step::Transpose(perm) => {
                let mut perm = perm;
                if let Some(PendingStep { step: Step::Transpose(prev), .. }) = self.steps.last() {
                    perm = perm.iter().map(|&q| prev[q]).collect();
                    self.steps.pop();
                }
                if perm.iter().enumerate().all(|(i, &p)| i == p) {
                    return Ok(());
                }
                self.steps.push(PendingStep {
                    name: name.to_string(),
                    step: Step::Transpose(perm),
                    fact,
                });
            }
            Step::Slice { .. } => {
                if fact == *self.fact() {
                    return Ok(());
                }
                self.steps.push(PendingStep { name: name.to_string(), step, fact });
            }
        }
        Ok(())
    }
}

/// The fact a step produces from `input`, by the IR's own shape rules.
pub(crate) fn infer_step(step: &Step, input: &TensorFact) -> Result<TensorFact, String> {
    let mut out = step.op().infer(&[input])?;
    out.pop().ok_or_else(|| "the step has no output".to_string())
}

/// An ONNX tensor during import.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// A wire or a parameter, through deferred steps.
    View(View),
    /// A value known at import time.
    Const(Rc<ConstTensor>),
    /// Slices and concatenations of several parameters (e.g. an LSTM's weights with its gates
    /// reordered): usable as the parameters of an op, not as a value.
    ParamSet {
        /// Fact of the combined tensor.
        fact: TensorFact,
        /// The parameters it is made of, by ONNX name, in order of first appearance.
        sources: Vec<String>,
    },
}

impl Value {
    /// A constant.
    pub fn constant(c: ConstTensor) -> Self {
        Value::Const(Rc::new(c))
    }

    /// A wire with no pending steps.
    pub fn wire(outlet: OutletId, fact: TensorFact) -> Self {
        Value::View(View::new(Base::Wire(outlet), fact))
    }

    /// The shape of the value.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Value::View(v) => v.fact().shape.clone(),
            Value::Const(c) => c.shape.clone(),
            Value::ParamSet { fact, .. } => fact.shape.clone(),
        }
    }

    /// The constant, if this is one.
    pub fn as_const(&self) -> Option<&ConstTensor> {
        match self {
            Value::Const(c) => Some(c),
            _ => None,
        }
    }

    /// Whether the value is made of parameters only.
    pub fn is_param(&self) -> bool {
        matches!(self, Value::ParamSet { .. } | Value::View(View { base: Base::Param(_), .. }))
    }

    /// The parameters the value is made of, by ONNX name.
    pub fn param_sources(&self) -> Vec<String> {
        match self {
            Value::ParamSet { sources, .. } => sources.clone(),
            Value::View(View { base: Base::Param(p), .. }) => vec![p.clone()],
            _ => Vec::new(),
        }
    }
}
