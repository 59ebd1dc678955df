//! Pooling: `MaxPool` (its indices output too), `AveragePool`, `GlobalAveragePool`, and `LpPool`
//! written as IR ops.

use ordo_ir::op::{Pool2d, PoolNd, Reduce, ReduceKind, UnaryOp};
use ordo_ir::{DType, Op, OutletId, TensorFact};

use super::common::{Outputs, one, reshape_op};
use super::indexed::{coordinates, index_buffer};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::{Node, small_uints};
use crate::tensor::{ConstData, ConstTensor, code};
use crate::value::Value;

/// `MaxPool` and `AveragePool`: the IR's 2-D ops over NCHW input with a symmetric window
/// (the common case), else its N-d `Pool` (1-D, 3-D, dilations, uneven or `SAME` padding).
/// `MaxPool`'s indices output, where read, is computed as [`IndexTables`] says.
pub(crate) fn pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if fact.rank() < 3 {
        return Err(node.malformed(format!("input {fact}: pooling needs [N, C, d1, ...]")));
    }
    // The storage order numbers the indices output only.
    let column_major = match node.int("storage_order", 0)? {
        0 => false,
        1 => true,
        other => return Err(node.malformed(format!("storage_order {other}: expected 0 or 1"))),
    };
    let p = window_nd(node, &fact.shape[2..], node.op_type() == "MaxPool", None)?;
    // Built before anything is emitted: tables too large are refused while the generic rule
    // can still plan the node.
    let tables = match node.output_named(1) {
        true => Some(IndexTables::of(node, &fact, &p, column_major)?),
        false => None,
    };
    let mut x = ctx.wire(node, 0)?;
    // The maximum of integers (8-bit images): pooled as f32, which holds every integer to
    // 2^24 exactly, and cast back.
    let integers = fact.dtype.is_integer() && p.max;
    if integers {
        let cast = Op::cast(ordo_ir::DType::F32);
        x = ctx.emit(&format!("{}.f32", node.name), cast, &[x], Vec::new())?[0];
    }
    let indices = match tables {
        Some(tables) => Some(tables.emit(ctx, node, x, &fact)?),
        None => None,
    };
    let symmetric = p.pads[..2] == p.pads[2..];
    let op = if fact.rank() == 4
        && p.dilation == [1, 1]
        && p.pads.len() == 4
        && symmetric
        && (0..2).all(|d| p.pads[d] * 2 <= p.kernel[d])
    {
        let pool = Pool2d {
            kernel: [p.kernel[0], p.kernel[1]],
            stride: [p.stride[0], p.stride[1]],
            padding: [p.pads[0], p.pads[1]],
            ceil_mode: p.ceil_mode,
            count_include_pad: p.count_include_pad,
        };
        if p.max { Op::MaxPool2d(pool) } else { Op::AvgPool2d(pool) }
    } else {
        Op::Pool(p)
    };
    if integers {
        let pooled = ctx.emit(&format!("{}.pooled", node.name), op, &[x], Vec::new())?[0];
        let values = ctx.emit_value(&node.name, Op::cast(fact.dtype), &[pooled])?;
        return Ok(vec![Some(values), indices]);
    }
    Ok(vec![Some(ctx.emit_value(&node.name, op, &[x])?), indices])
}

/// `MaxPool`'s indices output: for each window, the position of its first largest element
/// inside the input, counted over the whole tensor (row-major, or over the spatial dims in
/// column-major order with `storage_order` 1), as ONNX's reference numbers it. Written as
/// gathers of tables computed at import: the input's planes flattened, one more element
/// (-inf) appended for the window positions outside the input; each window's elements gathered,
/// those inside first (a tie with the outside goes inside); the first maximum's place in its
/// window (`ArgMax`); that place's position from a second table; plus each plane's offset.
/// Integers and narrow floats are compared in f32, which holds their order.
struct IndexTables {
    /// The output's spatial dims.
    out: Vec<usize>,
    /// Elements of one input plane.
    plane: usize,
    /// Output positions, and elements of one window.
    windows: usize,
    window: usize,
    /// Per window (`[windows, window]`): the row-major position in the plane of each element
    /// inside the input, then `plane` (the appended -inf) for each outside.
    gathered: Vec<i64>,
    /// The same entries as the output numbers them (`-1` outside).
    numbered: Vec<i64>,
}

impl IndexTables {
    /// The tables of a pooling `p` over input `fact`.
    fn of(node: &Node<'_>, fact: &TensorFact, p: &PoolNd, column_major: bool) -> OnnxResult<Self> {
        let spatial = &fact.shape[2..];
        let out: Vec<usize> = (0..spatial.len())
            .map(|d| p.out_len(d, spatial[d]))
            .collect::<Option<_>>()
            .ok_or_else(|| node.shape_error(format!("the window does not fit the input {fact}")))?;
        let plane: usize = spatial.iter().product();
        let (windows, window): (usize, usize) = (out.iter().product(), p.kernel.iter().product());
        if (windows as u64).saturating_mul(window as u64) > crate::tensor::MAX_FOLD {
            return Err(
                node.unsupported("its indices' tables would be too large to build at import")
            );
        }
        // Strides of a flat position over the spatial dims, in either order.
        let strides = |reversed: bool| {
            let mut strides = vec![1i64; spatial.len()];
            let order: Vec<usize> = match reversed {
                false => (0..spatial.len()).rev().collect(),
                true => (0..spatial.len()).collect(),
            };
            let mut step = 1i64;
            for d in order {
                strides[d] = step;
                step *= spatial[d] as i64;
            }
            strides
        };
        let (row_major, numbering) = (strides(false), strides(column_major));
        let (mut gathered, mut numbered) = (Vec::new(), Vec::new());
        for o in 0..windows {
            let at = coordinates(o, &out);
            let (mut inside, mut outside) = (Vec::new(), 0);
            for k in 0..window {
                let offset = coordinates(k, &p.kernel);
                let position: Option<Vec<i64>> = (0..spatial.len())
                    .map(|d| {
                        let i = (at[d] * p.stride[d] + offset[d] * p.dilation[d]) as i64
                            - p.pads[d] as i64;
                        (0..spatial[d] as i64).contains(&i).then_some(i)
                    })
                    .collect();
                match position {
                    Some(i) => {
                        let flat = |s: &[i64]| i.iter().zip(s).map(|(a, b)| a * b).sum::<i64>();
                        inside.push((flat(&row_major), flat(&numbering)));
                    }
                    None => outside += 1,
                }
            }
            let (g, n): (Vec<i64>, Vec<i64>) = inside.into_iter().unzip();
            gathered.extend(g.into_iter().chain(std::iter::repeat_n(plane as i64, outside)));
            numbered.extend(n.into_iter().chain(std::iter::repeat_n(-1, outside)));
        }
        Ok(Self { out, plane, windows, window, gathered, numbered })
    }

    /// The indices of the pooling of `x` (the input, or its f32 cast), as IR nodes.
    fn emit(
        self,
        ctx: &mut Ctx<'_>,
        node: &Node<'_>,
        mut x: OutletId,
        fact: &TensorFact,
    ) -> OnnxResult<Value> {
        let Self { out, plane, windows, window, gathered, numbered } = self;
        let (batch, channels) = (fact.shape[0], fact.shape[1]);
        if ctx.graph.fact(x).is_some_and(|f| f.dtype != DType::F32) {
            x = ctx.emit_part(node, "indices.f32", Op::cast(DType::F32), &[x])?;
        }
        let flat =
            ctx.emit_part(node, "indices.flat", reshape_op(&[batch, channels, plane]), &[x])?;
        let lowest = ConstTensor {
            elem: code::FLOAT,
            shape: vec![batch, channels, 1],
            data: ConstData::Splat(f64::NEG_INFINITY),
        };
        let lowest = ctx.buffer(node, &format!("{}.indices.outside", node.name), &lowest)?;
        let padded =
            ctx.emit_part(node, "indices.padded", Op::Concat { axis: 2 }, &[flat, lowest])?;
        let table = index_buffer(ctx, node, "indices.windows", vec![windows, window], gathered)?;
        let elements =
            ctx.emit_part(node, "indices.elements", Op::Gather { axis: 2 }, &[padded, table])?;
        let argmax = Op::ArgExtreme { max: true, axis: 3, keepdims: false, select_last: false };
        let first = ctx.emit_part(node, "indices.first", argmax, &[elements])?;
        let rows: Vec<i64> = (0..windows).map(|o| (o * window) as i64).collect();
        let rows = index_buffer(ctx, node, "indices.rows", vec![windows], rows)?;
        let entry = ctx.emit_part(node, "indices.entry", Op::Add, &[first, rows])?;
        let numbers = index_buffer(ctx, node, "indices.numbers", vec![windows * window], numbered)?;
        let picked =
            ctx.emit_part(node, "indices.picked", Op::Gather { axis: 0 }, &[numbers, entry])?;
        let planes: Vec<i64> = (0..batch * channels).map(|c| (c * plane) as i64).collect();
        let planes = index_buffer(ctx, node, "indices.planes", vec![batch, channels, 1], planes)?;
        let counted = ctx.emit_part(node, "indices.counted", Op::Add, &[picked, planes])?;
        let shape: Vec<usize> = [batch, channels].into_iter().chain(out).collect();
        ctx.emit_value(&format!("{}:1", node.name), reshape_op(&shape), &[counted])
    }
}

/// The window of an N-d pooling over spatial dims of `spatial` sizes; `kernel`, where given,
/// is the size `kernel_shape` may leave out (a convolution's weight).
pub(super) fn window_nd(
    node: &Node<'_>,
    spatial: &[usize],
    max: bool,
    kernel: Option<&[usize]>,
) -> OnnxResult<PoolNd> {
    let n = spatial.len();
    let list = |name: &str, default: usize, len: usize| -> OnnxResult<Vec<usize>> {
        match node.ints(name) {
            None => Ok(vec![default; len]),
            Some(v) => {
                let v = small_uints(node, name, v)?;
                if v.len() != len {
                    return Err(node.malformed(format!("`{name}` {v:?} for {n} spatial dims")));
                }
                Ok(v)
            }
        }
    };
    let kernel = match (node.ints("kernel_shape"), kernel) {
        (None, Some(k)) => k.to_vec(),
        (given, weight) => {
            let listed = list("kernel_shape", 0, n)?;
            if let (Some(_), Some(k)) = (given, weight)
                && listed != k
            {
                return Err(node.shape_error(format!(
                    "kernel_shape {listed:?} differs from the weight's kernel {k:?}"
                )));
            }
            listed
        }
    };
    let stride = list("strides", 1, n)?;
    let dilation = list("dilations", 1, n)?;
    if [&kernel, &stride, &dilation].iter().any(|v| v.contains(&0)) {
        return Err(node.malformed("kernel_shape, strides and dilations must be positive"));
    }
    let pads = match node.string("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => list("pads", 0, 2 * n)?,
        "VALID" => vec![0; 2 * n],
        same @ ("SAME_UPPER" | "SAME_LOWER") => {
            let mut pads = vec![0; 2 * n];
            for d in 0..n {
                let out = spatial[d].div_ceil(stride[d]);
                let span = (kernel[d] - 1) * dilation[d] + 1;
                let total = ((out - 1) * stride[d] + span).saturating_sub(spatial[d]);
                let small = total / 2;
                let (before, after) = if same == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                pads[d] = before;
                pads[d + n] = after;
            }
            pads
        }
        other => return Err(node.malformed(format!("auto_pad `{other}`"))),
    };
    Ok(PoolNd {
        max,
        kernel,
        stride,
        dilation,
        pads,
        ceil_mode: node.int("ceil_mode", 0)? != 0,
        count_include_pad: node.int("count_include_pad", 0)? != 0,
    })
}

/// `GlobalAveragePool` of NCHW input.
pub(crate) fn global_avg(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let rank = ctx.fact_of(node, &ctx.input(node, 0)?)?.rank();
    let x = ctx.wire(node, 0)?;
    if rank == 4 {
        return one(ctx.emit_value(&node.name, Op::GlobalAvgPool, &[x])?);
    }
    // Of [N, C, d1, ...] other than 2-D (a video model's [N, C, D, H, W]): the mean over
    // every spatial dim, kept.
    if rank < 3 {
        return Err(node.malformed(format!("input of rank {rank}: pooling needs [N, C, d1, ...]")));
    }
    let op =
        Op::Reduce(Reduce { kind: ReduceKind::Mean, axes: (2..rank).collect(), keepdims: true });
    one(ctx.emit_value(&node.name, op, &[x])?)
}

/// `LpPool`: `(Σ |x|^p)^(1/p)` over each window, zeros in the padding; written as IR ops,
/// whose gradients it takes: `|x|` (or `x·x` for p = 2) to the power p, averaged over the
/// window with the padding counted, times the window's size, to the power 1/p (a square root
/// for p = 2).
pub(crate) fn lp_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let fact = ctx.fact_of(node, &ctx.input(node, 0)?)?;
    if fact.rank() < 3 {
        return Err(node.malformed(format!("input {fact}: pooling needs [N, C, d1, ...]")));
    }
    if !fact.dtype.is_float() {
        return Err(node.unsupported(format!("input {fact}: LpPool of integers")));
    }
    let p = node.int("p", 2)?;
    if p < 1 {
        return Err(node.malformed(format!("p = {p}: expected a positive integer")));
    }
    let mut window = window_nd(node, &fact.shape[2..], false, None)?;
    if window.ceil_mode {
        // A window past the padding holds fewer elements than the kernel: the average's
        // divisor would no longer be the kernel's size.
        return Err(node.unsupported("LpPool with ceil_mode"));
    }
    window.count_include_pad = true;
    let size = window.kernel.iter().product::<usize>() as f64;
    let x = ctx.wire(node, 0)?;
    let part = |p: &str| format!("{}.{p}", node.name);
    let powered = match p {
        1 => ctx.emit(&part("abs"), Op::Unary { func: UnaryOp::Abs }, &[x], Vec::new())?[0],
        2 => ctx.emit(&part("square"), Op::Mul, &[x, x], Vec::new())?[0],
        _ => {
            let abs =
                ctx.emit(&part("abs"), Op::Unary { func: UnaryOp::Abs }, &[x], Vec::new())?[0];
            let exponent = super::composite::scalar(ctx, node, "p", p as f64)?;
            ctx.emit(&part("power"), Op::Pow, &[abs, exponent], Vec::new())?[0]
        }
    };
    let mean = ctx.emit(&part("mean"), Op::Pool(window), &[powered], Vec::new())?[0];
    let sum = ctx.emit(&part("sum"), Op::Scale { factor: size }, &[mean], Vec::new())?[0];
    if p == 2 {
        return one(ctx.emit_value(&node.name, Op::Unary { func: UnaryOp::Sqrt }, &[sum])?);
    }
    let root = super::composite::scalar(ctx, node, "root", 1.0 / p as f64)?;
    one(ctx.emit_value(&node.name, Op::Pow, &[sum, root])?)
}
