//! Shape rules of the generic operators with spatial or product structure: convolutions and
//! pools of any rank, products (`MatMul`, `Gemm`, `Einsum`), recurrent layers, resizing and
//! sampling; and their FLOPs.

use std::collections::BTreeMap;

use ordo_ir::op::broadcast_shapes;
use ordo_ir::{DType, TensorFact};

use super::In;
use super::rules::const_ints;
use crate::error::OnnxResult;
use crate::node::Node;

fn fact<'a>(node: &Node<'_>, ins: &'a [Option<In>], i: usize) -> OnnxResult<&'a TensorFact> {
    ins.get(i)
        .and_then(Option::as_ref)
        .map(|x| &x.fact)
        .ok_or_else(|| node.malformed(format!("input {i} is missing")))
}

/// An attribute list of `n` integers, or `default` for each.
fn ints_or(node: &Node<'_>, name: &str, n: usize, default: i64) -> Vec<i64> {
    node.ints(name).map_or_else(|| vec![default; n], <[i64]>::to_vec)
}

/// The spatial output sizes of a sliding window over `input` (`[N, C, spatial...]`) with
/// `kernel` sizes, the node's strides, dilations, pads (or `auto_pad`) and `ceil_mode`.
fn windows(node: &Node<'_>, input: &[usize], kernel: &[usize]) -> OnnxResult<Vec<usize>> {
    let n = kernel.len();
    if input.len() != n + 2 {
        return Err(node.malformed(format!("input rank {} for a {n}-d window", input.len())));
    }
    let strides = ints_or(node, "strides", n, 1);
    let dilations = ints_or(node, "dilations", n, 1);
    let pads = ints_or(node, "pads", 2 * n, 0);
    let ceil = node.int("ceil_mode", 0)? != 0;
    let auto_pad = node.string("auto_pad", "NOTSET")?;
    let mut out = Vec::with_capacity(n);
    if strides.len() < n || dilations.len() < n || pads.len() < 2 * n {
        return Err(node.malformed("strides, dilations or pads shorter than the kernel's rank"));
    }
    for i in 0..n {
        // In i128: attributes are any i64 a file holds.
        let (size, stride) = (input[i + 2] as i128, i128::from(strides[i].max(1)));
        let span = (kernel[i] as i128 - 1) * i128::from(dilations[i]) + 1;
        let o = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => (size + stride - 1) / stride,
            "VALID" => (size - span) / stride + 1,
            _ => {
                let padded = size + i128::from(pads[i]) + i128::from(pads[i + n]) - span;
                if ceil { (padded + stride - 1) / stride + 1 } else { padded / stride + 1 }
            }
        };
        if o < 1 || o > i128::from(u32::MAX) {
            return Err(node.shape_error(format!("a window of {span} over {size} gives {o}")));
        }
        out.push(o as usize);
    }
    Ok(out)
}

/// The operators of this file.
pub(super) fn spatial(node: &Node<'_>, ins: &[Option<In>]) -> OnnxResult<Vec<TensorFact>> {
    let x = fact(node, ins, 0)?;
    let one = |dtype: DType, shape: Vec<usize>| Ok(vec![TensorFact::new(dtype, shape)]);
    let at_least = |f: &TensorFact, rank: usize, what: &str| {
        if f.rank() >= rank {
            Ok(())
        } else {
            Err(node.malformed(format!("{what} has rank {}, at least {rank} expected", f.rank())))
        }
    };
    at_least(x, 1, "input 0")?;
    match node.op_type() {
        "Conv" | "ConvInteger" | "DeformConv" | "QLinearConv" => {
            // The weight's input and the output's type: QLinearConv's are its quantized ones.
            let (weight, dtype) = match node.op_type() {
                "ConvInteger" => (1, DType::I32),
                "QLinearConv" => {
                    (3, ins.get(7).and_then(Option::as_ref).map_or(DType::U8, |z| z.fact.dtype))
                }
                _ => (1, x.dtype),
            };
            let w = fact(node, ins, weight)?;
            at_least(w, 2, "the weight")?;
            let spatial = windows(node, &x.shape, &w.shape[2..])?;
            one(dtype, [vec![x.shape[0], w.shape[0]], spatial].concat())
        }
        "Col2Im" => {
            let image = const_ints(node, ins, 1, "image_shape")?;
            let block = const_ints(node, ins, 2, "block_shape")?;
            let cells: usize = block.iter().map(|&b| b.max(1) as usize).product();
            if x.rank() != 3 || x.shape[1] % cells != 0 {
                return Err(node.malformed("expects [N, C * block cells, L]"));
            }
            let spatial = image.iter().map(|&d| d.max(0) as usize);
            one(x.dtype, [x.shape[0], x.shape[1] / cells].into_iter().chain(spatial).collect())
        }
        "ConvTranspose" => {
            let w = fact(node, ins, 1)?;
            at_least(w, 2, "the weight")?;
            if x.rank() != w.rank() {
                return Err(node.malformed("the input and the weight differ in rank"));
            }
            let n = w.rank() - 2;
            let group = node.int("group", 1)?.max(1) as usize;
            let channels = w.shape[1] * group;
            let spatial: Vec<usize> = match node.ints("output_shape") {
                Some(s) => s.iter().map(|&d| d.max(0) as usize).collect(),
                None => {
                    let strides = ints_or(node, "strides", n, 1);
                    let dilations = ints_or(node, "dilations", n, 1);
                    let pads = ints_or(node, "pads", 2 * n, 0);
                    let extra = ints_or(node, "output_padding", n, 0);
                    let same = node.string("auto_pad", "NOTSET")?.starts_with("SAME");
                    if strides.len() < n
                        || dilations.len() < n
                        || pads.len() < 2 * n
                        || extra.len() < n
                    {
                        return Err(
                            node.malformed("strides, dilations, pads or output_padding too short")
                        );
                    }
                    (0..n)
                        .map(|i| {
                            let size = x.shape[i + 2] as i128;
                            let (s, d) = (i128::from(strides[i]), i128::from(dilations[i]));
                            let span = (w.shape[i + 2] as i128 - 1) * d + 1;
                            let o = if same {
                                size * s
                            } else {
                                s * (size - 1) + i128::from(extra[i]) + span
                                    - i128::from(pads[i])
                                    - i128::from(pads[i + n])
                            };
                            o.clamp(0, i128::from(u32::MAX)) as usize
                        })
                        .collect()
                }
            };
            one(x.dtype, [vec![x.shape[0], channels], spatial].concat())
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            let kernel: Vec<usize> = node
                .ints("kernel_shape")
                .ok_or_else(|| node.malformed("no kernel_shape"))?
                .iter()
                .map(|&k| k.max(1) as usize)
                .collect();
            let spatial = windows(node, &x.shape, &kernel)?;
            let shape = [x.shape[..2].to_vec(), spatial].concat();
            Ok(vec![TensorFact::new(x.dtype, shape.clone()), TensorFact::new(DType::I64, shape)])
        }
        "GlobalMaxPool" | "GlobalAveragePool" | "GlobalLpPool" => {
            at_least(x, 2, "input 0")?;
            let mut shape = x.shape.clone();
            shape[2..].iter_mut().for_each(|d| *d = 1);
            one(x.dtype, shape)
        }
        "MaxUnpool" => {
            if ins.get(2).is_some_and(Option::is_some) {
                let shape = const_ints(node, ins, 2, "output_shape")?;
                return one(x.dtype, shape.iter().map(|&d| d.max(0) as usize).collect());
            }
            let kernel =
                node.ints("kernel_shape").ok_or_else(|| node.malformed("no kernel_shape"))?;
            let n = kernel.len();
            let strides = ints_or(node, "strides", n, 1);
            let pads = ints_or(node, "pads", 2 * n, 0);
            if x.rank() != n + 2 || strides.len() != n || pads.len() != 2 * n {
                return Err(node.malformed(format!(
                    "kernel_shape {kernel:?}, strides {strides:?} and pads {pads:?} for an \
                     input {x}"
                )));
            }
            // Saturating: strides, pads and kernel are attributes (the shape check then
            // refuses a size that saturated).
            let spatial = (0..n).map(|i| {
                (x.shape[i + 2] as i64 - 1)
                    .saturating_mul(strides[i])
                    .saturating_add(kernel[i])
                    .saturating_sub(pads[i])
                    .saturating_sub(pads[i + n])
                    .max(0) as usize
            });
            one(x.dtype, x.shape[..2].iter().copied().chain(spatial).collect())
        }
        "MatMul" | "MatMulInteger" | "QLinearMatMul" => {
            let (other, dtype) = match node.op_type() {
                "MatMul" => (1, x.dtype),
                "MatMulInteger" => (1, DType::I32),
                _ => (3, ins.get(7).and_then(Option::as_ref).map_or(DType::U8, |z| z.fact.dtype)),
            };
            let y = fact(node, ins, other)?;
            at_least(y, 1, "the second operand")?;
            one(dtype, matmul_shape(node, &x.shape, &y.shape)?)
        }
        "Gemm" => {
            let y = fact(node, ins, 1)?;
            let ta = node.int("transA", 0)? != 0;
            let tb = node.int("transB", 0)? != 0;
            if x.rank() != 2 || y.rank() != 2 {
                return Err(node.malformed("Gemm multiplies matrices"));
            }
            let m = if ta { x.shape[1] } else { x.shape[0] };
            let n = if tb { y.shape[0] } else { y.shape[1] };
            one(x.dtype, vec![m, n])
        }
        "GridSample" => {
            let grid = fact(node, ins, 1)?;
            at_least(grid, 2, "the grid")?;
            at_least(x, 2, "input 0")?;
            let spatial = grid.shape[1..grid.rank() - 1].to_vec();
            one(x.dtype, [x.shape[..2].to_vec(), spatial].concat())
        }
        "AffineGrid" => {
            let size = const_ints(node, ins, 1, "size")?;
            if size.len() < 3 {
                return Err(node.malformed(format!("size {size:?}: [N, C, spatial...] expected")));
            }
            let spatial: Vec<usize> = size[2..].iter().map(|&d| d.max(0) as usize).collect();
            let rank = spatial.len();
            one(x.dtype, [vec![size[0].max(0) as usize], spatial, vec![rank]].concat())
        }
        "RoiAlign" | "MaxRoiPool" => {
            let rois = fact(node, ins, 1)?;
            at_least(rois, 1, "the regions")?;
            at_least(x, 2, "input 0")?;
            let (h, w) = match node.ints("pooled_shape") {
                Some(p) if p.len() == 2 => (p[0] as usize, p[1] as usize),
                _ => {
                    (node.int("output_height", 1)? as usize, node.int("output_width", 1)? as usize)
                }
            };
            one(x.dtype, vec![rois.shape[0], x.shape[1], h, w])
        }
        "Resize" => {
            if ins.get(3).is_some_and(Option::is_some) {
                let sizes = const_ints(node, ins, 3, "sizes")?;
                return one(x.dtype, resized_to(node, &x.shape, &sizes)?);
            }
            let scales = super::const_of(ins, 2)
                .and_then(|c| c.to_f64s())
                .ok_or_else(|| node.unsupported("scales (input 2) must be a constant"))?;
            let axes = axes_of(node, x.rank(), scales.len())?;
            let mut shape = x.shape.clone();
            for (&a, &s) in axes.iter().zip(&scales) {
                shape[a] = (x.shape[a] as f64 * s).floor() as usize;
            }
            one(x.dtype, shape)
        }
        "CenterCropPad" => {
            let sizes = const_ints(node, ins, 1, "shape")?;
            one(x.dtype, resized_to(node, &x.shape, &sizes)?)
        }
        other => Err(node.unsupported(format!("no shape rule for {other}"))),
    }
}

/// The axes an operator's per-axis list applies to: the `axes` attribute, or all of them.
fn axes_of(node: &Node<'_>, rank: usize, count: usize) -> OnnxResult<Vec<usize>> {
    match node.ints("axes") {
        Some(a) => a.iter().map(|&a| crate::ops::common::resolve_axis(node, a, rank)).collect(),
        None if count == rank => Ok((0..rank).collect()),
        None => Err(node.malformed(format!("{count} sizes for rank {rank}"))),
    }
}

/// `shape` with the sizes `sizes` at the node's axes (`Resize` keeping its aspect ratio is
/// taken as asked: the sizes given).
fn resized_to(node: &Node<'_>, shape: &[usize], sizes: &[i64]) -> OnnxResult<Vec<usize>> {
    let axes = axes_of(node, shape.len(), sizes.len())?;
    let mut out = shape.to_vec();
    for (&a, &s) in axes.iter().zip(sizes) {
        out[a] = s.max(0) as usize;
    }
    Ok(out)
}

/// NumPy's `matmul` shape: 1-D operands promoted and their dimension removed again.
fn matmul_shape(node: &Node<'_>, a: &[usize], b: &[usize]) -> OnnxResult<Vec<usize>> {
    let (a2, b2) = (
        if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() },
        if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() },
    );
    let (ra, rb) = (a2.len(), b2.len());
    if a2[ra - 1] != b2[rb - 2] {
        return Err(node.shape_error(format!("{a:?} x {b:?}: inner dimensions differ")));
    }
    let batch = broadcast_shapes(&a2[..ra - 2], &b2[..rb - 2])
        .ok_or_else(|| node.shape_error(format!("{a:?} x {b:?}: batches do not broadcast")))?;
    let mut shape = batch;
    if a.len() > 1 {
        shape.push(a2[ra - 2]);
    }
    if b.len() > 1 {
        shape.push(b2[rb - 1]);
    }
    Ok(shape)
}

/// `Einsum`'s output shape and its multiply-adds (the product of every index's size), from
/// its `equation` (explicit `->` or implicit: the indices used once, in order; `...`
/// broadcast).
pub(super) fn einsum(node: &Node<'_>, inputs: &[&TensorFact]) -> OnnxResult<(Vec<usize>, u64)> {
    let equation: String =
        node.string("equation", "")?.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (equation.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != inputs.len() {
        return Err(node.malformed(format!(
            "`{equation}` has {} terms for {} inputs",
            terms.len(),
            inputs.len()
        )));
    }
    let mut sizes: BTreeMap<char, usize> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis: Vec<usize> = Vec::new();
    for (term, input) in terms.iter().zip(inputs) {
        let letters: Vec<char> = term.replace("...", "").chars().collect();
        let extra = input
            .rank()
            .checked_sub(letters.len())
            .ok_or_else(|| node.malformed(format!("term `{term}` for rank {}", input.rank())))?;
        let start = term.find("...").map_or(0, |p| term[..p].chars().count());
        if term.contains("...") {
            let dims = &input.shape[start..start + extra];
            ellipsis = broadcast_shapes(&ellipsis, dims).ok_or_else(|| {
                node.shape_error(format!("`...` dimensions {dims:?} do not broadcast"))
            })?;
        }
        for (i, c) in letters.iter().enumerate() {
            let axis = if i < start { i } else { i + extra };
            let size = input.shape[axis];
            match sizes.get(c) {
                Some(&s) if s != size && s != 1 && size != 1 => {
                    return Err(node.shape_error(format!("index `{c}` is {s} and {size}")));
                }
                Some(&s) if s >= size => {}
                _ => {
                    sizes.insert(*c, size);
                }
            }
            *counts.entry(*c).or_default() += 1;
        }
    }
    let output: String = match rhs {
        Some(r) => r,
        None => {
            let once: String = counts.iter().filter(|(_, n)| **n == 1).map(|(c, _)| *c).collect();
            if lhs.contains("...") { format!("...{once}") } else { once }
        }
    };
    let mut shape = Vec::new();
    let mut rest = output.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("...") {
            shape.extend(&ellipsis);
            rest = after;
            continue;
        }
        let c = rest.chars().next().expect("not empty");
        shape.push(
            *sizes
                .get(&c)
                .ok_or_else(|| node.malformed(format!("output index `{c}` is in no input")))?,
        );
        rest = &rest[c.len_utf8()..];
    }
    let products = sizes.values().map(|&s| s as u64).product::<u64>()
        * ellipsis.iter().map(|&d| d as u64).product::<u64>();
    Ok((shape, 2 * products))
}

/// `GRU`, `RNN`, `LSTM`: `Y` `[seq, directions, batch, hidden]` and the last states
/// `[directions, batch, hidden]` (sequence-first; `layout = 1` batch-first).
pub(super) fn recurrent(
    node: &Node<'_>,
    x: &TensorFact,
    w: &TensorFact,
) -> OnnxResult<Vec<TensorFact>> {
    let hidden = node.int("hidden_size", 0)? as usize;
    let directions = w.shape.first().copied().unwrap_or(1);
    if x.rank() != 3 || hidden == 0 {
        return Err(node.malformed("expects a rank-3 input and hidden_size"));
    }
    let batch_first = node.int("layout", 0)? != 0;
    let (seq, batch) =
        if batch_first { (x.shape[1], x.shape[0]) } else { (x.shape[0], x.shape[1]) };
    let y = if batch_first {
        vec![batch, seq, directions, hidden]
    } else {
        vec![seq, directions, batch, hidden]
    };
    let state =
        if batch_first { vec![batch, directions, hidden] } else { vec![directions, batch, hidden] };
    Ok(vec![
        TensorFact::new(x.dtype, y),
        TensorFact::new(x.dtype, state.clone()),
        TensorFact::new(x.dtype, state),
    ])
}

/// The multiply-adds of the product operators, `None` for the others.
pub(super) fn product_flops(
    node: &Node<'_>,
    ins: &[Option<In>],
    outputs: &[TensorFact],
) -> Option<u64> {
    let f = |i: usize| ins.get(i).and_then(Option::as_ref).map(|x| &x.fact);
    let out = outputs.first()?.numel();
    Some(match node.op_type() {
        "Conv" => {
            let w = f(1)?;
            2 * out * w.shape[1..].iter().map(|&d| d as u64).product::<u64>()
        }
        "ConvTranspose" => {
            let (x, w) = (f(0)?, f(1)?);
            2 * x.numel() * w.shape[1..].iter().map(|&d| d as u64).product::<u64>()
        }
        "MatMul" | "MatMulInteger" | "Gemm" => {
            let x = f(0)?;
            let k = if node.op_type() == "Gemm" && node.int("transA", 0).ok()? != 0 {
                x.shape[0]
            } else {
                *x.shape.last()?
            };
            2 * out * k as u64
        }
        "Einsum" => {
            let inputs: Vec<&TensorFact> = ins.iter().flatten().map(|x| &x.fact).collect();
            einsum(node, &inputs).ok()?.1
        }
        "GRU" | "RNN" | "LSTM" => {
            // Per step and sample, every direction's gates: W (input) and R (hidden) products.
            let (x, w, r) = (f(0)?, f(1)?, f(2)?);
            2 * (x.shape[0] * x.shape[1]) as u64 * (w.numel() + r.numel())
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            let kernel: u64 = node.ints("kernel_shape")?.iter().map(|&k| k.max(1) as u64).product();
            out * kernel
        }
        _ => return None,
    })
}
