//! Pooling.

use serde::{Deserialize, Serialize};

use super::{expect_float, expect_inputs, expect_rank};
use crate::fact::TensorFact;

/// Window of a 2-D max or average pooling over NCHW input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool2d {
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Stride (height, width).
    pub stride: [usize; 2],
    /// Implicit padding on each side (height, width).
    pub padding: [usize; 2],
    /// Round the output size up instead of down (PyTorch's `ceil_mode`).
    pub ceil_mode: bool,
    /// For average pooling: count padded zeros in the divisor (PyTorch's default).
    pub count_include_pad: bool,
}

impl Pool2d {
    /// A square `k x k` window with stride `s` and no padding.
    pub fn new(k: usize, s: usize) -> Self {
        Self {
            kernel: [k, k],
            stride: [s, s],
            padding: [0, 0],
            ceil_mode: false,
            count_include_pad: true,
        }
    }

    /// With the same padding in both dimensions.
    pub fn padding(mut self, p: usize) -> Self {
        self.padding = [p, p];
        self
    }

    /// With `ceil_mode`.
    pub fn ceil_mode(mut self) -> Self {
        self.ceil_mode = true;
        self
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_rank("input", x, 4)?;
        expect_float("input", x)?;
        if self.stride.contains(&0) || self.kernel.contains(&0) {
            return Err("kernel and stride must be at least 1".into());
        }
        let mut shape = x.shape.clone();
        for i in 0..2 {
            if self.padding[i] * 2 > self.kernel[i] {
                return Err(format!(
                    "padding {:?} exceeds half the kernel {:?}",
                    self.padding, self.kernel
                ));
            }
            shape[2 + i] = self
                .out_len(x.shape[2 + i], i)
                .ok_or_else(|| format!("window {:?} does not fit input {x}", self.kernel))?;
        }
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }

    /// PyTorch's pooling output size, including its rule that in ceil mode the last window must
    /// start inside the input or the left padding.
    fn out_len(&self, input: usize, dim: usize) -> Option<usize> {
        let (k, s, p) = (self.kernel[dim], self.stride[dim], self.padding[dim]);
        let padded = input + 2 * p;
        if padded < k {
            return None;
        }
        let span = padded - k;
        let mut out = if self.ceil_mode { span.div_ceil(s) + 1 } else { span / s + 1 };
        if self.ceil_mode && (out - 1) * s >= input + p {
            out -= 1;
        }
        Some(out)
    }

    pub(crate) fn flops(&self, outputs: &[TensorFact]) -> u64 {
        outputs[0].numel() * (self.kernel[0] * self.kernel[1]) as u64
    }
}

pub(crate) fn infer_global(inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
    expect_inputs(inputs, 1)?;
    let x = inputs[0];
    expect_rank("input", x, 4)?;
    expect_float("input", x)?;
    Ok(vec![TensorFact::new(x.dtype, vec![x.shape[0], x.shape[1], 1, 1])])
}

/// A max or average pooling over the spatial dims of `[N, C, d1, ...]` input with any window:
/// per spatial dim a kernel, stride, dilation and padding before and after (ONNX's `MaxPool`
/// and `AveragePool` in full; the 2-D ops above are its common case).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoolNd {
    /// Max (else average).
    pub max: bool,
    /// Window size per spatial dim.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub stride: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilation: Vec<usize>,
    /// Padding before each spatial dim, then after each.
    pub pads: Vec<usize>,
    /// Round the output size up (a last window may start in the padding after, not past it).
    pub ceil_mode: bool,
    /// For averages: divide by the window's positions inside the padded input, else by those
    /// inside the input.
    pub count_include_pad: bool,
}

impl PoolNd {
    /// The output size of spatial dim `d` for an input of `len`.
    pub fn out_len(&self, d: usize, len: usize) -> Option<usize> {
        let n = self.kernel.len();
        let padded = len + self.pads[d] + self.pads[d + n];
        let span = (self.kernel[d] - 1) * self.dilation[d] + 1;
        let room = padded.checked_sub(span)?;
        let s = self.stride[d];
        let mut out = if self.ceil_mode { room.div_ceil(s) } else { room / s } + 1;
        // A last window that would start past the input and its padding before is dropped.
        if self.ceil_mode && (out - 1) * s >= len + self.pads[d] {
            out -= 1;
        }
        Some(out)
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_float("input", x)?;
        let n = self.kernel.len();
        if x.rank() != n + 2
            || self.stride.len() != n
            || self.dilation.len() != n
            || self.pads.len() != 2 * n
        {
            return Err(format!("a {n}-d window for input {x}"));
        }
        if [&self.kernel, &self.stride, &self.dilation].iter().any(|v| v.contains(&0)) {
            return Err("kernel, stride and dilation must be at least 1".into());
        }
        let mut shape = x.shape[..2].to_vec();
        for d in 0..n {
            shape.push(self.out_len(d, x.shape[d + 2]).ok_or_else(|| {
                format!("the window of dim {d} is larger than the padded input {x}")
            })?);
        }
        Ok(vec![TensorFact::new(x.dtype, shape)])
    }
}
