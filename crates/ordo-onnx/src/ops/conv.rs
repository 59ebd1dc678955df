//! `Conv` (2-D) and the padding rules shared with pooling.

use ordo_ir::op::Conv2d;

use super::{Outputs, one};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::{Node, small_uints};
use crate::value::Value;

/// Kernel, strides, symmetric padding and dilations of a 2-D window.
pub(crate) struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides.
    pub stride: [usize; 2],
    /// Padding on each side.
    pub padding: [usize; 2],
    /// Dilations.
    pub dilation: [usize; 2],
}

/// Reads `kernel_shape` (or `kernel`), `strides`, `pads`, `dilations` and `auto_pad` for an NCHW
/// input with spatial size `hw`. Asymmetric padding is not supported by the IR.
pub(crate) fn window(
    node: &Node<'_>,
    hw: [usize; 2],
    kernel: Option<[usize; 2]>,
) -> OnnxResult<Window> {
    let pair = |name: &str, default: usize| -> OnnxResult<[usize; 2]> {
        match node.ints(name) {
            None => Ok([default; 2]),
            Some(v) => match small_uints(node, name, v)?.as_slice() {
                &[a, b] => Ok([a, b]),
                _ => Err(node.unsupported(format!("`{name}` {v:?}: only 2-D windows"))),
            },
        }
    };
    let kernel = match (node.ints("kernel_shape"), kernel) {
        (Some(_), _) | (None, None) => pair("kernel_shape", 0)?,
        (None, Some(k)) => k,
    };
    if kernel.contains(&0) {
        return Err(node.malformed("no kernel_shape"));
    }
    let stride = pair("strides", 1)?;
    let dilation = pair("dilations", 1)?;
    if stride.contains(&0) || dilation.contains(&0) {
        return Err(node.malformed("strides and dilations must be positive"));
    }
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let padding = match auto_pad.as_str() {
        "NOTSET" | "" => match node.ints("pads") {
            None => [0, 0],
            Some(p) => match small_uints(node, "pads", p)?.as_slice() {
                &[h0, w0, h1, w1] if h0 == h1 && w0 == w1 => [h0, w0],
                _ => {
                    return Err(
                        node.unsupported(format!("pads {p:?} (only symmetric 2-D padding)"))
                    );
                }
            },
        },
        "VALID" => [0, 0],
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut pads = [0; 2];
            for i in 0..2 {
                let out = hw[i].div_ceil(stride[i]);
                let span = (kernel[i] - 1) * dilation[i] + 1;
                let total = ((out.saturating_sub(1)) * stride[i] + span).saturating_sub(hw[i]);
                if total % 2 == 1 {
                    return Err(node.unsupported("auto_pad needing asymmetric padding"));
                }
                pads[i] = total / 2;
            }
            pads
        }
        other => return Err(node.malformed(format!("auto_pad = {other}"))),
    };
    Ok(Window { kernel, stride, padding, dilation })
}

/// `Conv` over NCHW input with weight (and bias) parameters.
pub(crate) fn conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x_fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if x_fact.rank() != 4 {
        return Err(node.unsupported(format!("input {x_fact}: only 2-D convolutions (NCHW)")));
    }
    let weight = param_name(ctx, node, 1, "weight")?;
    let w_fact = ctx.param_fact(&weight).cloned().expect("checked parameter");
    if w_fact.rank() != 4 {
        return Err(node.shape_error(format!("weight {w_fact} must have rank 4")));
    }
    let bias = node.input(2).map(|_| param_name(ctx, node, 2, "bias")).transpose()?;
    let w =
        window(node, [x_fact.shape[2], x_fact.shape[3]], Some([w_fact.shape[2], w_fact.shape[3]]))?;
    let groups = usize::try_from(node.int("group", 1)?).map_err(|_| node.malformed("bad group"))?;
    let op = Conv2d {
        out_channels: w_fact.shape[0],
        kernel: w.kernel,
        stride: w.stride,
        padding: w.padding,
        dilation: w.dilation,
        groups,
        bias: bias.is_some(),
    };
    let x = ctx.wire(node, 0)?;
    let params: Vec<String> = std::iter::once(weight).chain(bias).collect();
    let out = ctx.emit_with_params(node, ordo_ir::Op::Conv2d(op), &[x], &params)?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    one(Value::wire(out, fact))
}

/// The ONNX name of the parameter read by input `i`, which must be a graph input or
/// initializer used directly.
pub(crate) fn param_name(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
) -> OnnxResult<String> {
    match ctx.input(node, i)? {
        Value::View(v) if v.plain_param().is_some() => {
            Ok(v.plain_param().unwrap_or_default().to_string())
        }
        _ => Err(node.unsupported(format!(
            "the {what} (input {i}) must be a parameter (an initializer or a graph input)"
        ))),
    }
}
