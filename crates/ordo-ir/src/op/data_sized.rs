//! Ops whose output size depends on the values of their inputs: `Range`, `NonZero`,
//! `NonMaxSuppression` and `Unique`. ordo plans static shapes, so each carries the size its
//! output is planned at (the size an ONNX file declares for it), and its kernel checks that
//! the run's values give that size: other values are an error, never a tensor of another
//! size.

use serde::{Deserialize, Serialize};

use super::expect_inputs;
use crate::fact::{DType, TensorFact};

/// `Range`: three scalars (rank 0, or one element) of one numeric type; `len` of that type.
pub(crate) fn infer_range(len: usize, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 3)?;
    let dtype = inputs[0].dtype;
    for (what, x) in ["start", "limit", "delta"].iter().zip(inputs) {
        if x.numel() != 1 || x.rank() > 1 {
            return Err(format!("{what} must be a scalar, got {x}"));
        }
        if x.dtype != dtype || !(dtype.is_integer() || dtype.is_float()) {
            return Err(format!("{what} is {x}: the three must be of one numeric type"));
        }
    }
    Ok(vec![TensorFact::new(dtype, vec![len])])
}

/// `NonZero`: any tensor of rank at least 1 (a scalar counts as rank 1); the coordinates of
/// its `count` nonzero elements, `I64` `[rank, count]`.
pub(crate) fn infer_non_zero(
    count: usize,
    inputs: &[&TensorFact],
) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    if inputs[0].dtype == DType::String {
        return Err(format!("input {}: nonzero strings are not defined", inputs[0]));
    }
    Ok(vec![TensorFact::new(DType::I64, vec![inputs[0].rank().max(1), count])])
}

/// ONNX's `NonMaxSuppression`: per batch and class, the boxes taken greedily by descending
/// score (ties: the lower index first), each dropped whose intersection over union with one
/// already taken exceeds `iou_threshold`; `[count, 3]` rows of (batch, class, box).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NonMaxSuppression {
    /// The planned number of rows.
    pub count: usize,
    /// Boxes as `[x_center, y_center, width, height]`, else as two corners
    /// `[y1, x1, y2, x2]` (either diagonal).
    pub center_point_box: bool,
    /// The most boxes taken per batch and class.
    pub max_per_class: usize,
    /// Boxes overlapping a taken one by more than this are dropped.
    pub iou_threshold: f64,
    /// Boxes scoring at most this are never taken (`None`: every box is a candidate).
    pub score_threshold: Option<f64>,
}

impl NonMaxSuppression {
    /// Boxes `[B, N, 4]` and scores `[B, C, N]`, both float; `I64` `[count, 3]`.
    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 2)?;
        let (boxes, scores) = (inputs[0], inputs[1]);
        if boxes.rank() != 3 || boxes.shape[2] != 4 || !boxes.dtype.is_float() {
            return Err(format!("boxes {boxes}: expected float [batches, boxes, 4]"));
        }
        let fits = scores.rank() == 3
            && scores.shape[0] == boxes.shape[0]
            && scores.shape[2] == boxes.shape[1];
        if !fits || !scores.dtype.is_float() {
            return Err(format!(
                "scores {scores}: expected float [batches, classes, boxes] for boxes {boxes}"
            ));
        }
        Ok(vec![TensorFact::new(DType::I64, vec![self.count, 3])])
    }
}

/// Which output of ONNX's `Unique` an IR node computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UniquePart {
    /// The distinct elements (or slices along the axis).
    Values,
    /// Each distinct one's first position in the input.
    Indices,
    /// Each input element's (or slice's) position among the distinct ones.
    Inverse,
    /// How often each distinct one occurs.
    Counts,
}

/// ONNX's `Unique`: the distinct elements of the flattened input, or the distinct slices along
/// `axis`, in ascending order (lexicographic for slices) when `sorted`, else in order of first
/// occurrence; one output (`part`) per IR node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unique {
    /// The axis whose slices are compared (`None`: the elements of the flattened input).
    pub axis: Option<usize>,
    /// Ascending order, else order of first occurrence.
    pub sorted: bool,
    /// The planned number of distinct elements or slices.
    pub count: usize,
    /// The output this node computes.
    pub part: UniquePart,
}

impl Unique {
    /// Any tensor (the axis within its rank); the part's fact.
    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        if x.dtype == DType::String {
            return Err(format!("input {x}: distinct strings are not computed"));
        }
        let (mut values, n) = match self.axis {
            Some(a) if a < x.rank() => (x.shape.clone(), x.shape[a]),
            Some(a) => return Err(format!("axis {a} of input {x}")),
            None => (vec![x.numel() as usize], x.numel() as usize),
        };
        values[self.axis.unwrap_or(0)] = self.count;
        let fact = match self.part {
            UniquePart::Values => TensorFact::new(x.dtype, values),
            UniquePart::Indices | UniquePart::Counts => {
                TensorFact::new(DType::I64, vec![self.count])
            }
            UniquePart::Inverse => TensorFact::new(DType::I64, vec![n]),
        };
        Ok(vec![fact])
    }
}
