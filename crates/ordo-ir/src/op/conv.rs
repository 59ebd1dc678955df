//! Convolution.

use serde::{Deserialize, Serialize};

use super::{ParamSpec, expect_float, expect_inputs, expect_rank};
use crate::fact::TensorFact;

/// 2-D convolution over NCHW input with weight `[out, in/groups, kh, kw]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conv2d {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Stride (height, width).
    pub stride: [usize; 2],
    /// Zero padding on each side (height, width).
    pub padding: [usize; 2],
    /// Dilation (height, width).
    pub dilation: [usize; 2],
    /// Channel groups; `in` and `out` must both be divisible by it.
    pub groups: usize,
    /// Whether there is a bias of shape `[out]`.
    pub bias: bool,
}

impl Conv2d {
    /// A square `k x k` convolution with stride 1, no padding, one group and a bias.
    pub fn new(out_channels: usize, k: usize) -> Self {
        Self {
            out_channels,
            kernel: [k, k],
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
            bias: true,
        }
    }

    /// A rectangular `kh x kw` kernel.
    pub fn rect(out_channels: usize, kh: usize, kw: usize) -> Self {
        Self { kernel: [kh, kw], ..Self::new(out_channels, 1) }
    }

    /// With the same stride in both dimensions.
    pub fn stride(mut self, s: usize) -> Self {
        self.stride = [s, s];
        self
    }

    /// With the same padding in both dimensions.
    pub fn padding(mut self, p: usize) -> Self {
        self.padding = [p, p];
        self
    }

    /// With padding (height, width).
    pub fn padding_hw(mut self, ph: usize, pw: usize) -> Self {
        self.padding = [ph, pw];
        self
    }

    /// With the same dilation in both dimensions.
    pub fn dilation(mut self, d: usize) -> Self {
        self.dilation = [d, d];
        self
    }

    /// With `g` channel groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }

    /// Without bias.
    pub fn no_bias(mut self) -> Self {
        self.bias = false;
        self
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_rank("input", x, 4)?;
        expect_float("input", x)?;
        check_window(x.shape[1], self.out_channels, self.groups, self.stride, self.dilation)?;
        let mut out = vec![x.shape[0], self.out_channels, 0, 0];
        for i in 0..2 {
            out[2 + i] = conv_out_len(
                x.shape[2 + i],
                self.kernel[i],
                self.stride[i],
                self.padding[i],
                self.dilation[i],
            )
            .ok_or_else(|| format!("kernel {:?} does not fit input {x}", self.kernel))?;
        }
        Ok(vec![TensorFact::new(x.dtype, out)])
    }

    pub(crate) fn param_specs(&self, inputs: &[&TensorFact]) -> Vec<ParamSpec> {
        let c = inputs[0].shape[1];
        let [kh, kw] = self.kernel;
        let mut specs =
            vec![ParamSpec::trainable("weight", vec![self.out_channels, c / self.groups, kh, kw])];
        if self.bias {
            specs.push(ParamSpec::trainable("bias", vec![self.out_channels]));
        }
        specs
    }

    pub(crate) fn flops(&self, inputs: &[&TensorFact], outputs: &[TensorFact]) -> u64 {
        let c = inputs[0].shape[1] as u64;
        let per_out = 2 * c / self.groups as u64 * (self.kernel[0] * self.kernel[1]) as u64;
        let out = outputs[0].numel();
        out * per_out + if self.bias { out } else { 0 }
    }
}

/// Checks a (transposed) convolution's groups, stride and dilation, and that both channel
/// counts divide into the groups.
pub(crate) fn check_window(
    c: usize,
    out_channels: usize,
    groups: usize,
    stride: [usize; 2],
    dilation: [usize; 2],
) -> Result<(), String> {
    if groups == 0 || stride.contains(&0) || dilation.contains(&0) {
        return Err("groups, stride and dilation must be at least 1".into());
    }
    if !c.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        return Err(format!(
            "{c} input and {out_channels} output channels are not divisible by {groups} groups"
        ));
    }
    Ok(())
}

/// Output length of a convolution or pooling window along one dimension, `None` when the window
/// does not fit.
pub(crate) fn conv_out_len(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    let span = dilation * (kernel.checked_sub(1)?) + 1;
    let padded = input + 2 * padding;
    if padded < span { None } else { Some((padded - span) / stride + 1) }
}
