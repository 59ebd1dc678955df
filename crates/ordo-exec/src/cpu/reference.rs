//! Naive reference kernels: every forward op by direct loops over multi-indices, in f64, with
//! no im2col, no GEMM and no shared code with the optimised kernels beyond the definitions
//! of the error function and of the dropout mask. The test oracle: optimised kernels are
//! compared against these, and gradients against their central finite differences.
//!
//! Compiled for tests and with the `reference` feature. Panics on bad input.

// Direct index loops are the point of a reference.
#![allow(clippy::needless_range_loop)]

use ordo_ir::op::{Conv2d, ConvTranspose2d, Lstm, Pool2d, UnaryOp};
use ordo_ir::{DType, Op, TensorFact};

use super::KernelContext;
use super::elementwise::dropout_keep;
use super::tensor::{Data, Tensor};
use super::util::erf;

/// A dense f64 tensor of an element type (`F32`, `I64`, or `Bool` held as 0 and 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Row-major elements.
    pub data: Vec<f64>,
    /// The element type the values stand for.
    pub dtype: DType,
}

impl Dense {
    /// The promotion of a kernel tensor.
    pub fn from_tensor(t: &Tensor) -> Self {
        let data = match t.data() {
            Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Data::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        };
        Self { shape: t.shape().to_vec(), data, dtype: t.dtype() }
    }

    fn zeros(shape: &[usize]) -> Self {
        Self { shape: shape.to_vec(), data: vec![0.0; shape.iter().product()], dtype: DType::F32 }
    }

    fn fact(&self) -> TensorFact {
        TensorFact::new(self.dtype, self.shape.clone())
    }

    fn at(&self, idx: &[usize]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }
}

/// The multi-index of flat index `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// The flat index of multi-index `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The index into a tensor of `shape` that output index `out_idx` broadcasts from.
fn broadcast_index(out_idx: &[usize], shape: &[usize]) -> usize {
    let off = out_idx.len() - shape.len();
    let idx: Vec<usize> =
        shape.iter().enumerate().map(|(d, &n)| if n == 1 { 0 } else { out_idx[off + d] }).collect();
    ravel(&idx, shape)
}

fn axis_of(axis: i64, rank: usize) -> usize {
    if axis < 0 { (axis + rank as i64) as usize } else { axis as usize }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The op's forward outputs, by definition.
pub fn forward(op: &Op, inputs: &[Dense], params: &[Dense], ctx: &KernelContext) -> Vec<Dense> {
    let facts: Vec<TensorFact> = inputs.iter().map(Dense::fact).collect();
    let refs: Vec<&TensorFact> = facts.iter().collect();
    let out_shape = match op {
        Op::Input => inputs[0].shape.clone(),
        Op::Parameter => params[0].shape.clone(),
        Op::Fill { .. } => ctx.outputs[0].shape.clone(),
        _ => op.infer(&refs).expect("reference: bad shapes").remove(0).shape,
    };
    let mut y = Dense::zeros(&out_shape);
    let each = |y: &mut Dense, f: &dyn Fn(&[usize]) -> f64| {
        for i in 0..y.data.len() {
            y.data[i] = f(&unravel(i, &y.shape));
        }
    };
    match op {
        Op::Input => y = inputs[0].clone(),
        Op::Parameter => y = params[0].clone(),
        Op::Fill { value } => y.data.fill(*value),
        // Its length checks are the kernel's own (tests/types.rs).
        Op::Range { .. } => {
            let (start, delta) = (inputs[0].data[0], inputs[2].data[0]);
            each(&mut y, &|i| start + i[0] as f64 * delta);
        }
        Op::Conv2d(cv) => conv(cv, &inputs[0], params, &mut y),
        Op::ConvTranspose2d(ct) => conv_transpose(ct, &inputs[0], params, &mut y),
        Op::BatchNorm(bn) => {
            let x = &inputs[0];
            let c = x.shape[1];
            let per = x.data.len() / c.max(1);
            for ch in 0..c {
                let members: Vec<usize> =
                    (0..x.data.len()).filter(|&i| unravel(i, &x.shape)[1] == ch).collect();
                let (mean, var) = if ctx.training {
                    let mean = members.iter().map(|&i| x.data[i]).sum::<f64>() / per as f64;
                    let var = members.iter().map(|&i| (x.data[i] - mean).powi(2)).sum::<f64>()
                        / per as f64;
                    (mean, var)
                } else {
                    (params[2].data[ch], params[3].data[ch])
                };
                for &i in &members {
                    let xh = (x.data[i] - mean) / (var + bn.eps).sqrt();
                    y.data[i] = xh * params[0].data[ch] + params[1].data[ch];
                }
            }
        }
        Op::LayerNorm(ln) => {
            let d: usize = ln.normalized_shape.iter().product();
            for r in 0..y.data.len() / d.max(1) {
                let row = &inputs[0].data[r * d..(r + 1) * d];
                let mean = row.iter().sum::<f64>() / d as f64;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
                for j in 0..d {
                    let xh = (row[j] - mean) / (var + ln.eps).sqrt();
                    y.data[r * d + j] =
                        if ln.affine { xh * params[0].data[j] + params[1].data[j] } else { xh };
                }
            }
        }
        Op::Unary { func } => {
            let x = &inputs[0];
            y.data = x.data.iter().map(|&v| unary(*func, v)).collect();
        }
        Op::Scale { factor } => y.data = inputs[0].data.iter().map(|v| v * factor).collect(),
        // Written out again here, independently of `ActivationKind::value`.
        Op::Activation { kind, alpha: a, beta: b } => {
            use ordo_ir::op::ActivationKind as K;
            y.data = inputs[0]
                .data
                .iter()
                .map(|&x| match kind {
                    K::Elu => {
                        if x > 0.0 {
                            x
                        } else {
                            a * (x.exp() - 1.0)
                        }
                    }
                    K::Selu => b * if x > 0.0 { x } else { a * (x.exp() - 1.0) },
                    K::LeakyRelu => {
                        if x < 0.0 {
                            a * x
                        } else {
                            x
                        }
                    }
                    K::ThresholdedRelu => {
                        if x > *a {
                            x
                        } else {
                            0.0
                        }
                    }
                    // NaN stays NaN (ONNX's reference: np.maximum and np.minimum).
                    K::Celu if x.is_nan() => x,
                    K::Celu => x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0),
                    K::HardSigmoid => (a * x + b).clamp(0.0, 1.0),
                    K::Shrink => {
                        if x < -a {
                            x + b
                        } else if x > *a {
                            x - b
                        } else {
                            0.0
                        }
                    }
                })
                .collect();
        }
        Op::Clip { min, max } => {
            y.data = inputs[0].data.iter().map(|v| v.max(*min).min(*max)).collect()
        }
        Op::Compare(_) | Op::Logic(_) => {
            let (a, b) = (&inputs[0], &inputs[1]);
            y.dtype = DType::Bool;
            each(&mut y, &|idx| {
                let (u, v) = (
                    a.data[broadcast_index(idx, &a.shape)],
                    b.data[broadcast_index(idx, &b.shape)],
                );
                let holds = match op {
                    Op::Logic(l) => l.apply(u != 0.0, v != 0.0),
                    Op::Compare(k) => k.holds(u, v),
                    _ => unreachable!("a comparison or logic"),
                };
                f64::from(u8::from(holds))
            });
        }
        Op::Cast { to, .. } => {
            y.dtype = *to;
            y.data = inputs[0]
                .data
                .iter()
                .map(|&v| match to {
                    DType::Bool => f64::from(u8::from(v != 0.0)),
                    DType::I64 => v.trunc(),
                    _ => v,
                })
                .collect();
        }
        Op::RandomLike(d) => {
            for (i, v) in y.data.iter_mut().enumerate() {
                *v = f64::from(super::random::draw(d, ctx.seed, i as u64) as f32);
            }
        }
        Op::Bernoulli => {
            for (i, v) in y.data.iter_mut().enumerate() {
                let p = inputs[0].data[i];
                *v = f64::from(u8::from(super::elementwise::uniform(ctx.seed, i as u64) < p));
            }
        }
        Op::Bitwise(kind) => {
            // The integers as f64 hold them exactly to 2^53; the bits wrap to the type here,
            // as the kernel's caller wraps them.
            let (a, b) = (&inputs[0], inputs.get(1).unwrap_or(&inputs[0]));
            y.dtype = a.dtype;
            each(&mut y, &|idx| {
                let (u, v) = (
                    a.data[broadcast_index(idx, &a.shape)] as i64,
                    b.data[broadcast_index(idx, &b.shape)] as i64,
                );
                ordo_ir::element::wrap_integer(kind.apply(u, v), a.dtype) as f64
            });
        }
        Op::Not => {
            y.dtype = DType::Bool;
            y.data = inputs[0].data.iter().map(|&v| f64::from(u8::from(v == 0.0))).collect();
        }
        Op::Where => {
            let (c, a, b) = (&inputs[0], &inputs[1], &inputs[2]);
            y.dtype = a.dtype;
            each(&mut y, &|idx| {
                if c.data[broadcast_index(idx, &c.shape)] != 0.0 {
                    a.data[broadcast_index(idx, &a.shape)]
                } else {
                    b.data[broadcast_index(idx, &b.shape)]
                }
            });
        }
        Op::Add | Op::Mul | Op::Div | Op::Max | Op::Min | Op::Pow => {
            let (a, b) = (&inputs[0], &inputs[1]);
            each(&mut y, &|idx| {
                let (u, v) = (
                    a.data[broadcast_index(idx, &a.shape)],
                    b.data[broadcast_index(idx, &b.shape)],
                );
                match op {
                    Op::Add => u + v,
                    Op::Mul => u * v,
                    Op::Max => u.max(v),
                    Op::Min => u.min(v),
                    Op::Pow => u.powf(v),
                    _ => u / v,
                }
            });
        }
        Op::Reduce(r) => {
            // Each output element: the elements of every input index that maps to it,
            // gathered, then reduced by the definition.
            use ordo_ir::op::ReduceKind::*;
            let x = &inputs[0];
            let kept = r.kept_shape(&x.shape);
            let mut groups: Vec<Vec<f64>> = vec![Vec::new(); kept.iter().product()];
            for i in 0..x.data.len() {
                let idx = unravel(i, &x.shape);
                groups[broadcast_index(&idx, &kept)].push(x.data[i]);
            }
            let sum = |g: &[f64]| g.iter().sum::<f64>();
            y.data = groups
                .iter()
                .map(|g| match r.kind {
                    Sum => sum(g),
                    Mean => sum(g) / g.len() as f64,
                    Max => g.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Min => g.iter().copied().fold(f64::INFINITY, f64::min),
                    Prod => g.iter().product(),
                    SumSquare => g.iter().map(|v| v * v).sum(),
                    L1 => g.iter().map(|v| v.abs()).sum(),
                    L2 => g.iter().map(|v| v * v).sum::<f64>().sqrt(),
                    LogSum => sum(g).ln(),
                    LogSumExp => g.iter().map(|v| v.exp()).sum::<f64>().ln(),
                })
                .collect();
        }
        Op::MaxPool2d(p) => pool(p, &inputs[0], &mut y, true),
        Op::AvgPool2d(p) => pool(p, &inputs[0], &mut y, false),
        Op::GlobalAvgPool => {
            let x = &inputs[0];
            let hw = x.shape[2] * x.shape[3];
            each(&mut y, &|idx| {
                (0..hw)
                    .map(|k| x.at(&[idx[0], idx[1], k / x.shape[3], k % x.shape[3]]))
                    .sum::<f64>()
                    / hw as f64
            });
        }
        Op::Concat { axis } => {
            let axis = axis_of(*axis, out_shape.len());
            each(&mut y, &|idx| {
                let mut idx = idx.to_vec();
                for part in inputs {
                    if idx[axis] < part.shape[axis] {
                        return part.at(&idx);
                    }
                    idx[axis] -= part.shape[axis];
                }
                unreachable!()
            });
            y.dtype = inputs[0].dtype;
        }
        Op::Reshape { .. } => y.data = inputs[0].data.clone(),
        Op::Transpose { perm } => {
            let x = &inputs[0];
            each(&mut y, &|idx| {
                let mut src = vec![0; idx.len()];
                perm.iter().enumerate().for_each(|(i, &p)| src[p] = idx[i]);
                x.at(&src)
            });
        }
        Op::Slice { axis, start, end: _, step } => {
            let x = &inputs[0];
            let axis = axis_of(*axis, x.shape.len());
            let len = x.shape[axis] as i64;
            let from = (if *start < 0 { start + len } else { *start }).clamp(0, len) as usize;
            each(&mut y, &|idx| {
                let mut src = idx.to_vec();
                src[axis] = from + idx[axis] * *step as usize;
                x.at(&src)
            });
        }
        Op::MatMul => {
            let (a, b) = (&inputs[0], &inputs[1]);
            let (ra, rb, r) = (a.shape.len(), b.shape.len(), out_shape.len());
            let k = a.shape[ra - 1];
            each(&mut y, &|idx| {
                let (mut ia, mut ib) = (idx[..r - 2].to_vec(), idx[..r - 2].to_vec());
                ia.extend([idx[r - 2], 0]);
                ib.extend([0, idx[r - 1]]);
                let (ia, ib) = (&ia[r - ra..], &ib[r - rb..]);
                (0..k)
                    .map(|kk| {
                        let mut ia = ia.to_vec();
                        let mut ib = ib.to_vec();
                        ia[ra - 1] = kk;
                        ib[rb - 2] = kk;
                        for d in 0..ra - 2 {
                            if a.shape[d] == 1 {
                                ia[d] = 0;
                            }
                        }
                        for d in 0..rb - 2 {
                            if b.shape[d] == 1 {
                                ib[d] = 0;
                            }
                        }
                        a.at(&ia) * b.at(&ib)
                    })
                    .sum()
            });
        }
        Op::Linear(l) => {
            let x = &inputs[0];
            let k = *x.shape.last().unwrap();
            each(&mut y, &|idx| {
                let r = ravel(&idx[..idx.len() - 1], &x.shape[..x.shape.len() - 1]);
                let o = idx[idx.len() - 1];
                let dot: f64 = (0..k).map(|j| x.data[r * k + j] * params[0].data[o * k + j]).sum();
                dot + if l.bias { params[1].data[o] } else { 0.0 }
            });
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            let x = &inputs[0];
            let axis = axis_of(*axis, x.shape.len());
            let log = matches!(op, Op::LogSoftmax { .. });
            each(&mut y, &|idx| {
                let mut j = idx.to_vec();
                let mut sum = 0.0;
                for k in 0..x.shape[axis] {
                    j[axis] = k;
                    sum += x.at(&j).exp();
                }
                if log { x.at(idx) - sum.ln() } else { x.at(idx).exp() / sum }
            });
        }
        Op::Trilu { k, upper } => {
            let r = out_shape.len();
            let x = &inputs[0];
            y.dtype = x.dtype;
            each(&mut y, &|idx| {
                let offset = idx[r - 1] as i64 - idx[r - 2] as i64;
                let keep = if *upper { offset >= *k } else { offset <= *k };
                if keep { x.at(idx) } else { 0.0 }
            });
        }
        Op::ArgExtreme { max, axis, keepdims, select_last } => {
            // Every candidate index in order; the extreme by a fold that keeps the first
            // (or, with `select_last`, the last) of equals.
            let x = &inputs[0];
            let axis = axis_of(*axis, x.shape.len());
            y.dtype = DType::I64;
            each(&mut y, &|idx| {
                let mut j = idx.to_vec();
                if !*keepdims {
                    j.insert(axis, 0);
                }
                let mut best: Option<(usize, f64)> = None;
                for k in 0..x.shape[axis] {
                    j[axis] = k;
                    let v = x.at(&j);
                    let take = match best {
                        None => true,
                        Some((_, b)) => {
                            if *max {
                                v > b || (*select_last && v == b)
                            } else {
                                v < b || (*select_last && v == b)
                            }
                        }
                    };
                    if take {
                        best = Some((k, v));
                    }
                }
                best.map_or(0.0, |(k, _)| k as f64)
            });
        }
        Op::CausalMask => {
            let r = out_shape.len();
            let x = &inputs[0];
            each(&mut y, &|idx| {
                if idx[r - 1] > idx[r - 2] { f64::NEG_INFINITY } else { x.at(idx) }
            });
        }
        Op::Embedding(e) => {
            let ids = &inputs[0];
            each(&mut y, &|idx| {
                let id = ids.at(&idx[..idx.len() - 1]) as usize;
                params[0].data[id * e.dim + idx[idx.len() - 1]]
            });
        }
        Op::Lstm(l) => lstm(l, &inputs[0], params, &mut y),
        Op::Dropout { p } => {
            let x = &inputs[0];
            for i in 0..x.data.len() {
                y.data[i] = if !ctx.training {
                    x.data[i]
                } else if dropout_keep(ctx.seed, i as u64, *p) {
                    x.data[i] / (1.0 - p)
                } else {
                    0.0
                };
            }
        }
        Op::Pad { pads, mode, value } => {
            // Written out per mode, independently of `PadMode::source`.
            use ordo_ir::op::PadMode;
            let x = &inputs[0];
            let r = x.shape.len();
            y.dtype = x.dtype;
            each(&mut y, &|idx| {
                let mut j = Vec::with_capacity(r);
                for d in 0..r {
                    let n = x.shape[d] as i64;
                    let mut k = idx[d] as i64 - pads[d];
                    if !(0..n).contains(&k) {
                        match mode {
                            PadMode::Constant => return *value,
                            PadMode::Edge => k = k.max(0).min(n - 1),
                            PadMode::Wrap => k = ((k % n) + n) % n,
                            PadMode::Reflect => {
                                while !(0..n).contains(&k) {
                                    k = if k < 0 { -k } else { 2 * (n - 1) - k };
                                }
                            }
                        }
                    }
                    j.push(k as usize);
                }
                x.at(&j)
            });
        }
        Op::Einsum(e) => {
            // Every assignment of values to the labels, each input read by its multi-index.
            let mut sizes = std::collections::BTreeMap::new();
            for (labels, x) in e.inputs.iter().zip(inputs) {
                for (l, &n) in labels.iter().zip(&x.shape) {
                    sizes.insert(*l, n);
                }
            }
            let labels: Vec<u32> = sizes.keys().copied().collect();
            let space: Vec<usize> = sizes.values().copied().collect();
            let points: usize = space.iter().product();
            for p in 0..points {
                let values = unravel(p, &space);
                let value_of = |l: &u32| values[labels.iter().position(|m| m == l).unwrap()];
                let product: f64 = e
                    .inputs
                    .iter()
                    .zip(inputs)
                    .map(|(ls, x)| x.at(&ls.iter().map(value_of).collect::<Vec<_>>()))
                    .product();
                let out: Vec<usize> = e.output.iter().map(value_of).collect();
                y.data[ravel(&out, &y.shape)] += product;
            }
        }
        Op::Pool(p) => {
            // Every output position's window by its multi-index, the positions counted anew.
            let x = &inputs[0];
            let n = p.kernel.len();
            let window: usize = p.kernel.iter().product();
            each(&mut y, &|idx| {
                let (mut best, mut sum, mut real, mut padded) = (f64::NEG_INFINITY, 0.0, 0, 0);
                for w in 0..window {
                    let k = unravel(w, &p.kernel);
                    let mut j = idx[..2].to_vec();
                    let (mut inside, mut in_pad) = (true, true);
                    for d in 0..n {
                        let pos = (idx[d + 2] * p.stride[d] + k[d] * p.dilation[d]) as i64
                            - p.pads[d] as i64;
                        inside &= pos >= 0 && pos < x.shape[d + 2] as i64;
                        in_pad &= pos < (x.shape[d + 2] + p.pads[d + n]) as i64;
                        j.push(pos.max(0) as usize);
                    }
                    padded += usize::from(in_pad);
                    if inside {
                        let v = x.at(&j);
                        best = best.max(v);
                        sum += v;
                        real += 1;
                    }
                }
                if p.max {
                    best
                } else {
                    sum / (if p.count_include_pad { padded } else { real }).max(1) as f64
                }
            });
        }
        Op::TopK { k: _, axis, largest, indices } => {
            // Per output element: rank its lane's elements by selection, one at a time.
            let x = &inputs[0];
            let a = axis_of(*axis, x.shape.len());
            if *indices {
                y.dtype = DType::I64;
            }
            each(&mut y, &|idx| {
                let mut j = idx.to_vec();
                let mut taken: Vec<usize> = Vec::new();
                let mut pick = 0;
                for _ in 0..=idx[a] {
                    pick = (0..x.shape[a])
                        .filter(|c| !taken.contains(c))
                        .reduce(|best, c| {
                            j[a] = c;
                            let v = x.at(&j);
                            j[a] = best;
                            let b = x.at(&j);
                            let better = if *largest { v > b } else { v < b };
                            if better { c } else { best }
                        })
                        .unwrap();
                    taken.push(pick);
                }
                j[a] = pick;
                if *indices { pick as f64 } else { x.at(&j) }
            });
        }
        Op::Hardmax { axis } => {
            let x = &inputs[0];
            let a = axis_of(*axis, x.shape.len());
            each(&mut y, &|idx| {
                let mut j = idx.to_vec();
                let mut best = 0;
                for k in 0..x.shape[a] {
                    j[a] = k;
                    let v = x.at(&j);
                    j[a] = best;
                    if v > x.at(&j) {
                        best = k;
                    }
                }
                f64::from(u8::from(best == idx[a]))
            });
        }
        Op::CumSum { axis, exclusive, reverse } | Op::CumProd { axis, exclusive, reverse } => {
            let x = &inputs[0];
            let a = axis_of(*axis, x.shape.len());
            let product = matches!(op, Op::CumProd { .. });
            y.dtype = x.dtype;
            each(&mut y, &|idx| {
                let mut j = idx.to_vec();
                let terms = (0..x.shape[a])
                    .filter(|&k| {
                        let before = if *reverse { k > idx[a] } else { k < idx[a] };
                        before || (!*exclusive && k == idx[a])
                    })
                    .map(|k| {
                        j[a] = k;
                        x.at(&j)
                    });
                if product { terms.product() } else { terms.sum() }
            });
        }
        Op::Mod { fmod } => {
            let (a, b) = (&inputs[0], &inputs[1]);
            y.dtype = a.dtype;
            each(&mut y, &|idx| {
                let (u, v) = (
                    a.data[broadcast_index(idx, &a.shape)],
                    b.data[broadcast_index(idx, &b.shape)],
                );
                let r = u - v * (u / v).trunc();
                if !*fmod && r != 0.0 && (r < 0.0) != (v < 0.0) { r + v } else { r }
            });
        }
        Op::Tile { .. } => {
            let x = &inputs[0];
            y.dtype = x.dtype;
            each(&mut y, &|idx| {
                let j: Vec<usize> = idx.iter().zip(&x.shape).map(|(&i, &n)| i % n).collect();
                x.at(&j)
            });
        }
        Op::Expand { .. } => {
            let x = &inputs[0];
            y.dtype = x.dtype;
            each(&mut y, &|idx| x.data[broadcast_index(idx, &x.shape)]);
        }
        Op::Gather { axis } => {
            let (data, indices) = (&inputs[0], &inputs[1]);
            let a = axis_of(*axis, data.shape.len());
            let r = indices.shape.len();
            y.dtype = data.dtype;
            each(&mut y, &|idx| {
                let k = indices.at(&idx[a..a + r]) as i64;
                let k = if k < 0 { k + data.shape[a] as i64 } else { k } as usize;
                let mut j = idx[..a].to_vec();
                j.push(k);
                j.extend_from_slice(&idx[a + r..]);
                data.at(&j)
            });
        }
        Op::GatherElements { axis } => {
            let (data, indices) = (&inputs[0], &inputs[1]);
            let a = axis_of(*axis, data.shape.len());
            y.dtype = data.dtype;
            each(&mut y, &|idx| {
                let k = indices.at(idx) as i64;
                let mut j = idx.to_vec();
                j[a] = if k < 0 { k + data.shape[a] as i64 } else { k } as usize;
                data.at(&j)
            });
        }
        Op::ScatterNd { reduction } => {
            // Row by row, element by element: each update's coordinates are its row's index
            // prefix followed by its own trailing coordinates.
            let (data, indices, updates) = (&inputs[0], &inputs[1], &inputs[2]);
            y.dtype = data.dtype;
            y.data = data.data.clone();
            for e in 0..updates.data.len() {
                let j = nd_coordinates(indices, &unravel(e, &updates.shape), &data.shape);
                let flat = ravel(&j, &data.shape);
                y.data[flat] = scatter_combine(*reduction, y.data[flat], updates.data[e]);
            }
        }
        Op::GatherNd => {
            // Each output element: its row's index prefix, then its own trailing coordinates.
            let (data, indices) = (&inputs[0], &inputs[1]);
            y.dtype = data.dtype;
            each(&mut y, &|idx| data.at(&nd_coordinates(indices, idx, &data.shape)));
        }
        Op::ScatterElements { axis, reduction } => {
            // Element by element of the indices: its own coordinates, the axis one replaced.
            let (data, indices, updates) = (&inputs[0], &inputs[1], &inputs[2]);
            let a = axis_of(*axis, data.shape.len());
            y.dtype = data.dtype;
            y.data = data.data.clone();
            for e in 0..indices.data.len() {
                let mut j = unravel(e, &indices.shape);
                let i = indices.data[e] as i64;
                j[a] = (if i < 0 { i + data.shape[a] as i64 } else { i }) as usize;
                let flat = ravel(&j, &data.shape);
                y.data[flat] = scatter_combine(*reduction, y.data[flat], updates.data[e]);
            }
        }
        Op::NllLoss(n) => {
            // Each target element by its multi-index: its class's value, weighted.
            use ordo_ir::op::LossReduction;
            let (x, t) = (&inputs[0], &inputs[1]);
            let mut losses = Vec::new();
            let mut weights = 0.0;
            for e in 0..t.data.len() {
                let mut idx = unravel(e, &t.shape);
                let class = t.data[e] as i64;
                if Some(class) == n.ignore_index {
                    losses.push(0.0);
                    continue;
                }
                let w = inputs.get(2).map_or(1.0, |w| w.data[class as usize]);
                idx.insert(1, class as usize);
                losses.push(-x.at(&idx) * w);
                weights += w;
            }
            y.data = match n.reduction {
                LossReduction::None => losses,
                LossReduction::Sum => vec![losses.iter().sum()],
                LossReduction::Mean => vec![losses.iter().sum::<f64>() / weights],
            };
        }
        Op::CrossEntropyLoss => {
            let (x, t) = (&inputs[0], &inputs[1]);
            let c = *x.shape.last().unwrap();
            let (mut sum, mut n) = (0.0, 0.0);
            for (r, &target) in t.data.iter().enumerate() {
                if target < 0.0 {
                    continue;
                }
                let row = &x.data[r * c..(r + 1) * c];
                let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
                sum += lse - row[target as usize];
                n += 1.0;
            }
            y.data[0] = sum / n;
        }
        Op::Grad(_) | Op::Update(_) => panic!("reference: forward ops only"),
        // Bits, not values: checked against hand-computed bits (tests/types.rs).
        Op::BitCast { .. } => panic!("reference: no bit casts"),
        // Selections: checked against onnx's reference outputs (ordo-cli's conformance tests).
        Op::NonZero { .. } | Op::NonMaxSuppression(_) | Op::Unique(_) => {
            panic!("reference: no selections")
        }
        Op::Opaque(o) => panic!("reference: `{}` is imported for planning only", o.op_type),
        Op::TensorParallel(_) => panic!("reference: a tensor-parallel collective does not run"),
    }
    vec![y]
}

fn unary(func: UnaryOp, x: f64) -> f64 {
    match func {
        // NaN stays NaN, as `torch.relu` and ONNX's `np.maximum(x, 0)` keep it.
        UnaryOp::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => x * 0.5 * (1.0 + erf(x / 2f64.sqrt())),
        UnaryOp::GeluTanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x.powi(3))).tanh())
        }
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::HardSwish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        UnaryOp::HardSigmoid => (x + 3.0).clamp(0.0, 6.0) / 6.0,
        // Not `x.powf(-0.5)`, which IEEE makes 0 at -inf where `torch.rsqrt` gives NaN.
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Erf => erf(x),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        // Not `x.powf(0.5)`, which IEEE makes +inf at -inf where `sqrt` gives NaN.
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Reciprocal => x.powi(-1),
        UnaryOp::Softplus => (1.0 + x.exp()).ln(),
        UnaryOp::Softsign => x / (1.0 + x.abs()),
        UnaryOp::Tan => x.sin() / x.cos(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => (x.exp() - (-x).exp()) / 2.0,
        UnaryOp::Cosh => (x.exp() + (-x).exp()) / 2.0,
        // Odd: ln(|x| + sqrt(x^2 + 1)) with x's sign, which stays -inf at -inf (the plain
        // formula gives -inf + inf).
        UnaryOp::Asinh => x.signum() * (x.abs() + (x * x + 1.0).sqrt()).ln(),
        UnaryOp::Acosh => (x + (x * x - 1.0).sqrt()).ln(),
        UnaryOp::Atanh => 0.5 * ((1.0 + x) / (1.0 - x)).ln(),
        UnaryOp::Mish => x * (1.0 + x.exp()).ln().tanh(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round_ties_even(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
    }
}

fn conv(cv: &Conv2d, x: &Dense, params: &[Dense], y: &mut Dense) {
    let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [_, o, oh, ow] = [y.shape[0], y.shape[1], y.shape[2], y.shape[3]];
    let (cg, og) = (c / cv.groups, o / cv.groups);
    let wt = &params[0];
    for b in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = if cv.bias { params[1].data[oc] } else { 0.0 };
                    for ic in 0..cg {
                        for ky in 0..cv.kernel[0] {
                            for kx in 0..cv.kernel[1] {
                                let (Some(iy), Some(ix)) = (
                                    tap(oy, ky, (cv.stride[0], cv.dilation[0], cv.padding[0]), h),
                                    tap(ox, kx, (cv.stride[1], cv.dilation[1], cv.padding[1]), w),
                                ) else {
                                    continue;
                                };
                                let xv = x.at(&[b, g * cg + ic, iy, ix]);
                                acc += xv * wt.at(&[oc, ic, ky, kx]);
                            }
                        }
                    }
                    y.data[ravel(&[b, oc, oy, ox], &y.shape)] = acc;
                }
            }
        }
    }
}

/// A scatter's element after an update lands on it (NaN-propagating max and min).
fn scatter_combine(reduction: ordo_ir::op::ScatterReduction, a: f64, u: f64) -> f64 {
    use ordo_ir::op::ScatterReduction as R;
    let nan = a.is_nan() || u.is_nan();
    match reduction {
        R::None => u,
        R::Add => a + u,
        R::Mul => a * u,
        R::Max if nan => f64::NAN,
        R::Max => a.max(u),
        R::Min if nan => f64::NAN,
        R::Min => a.min(u),
    }
}

/// The data coordinates of element `at` of a `GatherND` output or `ScatterND` update: the index
/// row of `at`'s leading coordinates (negative from the end), then `at`'s trailing ones.
fn nd_coordinates(indices: &Dense, at: &[usize], data_shape: &[usize]) -> Vec<usize> {
    let rank = indices.shape.len();
    let mut j: Vec<usize> = (0..indices.shape[rank - 1])
        .map(|d| {
            let mut row = at[..rank - 1].to_vec();
            row.push(d);
            let i = indices.at(&row) as i64;
            (if i < 0 { i + data_shape[d] as i64 } else { i }) as usize
        })
        .collect();
    j.extend_from_slice(&at[rank - 1..]);
    j
}

/// Each input element scattered through the kernel: `y[oc, iy * s - p + ky * d, ...] +=
/// x[ic, iy, ...] * w[ic, oc in its group, ky, kx]`, then the bias.
fn conv_transpose(ct: &ConvTranspose2d, x: &Dense, params: &[Dense], y: &mut Dense) {
    let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [_, o, oh, ow] = [y.shape[0], y.shape[1], y.shape[2], y.shape[3]];
    let (cg, og) = (c / ct.groups, o / ct.groups);
    y.data.fill(0.0);
    for b in 0..n {
        for ic in 0..c {
            let g = ic / cg;
            for iy in 0..h {
                for ix in 0..w {
                    let xv = x.at(&[b, ic, iy, ix]);
                    for ocg in 0..og {
                        for ky in 0..ct.kernel[0] {
                            for kx in 0..ct.kernel[1] {
                                let (Some(oy), Some(ox)) = (
                                    tap(iy, ky, (ct.stride[0], ct.dilation[0], ct.padding[0]), oh),
                                    tap(ix, kx, (ct.stride[1], ct.dilation[1], ct.padding[1]), ow),
                                ) else {
                                    continue;
                                };
                                let at = ravel(&[b, g * og + ocg, oy, ox], &y.shape);
                                y.data[at] += xv * params[0].at(&[ic, ocg, ky, kx]);
                            }
                        }
                    }
                }
            }
        }
    }
    if ct.bias {
        for (i, v) in y.data.iter_mut().enumerate() {
            *v += params[1].data[(i / (oh * ow)) % o];
        }
    }
}

fn pool(p: &Pool2d, x: &Dense, y: &mut Dense, max: bool) {
    let (h, w) = (x.shape[2] as i64, x.shape[3] as i64);
    for i in 0..y.data.len() {
        let [b, c, oy, ox] = unravel(i, &y.shape)[..] else { unreachable!() };
        let y0 = (oy * p.stride[0]) as i64 - p.padding[0] as i64;
        let x0 = (ox * p.stride[1]) as i64 - p.padding[1] as i64;
        let (mut best, mut sum, mut inside, mut padded) = (f64::NEG_INFINITY, 0.0, 0, 0);
        for ky in 0..p.kernel[0] as i64 {
            for kx in 0..p.kernel[1] as i64 {
                let (iy, ix) = (y0 + ky, x0 + kx);
                let in_pad = iy < h + p.padding[0] as i64 && ix < w + p.padding[1] as i64;
                if in_pad {
                    padded += 1;
                }
                if iy < 0 || ix < 0 || iy >= h || ix >= w {
                    continue;
                }
                let v = x.at(&[b, c, iy as usize, ix as usize]);
                best = best.max(v);
                sum += v;
                inside += 1;
            }
        }
        y.data[i] = if max {
            best
        } else {
            sum / f64::from(if p.count_include_pad { padded } else { inside })
        };
    }
}

fn lstm(l: &Lstm, x: &Dense, params: &[Dense], y: &mut Dense) {
    let [t_len, b_len, i_len] = [x.shape[0], x.shape[1], x.shape[2]];
    let (h, dirs) = (l.hidden, l.directions());
    for d in 0..dirs {
        let [w_ih, w_hh, b_ih, b_hh] = [0, 1, 2, 3].map(|k| &params[4 * d + k]);
        for b in 0..b_len {
            let (mut hp, mut cp) = (vec![0.0; h], vec![0.0; h]);
            for s in 0..t_len {
                let t = if d == 1 { t_len - 1 - s } else { s };
                let gate = |row: usize| {
                    let mut z = b_ih.data[row] + b_hh.data[row];
                    for k in 0..i_len {
                        z += w_ih.data[row * i_len + k] * x.at(&[t, b, k]);
                    }
                    for k in 0..h {
                        z += w_hh.data[row * h + k] * hp[k];
                    }
                    z
                };
                let (mut hn, mut cn) = (vec![0.0; h], vec![0.0; h]);
                for j in 0..h {
                    let i = sigmoid(gate(j));
                    let f = sigmoid(gate(h + j));
                    let g = gate(2 * h + j).tanh();
                    let o = sigmoid(gate(3 * h + j));
                    cn[j] = f * cp[j] + i * g;
                    hn[j] = o * cn[j].tanh();
                    y.data[ravel(&[t, b, d * h + j], &y.shape)] = hn[j];
                }
                (hp, cp) = (hn, cn);
            }
        }
    }
}

/// The coordinate that window position `i`'s tap `k` reads, `i * stride + k * dilation -
/// padding`, when it lies in `0..size` (outside it is padding).
fn tap(
    i: usize,
    k: usize,
    (stride, dilation, padding): (usize, usize, usize),
    size: usize,
) -> Option<usize> {
    (i * stride + k * dilation).checked_sub(padding).filter(|&at| at < size)
}
