//! Operators written as a few IR ops: `GlobalMaxPool` (a max over the spatial dims), `IsNaN`
//! and `IsInf` (comparisons), `PRelu` (a `Where`), `LpNormalization` (a division by an L1 or
//! L2 norm), `DepthToSpace` and `SpaceToDepth` (reshapes around a transpose), and `EyeLike`
//! (a constant: its values depend on its input's shape only), `OneHot` (a comparison with
//! the classes, then a `Where`), `Swish`, `RotaryEmbedding` and `CenterCropPad` (a `Pad`,
//! negative where it crops). Their gradients are those of the IR ops.

use ordo_ir::op::{CompareKind, LogicKind, Reduce, ReduceKind};
use ordo_ir::{DType, Op, OutletId};

use super::common::{Outputs, one, resolve_axis};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::{ConstData, ConstTensor, code, onnx_code};
use crate::value::Value;

/// One IR node named after the ONNX node itself (the last of its IR nodes).
fn emit_last(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    op: Op,
    inputs: &[OutletId],
) -> OnnxResult<OutletId> {
    Ok(ctx.emit(&node.name, op, inputs, Vec::new())?[0])
}

fn part(node: &Node<'_>, p: &str) -> String {
    format!("{}.{p}", node.name)
}

/// A scalar constant of input 0's float type as a buffer.
pub(crate) fn scalar(ctx: &mut Ctx<'_>, node: &Node<'_>, p: &str, v: f64) -> OnnxResult<OutletId> {
    let dtype = ctx.fact_of(node, &ctx.input(node, 0)?)?.dtype;
    let c = ConstTensor { elem: code::FLOAT, shape: vec![], data: ConstData::Float(vec![v]) };
    ctx.buffer(node, &part(node, p), &crate::fold::cast(&c, dtype))
}

/// Input 0 as a float wire with its shape.
fn float_input(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<(OutletId, Vec<usize>)> {
    let x = ctx.wire(node, 0)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    if !fact.dtype.is_float() {
        return Err(node.unsupported(format!("input {fact}: the IR computes these on floats")));
    }
    Ok((x, fact.shape))
}

/// `GlobalMaxPool`: the maximum over every spatial dim, kept as size 1.
pub(crate) fn global_max_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, shape) = float_input(ctx, node)?;
    let op = Op::Reduce(Reduce {
        kind: ReduceKind::Max,
        axes: (2..shape.len()).collect(),
        keepdims: true,
    });
    one(ctx.emit_value(&node.name, op, &[x])?)
}

/// `IsNaN`: `x != x`; `IsInf`: `x == inf` or `x == -inf` (as `detect_positive` and
/// `detect_negative` say).
pub(crate) fn is_special(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, _) = float_input(ctx, node)?;
    let equal = Op::Compare(CompareKind::Equal);
    if node.op_type() == "IsNaN" {
        let same = ctx.emit_part(node, "equal", equal, &[x, x])?;
        return one(ctx.emit_value(&node.name, Op::Not, &[same])?);
    }
    let signs: Vec<f64> = [
        (node.int("detect_positive", 1)?, f64::INFINITY),
        (node.int("detect_negative", 1)?, f64::NEG_INFINITY),
    ]
    .into_iter()
    .filter(|&(on, _)| on != 0)
    .map(|(_, v)| v)
    .collect();
    let out = match signs[..] {
        [] => {
            // Neither sign: all false, as `x != x && x == x`.
            let same = ctx.emit_part(node, "equal", equal.clone(), &[x, x])?;
            let differ = ctx.emit_part(node, "differ", Op::Not, &[same])?;
            emit_last(ctx, node, Op::Logic(LogicKind::And), &[same, differ])?
        }
        [v] => {
            let inf = scalar(ctx, node, "inf", v)?;
            emit_last(ctx, node, equal, &[x, inf])?
        }
        _ => {
            let (pos, neg) = (
                scalar(ctx, node, "inf", f64::INFINITY)?,
                scalar(ctx, node, "neg_inf", f64::NEG_INFINITY)?,
            );
            let a = ctx.emit_part(node, "positive", equal.clone(), &[x, pos])?;
            let b = ctx.emit_part(node, "negative", equal, &[x, neg])?;
            emit_last(ctx, node, Op::Logic(LogicKind::Or), &[a, b])?
        }
    };
    one(ctx.wire_value(out))
}

/// `PRelu`: `x < 0 ? slope * x : x`, the slope broadcast to `x`.
pub(crate) fn prelu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, _) = float_input(ctx, node)?;
    let slope = ctx.wire(node, 1)?;
    let zero = scalar(ctx, node, "zero", 0.0)?;
    let negative = ctx.emit_part(node, "negative", Op::Compare(CompareKind::Less), &[x, zero])?;
    let scaled = ctx.emit_part(node, "scaled", Op::Mul, &[x, slope])?;
    one(ctx.emit_value(&node.name, Op::Where, &[negative, scaled, x])?)
}

/// `LpNormalization`: `x / ||x||_p` along `axis`, p 1 or 2 (0 where the norm is 0).
pub(crate) fn lp_normalization(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, shape) = float_input(ctx, node)?;
    let axis = resolve_axis(node, node.int("axis", -1)?, shape.len())?;
    let kind = match node.int("p", 2)? {
        1 => ReduceKind::L1,
        2 => ReduceKind::L2,
        p => return Err(node.malformed(format!("p = {p}: expected 1 or 2"))),
    };
    let norm = ctx.emit_part(
        node,
        "norm",
        Op::Reduce(Reduce { kind, axes: vec![axis], keepdims: true }),
        &[x],
    )?;
    // A zero norm (an all-zero lane) divides by 1 instead: the lane stays 0, as in onnx's
    // reference, and no 0 / 0 reaches the gradient.
    let (zero, one_) = (scalar(ctx, node, "zero", 0.0)?, scalar(ctx, node, "one", 1.0)?);
    let empty = ctx.emit_part(node, "empty", Op::Compare(CompareKind::Equal), &[norm, zero])?;
    let divisor = ctx.emit_part(node, "divisor", Op::Where, &[empty, one_, norm])?;
    one(ctx.emit_value(&node.name, Op::Div, &[x, divisor])?)
}

/// `DepthToSpace` (`DCR` or `CRD` order) and `SpaceToDepth` of `[N, C, H, W]` with block `b`:
/// a reshape to six dims, a transpose, a reshape back.
pub(crate) fn depth_space(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.wire(node, 0)?;
    let fact = ctx.graph.fact(x).cloned().expect("emitted");
    let b = usize::try_from(node.int("blocksize", 0)?)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| node.malformed("blocksize must be positive"))?;
    let &[n, c, h, w] = &fact.shape[..] else {
        return Err(node.shape_error(format!("input {fact}: expected [N, C, H, W]")));
    };
    let (split, perm, out) = if node.op_type() == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(
                node.shape_error(format!("{c} channels do not split into {b} x {b} blocks"))
            );
        }
        let c_out = c / (b * b);
        match node.string("mode", "DCR")?.as_str() {
            "DCR" => {
                (vec![n, b, b, c_out, h, w], vec![0, 3, 4, 1, 5, 2], vec![n, c_out, h * b, w * b])
            }
            "CRD" => {
                (vec![n, c_out, b, b, h, w], vec![0, 1, 4, 2, 5, 3], vec![n, c_out, h * b, w * b])
            }
            other => return Err(node.malformed(format!("mode `{other}`: expected DCR or CRD"))),
        }
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(node.shape_error(format!("{h} x {w} does not split into {b} x {b} blocks")));
        }
        (vec![n, c, h / b, b, w / b, b], vec![0, 3, 5, 1, 2, 4], vec![n, c * b * b, h / b, w / b])
    };
    let shape = |s: Vec<usize>| Op::Reshape { shape: s.into_iter().map(|d| d as i64).collect() };
    let blocks = ctx.emit_part(node, "blocks", shape(split), &[x])?;
    let moved = ctx.emit_part(node, "moved", Op::Transpose { perm }, &[blocks])?;
    one(ctx.emit_value(&node.name, shape(out), &[moved])?)
}

/// `EyeLike`: ones on diagonal `k` of a matrix shaped like the input, a constant.
pub(crate) fn eye_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let input = ctx.input(node, 0)?;
    let (elem, shape) = match &input {
        Value::Const(c) => (c.elem, c.shape.clone()),
        other => {
            let fact = ctx.fact_of(node, other)?;
            (onnx_code(fact.dtype), fact.shape)
        }
    };
    let &[rows, cols] = &shape[..] else {
        return Err(node.shape_error(format!("input of shape {shape:?}: expected a matrix")));
    };
    let elem = if node.has_attr("dtype") { node.int("dtype", 0)? as i32 } else { elem };
    let k = node.int("k", 0)?;
    let on = |i: usize, j: usize| j as i64 - i as i64 == k;
    let cells = (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j)));
    let data = if crate::tensor::is_float_code(elem) {
        ConstData::Float(cells.map(|(i, j)| f64::from(u8::from(on(i, j)))).collect())
    } else {
        ConstData::Int(cells.map(|(i, j)| i64::from(on(i, j))).collect())
    };
    one(Value::constant(ConstTensor { elem, shape, data }))
}

/// `OneHot(indices, depth, values)`: `on` where `indices mod depth` (NumPy's `mod`, so -1 is
/// the last class) equals the position along the new `axis`, `off` elsewhere. Indices of a
/// float type are cast to integers first (ONNX's rule); `depth` and `values` (`[off, on]`)
/// are constants, as exports write them. An `Equal` of the indices against a constant
/// `arange(depth)`, then a `Where`.
pub(crate) fn one_hot(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let indices = ctx.input(node, 0)?;
    if matches!(indices, Value::Const(_)) {
        return Err(node.unsupported("constants: imported by the generic rule"));
    }
    let depth = ctx.const_input(node, 1, "depth")?.scalar().unwrap_or(f64::NAN);
    if !(depth >= 1.0 && depth.fract() == 0.0 && depth <= 1e9) {
        return Err(node.malformed(format!("depth {depth}: expected a positive integer")));
    }
    let values = ctx.const_input(node, 2, "values")?;
    let (Some(off), Some(on), 2) = (values.get_f64(0), values.get_f64(1), values.numel()) else {
        return Err(node.malformed("values must hold two elements, [off, on]"));
    };
    let shape = ctx.fact_of(node, &indices)?.shape;
    let axis = resolve_axis(node, node.int("axis", -1)?, shape.len() + 1)?;
    let mut x = ctx.wire(node, 0)?;
    if ctx.graph.fact(x).is_some_and(|f| f.dtype != DType::I64) {
        x = ctx.emit_part(node, "ids", Op::cast(DType::I64), &[x])?;
    }
    let int = |v: Vec<i64>, shape: Vec<usize>| ConstTensor {
        elem: code::INT64,
        shape,
        data: ConstData::Int(v),
    };
    let depth = depth as usize;
    let d = ctx.buffer(node, &part(node, "depth"), &int(vec![depth as i64], vec![]))?;
    let wrapped = ctx.emit_part(node, "wrapped", Op::Mod { fmod: false }, &[x, d])?;
    // The indices with a dimension of 1 at `axis`, against the classes along it.
    let mut kept = shape.clone();
    kept.insert(axis, 1);
    let reshape = super::common::reshape_op(&kept);
    let ids = ctx.emit_part(node, "unsqueezed", reshape, &[wrapped])?;
    let mut along = vec![1; shape.len() + 1];
    along[axis] = depth;
    let classes = int((0..depth as i64).collect(), along);
    let classes = ctx.buffer(node, &part(node, "classes"), &classes)?;
    let hit = ctx.emit_part(node, "hit", Op::Compare(CompareKind::Equal), &[ids, classes])?;
    let Some(dtype) = values.fact().map(|f| f.dtype) else {
        return Err(node.unsupported("values of a type without tensors"));
    };
    let scalar =
        |v: f64| ConstTensor { elem: code::FLOAT, shape: vec![], data: ConstData::Float(vec![v]) };
    let on = ctx.buffer(node, &part(node, "on"), &crate::fold::cast(&scalar(on), dtype))?;
    let off = ctx.buffer(node, &part(node, "off"), &crate::fold::cast(&scalar(off), dtype))?;
    one(ctx.emit_value(&node.name, Op::Where, &[hit, on, off])?)
}

/// `Swish` (opset 24): `x * sigmoid(alpha * x)`, SiLU for `alpha` 1.
pub(crate) fn swish(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, _) = float_input(ctx, node)?;
    let alpha = node.float("alpha", 1.0)?;
    let scaled = match alpha {
        1.0 => x,
        _ => ctx.emit_part(node, "scaled", Op::Scale { factor: alpha }, &[x])?,
    };
    let sigmoid = Op::Unary { func: ordo_ir::op::UnaryOp::Sigmoid };
    let gate = ctx.emit_part(node, "gate", sigmoid, &[scaled])?;
    one(ctx.emit_value(&node.name, Op::Mul, &[x, gate])?)
}

/// `RotaryEmbedding` (opset 23): the first `rotary_embedding_dim` features of each head turned
/// by the angles of its position, `(x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos)`, the pairs
/// being the two halves of those features or (`interleaved`) their even and odd ones. The
/// caches are `[positions, dim / 2]` rows picked by `position_ids`, or already `[B, S, dim /
/// 2]`. Slices, products, sums and concatenations of the IR; its gradient is theirs.
pub(crate) fn rotary_embedding(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let (x, _) = float_input(ctx, node)?;
    let shape = |ctx: &Ctx<'_>, o: OutletId| ctx.graph.fact(o).expect("emitted").shape.clone();
    let reshape = super::common::reshape_op;
    let xs = shape(ctx, x);
    let bshd = [0, 2, 1, 3];
    // To [batch, sequence, heads, head size].
    let (x, [b, s, h, d]) = match xs[..] {
        [b, h, s, d] => {
            let t = ctx.emit_part(node, "bshd", Op::Transpose { perm: bshd.to_vec() }, &[x])?;
            (t, [b, s, h, d])
        }
        [b, s, hidden] => {
            let heads = usize::try_from(node.int("num_heads", 0)?).unwrap_or(0);
            if heads == 0 || hidden % heads != 0 {
                return Err(node.malformed(format!("num_heads {heads} for a hidden size {hidden}")));
            }
            let d = hidden / heads;
            (ctx.emit_part(node, "heads", reshape(&[b, s, heads, d]), &[x])?, [b, s, heads, d])
        }
        _ => return Err(node.malformed(format!("input of shape {xs:?}: expected rank 3 or 4"))),
    };
    let rot = match usize::try_from(node.int("rotary_embedding_dim", 0)?).unwrap_or(0) {
        0 => d,
        r => r,
    };
    if rot > d || rot % 2 != 0 {
        return Err(node.malformed(format!("rotary_embedding_dim {rot} for heads of {d}")));
    }
    let half = rot / 2;
    let slice = |start: usize, end: usize, step: usize| Op::Slice {
        axis: 3,
        start: start as i64,
        end: end as i64,
        step: step as i64,
    };
    // The angles' cosines and sines, [b, s, 1, half].
    let mut angles = Vec::new();
    for (i, name) in [(1, "cos"), (2, "sin")] {
        let mut cache = ctx.wire(node, i)?;
        if node.input(3).is_some() {
            let positions = ctx.wire(node, 3)?;
            cache = ctx.emit_part(
                node,
                &format!("{name}_rows"),
                Op::Gather { axis: 0 },
                &[cache, positions],
            )?;
        }
        let cs = shape(ctx, cache);
        if cs != [b, s, half] {
            return Err(
                node.malformed(format!("{name} cache rows {cs:?}: expected [{b}, {s}, {half}]"))
            );
        }
        angles.push(ctx.emit_part(node, name, reshape(&[b, s, 1, half]), &[cache])?);
    }
    let (cos, sin) = (angles[0], angles[1]);
    let interleaved = node.int("interleaved", 0)? != 0;
    let (x1, x2) = if interleaved {
        (slice(0, rot, 2), slice(1, rot, 2))
    } else {
        (slice(0, half, 1), slice(half, rot, 1))
    };
    let x1 = ctx.emit_part(node, "x1", x1, &[x])?;
    let x2 = ctx.emit_part(node, "x2", x2, &[x])?;
    let mut product =
        |name: &str, a: OutletId, b: OutletId| ctx.emit_part(node, name, Op::Mul, &[a, b]);
    let (c1, s2, s1, c2) = (
        product("cos_x1", cos, x1)?,
        product("sin_x2", sin, x2)?,
        product("sin_x1", sin, x1)?,
        product("cos_x2", cos, x2)?,
    );
    let minus = ctx.emit_part(node, "minus_sin_x2", Op::Scale { factor: -1.0 }, &[s2])?;
    let real = ctx.emit_part(node, "real", Op::Add, &[c1, minus])?;
    let imag = ctx.emit_part(node, "imag", Op::Add, &[s1, c2])?;
    let mut turned = if interleaved {
        let real = ctx.emit_part(node, "real_pairs", reshape(&[b, s, h, half, 1]), &[real])?;
        let imag = ctx.emit_part(node, "imag_pairs", reshape(&[b, s, h, half, 1]), &[imag])?;
        let pairs = ctx.emit_part(node, "pairs", Op::Concat { axis: 4 }, &[real, imag])?;
        ctx.emit_part(node, "turned", reshape(&[b, s, h, rot]), &[pairs])?
    } else {
        ctx.emit_part(node, "turned", Op::Concat { axis: 3 }, &[real, imag])?
    };
    if rot < d {
        let kept = ctx.emit_part(node, "kept", slice(rot, d, 1), &[x])?;
        turned = ctx.emit_part(node, "joined", Op::Concat { axis: 3 }, &[turned, kept])?;
    }
    let back = if xs.len() == 4 { Op::Transpose { perm: bshd.to_vec() } } else { reshape(&xs) };
    one(ctx.emit_value(&node.name, back, &[turned])?)
}

/// `CenterCropPad(x, shape)`: each axis of `axes` (default: all) cropped or padded with zeros
/// to its size in `shape`, centred (an odd difference leaves the extra element at the end,
/// as onnx's reference does): one IR `Pad`, whose negative counts crop.
pub(crate) fn center_crop_pad(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let x = ctx.input(node, 0)?;
    if matches!(x, Value::Const(_)) {
        return Err(node.unsupported("a constant: imported by the generic rule"));
    }
    let dims = ctx.fact_of(node, &x)?.shape;
    let rank = dims.len();
    let sizes = ctx
        .const_input(node, 1, "shape")?
        .to_i64s()
        .ok_or_else(|| node.malformed("shape must be integers"))?;
    let axes: Vec<usize> = match node.ints("axes") {
        Some(axes) => {
            axes.iter().map(|&a| resolve_axis(node, a, rank)).collect::<OnnxResult<_>>()?
        }
        None => (0..rank).collect(),
    };
    if sizes.len() != axes.len() {
        return Err(node.malformed(format!(
            "shape has {} sizes for {} axes",
            sizes.len(),
            axes.len()
        )));
    }
    let mut pads = vec![0i64; 2 * rank];
    for (&axis, &size) in axes.iter().zip(&sizes) {
        if size < 1 {
            return Err(node.malformed(format!("shape: size {size} for axis {axis}")));
        }
        // Padding (positive) or cropping (negative) of `change` elements: half before,
        // rounded toward zero, the rest after.
        let change = size - dims[axis] as i64;
        pads[axis] = change / 2;
        pads[axis + rank] = change - change / 2;
    }
    let w = ctx.wire(node, 0)?;
    let op = Op::Pad { pads, mode: ordo_ir::op::PadMode::Constant, value: 0.0 };
    one(ctx.emit_value(&node.name, op, &[w])?)
}
