//! Shape rules of individual ops, checked against PyTorch's documented formulas and examples.

use ordo_ir::op::{Conv2d, Lstm, Pool2d};
use ordo_ir::{DType, GraphBuilder, IrResult, OutletId, TensorFact, graph_stats};

fn shape_of(build: impl FnOnce(&mut GraphBuilder) -> IrResult<OutletId>) -> Vec<usize> {
    let mut b = GraphBuilder::new("t");
    let out = build(&mut b).unwrap();
    b.fact(out).shape.clone()
}

#[test]
fn conv_output_follows_the_pytorch_formula() {
    // floor((H + 2p - d(k-1) - 1) / s) + 1
    for (h, k, s, p, d) in
        [(224, 7, 2, 3, 1), (56, 3, 1, 1, 1), (17, 3, 2, 0, 1), (32, 3, 1, 2, 2), (5, 5, 1, 0, 1)]
    {
        let expected = (h + 2 * p - d * (k - 1) - 1) / s + 1;
        let shape = shape_of(|b| {
            let x = b.input("x", TensorFact::f32([2, 6, h, h]))?;
            b.conv2d("c", x, Conv2d::new(12, k).stride(s).padding(p).dilation(d).groups(3))
        });
        assert_eq!(shape, vec![2, 12, expected, expected], "h={h} k={k} s={s} p={p} d={d}");
    }
}

#[test]
fn conv_rejects_bad_groups_and_too_small_inputs() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", TensorFact::f32([1, 6, 4, 4])).unwrap();
    assert!(b.conv2d("groups", x, Conv2d::new(8, 1).groups(4)).is_err());
    assert!(b.conv2d("too_small", x, Conv2d::new(8, 5)).is_err());
    let v = b.input("v", TensorFact::f32([6, 4])).unwrap();
    assert!(b.conv2d("rank", v, Conv2d::new(8, 1)).is_err());
}

#[test]
fn pooling_floor_and_ceil_modes_match_pytorch() {
    // torch: MaxPool2d(3, 2)(112x112) -> 55; ceil_mode -> 56; MaxPool2d(3, 2, 1) -> 56.
    let pool = |h: usize, p: Pool2d| {
        shape_of(|b| {
            let x = b.input("x", TensorFact::f32([1, 1, h, h]))?;
            b.max_pool("p", x, p)
        })[2]
    };
    assert_eq!(pool(112, Pool2d::new(3, 2)), 55);
    assert_eq!(pool(112, Pool2d::new(3, 2).ceil_mode()), 56);
    assert_eq!(pool(112, Pool2d::new(3, 2).padding(1)), 56);
    // ceil mode never starts a window in the right padding: 6 with k2 s2 p1 -> 4, not 5.
    assert_eq!(pool(6, Pool2d::new(2, 2).padding(1).ceil_mode()), 4);
    assert_eq!(pool(147, Pool2d::new(3, 2)), 73);
}

#[test]
fn reshape_transpose_slice_concat() {
    assert_eq!(
        shape_of(|b| {
            let x = b.input("x", TensorFact::f32([2, 3, 4]))?;
            b.reshape("r", x, &[-1, 4])
        }),
        vec![6, 4]
    );
    assert_eq!(
        shape_of(|b| {
            let x = b.input("x", TensorFact::f32([2, 3, 4]))?;
            b.transpose("t", x, &[2, 0, 1])
        }),
        vec![4, 2, 3]
    );
    assert_eq!(
        shape_of(|b| {
            let x = b.input("x", TensorFact::f32([2, 10]))?;
            b.slice("s", x, -1, -3, i64::MAX)
        }),
        vec![2, 3]
    );
    assert_eq!(
        shape_of(|b| {
            let x = b.input("x", TensorFact::f32([2, 3, 5]))?;
            let y = b.input("y", TensorFact::f32([2, 4, 5]))?;
            b.concat("c", &[x, y, x], 1)
        }),
        vec![2, 10, 5]
    );
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", TensorFact::f32([2, 3, 4])).unwrap();
    assert!(b.reshape("bad", x, &[5, -1]).is_err());
    assert!(b.transpose("bad_perm", x, &[0, 0, 1]).is_err());
    let y = b.input("y", TensorFact::f32([2, 4, 5])).unwrap();
    assert!(b.concat("bad_cat", &[x, y], 1).is_err());
}

#[test]
fn matmul_broadcasts_batch_dimensions() {
    assert_eq!(
        shape_of(|b| {
            let q = b.input("q", TensorFact::f32([8, 12, 128, 64]))?;
            let k = b.input("k", TensorFact::f32([1, 12, 64, 128]))?;
            b.matmul("scores", q, k)
        }),
        vec![8, 12, 128, 128]
    );
    let mut b = GraphBuilder::new("t");
    let a = b.input("a", TensorFact::f32([3, 4])).unwrap();
    assert!(b.matmul("inner", a, a).is_err());
}

#[test]
fn lstm_and_embedding_shapes_and_params() {
    let mut b = GraphBuilder::new("t");
    let ids = b.input("ids", TensorFact::new(DType::I64, [40, 128])).unwrap();
    let e = b.embedding("emb", ids, 30000, 512).unwrap();
    let h = b.lstm("enc0", e, Lstm::bidirectional(512)).unwrap();
    assert_eq!(b.fact(h).shape, vec![40, 128, 1024]);
    let h = b.lstm("enc1", h, Lstm::new(512)).unwrap();
    assert_eq!(b.fact(h).shape, vec![40, 128, 512]);
    let g = b.finish();
    let lstm = |i: usize, h: usize| 4 * h * (i + h) + 8 * h;
    assert_eq!(graph_stats(&g).params as usize, 30000 * 512 + 2 * lstm(512, 512) + lstm(1024, 512));
    assert!(
        g.params
            .iter()
            .any(|p| p.name == "enc0.weight_hh_l0_reverse" && p.fact.shape == [2048, 512])
    );
}

#[test]
fn cross_entropy_needs_integer_targets_of_the_right_shape() {
    let mut b = GraphBuilder::new("t");
    let logits = b.input("logits", TensorFact::f32([4, 7, 10])).unwrap();
    let good = b.input("good", TensorFact::new(DType::I64, [4, 7])).unwrap();
    let float = b.input("float", TensorFact::f32([4, 7])).unwrap();
    let short = b.input("short", TensorFact::new(DType::I64, [4])).unwrap();
    let loss = b.cross_entropy("loss", logits, good).unwrap();
    assert_eq!(b.fact(loss).shape, Vec::<usize>::new());
    assert!(b.cross_entropy("l1", logits, float).is_err());
    assert!(b.cross_entropy("l2", logits, short).is_err());
}

#[test]
fn stats_count_flops_and_activations() {
    let mut b = GraphBuilder::new("t");
    let x = b.input("x", TensorFact::f32([2, 3, 8, 8])).unwrap();
    let c = b.conv2d("c", x, Conv2d::new(4, 3).padding(1)).unwrap();
    b.relu("r", c).unwrap();
    let g = b.finish();
    let stats = ordo_ir::node_stats(&g);
    // conv: 2 * out(2*4*8*8) * 3*3*3 + bias per output.
    assert_eq!(stats[1].flops, 2 * 512 * 27 + 512);
    assert_eq!(stats[1].params, 4 * 3 * 9 + 4);
    assert_eq!(stats[2].flops, 512);
    assert_eq!(stats[2].activation_bytes, 512 * 4);
    assert_eq!(stats[0].activation_bytes, 2 * 3 * 64 * 4);
}
