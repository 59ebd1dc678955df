//! Launch overhead and occupancy: the device fields that set them, the cost-graph attribute that
//! carries them, and what they make of small kernels on a GPU and on a CPU core.

use ordo_cost::{Cluster, ClusterError, CostGraphError, costgraph_for_cluster, parse_costgraph};
use ordo_ir::{GraphBuilder, TensorFact};

/// a -> b; b occupies a quarter of its device.
const GRAPH: &str = r#"{"directed": true, "multigraph": false, "graph": {},
  "nodes": [
    {"id": 0, "name": "a", "weight": 5, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [4096]},
    {"id": 1, "name": "b", "weight": 7, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [16], "occupancy": 0.25}
  ],
  "links": [
    {"source": 0, "target": 1, "weight": 135,
     "tensor": [{"name": "a:0", "num_bytes": 4096, "weight": 135}]}
  ]}"#;

#[test]
fn the_occupancy_attribute_round_trips() {
    let graph = parse_costgraph(GRAPH, "g.json").unwrap();
    assert_eq!(graph.nodes[0].occupancy, 1.0, "absent means 1");
    assert_eq!(graph.nodes[1].occupancy, 0.25);
    let text = ordo_cost::to_json_string(&graph);
    assert_eq!(text.matches("\"occupancy\":0.25").count(), 1, "{text}");
    assert_eq!(text.matches("occupancy").count(), 1, "1 is not written: {text}");
    assert_eq!(parse_costgraph(&text, "g.json").unwrap(), graph);
    // An integer 1 and null both read as 1.
    for value in ["1", "null"] {
        let text = GRAPH.replace("\"occupancy\": 0.25", &format!("\"occupancy\": {value}"));
        assert_eq!(parse_costgraph(&text, "g.json").unwrap().nodes[1].occupancy, 1.0, "{value}");
    }
    // A share that needs every digit survives too.
    let mut graph = graph;
    graph.nodes[0].occupancy = 65536.0 / 270336.0;
    let text = ordo_cost::to_json_string(&graph);
    assert_eq!(parse_costgraph(&text, "g.json").unwrap(), graph);
}

#[test]
fn a_bad_occupancy_names_the_node() {
    for (value, problem) in [
        ("0", "is 0; it must be a share of the device, more than 0 and at most 1"),
        ("1.5", "is 1.5; it must be"),
        ("-0.5", "is -0.5; it must be"),
        ("-2", "is -2; it must be"),
        ("\"half\"", "must be a number, found a string \"half\""),
        ("[0.5]", "must be a number, found a list"),
    ] {
        let text = GRAPH.replace("\"occupancy\": 0.25", &format!("\"occupancy\": {value}"));
        let err = parse_costgraph(&text, "bad.json").expect_err(value);
        assert!(matches!(err, CostGraphError::Node { .. }), "{err:?}");
        let message = err.to_string();
        let start = "bad.json: node 1 (\"b\"): attribute \"occupancy\" ";
        assert!(message.starts_with(start), "{message}");
        assert!(message.contains(problem), "{message:?} lacks {problem:?}");
    }
    // A graph built in memory is checked as well, NaN included.
    let mut graph = parse_costgraph(GRAPH, "g.json").unwrap();
    for bad in [f64::NAN, 0.0, 2.0, f64::INFINITY] {
        graph.nodes[0].occupancy = bad;
        let message = graph.validate("mem").unwrap_err().to_string();
        assert!(message.starts_with("mem: node 0 (\"a\"): attribute \"occupancy\""), "{message}");
    }
}

#[test]
fn shipped_devices_have_their_launch_overhead_and_parallelism() {
    // SMs x 2048 resident threads per SM.
    for (prefix, sms) in [("v100", 80), ("a100", 108), ("h100x4-nvlink", 132), ("h100x8-pcie", 114)]
    {
        for name in Cluster::builtin_names().filter(|n| n.starts_with(prefix)) {
            let cluster = Cluster::builtin(name).unwrap();
            let device = &cluster.node_devices()[0];
            assert_eq!(device.parallelism, sms * 2048, "{name}");
            assert_eq!(device.launch_overhead_us, 5.0, "{name}");
        }
    }
    let cpu = Cluster::builtin("cpu").unwrap();
    let core = &cpu.node_devices()[0];
    assert_eq!((core.parallelism, core.launch_overhead_us), (1, 1.0));
}

const DEVICE: &str = r#"{"format": "ordo.cluster/1", "name": "one",
  "device": {"kind": "gpu", "memory_bytes": "16GiB", "peak_flops": 15.7e12,
             "memory_bandwidth": 900e9, "launch_overhead_us": 3, "parallelism": 4096},
  "count": 1}"#;

#[test]
fn device_fields_are_read_checked_and_written() {
    let cluster = Cluster::parse(DEVICE, "one.json").unwrap();
    assert_eq!(cluster.node_devices()[0].launch_overhead_us, 3.0);
    assert_eq!(cluster.roofline(0).parallelism, 4096);
    let text = cluster.to_json_string();
    assert!(text.contains("\"launch_overhead_us\": 3,\n    \"parallelism\": 4096"), "{text}");
    assert_eq!(Cluster::parse(&text, "one.json").unwrap(), cluster);

    // Older files: `kernel_overhead_us` is the same field, and no parallelism means 1.
    let old = DEVICE.replace("launch_overhead_us", "kernel_overhead_us");
    let old = old.replace(", \"parallelism\": 4096", "");
    let old = Cluster::parse(&old, "old.json").unwrap();
    assert_eq!(old.node_devices()[0].launch_overhead_us, 3.0);
    assert_eq!(old.node_devices()[0].parallelism, 1);

    let bad = |from: &str, to: &str| {
        assert!(DEVICE.contains(from), "{from}");
        Cluster::parse(&DEVICE.replace(from, to), "bad.json").unwrap_err()
    };
    let err = bad("\"parallelism\": 4096", "\"parallelism\": 0");
    assert!(matches!(err, ClusterError::Device { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "bad.json: \"device\": \"parallelism\" is 0; a device keeps at least 1 work item in flight"
    );
    let err = bad("\"parallelism\": 4096", "\"parallelism\": 2.5");
    assert!(err.to_string().contains("2.5"), "{err}");
    let err = bad("\"launch_overhead_us\": 3", "\"launch_overhead_us\": -3");
    assert!(err.to_string().contains("\"launch_overhead_us\" is -3"), "{err}");
    // One name or the other, not both.
    let err =
        bad("\"launch_overhead_us\": 3", "\"launch_overhead_us\": 3, \"kernel_overhead_us\": 3");
    assert!(err.to_string().contains("duplicate field"), "{err}");
}

/// x [4, 64] -> fc (Linear 64) -> relu: kernels of 256 output elements.
#[test]
fn small_kernels_occupy_little_of_a_gpu_and_all_of_a_cpu_core() {
    let mut b = GraphBuilder::new("small");
    let x = b.input("x", TensorFact::f32([4, 64])).unwrap();
    let fc = b.linear("fc", x, 64).unwrap();
    b.relu("relu", fc).unwrap();
    let graph = b.finish();

    let a100 = Cluster::builtin("a100x4-nvlink").unwrap();
    let gpu = costgraph_for_cluster(&graph, &a100);
    let share = 256.0 / 221_184.0;
    assert!(gpu.nodes.iter().all(|n| n.occupancy == share), "{:?}", gpu.nodes);
    // fc: 33024 FLOP, 18688 B (input, output, 64 x 64 weights and 64 biases) over 1/864 of
    // the A100: max(1.46, 7.92) + 5 = 12.92 µs, where the whole A100 would take 5.01 µs.
    // relu: 256 FLOP and 2048 B: max(0.01, 0.87) + 5 = 5.87 µs.
    let weights: Vec<u64> = gpu.nodes.iter().map(|n| n.weight).collect();
    assert_eq!(weights, [1, 13, 6]);
    assert_eq!(a100.roofline(0).time_us(33024, 18688), 5);
    assert!(gpu.graph["cost_model"].as_str().unwrap().contains("221184 threads in flight"));

    let cpu = costgraph_for_cluster(&graph, &Cluster::builtin("cpu").unwrap());
    assert!(cpu.nodes.iter().all(|n| n.occupancy == 1.0));
    // fc on one core: max(0.22, 3.65) + 1 µs.
    assert_eq!(cpu.nodes[1].weight, 5);
}
