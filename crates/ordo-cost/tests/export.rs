//! Export of a small hand-built IR graph, with every number worked out by hand.

use ordo_cost::{ColocationGroup, costgraph_from_graph};
use ordo_ir::op::{Linear, Lstm};
use ordo_ir::{DType, GraphBuilder, Op, TensorFact};

/// Compute times: round(max(flops / 15.7e12, bytes / 900e9) * 1e6 + 5) µs.
/// Link weights: round(0.0001754 * bytes + 134) µs.
#[test]
fn hand_built_graph() {
    let mut b = GraphBuilder::new("tiny");
    let x = b.input("x", TensorFact::f32([64, 1024])).unwrap(); // 0
    let fc1 = b.linear("fc1", x, 4096).unwrap(); // 1
    let relu = b.relu("relu", fc1).unwrap(); // 2
    let view = b.reshape("view", relu, &[64, 64, 64]).unwrap(); // 3
    let tr = b.transpose("tr", view, &[0, 2, 1]).unwrap(); // 4
    let sq = b.mul("sq", tr, tr).unwrap(); // 5
    let cat = b.concat("cat", &[sq, view], 0).unwrap(); // 6
    b.slice("head", cat, 0, 0, 32).unwrap(); // 7
    let fc1_params = b.params_of(fc1.node).to_vec();
    b.op_with_params("tied", Op::Linear(Linear::new(4096)), &[x], &fc1_params).unwrap(); // 8
    let ids = b.input("ids", TensorFact::new(DType::I64, [64, 512])).unwrap(); // 9
    b.embedding("emb", ids, 1000, 1024).unwrap(); // 10
    let seq = b.input("seq", TensorFact::f32([10, 4, 32])).unwrap(); // 11
    b.lstm("lstm", seq, Lstm::new(16)).unwrap(); // 12
    let graph = b.finish();

    let cost = costgraph_from_graph(&graph);
    cost.validate("tiny").unwrap();
    assert_eq!(cost.graph["source"], "ordo");
    assert_eq!(cost.graph["model"], "tiny");
    assert!(cost.graph["cost_model"].as_str().unwrap().contains("15.7e12"));

    let x_bytes = 64 * 1024 * 4; // 262144
    let w_bytes = (4096 * 1024 + 4096) * 4; // 16793600: weight and bias
    let h_bytes = 64 * 4096 * 4; // 1048576
    let cat_bytes = 2 * h_bytes;
    let emb_bytes = 64 * 512 * 1024 * 4; // 134217728
    let rows: [(&str, &str, u64, u64, u64); 13] = [
        // (name, op type, weight, persistent, output)
        ("x", "Input", 1, 0, x_bytes),
        // flops 2*64*4096*1024 + 64*4096 = 537133056 -> 34.21 µs; bytes 18104320 -> 20.12 µs.
        ("fc1", "Linear", 39, w_bytes, h_bytes),
        // flops 262144 (tiny); bytes 2 * 1048576 -> 2.33 µs; 7.33.
        ("relu", "Relu", 7, 0, h_bytes),
        ("view", "Reshape", 5, 0, h_bytes),
        // moves in + out = 2097152 bytes -> 2.33 µs.
        ("tr", "Transpose", 7, 0, h_bytes),
        // reads its one input twice: bytes 3 * 1048576 -> 3.50 µs; 8.495 -> 8.
        ("sq", "Mul", 8, 0, h_bytes),
        // in 2 MiB + out 2 MiB -> 4.66 µs.
        ("cat", "Concat", 10, 0, cat_bytes),
        // 2 * out = 2 * 524288 bytes -> 1.17 µs.
        ("head", "Slice", 6, 0, cat_bytes / 4),
        // the same work as fc1; its parameters are charged to fc1.
        ("tied", "Linear", 39, 0, h_bytes),
        ("ids", "Input", 1, 0, 64 * 512 * 8),
        // 2 * out + indices = 268697600 bytes -> 298.55 µs; the 4096000-byte table is persistent.
        ("emb", "Embedding", 304, 1000 * 1024 * 4, emb_bytes),
        ("seq", "Input", 1, 0, 10 * 4 * 32 * 4),
        // tiny roofline (5 µs) + 10 steps * 1 direction * 5 µs.
        ("lstm", "Lstm", 55, (64 * 32 + 64 * 16 + 128) * 4, 10 * 4 * 16 * 4),
    ];
    assert_eq!(cost.nodes.len(), rows.len());
    for (i, (node, (name, op, weight, persistent, output))) in
        cost.nodes.iter().zip(rows).enumerate()
    {
        assert_eq!(node.id, i as u64);
        assert_eq!(node.name, name);
        assert_eq!(node.op_type.as_deref(), Some(op), "{name}");
        assert_eq!(node.weight, weight, "{name}");
        assert_eq!(node.persistent_memory, persistent, "{name}");
        assert_eq!(node.output_memory, [output], "{name}");
        assert_eq!(node.temporary_memory, 0);
        assert_eq!(node.colocation_group, ColocationGroup::List(vec![name.to_string()]));
        // Baechi's roofline has parallelism 1: every kernel fills the device.
        assert_eq!(node.occupancy, 1.0, "{name}");
    }
    assert_eq!(cost.nodes[1].flops, Some(537133056));
    assert_eq!(cost.nodes[12].flops, Some(266240));

    // 262144 B -> 179.98; 1048576 B -> 317.92; 2097152 B -> 501.84; 5120 B -> 134.90.
    let links: Vec<(u64, u64, u64, Vec<&str>)> = cost
        .links
        .iter()
        .map(|l| (l.source, l.target, l.weight, l.tensor.iter().map(|t| t.name.as_str()).collect()))
        .collect();
    let expected: Vec<(u64, u64, u64, Vec<&str>)> = vec![
        (0, 1, 180, vec!["x:0"]),
        (0, 8, 180, vec!["x:0"]),
        (1, 2, 318, vec!["fc1:0"]),
        (2, 3, 318, vec!["relu:0"]),
        (3, 4, 318, vec!["view:0"]),
        (3, 6, 318, vec!["view:0"]),
        (4, 5, 318, vec!["tr:0"]),
        (5, 6, 318, vec!["sq:0"]),
        (6, 7, 502, vec!["cat:0"]),
        (9, 10, 180, vec!["ids:0"]),
        (11, 12, 135, vec!["seq:0"]),
    ];
    assert_eq!(links, expected);
    assert_eq!(cost.links[0].tensor[0].num_bytes, x_bytes);

    let text = ordo_cost::to_json_string(&cost);
    assert!(!text.contains("occupancy"), "occupancy 1 is not written");
    assert_eq!(ordo_cost::parse_costgraph(&text, "tiny.json").unwrap(), cost);
}
