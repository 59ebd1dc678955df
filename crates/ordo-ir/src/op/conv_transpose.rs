//! 2-D transposed convolution (ONNX's `ConvTranspose`, PyTorch's `ConvTranspose2d`): the
//! gradient of a convolution with respect to its input, used as a layer. Its weight is
//! `[in, out / groups, kh, kw]`, the layout of the convolution it transposes (which maps `out`
//! channels to `in`).

use serde::{Deserialize, Serialize};

use super::conv::check_window;
use super::{Conv2d, ParamSpec, expect_float, expect_inputs, expect_rank};
use crate::fact::TensorFact;

/// A 2-D transposed convolution with optional bias.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvTranspose2d {
    /// Output channels.
    pub out_channels: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Stride (height, width).
    pub stride: [usize; 2],
    /// Padding removed from each side of the output (height, width).
    pub padding: [usize; 2],
    /// Extra rows and columns added at the end of the output (each less than the stride
    /// or the dilation), to reach sizes a strided convolution maps to the same input size.
    pub output_padding: [usize; 2],
    /// Dilation (height, width).
    pub dilation: [usize; 2],
    /// Channel groups; `in` and `out` must both be divisible by it.
    pub groups: usize,
    /// Whether there is a bias of shape `[out]`.
    pub bias: bool,
}

impl ConvTranspose2d {
    /// The convolution whose input gradient this is: `out_channels` of it are this op's input
    /// channels `c`.
    pub fn transposed(&self, c: usize) -> Conv2d {
        Conv2d {
            out_channels: c,
            kernel: self.kernel,
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
            bias: false,
        }
    }

    pub(crate) fn infer(&self, inputs: &[&TensorFact]) -> Result<Vec<TensorFact>, String> {
        expect_inputs(inputs, 1)?;
        let x = inputs[0];
        expect_rank("input", x, 4)?;
        expect_float("input", x)?;
        check_window(x.shape[1], self.out_channels, self.groups, self.stride, self.dilation)?;
        let mut out = vec![x.shape[0], self.out_channels, 0, 0];
        for i in 0..2 {
            if self.output_padding[i] >= self.stride[i].max(self.dilation[i]) {
                return Err(format!(
                    "output padding {:?} must be less than the stride or the dilation",
                    self.output_padding
                ));
            }
            // (in - 1) * stride + dilation * (kernel - 1) + 1 + output_padding - 2 * padding
            let full = (x.shape[2 + i].max(1) - 1) * self.stride[i]
                + self.dilation[i] * self.kernel[i].saturating_sub(1)
                + 1
                + self.output_padding[i];
            out[2 + i] = full
                .checked_sub(2 * self.padding[i])
                .filter(|&n| n > 0 && self.kernel[i] > 0 && x.shape[2 + i] > 0)
                .ok_or_else(|| format!("padding {:?} leaves no output of {x}", self.padding))?;
        }
        Ok(vec![TensorFact::new(x.dtype, out)])
    }

    pub(crate) fn param_specs(&self, inputs: &[&TensorFact]) -> Vec<ParamSpec> {
        let c = inputs[0].shape[1];
        let [kh, kw] = self.kernel;
        let mut specs =
            vec![ParamSpec::trainable("weight", vec![c, self.out_channels / self.groups, kh, kw])];
        if self.bias {
            specs.push(ParamSpec::trainable("bias", vec![self.out_channels]));
        }
        specs
    }

    /// The transposed convolution's multiply-adds: each input element meets `out / groups x
    /// kh x kw` weights.
    pub(crate) fn flops(&self, inputs: &[&TensorFact], outputs: &[TensorFact]) -> u64 {
        let per_in = 2
            * (self.out_channels / self.groups.max(1)) as u64
            * (self.kernel[0] * self.kernel[1]) as u64;
        let bias = if self.bias { outputs[0].numel() } else { 0 };
        inputs[0].numel() * per_in + bias
    }
}
