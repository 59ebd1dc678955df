//! 3-D `Conv` (`[N, C, D, H, W]`, weight `[C', C / groups, kD, kH, kW]`) as the IR's 2-D
//! convolutions, one per tap of the kernel's depth: output frame `d` is the sum over taps `t`
//! of a 2-D convolution of input frame `d * stride + t * dilation` (after the depth padding)
//! by the weight's slice `t`. The frames a tap reads are one strided slice of the input with
//! the depth moved next to the batch, folded into the batch, so each tap is a single `Conv2d`
//! over `N * D'` images; the weight slices are parameters of their own, cut from the ONNX
//! weight ([`ParamSource::Tap`]), trained together exactly as the whole weight would be (each
//! element of the weight is in one slice).
//!
//! A 3-D `ConvTranspose` is the same in reverse: each tap is a 2-D transposed convolution of
//! every input frame, whose results land on frames `d * stride + t * dilation` of the output
//! (spread apart by the stride and shifted by the tap with `Pad`), summed, then cut by the
//! depth padding.

use ordo_ir::op::{Conv2d, ConvTranspose2d, PadMode};
use ordo_ir::{Op, OutletId, TensorFact};

use super::common::{Outputs, one, reshape_op};
use super::conv::{WindowNd, param_name, window_nd};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor_io::ParamSource;

/// `Conv` of a 5-D input.
pub(crate) fn conv3d(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x_fact: &TensorFact,
) -> OnnxResult<Outputs> {
    let weight = param_name(ctx, node, 1, "weight")?;
    let w_fact = ctx.param_fact(&weight).cloned().expect("checked parameter");
    let &[out_channels, _, depth, kh, kw] = &w_fact.shape[..] else {
        return Err(
            node.shape_error(format!("weight {w_fact} of a 3-D convolution must have rank 5"))
        );
    };
    let bias = node.input(2).map(|_| param_name(ctx, node, 2, "bias")).transpose()?;
    let w = window_nd(node, &x_fact.shape[2..], Some(&w_fact.shape[2..]))?;
    let groups = usize::try_from(node.int("group", 1)?).map_err(|_| node.malformed("bad group"))?;
    let &[n, c, d, h, width] = &x_fact.shape[..] else { unreachable!("a 5-D input") };
    let (pad, stride, dilation) = (w.padding[0], w.stride[0], w.dilation[0]);
    let span = dilation * (depth - 1) + 1;
    let padded = d + 2 * pad;
    if padded < span {
        return Err(node.shape_error(format!(
            "the kernel spans {span} frames, the input has {padded} (padding included)"
        )));
    }
    let frames = (padded - span) / stride + 1;
    let mut x = ctx.wire(node, 0)?;
    if pad > 0 {
        let (p, z) = (pad as i64, 0);
        let op = Op::Pad {
            pads: vec![z, z, p, z, z, z, z, p, z, z],
            mode: PadMode::Constant,
            value: 0.0,
        };
        x = ctx.emit_part(node, "pad_depth", op, &[x])?;
    }
    // [N, D, C, H, W]: a tap's frames are one slice of dim 1, folded into the batch.
    x = ctx.emit_part(node, "depth_first", swap_channels_and_depth(), &[x])?;
    let conv = Conv2d {
        out_channels,
        kernel: [kh, kw],
        stride: [w.stride[1], w.stride[2]],
        padding: [w.padding[1], w.padding[2]],
        dilation: [w.dilation[1], w.dilation[2]],
        groups,
        bias: false,
    };
    let mut sum: Option<OutletId> = None;
    for t in 0..depth {
        let start = (t * dilation) as i64;
        let end = start + ((frames - 1) * stride + 1) as i64;
        let slice = Op::Slice { axis: 1, start, end, step: stride as i64 };
        let taken = ctx.emit_part(node, &format!("tap{t}.frames"), slice, &[x])?;
        let folded = ctx.emit_part(
            node,
            &format!("tap{t}.fold"),
            reshape_op(&[n * frames, c, h, width]),
            &[taken],
        )?;
        // The bias is added once, by the first tap.
        let mut params = vec![tap_weight(ctx, &weight, &w_fact, t)];
        let mut op = conv.clone();
        if let (0, Some(b)) = (t, &bias) {
            op.bias = true;
            params.push(b.clone());
        }
        let y = ctx.emit_with_params(&tap_node(node, t), Op::Conv2d(op), &[folded], &params)?[0];
        sum = Some(add_tap(ctx, node, t, sum, y)?);
    }
    let y = sum.expect("a kernel of depth at least 1");
    let y_fact = ctx.graph.fact(y).cloned().expect("emitted");
    let (oh, ow) = (y_fact.shape[2], y_fact.shape[3]);
    let y = ctx.emit_part(node, "unfold", reshape_op(&[n, frames, out_channels, oh, ow]), &[y])?;
    let y = ctx.emit_part(node, "channels_first", swap_channels_and_depth(), &[y])?;
    one(ctx.wire_value(y))
}

/// What `ConvTranspose` read for a 3-D one: the padding and output padding per spatial dim,
/// depth first, as it works them out for any rank, and the crop it takes off the depth.
pub(crate) struct Transposed3d {
    /// The weight `[C, C' / groups, kD, kH, kW]`, by ONNX name.
    pub weight: String,
    /// The bias, by ONNX name.
    pub bias: Option<String>,
    /// Channel groups.
    pub groups: usize,
    /// Kernel, strides, dilations.
    pub window: WindowNd,
    /// Taken off both ends of each dim.
    pub padding: Vec<usize>,
    /// Added at the end of each dim.
    pub output_padding: Vec<usize>,
    /// What the caller takes off the start and end of the depth after the padding.
    pub depth_crop: (usize, usize),
}

/// `ConvTranspose` of the 5-D input `x`, the padding taken off, the bias added; the caller
/// takes off the crops, as it does for 1-D and 2-D ones.
pub(crate) fn conv_transpose3d(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: OutletId,
    x_fact: &TensorFact,
    spec: Transposed3d,
) -> OnnxResult<OutletId> {
    let w_fact = ctx.param_fact(&spec.weight).cloned().expect("checked parameter");
    let &[_, per_group, depth, kh, kw] = &w_fact.shape[..] else { unreachable!("rank 5") };
    let &[n, c, d, h, width] = &x_fact.shape[..] else { unreachable!("a 5-D input") };
    let out_channels = per_group * spec.groups;
    let win = &spec.window;
    let (stride, dilation) = (win.stride[0], win.dilation[0]);
    let conv = ConvTranspose2d {
        out_channels,
        kernel: [kh, kw],
        stride: [win.stride[1], win.stride[2]],
        padding: [spec.padding[1], spec.padding[2]],
        output_padding: [spec.output_padding[1], spec.output_padding[2]],
        dilation: [win.dilation[1], win.dilation[2]],
        groups: spec.groups,
        bias: false,
    };
    let x = ctx.emit_part(node, "depth_first", swap_channels_and_depth(), &[x])?;
    let x = ctx.emit_part(node, "fold", reshape_op(&[n * d, c, h, width]), &[x])?;
    // The output's depth before the padding is taken off: the last tap's last frame, plus the
    // output padding.
    let spread = (d - 1) * stride + 1;
    let full = spread + dilation * (depth - 1) + spec.output_padding[0];
    let mut sum: Option<OutletId> = None;
    for t in 0..depth {
        let tap = tap_weight(ctx, &spec.weight, &w_fact, t);
        let op = Op::ConvTranspose2d(conv.clone());
        let y = ctx.emit_with_params(&tap_node(node, t), op, &[x], &[tap])?[0];
        let y_fact = ctx.graph.fact(y).cloned().expect("emitted");
        let (oh, ow) = (y_fact.shape[2], y_fact.shape[3]);
        let mut y = ctx.emit_part(
            node,
            &format!("tap{t}.unfold"),
            reshape_op(&[n, d, out_channels, oh, ow]),
            &[y],
        )?;
        if stride > 1 {
            // Frame i to frame i * stride: each frame followed by stride - 1 of zeros.
            let gaps = reshape_op(&[n, d, 1, out_channels, oh, ow]);
            y = ctx.emit_part(node, &format!("tap{t}.frames"), gaps, &[y])?;
            let mut pads = vec![0; 12];
            pads[6 + 2] = (stride - 1) as i64;
            let pad = Op::Pad { pads, mode: PadMode::Constant, value: 0.0 };
            y = ctx.emit_part(node, &format!("tap{t}.gaps"), pad, &[y])?;
            let joined = reshape_op(&[n, d * stride, out_channels, oh, ow]);
            y = ctx.emit_part(node, &format!("tap{t}.spread"), joined, &[y])?;
            let cut = Op::Slice { axis: 1, start: 0, end: spread as i64, step: 1 };
            y = ctx.emit_part(node, &format!("tap{t}.cut"), cut, &[y])?;
        }
        // Shifted to start at frame t * dilation, and as long as the output.
        let before = t * dilation;
        let mut pads = vec![0; 10];
        pads[1] = before as i64;
        pads[5 + 1] = (full - spread - before) as i64;
        let shift = Op::Pad { pads, mode: PadMode::Constant, value: 0.0 };
        y = ctx.emit_part(node, &format!("tap{t}.shift"), shift, &[y])?;
        sum = Some(add_tap(ctx, node, t, sum, y)?);
    }
    let mut y = sum.expect("a kernel of depth at least 1");
    let pad = spec.padding[0];
    let taken = 2 * pad + spec.depth_crop.0 + spec.depth_crop.1;
    if taken >= full {
        return Err(
            node.shape_error(format!("the padding takes {taken} of the output's {full} frames"))
        );
    }
    if pad > 0 {
        let cut = Op::Slice { axis: 1, start: pad as i64, end: (full - pad) as i64, step: 1 };
        y = ctx.emit_part(node, "unpad_depth", cut, &[y])?;
    }
    y = ctx.emit_part(node, "channels_first", swap_channels_and_depth(), &[y])?;
    if spec.bias.is_some() {
        let b = ctx.wire(node, 2)?;
        let b = ctx.emit_part(node, "bias_shape", reshape_op(&[1, out_channels, 1, 1, 1]), &[b])?;
        y = ctx.emit_part(node, "bias", Op::Add, &[y, b])?;
    }
    Ok(y)
}

/// Declares slice `t` of a 3-D convolution weight's depth (dim 2) as a parameter of its own;
/// returns its name.
fn tap_weight(ctx: &mut Ctx<'_>, weight: &str, w_fact: &TensorFact, t: usize) -> String {
    let tap = format!("{weight}/tap{t}");
    let mut shape = w_fact.shape.clone();
    shape.remove(2);
    let source = ParamSource::Tap { tensor: weight.to_string(), axis: 2, index: t };
    ctx.declare_derived_param(&tap, TensorFact::new(w_fact.dtype, shape), source);
    tap
}

/// The node as tap `t`'s 2-D (transposed) convolution is named.
fn tap_node<'a>(node: &Node<'a>, t: usize) -> Node<'a> {
    Node { proto: node.proto, name: format!("{}/tap{t}", node.name), opset: node.opset }
}

/// Tap `t`'s result `y` added to the sum of the taps before it.
fn add_tap(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    t: usize,
    sum: Option<OutletId>,
    y: OutletId,
) -> OnnxResult<OutletId> {
    match sum {
        None => Ok(y),
        Some(s) => ctx.emit_part(node, &format!("tap{t}.sum"), Op::Add, &[s, y]),
    }
}

/// `[N, C, D, H, W]` to `[N, D, C, H, W]` and back.
fn swap_channels_and_depth() -> Op {
    Op::Transpose { perm: vec![0, 2, 1, 3, 4] }
}
