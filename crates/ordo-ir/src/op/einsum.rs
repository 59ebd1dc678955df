//! `Einsum` with its subscripts resolved: each dim of each input and of the output named by a
//! label (the importer expands `...` into labels of their own).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fact::TensorFact;

/// A sum of products over labelled dims: every label's size is the same wherever it
/// appears; labels missing from the output are summed over.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Einsum {
    /// Each input's labels, one per dim.
    pub inputs: Vec<Vec<u32>>,
    /// The output's labels (distinct).
    pub output: Vec<u32>,
}

impl Einsum {
    /// Each label's size, from the inputs' shapes, or why they disagree.
    pub fn sizes(&self, inputs: &[&TensorFact]) -> Result<BTreeMap<u32, usize>, String> {
        if inputs.len() != self.inputs.len() {
            return Err(format!("expects {} inputs, got {}", self.inputs.len(), inputs.len()));
        }
        let mut sizes = BTreeMap::new();
        for (k, (labels, x)) in self.inputs.iter().zip(inputs).enumerate() {
            if labels.len() != x.rank() {
                return Err(format!("input {k} {x} has {} labels", labels.len()));
            }
            for (&label, &n) in labels.iter().zip(&x.shape) {
                if *sizes.entry(label).or_insert(n) != n {
                    return Err(format!("label {label} is {} and {n}", sizes[&label]));
                }
            }
        }
        Ok(sizes)
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        let sizes = self.sizes(inputs)?;
        let first = inputs.first().ok_or("expects at least one input")?;
        if inputs.iter().any(|x| x.dtype != first.dtype) || !first.dtype.is_float() {
            return Err("inputs must be floats of one element type".into());
        }
        let shape = self
            .output
            .iter()
            .map(|l| sizes.get(l).copied().ok_or(format!("output label {l} is in no input")))
            .collect::<Result<Vec<usize>, _>>()?;
        Ok(vec![TensorFact::new(first.dtype, shape)])
    }

    /// Multiply-adds: one per point of the full label space and input.
    pub fn flops(&self, inputs: &[&TensorFact]) -> u64 {
        let Ok(sizes) = self.sizes(inputs) else { return 0 };
        let points: u64 = sizes.values().map(|&n| n as u64).product();
        2 * points * self.inputs.len() as u64
    }
}
