//! `Resize` (opset 11 and later, and `Upsample`) as one constant interpolation matrix per resized axis: the
//! modes are separable, so each axis's output is a weighted sum of its input positions, the
//! weights computed at import the way onnx's reference computes them (every coordinate
//! transformation, nearest with its rounding modes, linear and cubic, antialiasing, excluded
//! outside taps; `tf_crop_and_resize`'s extrapolated positions add a constant). An axis is
//! then a `MatMul` by the matrix, with transposes around it unless it is one of the last two.

use ordo_ir::{Op, OutletId};

use super::common::Outputs;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::synth;
use crate::tensor::{ConstData, ConstTensor, code};
use crate::value::Value;

/// How an output coordinate maps to an input one, and the taps around it.
struct Sampling {
    mode: String,
    nearest: String,
    transform: String,
    cubic_a: f64,
    antialias: bool,
    exclude_outside: bool,
    extrapolation: f64,
}

impl Sampling {
    /// The taps' weights for the fractional position `ratio` (in `(0, 1]`) at `scale`.
    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        let a = self.cubic_a;
        match (self.mode.as_str(), self.antialias) {
            ("nearest", _) => {
                if ratio.fract() == 0.0 {
                    return vec![0.0, 1.0];
                }
                let up = match self.nearest.as_str() {
                    "round_prefer_ceil" => ratio >= 0.5,
                    "floor" => false,
                    "ceil" => true,
                    _ => ratio > 0.5,
                };
                vec![f64::from(u8::from(!up)), f64::from(u8::from(up))]
            }
            ("linear", false) => vec![1.0 - ratio, ratio],
            ("linear", true) => {
                let s = scale.min(1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                let taps: Vec<f64> = (start..start + 2 - 2 * start)
                    .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
                    .collect();
                normalized(taps)
            }
            (_, false) => {
                let r = ratio;
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                    ((a * (2.0 - r) - 5.0 * a) * (2.0 - r) + 8.0 * a) * (2.0 - r) - 4.0 * a,
                ]
            }
            (_, true) => {
                let s = scale.min(1.0);
                let start = (-2.0 / s).floor() as i64 + 1;
                let cubic = |x: f64| {
                    let x = x.abs();
                    if x <= 1.0 {
                        (a + 2.0) * x.powi(3) - (a + 3.0) * x * x + 1.0
                    } else if x < 2.0 {
                        a * x.powi(3) - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                normalized((start..2 - start).map(|i| cubic(s * (i as f64 - ratio))).collect())
            }
        }
    }

    /// The `[out, in]` weights of one axis and, for `tf_crop_and_resize`, which outputs take
    /// the extrapolation value instead.
    fn matrix(
        &self,
        input: usize,
        output: usize,
        scale: f64,
        roi: (f64, f64),
    ) -> (Vec<f64>, Vec<bool>) {
        let (n_in, out_w) = (input as f64, scale * input as f64);
        let mut weights = vec![0.0; output * input];
        let mut extrapolated = vec![false; output];
        for y in 0..output {
            let yf = y as f64;
            let x = match self.transform.as_str() {
                "align_corners" if out_w == 1.0 => 0.0,
                "align_corners" => yf * (n_in - 1.0) / (out_w - 1.0),
                "asymmetric" => yf / scale,
                "tf_crop_and_resize" => {
                    let span = (roi.1 - roi.0) * (n_in - 1.0);
                    let x = if out_w == 1.0 { span / 2.0 } else { yf * span / (out_w - 1.0) };
                    x + roi.0 * (n_in - 1.0)
                }
                "pytorch_half_pixel" if out_w == 1.0 => -0.5,
                "half_pixel_symmetric" => {
                    let offset = n_in / 2.0 * (1.0 - output as f64 / out_w);
                    offset + (yf + 0.5) / scale - 0.5
                }
                _ => (yf + 0.5) / scale - 0.5,
            };
            if self.transform == "tf_crop_and_resize" && (x < 0.0 || x > n_in - 1.0) {
                extrapolated[y] = true;
                continue;
            }
            let ratio = if x == x.floor() { 1.0 } else { x - x.floor() };
            let mut coeffs = self.coeffs(ratio, scale);
            let n = coeffs.len() as i64;
            // The n taps nearest to x in edge-padded coordinates, ties to the smaller index.
            let pad = (n + 1) / 2;
            let padded = x + pad as f64;
            let p = padded.floor() as i64;
            let frac = padded - p as f64;
            let offset = if n % 2 == 0 {
                if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
            } else if frac <= 0.5 {
                -((n - 1) / 2)
            } else {
                -((n - 1) / 2) + 1
            };
            let first = p + offset - pad;
            if self.exclude_outside {
                for (k, c) in coeffs.iter_mut().enumerate() {
                    let i = first + k as i64;
                    if i < 0 || i >= input as i64 {
                        *c = 0.0;
                    }
                }
                let sum: f64 = coeffs.iter().sum();
                let sum = if sum == 0.0 { 1.0 } else { sum };
                coeffs.iter_mut().for_each(|c| *c /= sum);
            }
            for (k, c) in coeffs.iter().enumerate() {
                let i = (first + k as i64).clamp(0, input as i64 - 1) as usize;
                weights[y * input + i] += c;
            }
        }
        (weights, extrapolated)
    }
}

fn normalized(taps: Vec<f64>) -> Vec<f64> {
    let sum: f64 = taps.iter().sum();
    taps.into_iter().map(|t| t / sum).collect()
}

/// `Upsample` (opsets 7 to 9, then renamed `Resize`): a `Resize` by its scales (an attribute
/// before opset 9, a constant input from 9) with asymmetric coordinates, nearest rounding
/// down, as onnx's reference computes it.
pub(crate) fn upsample(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let scales = if node.opset < 9 {
        node.floats("scales").ok_or_else(|| node.malformed("attribute `scales` is missing"))?
    } else {
        let c = ctx.const_input(node, 1, "the scales")?;
        c.to_f64s().ok_or_else(|| node.malformed("too many scales"))?
    };
    if scales.iter().any(|&s| !(s.is_finite() && s > 0.0)) {
        return Err(node.malformed(format!("scales {scales:?}: each must be positive")));
    }
    let mode = node.choice("mode", "nearest", &[("nearest", "nearest"), ("linear", "linear")])?;
    let scales_name = format!("{}/scales", node.name);
    let c = ConstTensor {
        elem: code::FLOAT,
        shape: vec![scales.len()],
        data: ConstData::Float(scales),
    };
    ctx.set(&scales_name, Value::constant(c));
    let attributes = vec![
        synth::string("mode", mode),
        synth::string("coordinate_transformation_mode", "asymmetric"),
        synth::string("nearest_mode", "floor"),
    ];
    let inputs = [node.required_input(0)?, "", &scales_name];
    let output = node.proto.output.first().map_or("", String::as_str);
    let proto = synth::node("Resize", &node.name, &inputs, output, attributes);
    resize(ctx, &Node { proto: &proto, name: node.name.clone(), opset: node.opset.max(11) })
}

/// `Resize` of a float tensor with constant scales or sizes (and roi).
pub(crate) fn resize(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    if node.opset < 11 {
        return Err(node.unsupported("Resize before opset 11"));
    }
    let mut x = ctx.wire(node, 0)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    if !fact.dtype.is_float() {
        return Err(node.unsupported(format!("input {fact}: the IR interpolates floats")));
    }
    let rank = fact.rank();
    let given = |i: usize| node.input(i).is_some();
    let list = |ctx: &Ctx<'_>, i: usize, what: &str| -> OnnxResult<Option<Vec<f64>>> {
        if !given(i) {
            return Ok(None);
        }
        let c = ctx.const_input(node, i, what)?;
        Ok(c.to_f64s().filter(|v| !v.is_empty()))
    };
    let axes: Vec<usize> = match node.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&d| super::common::resolve_axis(node, d, rank))
            .collect::<OnnxResult<_>>()?,
        None => (0..rank).collect(),
    };
    let roi_list = list(ctx, 1, "the roi")?;
    let scales = list(ctx, 2, "the scales")?;
    let sizes = list(ctx, 3, "the sizes")?;
    // Per axis of the input: the scale, the output size and the roi.
    let mut scale = vec![1.0; rank];
    let mut out = fact.shape.clone();
    match (scales, sizes) {
        (_, Some(sizes)) => {
            if sizes.len() != axes.len() {
                return Err(node.shape_error(format!("sizes {sizes:?} for axes {axes:?}")));
            }
            for (&a, &s) in axes.iter().zip(&sizes) {
                scale[a] = s / fact.shape[a] as f64;
                out[a] = s as usize;
            }
            let policy = node.string("keep_aspect_ratio_policy", "stretch")?;
            if policy != "stretch" {
                let picked = axes.iter().map(|&a| scale[a]);
                let s = if policy == "not_larger" {
                    picked.fold(f64::INFINITY, f64::min)
                } else {
                    picked.fold(0.0, f64::max)
                };
                for &a in &axes {
                    scale[a] = s;
                    out[a] = (s * fact.shape[a] as f64 + 0.5) as usize;
                }
            }
        }
        (Some(scales), None) => {
            if scales.len() != axes.len() || scales.iter().any(|&s| !(s > 0.0 && s.is_finite())) {
                return Err(node.shape_error(format!("scales {scales:?} for axes {axes:?}")));
            }
            for (&a, &s) in axes.iter().zip(&scales) {
                scale[a] = s;
                out[a] = (s * fact.shape[a] as f64) as usize;
            }
        }
        (None, None) => return Err(node.malformed("neither scales nor sizes")),
    }
    let roi = |a: usize| -> (f64, f64) {
        match &roi_list {
            Some(r) if r.len() == 2 * axes.len() => {
                let k = axes.iter().position(|&b| b == a).unwrap_or(0);
                (r[k], r[axes.len() + k])
            }
            Some(r) if r.len() == 2 * rank => (r[a], r[rank + a]),
            _ => (0.0, 1.0),
        }
    };
    let sampling = Sampling {
        mode: node.string("mode", "nearest")?,
        nearest: node.string("nearest_mode", "round_prefer_floor")?,
        transform: node.string("coordinate_transformation_mode", "half_pixel")?,
        cubic_a: node.float("cubic_coeff_a", -0.75)?,
        antialias: node.int("antialias", 0)? != 0,
        exclude_outside: node.int("exclude_outside", 0)? != 0,
        extrapolation: node.float("extrapolation_value", 0.0)?,
    };
    if !["nearest", "linear", "cubic"].contains(&sampling.mode.as_str()) {
        return Err(node.malformed(format!("mode `{}`", sampling.mode)));
    }
    let transforms = [
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
    ];
    if !transforms.contains(&sampling.transform.as_str()) {
        return Err(
            node.malformed(format!("coordinate_transformation_mode `{}`", sampling.transform))
        );
    }
    let changed: Vec<usize> = (0..rank)
        .filter(|&a| {
            out[a] != fact.shape[a] || (scale[a] - 1.0).abs() > 1e-12 || roi(a) != (0.0, 1.0)
        })
        .collect();
    if out.contains(&0) {
        return Err(node.shape_error(format!("output of shape {out:?}")));
    }
    for (k, &a) in changed.iter().enumerate() {
        let last = k + 1 == changed.len();
        let input = ctx.graph.fact(x).expect("emitted").shape[a];
        let (weights, extrapolated) = sampling.matrix(input, out[a], scale[a], roi(a));
        x = apply_along(
            ctx,
            node,
            x,
            a,
            out[a],
            input,
            weights,
            last && !extrapolated.contains(&true),
        )?;
        if extrapolated.contains(&true) {
            let mut shape = vec![1; rank];
            shape[a] = out[a];
            let bias: Vec<f64> = extrapolated
                .iter()
                .map(|&e| if e { sampling.extrapolation } else { 0.0 })
                .collect();
            let c = ConstTensor { elem: code::FLOAT, shape, data: ConstData::Float(bias) };
            let b = ctx.buffer(node, &format!("{}.extrapolation{a}", node.name), &c)?;
            let name =
                if last { node.name.clone() } else { format!("{}.extrapolated{a}", node.name) };
            x = ctx.emit(&name, Op::Add, &[x, b], Vec::new())?[0];
        }
    }
    Ok(vec![Some(Value::wire(x, ctx.graph.fact(x).cloned().expect("emitted")))])
}

/// `x` with axis `a` (of size `input`) mapped through the `[output, input]` weights.
#[allow(clippy::too_many_arguments)]
fn apply_along(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: OutletId,
    a: usize,
    output: usize,
    input: usize,
    weights: Vec<f64>,
    named: bool,
) -> OnnxResult<OutletId> {
    let rank = ctx.graph.fact(x).expect("emitted").rank();
    let part = |p: &str| format!("{}.{p}{a}", node.name);
    let final_name = if named { node.name.clone() } else { part("resized") };
    if a + 2 == rank {
        // Rows: W [out, in] times x [..., in, w].
        let c = ConstTensor {
            elem: code::FLOAT,
            shape: vec![output, input],
            data: ConstData::Float(weights),
        };
        let w = ctx.buffer(node, &part("weights"), &c)?;
        return Ok(ctx.emit(&final_name, Op::MatMul, &[w, x], Vec::new())?[0]);
    }
    // The axis moved last (if it is not), x [..., in] times W^T [in, out], moved back.
    let mut transposed = vec![0.0; weights.len()];
    for o in 0..output {
        for i in 0..input {
            transposed[i * output + o] = weights[o * input + i];
        }
    }
    let c = ConstTensor {
        elem: code::FLOAT,
        shape: vec![input, output],
        data: ConstData::Float(transposed),
    };
    let w = ctx.buffer(node, &part("weights_t"), &c)?;
    if a + 1 == rank {
        return Ok(ctx.emit(&final_name, Op::MatMul, &[x, w], Vec::new())?[0]);
    }
    let mut perm: Vec<usize> = (0..rank).filter(|&d| d != a).collect();
    perm.push(a);
    let mut back = vec![0; rank];
    for (i, &d) in perm.iter().enumerate() {
        back[d] = i;
    }
    let moved = ctx.emit(&part("moved"), Op::Transpose { perm }, &[x], Vec::new())?[0];
    let mapped = ctx.emit(&part("mapped"), Op::MatMul, &[moved, w], Vec::new())?[0];
    Ok(ctx.emit(&final_name, Op::Transpose { perm: back }, &[mapped], Vec::new())?[0])
}
