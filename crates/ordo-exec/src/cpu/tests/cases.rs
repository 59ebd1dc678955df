//! Random small instances of every op, shared by the forward and gradient tests.

use ordo_ir::op::{
    BatchNorm, Conv2d, ConvTranspose2d, Embedding, LayerNorm, Linear, Lstm, Pool2d, UnaryOp,
};
use ordo_ir::op::{Distribution, ScatterReduction};
use ordo_ir::{DType, Op, TensorFact};

use super::super::Tensor;
use super::{params_for, positive, rand};

/// One instance: the op, its inputs and its parameters.
pub(crate) struct Case {
    pub op: Op,
    pub inputs: Vec<Tensor>,
    pub params: Vec<Tensor>,
}

fn case(op: Op, inputs: Vec<Tensor>, seed: u64) -> Case {
    let params = params_for(&op, &inputs, seed);
    Case { op, inputs, params }
}

const UNARIES: [UnaryOp; 32] = [
    UnaryOp::Relu,
    UnaryOp::Gelu,
    UnaryOp::GeluTanh,
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::HardSwish,
    UnaryOp::HardSigmoid,
    UnaryOp::Rsqrt,
    UnaryOp::Erf,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Abs,
    UnaryOp::Sin,
    UnaryOp::Cos,
    UnaryOp::Reciprocal,
    UnaryOp::Softplus,
    UnaryOp::Softsign,
    UnaryOp::Tan,
    UnaryOp::Asin,
    UnaryOp::Acos,
    UnaryOp::Atan,
    UnaryOp::Sinh,
    UnaryOp::Cosh,
    UnaryOp::Asinh,
    UnaryOp::Acosh,
    UnaryOp::Atanh,
    UnaryOp::Mish,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Sign,
];

/// A random transposed convolution and input: groups, strides, padding, output padding,
/// dilation.
pub(crate) fn conv_transpose_case(r: &mut fastrand::Rng, seed: u64) -> Case {
    let groups = r.usize(1..3);
    let (cg, og) = (r.usize(1..3), r.usize(1..3));
    let kernel = [r.usize(1..4), r.usize(1..4)];
    let stride = [r.usize(1..3), r.usize(1..3)];
    let dilation = [r.usize(1..3), 1];
    let output_padding = [r.usize(0..stride[0].max(dilation[0])), 0];
    // At most half the dilated kernel: the output stays at least the input's size.
    let padding =
        [r.usize(0..=dilation[0] * (kernel[0] - 1) / 2), r.usize(0..=(kernel[1] - 1) / 2)];
    let op = Op::ConvTranspose2d(ConvTranspose2d {
        out_channels: og * groups,
        kernel,
        stride,
        padding,
        output_padding,
        dilation,
        groups,
        bias: r.bool(),
    });
    let x = rand(&[2, cg * groups, r.usize(2..5), r.usize(2..5)], seed + 60);
    case(op, vec![x], seed)
}

/// A random convolution and input: groups 1, 2 or depthwise, strides, padding, dilation.
pub(crate) fn conv_case(r: &mut fastrand::Rng, seed: u64) -> Case {
    let (cg, groups) = match r.usize(0..3) {
        0 => (r.usize(1..4), 1),
        1 => (r.usize(1..3), 2),
        _ => (1, r.usize(2..5)),
    };
    let og = r.usize(1..3);
    let (k, d, p) = ([r.usize(1..4), r.usize(1..4)], r.usize(1..3), r.usize(0..2));
    let span = |k: usize| d * (k - 1) + 1;
    let (h, w) = (span(k[0]) + r.usize(0..4), span(k[1]) + r.usize(0..4));
    let mut cv = Conv2d::rect(og * groups, k[0], k[1]).stride(r.usize(1..3)).padding(p);
    cv = cv.dilation(d).groups(groups);
    if r.bool() {
        cv = cv.no_bias();
    }
    let x = rand(&[r.usize(1..3), cg * groups, h, w], seed);
    case(Op::Conv2d(cv), vec![x], seed)
}

/// A random pooling window over a random input.
pub(crate) fn pool_case(r: &mut fastrand::Rng, seed: u64, max: bool) -> Case {
    let k = r.usize(1..4);
    let mut p = Pool2d::new(k, r.usize(1..3)).padding(r.usize(0..k / 2 + 1));
    if r.bool() {
        p = p.ceil_mode();
    }
    p.count_include_pad = r.bool();
    let x = rand(&[r.usize(1..3), r.usize(1..3), k + r.usize(0..4), k + r.usize(0..4)], seed);
    case(if max { Op::MaxPool2d(p) } else { Op::AvgPool2d(p) }, vec![x], seed)
}

/// One random instance of every op kind (unaries: all eight).
pub(crate) fn all(seed: u64) -> Vec<Case> {
    let mut r = fastrand::Rng::with_seed(seed);
    let s = seed * 1000;
    let mut cases = vec![conv_case(&mut r, s + 1), pool_case(&mut r, s + 2, true)];
    cases.push(pool_case(&mut r, s + 3, false));
    let lin = Linear { out_features: r.usize(1..5), bias: r.bool() };
    cases.push(case(Op::Linear(lin), vec![rand(&[2, r.usize(1..4), r.usize(1..5)], s + 4)], s));
    let (m, k, n) = (r.usize(1..4), r.usize(1..4), r.usize(1..4));
    let (a, b) =
        if r.bool() { (vec![2, 1, m, k], vec![3, k, n]) } else { (vec![m, k], vec![k, n]) };
    cases.push(case(Op::MatMul, vec![rand(&a, s + 5), rand(&b, s + 6)], s));
    let bn_shape = if r.bool() { vec![3, 2, 2, 3] } else { vec![4, 3] };
    cases.push(case(Op::BatchNorm(BatchNorm::new()), vec![rand(&bn_shape, s + 7)], s));
    let ln = if r.bool() {
        LayerNorm::new(4)
    } else {
        LayerNorm { normalized_shape: vec![3, 4], eps: 1e-5, affine: r.bool() }
    };
    cases.push(case(Op::LayerNorm(ln), vec![rand(&[2, 3, 4], s + 8)], s));
    for (i, func) in UNARIES.into_iter().enumerate() {
        let mut x = rand(&[2, 3, 4], s + 10 + i as u64);
        if matches!(func, UnaryOp::Rsqrt | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Reciprocal) {
            x = positive(x);
        }
        if matches!(func, UnaryOp::HardSwish | UnaryOp::HardSigmoid) {
            let v = x.as_f32().unwrap().iter().map(|v| v * 5.0).collect();
            x = Tensor::from_f32(x.shape(), v).unwrap();
        }
        // Inside the open domains, away from their ends.
        if matches!(func, UnaryOp::Asin | UnaryOp::Acos | UnaryOp::Atanh) {
            let v = x.as_f32().unwrap().iter().map(|v| v * 0.8).collect();
            x = Tensor::from_f32(x.shape(), v).unwrap();
        }
        if func == UnaryOp::Acosh {
            let v = x.as_f32().unwrap().iter().map(|v| v.abs() + 1.2).collect();
            x = Tensor::from_f32(x.shape(), v).unwrap();
        }
        cases.push(case(Op::Unary { func }, vec![x], s));
    }
    cases.push(case(Op::Scale { factor: 0.7 }, vec![rand(&[3, 4], s + 20)], s));
    let shapes =
        [([2, 3, 4].to_vec(), [3, 1].to_vec()), (vec![4], vec![2, 3, 4]), (vec![2, 1], vec![1, 3])];
    let (sa, sb) = &shapes[r.usize(0..3)];
    for op in [Op::Add, Op::Mul] {
        cases.push(case(op, vec![rand(sa, s + 21), rand(sb, s + 22)], s));
    }
    for (kind, axes, keepdims) in [
        (ordo_ir::op::ReduceKind::Mean, vec![2], true),
        (ordo_ir::op::ReduceKind::Sum, vec![0, 2], false),
        (ordo_ir::op::ReduceKind::Mean, vec![0, 1, 2], false),
    ] {
        let op = Op::Reduce(ordo_ir::op::Reduce { kind, axes, keepdims });
        cases.push(case(op, vec![rand(&[2, 3, 4], s + 29)], s));
    }
    {
        use ordo_ir::op::ReduceKind::*;
        for (i, kind) in
            [Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp].into_iter().enumerate()
        {
            let axes = if r.bool() { vec![1] } else { vec![0, 2] };
            let keepdims = r.bool();
            let mut x = rand(&[2, 3, 4], s + 40 + i as u64);
            if kind == LogSum {
                x = positive(x);
            }
            let op = Op::Reduce(ordo_ir::op::Reduce { kind, axes, keepdims });
            cases.push(case(op, vec![x], s));
        }
    }
    // Masks: comparisons of floats, of integers with ties, of bools; logic; selection.
    {
        use ordo_ir::op::{CompareKind, LogicKind};
        let mut g = fastrand::Rng::with_seed(s + 37);
        let ints = |g: &mut fastrand::Rng, shape: &[usize]| {
            Tensor::from_i64(shape, (0..shape.iter().product()).map(|_| g.i64(0..3)).collect())
                .unwrap()
        };
        let bools = |g: &mut fastrand::Rng, shape: &[usize]| {
            Tensor::from_bool(shape, (0..shape.iter().product()).map(|_| g.bool()).collect())
                .unwrap()
        };
        for kind in [
            CompareKind::Equal,
            CompareKind::Less,
            CompareKind::LessOrEqual,
            CompareKind::Greater,
            CompareKind::GreaterOrEqual,
        ] {
            let op = Op::Compare(kind);
            cases.push(case(op.clone(), vec![rand(sa, s + 38), rand(sb, s + 39)], s));
            cases.push(case(op, vec![ints(&mut g, sa), ints(&mut g, sb)], s));
        }
        cases.push(case(
            Op::Compare(CompareKind::Equal),
            vec![bools(&mut g, sa), bools(&mut g, sb)],
            s,
        ));
        for kind in [LogicKind::And, LogicKind::Or, LogicKind::Xor] {
            cases.push(case(Op::Logic(kind), vec![bools(&mut g, sa), bools(&mut g, sb)], s));
        }
        cases.push(case(Op::Not, vec![bools(&mut g, &[3, 4])], s));
        for to in [DType::F32, DType::I64, DType::Bool] {
            let mut halves = rand(&[3, 4], s + 42);
            // Whole and half values and zeros: truncation and "not zero" at their edges.
            halves.as_f32_mut().unwrap().iter_mut().for_each(|v| *v = (*v * 6.0).round() / 2.0);
            for x in [halves, ints(&mut g, &[3, 4]), bools(&mut g, &[2, 3])] {
                cases.push(case(Op::cast(to), vec![x], s));
            }
        }

        for d in [
            Distribution::Uniform { low: -2.0, high: 3.0 },
            Distribution::Normal { mean: 1.0, scale: 0.5 },
        ] {
            cases.push(case(Op::RandomLike(d), vec![ints(&mut g, &[2, 3, 4])], s));
        }
        let mut p = rand(&[4, 5], s + 43);
        p.as_f32_mut().unwrap().iter_mut().for_each(|v| *v = v.abs().min(1.0));
        cases.push(case(Op::Bernoulli, vec![p], s));
        let (c, x, y) = (bools(&mut g, sb), rand(sa, s + 40), rand(sb, s + 41));
        cases.push(case(Op::Where, vec![c.clone(), x, y], s));
        cases.push(case(Op::Where, vec![c, ints(&mut g, sb), ints(&mut g, sa)], s));
    }
    cases.push(case(
        Op::LogSoftmax { axis: if r.bool() { -1 } else { 1 } },
        vec![rand(&[2, 3, 4], s + 42)],
        s,
    ));
    for (k, upper) in [(0, true), (-1, false), (2, true), (1, false)] {
        cases.push(case(Op::Trilu { k, upper }, vec![rand(&[2, 3, 4], s + 43)], s));
    }
    {
        // Range: a start and a step at random, the limit half a step past the fourth element.
        let (start, delta) = (r.f32() * 4.0 - 2.0, r.f32() + 0.25);
        let limit = start + 3.5 * delta;
        let scalar = |v: f32| Tensor::from_f32(&[], vec![v]).unwrap();
        let bounds = vec![scalar(start), scalar(limit), scalar(delta)];
        cases.push(case(Op::Range { len: 4 }, bounds, s));
    }
    {
        // Integers with ties (first or last index), floats.
        let mut g = fastrand::Rng::with_seed(s + 44);
        let ties = Tensor::from_i64(&[3, 4, 2], (0..24).map(|_| g.i64(0..3)).collect()).unwrap();
        for (max, select_last) in [(true, false), (true, true), (false, false), (false, true)] {
            let op = Op::ArgExtreme { max, axis: 1, keepdims: select_last, select_last };
            cases.push(case(op, vec![ties.clone()], s));
            let op = Op::ArgExtreme { max, axis: -1, keepdims: !select_last, select_last };
            cases.push(case(op, vec![rand(&[3, 4, 2], s + 45)], s));
        }
    }
    {
        // Classes second, spatial dims after; some targets ignored; with and without weights.
        use ordo_ir::op::{LossReduction, NllLoss};
        let mut g = fastrand::Rng::with_seed(s + 46);
        let targets = Tensor::from_i64(&[3, 2], (0..6).map(|_| g.i64(0..5)).collect()).unwrap();
        for (i, reduction) in
            [LossReduction::None, LossReduction::Sum, LossReduction::Mean].into_iter().enumerate()
        {
            let op = Op::NllLoss(NllLoss { reduction, ignore_index: Some(4) });
            let x = rand(&[3, 4, 2], s + 47 + i as u64);
            let clamped: Vec<i64> =
                targets.as_i64().unwrap().iter().map(|&t| t.clamp(0, 3)).collect();
            let clamped = Tensor::from_i64(&[3, 2], clamped).unwrap();
            cases.push(case(op.clone(), vec![x.clone(), clamped], s));
            let weights = positive(rand(&[4], s + 50));
            let op = Op::NllLoss(NllLoss { reduction, ignore_index: Some(3) });
            let t = Tensor::from_i64(
                &[3, 2],
                targets.as_i64().unwrap().iter().map(|&t| t % 4).collect(),
            )
            .unwrap();
            cases.push(case(op, vec![x, t, weights], s));
        }
    }
    {
        // Broadcasts; gathers with repeated and negative indices (the gradient adds up).
        let mut g = fastrand::Rng::with_seed(s + 51);
        cases.push(case(Op::Expand { shape: vec![2, 3, 4] }, vec![rand(&[3, 1], s + 52)], s));
        cases.push(case(Op::Expand { shape: vec![3, 4] }, vec![rand(&[4], s + 53)], s));
        let idx = |g: &mut fastrand::Rng, shape: &[usize], len: i64| {
            Tensor::from_i64(shape, (0..shape.iter().product()).map(|_| g.i64(-len..len)).collect())
                .unwrap()
        };
        let data = rand(&[3, 4, 2], s + 54);
        cases.push(case(Op::Gather { axis: 1 }, vec![data.clone(), idx(&mut g, &[2, 3], 4)], s));
        cases.push(case(Op::Gather { axis: 0 }, vec![data.clone(), idx(&mut g, &[5], 3)], s));
        cases.push(case(Op::Gather { axis: -1 }, vec![data.clone(), idx(&mut g, &[], 2)], s));
        let op = Op::GatherElements { axis: 1 };
        cases.push(case(op, vec![data.clone(), idx(&mut g, &[3, 5, 2], 4)], s));
        let op = Op::GatherElements { axis: 0 };
        cases.push(case(op, vec![data, idx(&mut g, &[2, 2, 1], 3)], s));
        // Rows addressing elements and slices, with repeats (the last replacing row wins;
        // adds accumulate).
        for reduction in [
            ScatterReduction::None,
            ScatterReduction::Add,
            ScatterReduction::Mul,
            ScatterReduction::Max,
            ScatterReduction::Min,
        ] {
            let op = Op::ScatterNd { reduction };
            let (data, updates) = (rand(&[3, 4, 2], s + 55), rand(&[5, 2], s + 56));
            let rows = Tensor::from_i64(
                &[5, 2],
                (0..5).flat_map(|_| [g.i64(-3..3), g.i64(-4..4)]).collect(),
            )
            .unwrap();
            cases.push(case(op.clone(), vec![data, rows, updates], s));
            let (data, updates) = (rand(&[3, 4], s + 57), rand(&[2, 1, 4], s + 58));
            cases.push(case(op, vec![data, idx(&mut g, &[2, 1, 1], 3), updates], s));
            if reduction == ScatterReduction::None {
                let data = rand(&[3, 4, 2], s + 62);
                let rows = Tensor::from_i64(
                    &[2, 2, 2],
                    (0..4).flat_map(|_| [g.i64(-3..3), g.i64(-4..4)]).collect(),
                )
                .unwrap();
                cases.push(case(Op::GatherNd, vec![data, rows], s));
            }
            for (axis, len) in [(0, 3), (-1, 4)] {
                let op = Op::ScatterElements { axis, reduction };
                let (data, updates) = (rand(&[3, 4], s + 59), rand(&[2, 3], s + 61));
                cases.push(case(op, vec![data, idx(&mut g, &[2, 3], len), updates], s));
            }
        }
    }
    {
        use ordo_ir::op::ActivationKind as K;
        for (i, (kind, alpha, beta)) in [
            (K::Elu, 0.7, 0.0),
            (K::Selu, 1.67, 1.05),
            (K::LeakyRelu, 0.1, 0.0),
            (K::ThresholdedRelu, 0.3, 0.0),
            (K::Celu, 1.3, 0.0),
            (K::HardSigmoid, 0.4, 0.6),
            (K::Shrink, 0.25, 0.1),
        ]
        .into_iter()
        .enumerate()
        {
            let op = Op::Activation { kind, alpha, beta };
            cases.push(case(op, vec![rand(&[3, 5], s + 60 + i as u64)], s));
        }
    }
    {
        // Borders of every mode, a crop; tiles.
        use ordo_ir::op::PadMode;
        for (i, mode) in [PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap]
            .into_iter()
            .enumerate()
        {
            let op = Op::Pad { pads: vec![1, 0, 2, 2, -1, 1], mode, value: 0.5 };
            cases.push(case(op, vec![rand(&[3, 4, 3], s + 70 + i as u64)], s));
        }
        cases.push(case(Op::Tile { repeats: vec![2, 1, 3] }, vec![rand(&[2, 3, 2], s + 75)], s));
    }
    {
        for (i, (exclusive, reverse)) in
            [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate()
        {
            let axis = if i % 2 == 0 { 1 } else { -1 };
            let op = Op::CumSum { axis, exclusive, reverse };
            cases.push(case(op, vec![rand(&[2, 3, 4], s + 80 + i as u64)], s));
            let op = Op::CumProd { axis, exclusive, reverse };
            cases.push(case(op, vec![rand(&[2, 3, 4], s + 90 + i as u64)], s));
        }
        let mut g = fastrand::Rng::with_seed(s + 85);
        let ints = Tensor::from_i64(&[3, 4], (0..12).map(|_| g.i64(-9..9)).collect()).unwrap();
        cases.push(case(
            Op::CumSum { axis: 0, exclusive: false, reverse: true },
            vec![ints.clone()],
            s,
        ));
        cases.push(case(
            Op::CumProd { axis: 1, exclusive: true, reverse: false },
            vec![ints.clone()],
            s,
        ));
        cases.push(case(Op::Hardmax { axis: -1 }, vec![rand(&[3, 4], s + 86)], s));
        cases.push(case(Op::Hardmax { axis: 0 }, vec![rand(&[3, 4], s + 87)], s));
        // Remainders of signed values: C's for floats, both for integers (divisors nonzero).
        cases.push(case(
            Op::Mod { fmod: true },
            vec![rand(sa, s + 88), positive(rand(sb, s + 89))],
            s,
        ));
        let divisors = Tensor::from_i64(&[4], vec![3, -2, 5, -7]).unwrap();
        for fmod in [false, true] {
            cases.push(case(Op::Mod { fmod }, vec![ints.clone(), divisors.clone()], s));
        }
        // Bit operations, the second operand broadcast along the rows; shift counts 0 to 4.
        use ordo_ir::op::BitwiseKind;
        let counts = Tensor::from_i64(&[4], vec![0, 1, 3, 4]).unwrap();
        for kind in [BitwiseKind::And, BitwiseKind::Or, BitwiseKind::Xor] {
            cases.push(case(Op::Bitwise(kind), vec![ints.clone(), divisors.clone()], s));
        }
        for kind in [BitwiseKind::ShiftLeft, BitwiseKind::ShiftRight] {
            cases.push(case(Op::Bitwise(kind), vec![ints.clone(), counts.clone()], s));
        }
        cases.push(case(Op::Bitwise(BitwiseKind::Not), vec![ints.clone()], s));
    }
    {
        // Batched product, a diagonal with a sum, a three-way contraction, a full sum.
        use ordo_ir::op::Einsum;
        let ein = |inputs: Vec<Vec<u32>>, output: Vec<u32>| Op::Einsum(Einsum { inputs, output });
        let bmm = ein(vec![vec![0, 1, 2], vec![0, 2, 3]], vec![0, 1, 3]);
        cases.push(case(bmm, vec![rand(&[2, 3, 4], s + 90), rand(&[2, 4, 2], s + 91)], s));
        let diag = ein(vec![vec![0, 1, 1]], vec![0]);
        cases.push(case(diag, vec![rand(&[2, 3, 3], s + 92)], s));
        let three = ein(vec![vec![0, 1], vec![1, 2], vec![2]], vec![0]);
        let xs = vec![rand(&[3, 4], s + 93), rand(&[4, 2], s + 94), rand(&[2], s + 95)];
        cases.push(case(three, xs, s));
        cases.push(case(ein(vec![vec![0, 1]], vec![]), vec![rand(&[3, 4], s + 96)], s));
    }
    {
        // 1-D with uneven pads, 3-D dilated, ceil mode; both divisors.
        use ordo_ir::op::PoolNd;
        for (i, max) in [true, false].into_iter().enumerate() {
            let one_d = PoolNd {
                max,
                kernel: vec![3],
                stride: vec![2],
                dilation: vec![1],
                pads: vec![2, 1],
                ceil_mode: true,
                count_include_pad: i == 1,
            };
            cases.push(case(Op::Pool(one_d), vec![rand(&[2, 2, 7], s + 100 + i as u64)], s));
            let three_d = PoolNd {
                max,
                kernel: vec![2, 2, 2],
                stride: vec![1, 2, 1],
                dilation: vec![2, 1, 1],
                pads: vec![0, 1, 0, 1, 0, 1],
                ceil_mode: false,
                count_include_pad: i == 0,
            };
            cases.push(case(
                Op::Pool(three_d),
                vec![rand(&[1, 2, 4, 4, 3], s + 102 + i as u64)],
                s,
            ));
        }
    }
    for (k, axis, largest) in [(2, 1, true), (3, -1, false), (1, 0, true)] {
        for indices in [false, true] {
            let op = Op::TopK { k, axis, largest, indices };
            cases.push(case(op, vec![rand(&[3, 4, 3], s + 110)], s));
        }
    }
    // Distinct operands (no ties for the finite differences), a positive base for the power.
    for op in [Op::Max, Op::Min] {
        cases.push(case(op, vec![rand(sa, s + 31), rand(sb, s + 32)], s));
    }
    cases.push(case(Op::Pow, vec![positive(rand(sa, s + 33)), rand(sb, s + 34)], s));
    // Elements on both sides of each bound (none on a bound).
    cases.push(case(Op::Clip { min: -0.3, max: 0.4 }, vec![rand(&[3, 5], s + 35)], s));
    cases.push(case(Op::Clip { min: f64::NEG_INFINITY, max: 0.1 }, vec![rand(&[7], s + 36)], s));
    // A divisor away from 0, both ways round the broadcast.
    cases.push(case(Op::Div, vec![rand(sa, s + 25), positive(rand(sb, s + 26))], s));
    cases.push(case(Op::Div, vec![rand(sb, s + 27), positive(rand(sa, s + 28))], s));
    cases.push(case(Op::GlobalAvgPool, vec![rand(&[2, 3, 3, 4], s + 23)], s));
    let parts = (0..3).map(|i| rand(&[2, 1 + i, 3], s + 24 + i as u64)).collect();
    cases.push(case(Op::Concat { axis: if r.bool() { 1 } else { -2 } }, parts, s));
    cases.push(case(Op::Reshape { shape: vec![6, -1] }, vec![rand(&[2, 3, 4], s + 27)], s));
    cases.push(case(Op::Transpose { perm: vec![2, 0, 1] }, vec![rand(&[2, 3, 4], s + 28)], s));
    let sl = Op::Slice { axis: 1, start: r.i64(-6..2), end: -1, step: r.i64(1..3) };
    cases.push(case(sl, vec![rand(&[2, 7, 3], s + 29)], s));
    cases.push(case(
        Op::Softmax { axis: if r.bool() { -1 } else { 1 } },
        vec![rand(&[2, 3, 4], s + 30)],
        s,
    ));
    let cm = if r.bool() { vec![2, 4, 4] } else { vec![3, 5] };
    cases.push(case(Op::CausalMask, vec![rand(&cm, s + 31)], s));
    let ids = Tensor::random_ids(&[2, 3], 10, s + 32).unwrap();
    cases.push(case(Op::Embedding(Embedding::new(10, 4)), vec![ids], s));
    let lstm = if r.bool() { Lstm::bidirectional(3) } else { Lstm::new(r.usize(1..4)) };
    cases.push(case(Op::Lstm(lstm), vec![rand(&[r.usize(1..4), 2, 3], s + 33)], s));
    cases.push(case(Op::Dropout { p: 0.3 }, vec![rand(&[4, 5], s + 34)], s));
    let (lead, classes) = if r.bool() { (vec![4], 5) } else { (vec![2, 3], 4) };
    let mut targets =
        Tensor::random_ids(&lead, classes, s + 35).unwrap().as_i64().unwrap().to_vec();
    targets[0] = -100;
    let mut logits_shape = lead.clone();
    logits_shape.push(classes);
    let t = Tensor::from_i64(&lead, targets).unwrap();
    cases.push(case(Op::CrossEntropyLoss, vec![rand(&logits_shape, s + 36), t], s));
    let param = Tensor::random(&TensorFact::f32([3, 4]), s + 37).unwrap();
    cases.push(Case { op: Op::Parameter, inputs: vec![], params: vec![param] });
    cases
}
