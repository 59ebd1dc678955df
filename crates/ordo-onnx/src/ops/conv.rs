//! `Conv` and `ConvTranspose` (1-D and 2-D; 3-D in [`super::conv3d`]) and the padding rules
//! shared with pooling.

use ordo_ir::op::{Conv2d, ConvTranspose2d};
use ordo_ir::{Op, OutletId, TensorFact};

use super::common::{Outputs, one, reshape_op};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::{Node, small_uints};
use crate::tensor_io::ParamSource;
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
    let w = window_nd(node, &hw, kernel.as_ref().map(|k| &k[..]))?;
    let pair = |v: &[usize]| [v[0], v[1]];
    Ok(Window {
        kernel: pair(&w.kernel),
        stride: pair(&w.stride),
        padding: pair(&w.padding),
        dilation: pair(&w.dilation),
    })
}

/// [`Window`] of any number of spatial dims.
pub(crate) struct WindowNd {
    /// Kernel size per spatial dim.
    pub kernel: Vec<usize>,
    /// Strides.
    pub stride: Vec<usize>,
    /// Padding on each side.
    pub padding: Vec<usize>,
    /// Dilations.
    pub dilation: Vec<usize>,
}

/// The window attributes for spatial sizes `spatial` (one entry per spatial dim).
pub(crate) fn window_nd(
    node: &Node<'_>,
    spatial: &[usize],
    kernel: Option<&[usize]>,
) -> OnnxResult<WindowNd> {
    let n = spatial.len();
    let list = |name: &str, default: usize| -> OnnxResult<Vec<usize>> {
        match node.ints(name) {
            None => Ok(vec![default; n]),
            Some(v) if v.len() == n => small_uints(node, name, v),
            Some(v) => Err(node.unsupported(format!("`{name}` {v:?}: expected {n} values"))),
        }
    };
    let kernel = match (node.ints("kernel_shape"), kernel) {
        (Some(_), _) | (None, None) => list("kernel_shape", 0)?,
        (None, Some(k)) => k.to_vec(),
    };
    if kernel.contains(&0) {
        return Err(node.malformed("no kernel_shape"));
    }
    let stride = list("strides", 1)?;
    let dilation = list("dilations", 1)?;
    if stride.contains(&0) || dilation.contains(&0) {
        return Err(node.malformed("strides and dilations must be positive"));
    }
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let padding = match auto_pad.as_str() {
        "NOTSET" | "" => match node.ints("pads") {
            None => vec![0; n],
            Some(p) => {
                let p = small_uints(node, "pads", p)?;
                if p.len() != 2 * n || p[..n] != p[n..] {
                    return Err(node.unsupported(format!(
                        "pads {p:?} (only symmetric padding, {} values)",
                        2 * n
                    )));
                }
                p[..n].to_vec()
            }
        },
        "VALID" => vec![0; n],
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut pads = vec![0; n];
            for i in 0..n {
                let out = spatial[i].div_ceil(stride[i]);
                let span = (kernel[i] - 1) * dilation[i] + 1;
                let total = ((out.saturating_sub(1)) * stride[i] + span).saturating_sub(spatial[i]);
                if total % 2 == 1 {
                    return Err(node.unsupported("auto_pad needing asymmetric padding"));
                }
                pads[i] = total / 2;
            }
            pads
        }
        other => return Err(node.malformed(format!("auto_pad = {other}"))),
    };
    Ok(WindowNd { kernel, stride, padding, dilation })
}

/// `Conv` over NCHW input with weight (and bias) parameters.
pub(crate) fn conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x_fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    match x_fact.rank() {
        3 => return conv1d(ctx, node, &x_fact),
        4 => {}
        5 => return super::conv3d::conv3d(ctx, node, &x_fact),
        _ => {
            return Err(node.unsupported(format!("input {x_fact}: only 1-D to 3-D convolutions")));
        }
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
    let out = ctx.emit_with_params(node, Op::Conv2d(op), &[x], &params)?[0];
    let fact = ctx.graph.fact(out).cloned().expect("emitted");
    one(Value::wire(out, fact))
}

/// A 1-D `Conv` (`[N, C, L]`, weight `[C', C / groups, k]`) as the IR's 2-D one over
/// `[N, C, 1, L]` with a `1 x k` kernel; the weight is the same values seen as
/// `[C', C / groups, 1, k]`.
fn conv1d(ctx: &mut Ctx<'_>, node: &Node<'_>, x_fact: &TensorFact) -> OnnxResult<Outputs> {
    let weight = param_name(ctx, node, 1, "weight")?;
    let w_fact = ctx.param_fact(&weight).cloned().expect("checked parameter");
    let &[out_channels, per_group, k] = &w_fact.shape[..] else {
        return Err(
            node.shape_error(format!("weight {w_fact} of a 1-D convolution must have rank 3"))
        );
    };
    let bias = node.input(2).map(|_| param_name(ctx, node, 2, "bias")).transpose()?;
    let w = window_nd(node, &x_fact.shape[2..], Some(&[k]))?;
    let groups = usize::try_from(node.int("group", 1)?).map_err(|_| node.malformed("bad group"))?;
    let op = Conv2d {
        out_channels,
        kernel: [1, w.kernel[0]],
        stride: [1, w.stride[0]],
        padding: [0, w.padding[0]],
        dilation: [1, w.dilation[0]],
        groups,
        bias: bias.is_some(),
    };
    let as_2d = format!("{weight}/as_2d");
    let fact = TensorFact::new(w_fact.dtype, vec![out_channels, per_group, 1, k]);
    ctx.declare_derived_param(&as_2d, fact, ParamSource::Tensor(weight));
    let (n, c, len) = (x_fact.shape[0], x_fact.shape[1], x_fact.shape[2]);
    let x = ctx.wire(node, 0)?;
    let x2 =
        ctx.emit(&format!("{}/as_2d", node.name), reshape_op(&[n, c, 1, len]), &[x], Vec::new())?
            [0];
    let params: Vec<String> = std::iter::once(as_2d).chain(bias).collect();
    let y2 = ctx.emit_with_params(node, Op::Conv2d(op), &[x2], &params)?[0];
    let y2_fact = ctx.graph.fact(y2).cloned().expect("emitted");
    let out = [n, out_channels, y2_fact.shape[3]];
    one(ctx.emit_value(&format!("{}/as_1d", node.name), reshape_op(&out), &[y2])?)
}

/// `ConvTranspose` (1-D or 2-D) with weight `[C, out / groups, k...]` (and bias) parameters:
/// `pads` (symmetric), `output_padding`, or an `output_shape` or `auto_pad` whose total
/// padding splits evenly. A 1-D one is the IR's 2-D one over a unit height (as `Conv`).
pub(crate) fn conv_transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x_fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    let dims = x_fact.rank().saturating_sub(2);
    if !(1..=3).contains(&dims) {
        return Err(
            node.unsupported(format!("input {x_fact}: only 1-D to 3-D transposed convolutions"))
        );
    }
    let weight = param_name(ctx, node, 1, "weight")?;
    let w_fact = ctx.param_fact(&weight).cloned().expect("checked parameter");
    if w_fact.rank() != dims + 2 {
        return Err(node.shape_error(format!("weight {w_fact} must have rank {}", dims + 2)));
    }
    let per_group = w_fact.shape[1];
    let bias = node.input(2).map(|_| param_name(ctx, node, 2, "bias")).transpose()?;
    let groups = usize::try_from(node.int("group", 1)?).map_err(|_| node.malformed("bad group"))?;
    let spatial = &x_fact.shape[2..];
    let mut output_padding = match node.ints("output_padding") {
        None => vec![0; dims],
        Some(v) if v.len() == dims => small_uints(node, "output_padding", v)?,
        Some(v) => {
            return Err(node.unsupported(format!("`output_padding` {v:?}: expected {dims} values")));
        }
    };
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let w = window_nd(node, spatial, Some(&w_fact.shape[2..]))?;
    // The output before any padding is taken off.
    let fulls: Vec<usize> = (0..dims)
        .map(|i| {
            (spatial[i].max(1) - 1) * w.stride[i]
                + w.dilation[i] * (w.kernel[i] - 1)
                + 1
                + output_padding[i]
        })
        .collect();
    // Asked for an output size (`output_shape`, or a SAME auto_pad's `input * stride`), the
    // padding taken off each end follows from it (ONNX's reference: SAME_UPPER takes the
    // smaller half off the start; with neither, the output is cut or extended at the end). A
    // negative padding extends the output, with zeros and the bias, as `output_padding` does.
    let same = matches!(auto_pad.as_str(), "SAME_UPPER" | "SAME_LOWER");
    let target = match (node.ints("output_shape"), same) {
        (Some(shape), _) => Some(small_uints(node, "output_shape", shape)?),
        (None, true) => Some((0..dims).map(|i| spatial[i] * w.stride[i]).collect()),
        (None, false) => None,
    };
    let (mut padding, mut crops) = (w.padding.clone(), vec![(0, 0); dims]);
    match target {
        None => {}
        Some(out) if out.len() == dims => {
            for (i, &size) in out.iter().enumerate() {
                let total = fulls[i] as i64 - size as i64;
                let (begin, end) = match auto_pad.as_str() {
                    "SAME_UPPER" => (total.div_euclid(2), total - total.div_euclid(2)),
                    "SAME_LOWER" => (total - total.div_euclid(2), total.div_euclid(2)),
                    _ => (0, total),
                };
                if begin < 0 {
                    return Err(node.unsupported(format!(
                        "output size {size} extends the output before its start"
                    )));
                }
                // The kernel takes off the smaller padding at both ends; a slice the rest.
                let both = begin.min(end).max(0);
                padding[i] = both as usize;
                if end < 0 {
                    output_padding[i] += (-end) as usize;
                }
                crops[i] = ((begin - both) as usize, (end - both).max(0) as usize);
            }
        }
        Some(other) => return Err(node.shape_error(format!("output_shape {other:?}"))),
    }
    let x = ctx.wire(node, 0)?;
    let y = if dims == 3 {
        let depth_crop = crops[0];
        let spec = super::conv3d::Transposed3d {
            weight,
            bias,
            groups,
            window: w,
            padding,
            output_padding,
            depth_crop,
        };
        super::conv3d::conv_transpose3d(ctx, node, x, &x_fact, spec)?
    } else {
        // A 1-D window becomes a 2-D one with a unit first dim.
        let lift = |v: &[usize], unit: usize| -> [usize; 2] {
            if dims == 1 { [unit, v[0]] } else { [v[0], v[1]] }
        };
        let op = ConvTranspose2d {
            out_channels: per_group * groups,
            kernel: lift(&w.kernel, 1),
            stride: lift(&w.stride, 1),
            padding: lift(&padding, 0),
            output_padding: lift(&output_padding, 0),
            dilation: lift(&w.dilation, 1),
            groups,
            bias: bias.is_some(),
        };
        if dims == 2 {
            let params: Vec<String> = std::iter::once(weight).chain(bias).collect();
            ctx.emit_with_params(node, Op::ConvTranspose2d(op), &[x], &params)?[0]
        } else {
            conv_transpose_1d(ctx, node, (op, x, &x_fact, weight, bias))?
        }
    };
    // What the padding left to take off one end.
    let mut y = y;
    for (i, &(begin, end)) in crops.iter().enumerate().filter(|(_, c)| **c != (0, 0)) {
        let len = ctx.graph.fact(y).expect("emitted").shape[2 + i] as i64;
        let slice =
            Op::Slice { axis: 2 + i as i64, start: begin as i64, end: len - end as i64, step: 1 };
        y = ctx.emit_part(node, &format!("crop{i}"), slice, &[y])?;
    }
    let fact = ctx.graph.fact(y).cloned().expect("emitted");
    one(Value::wire(y, fact))
}

/// A 1-D transposed convolution as a 2-D one over a unit height: the input and weight get a
/// dimension of 1, the output loses it.
fn conv_transpose_1d(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    (op, x, x_fact, weight, bias): (ConvTranspose2d, OutletId, &TensorFact, String, Option<String>),
) -> OnnxResult<OutletId> {
    let w_fact = ctx.param_fact(&weight).cloned().expect("checked parameter");
    let as_2d = format!("{weight}/as_2d");
    let mut shape_2d = w_fact.shape.clone();
    shape_2d.insert(2, 1);
    ctx.declare_derived_param(
        &as_2d,
        TensorFact::new(w_fact.dtype, shape_2d),
        ParamSource::Tensor(weight),
    );
    let params: Vec<String> = std::iter::once(as_2d).chain(bias).collect();
    let (n, c, len) = (x_fact.shape[0], x_fact.shape[1], x_fact.shape[2]);
    let x2 =
        ctx.emit(&format!("{}/as_2d", node.name), reshape_op(&[n, c, 1, len]), &[x], Vec::new())?
            [0];
    let y2 = ctx.emit_with_params(node, Op::ConvTranspose2d(op), &[x2], &params)?[0];
    let y_fact = ctx.graph.fact(y2).cloned().expect("emitted");
    let out = [n, y_fact.shape[1], y_fact.shape[3]];
    Ok(ctx.emit(&format!("{}/as_1d", node.name), reshape_op(&out), &[y2], Vec::new())?[0])
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
