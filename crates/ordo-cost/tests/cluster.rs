//! Cluster descriptions: the shipped files, Baechi's model, hand-computed times, bad input,
//! byte counts, and costing a graph for a cluster.

use ordo_cost::{
    Cluster, ClusterError, CommModel, DeviceKind, DeviceSpec, LinkSpec, Roofline,
    costgraph_for_cluster, format_bytes, parse_bytes,
};
use ordo_ir::{GraphBuilder, TensorFact};

const GIB: u64 = 1 << 30;

#[test]
fn every_shipped_cluster_parses_and_round_trips() {
    let names: Vec<&str> = Cluster::builtin_names().collect();
    for gpu in ["v100", "a100", "h100"] {
        for n in [4, 8] {
            for link in ["nvlink", "pcie"] {
                assert!(names.contains(&format!("{gpu}x{n}-{link}").as_str()), "{gpu}x{n}-{link}");
            }
        }
    }
    assert!(names.contains(&"cpu"));
    let node_clusters = ["a100x8-ib-hdr", "h100x8-ib-ndr", "h100x8-roce"];
    assert!(node_clusters.iter().all(|name| names.contains(name)));
    assert_eq!(names.len(), 16);
    for name in names {
        let cluster = Cluster::builtin(name).unwrap();
        assert_eq!(cluster.name, name);
        assert!(cluster.source.as_deref().is_some_and(|s| s.len() > 40), "{name}: source");
        assert!(cluster.is_uniform_compute(), "{name}");
        let kind = if name == "cpu" { DeviceKind::Cpu } else { DeviceKind::Gpu };
        assert!(cluster.node_devices().iter().all(|d| d.kind == kind), "{name}");
        let count = if name.contains("x4") { 4 } else { 8 };
        assert_eq!(cluster.devices_per_node(), count, "{name}");
        let nodes = if node_clusters.contains(&name) { 16 } else { 1 };
        assert_eq!(cluster.node_count(), nodes, "{name}");
        assert_eq!(cluster.device_count(), count * nodes, "{name}");
        let uniform = name != "v100x8-nvlink" && nodes == 1;
        assert_eq!(cluster.is_uniform_links(), uniform, "{name}");

        let text = cluster.to_json_string();
        if std::env::var_os("ORDO_WRITE_SHIPPED_CLUSTERS").is_some() {
            let path = format!("{}/clusters/{name}.json", env!("CARGO_MANIFEST_DIR"));
            std::fs::write(path, &text).unwrap();
        }
        assert_eq!(Cluster::parse(&text, name).unwrap(), cluster, "{name}: {text}");
        // Written exactly as shipped.
        let path = format!("{}/clusters/{name}.json", env!("CARGO_MANIFEST_DIR"));
        assert_eq!(text, std::fs::read_to_string(path).unwrap(), "{name}");
        let serde_text = serde_json::to_string(&cluster).unwrap();
        assert_eq!(serde_json::from_str::<Cluster>(&serde_text).unwrap(), cluster, "{name}");
    }
    assert!(Cluster::builtin("tpu").is_none());
}

#[test]
fn shipped_numbers() {
    let v100 = Cluster::builtin("v100x8-nvlink").unwrap();
    assert_eq!(v100.memory_limits(), vec![16 * GIB; 8]);
    // Baechi's V100 numbers, but with the V100's 80 SMs x 2048 threads: a kernel with fewer
    // work items than that occupies only part of it (Baechi's model has parallelism 1), and
    // its fp16 tensor cores' 125 TFLOP/s.
    let tensor_cores = Some(125e12);
    let v100_roofline = Roofline::baechi_default();
    assert_eq!(
        v100.roofline(0),
        Roofline { parallelism: 80 * 2048, half_flops_per_s: tensor_cores, ..v100_roofline }
    );
    let h100 = Cluster::builtin("h100x8-nvlink").unwrap();
    assert_eq!(h100.memory_limits(), vec![80 * GIB; 8]);
    assert_eq!(h100.node_devices()[7].name, "gpu7");
    assert_eq!(h100.node_devices()[0].peak_flops, 67e12);
    assert_eq!(h100.node_devices()[0].half_precision_flops, Some(989.4e12));
    assert_eq!(h100.node_devices()[0].memory_bandwidth, 3.35e12);
    assert_eq!(h100.link(2, 5), LinkSpec { latency_us: 7.0, bandwidth_bytes_per_s: 375e9 });
    let a100 = Cluster::builtin("a100x4-pcie").unwrap();
    assert_eq!(a100.node_devices()[0].memory_bandwidth, 1.935e12);
    let cpu = Cluster::builtin("cpu").unwrap();
    assert_eq!(cpu.node_devices()[0].peak_flops, 147.2e9);
    assert_eq!(cpu.memory_limits()[0], 16 * GIB);
}

/// Hand-computed: latency + bytes / bandwidth, rounded.
#[test]
fn shipped_transfer_times() {
    let dgx1 = Cluster::builtin("v100x8-nvlink").unwrap();
    // gpu0 - gpu3: two NVLinks, 7 µs + 48e6 B / 48e9 B/s = 7 + 1000 µs.
    assert_eq!(dgx1.comm(0, 3).time_us(48_000_000), 1007);
    assert_eq!(dgx1.comm(3, 0).time_us(48_000_000), 1007);
    // gpu0 - gpu1: one NVLink, 24e9 B/s: 7 + 2000 µs.
    assert_eq!(dgx1.comm(0, 1).time_us(48_000_000), 2007);
    // gpu0 - gpu5: no NVLink, staged through the host at 9e9 B/s: 25 + 5333.3 µs.
    assert_eq!(dgx1.comm(0, 5).time_us(48_000_000), 5358);
    assert_eq!(dgx1.comm(5, 5), CommModel { us_per_byte: 0.0, fixed_us: 0.0 });
    // a100x8-nvlink: 7 µs + 1 MiB / 260e9 B/s = 7 + 4.033 µs.
    let a100 = Cluster::builtin("a100x8-nvlink").unwrap();
    assert_eq!(a100.comm(6, 1).time_us(1 << 20), 11);
    // v100x4-pcie: 10 µs + 1 MiB / 12e9 B/s = 10 + 87.38 µs.
    let pcie = Cluster::builtin("v100x4-pcie").unwrap();
    assert_eq!(pcie.comm(2, 3).time_us(1 << 20), 97);
}

#[test]
fn baechi_links_are_baechis_model() {
    let cluster = Cluster::baechi(4, None);
    assert_eq!(cluster.device_count(), 4);
    assert_eq!(cluster.memory_limits(), vec![u64::MAX; 4]);
    assert_eq!(cluster.roofline(3), Roofline::baechi_default());
    assert!(cluster.is_uniform_links());
    for (from, to) in [(0, 1), (3, 2), (1, 3)] {
        let comm = cluster.comm(from, to);
        assert_eq!(comm, CommModel::baechi_default());
        for bytes in [0u64, 1, 4096, 262_144, 1_000_000, 20_971_520, 123_456_789] {
            let expected = 134 + (0.0001754 * bytes as f64).round() as u64;
            assert_eq!(comm.time_us(bytes), expected, "{bytes} bytes");
        }
    }
    let limited = Cluster::baechi(2, Some(16 * GIB));
    assert_eq!(limited.memory_limits(), [16 * GIB, 16 * GIB]);
    for cluster in [cluster, limited, Cluster::baechi(1, None)] {
        let text = cluster.to_json_string();
        assert_eq!(Cluster::parse(&text, "baechi.json").unwrap(), cluster, "{text}");
    }
}

fn device(name: &str, peak_flops: f64) -> DeviceSpec {
    DeviceSpec {
        name: name.into(),
        kind: DeviceKind::Gpu,
        memory_bytes: 40 * GIB + 5,
        peak_flops,
        memory_bandwidth: 1e12,
        launch_overhead_us: 4.0,
        parallelism: 1000,
        half_precision_flops: Some(8.0 * peak_flops),
    }
}

#[test]
fn explicit_clusters_round_trip() {
    let pcie = LinkSpec { latency_us: 10.0, bandwidth_bytes_per_s: 25e9 };
    let devices = vec![device("big", 60e12), device("small", 20e12), device("spare", 20e12)];
    let mut cluster = Cluster::new("mixed", devices, pcie).unwrap();
    let fast = LinkSpec { latency_us: 7.0, bandwidth_bytes_per_s: 100e9 };
    cluster.set_link(0, 1, fast).unwrap();
    cluster.set_link(1, 0, fast).unwrap();
    cluster.set_link(2, 0, LinkSpec { latency_us: 12.0, ..pcie }).unwrap();
    assert!(!cluster.is_uniform_links());
    assert!(!cluster.is_uniform_compute());
    assert_eq!(cluster.device_index("spare"), Some(2));
    let text = cluster.to_json_string();
    assert!(text.contains("\"devices\"") && text.contains("\"one_way\": true"), "{text}");
    let back = Cluster::parse(&text, "mixed.json").unwrap();
    assert_eq!(back, cluster, "{text}");
    assert_eq!(back.link(0, 2), pcie);
    assert_eq!(back.link(2, 0).latency_us, 12.0);

    let err = cluster.set_link(1, 1, fast).unwrap_err();
    assert_eq!(err.to_string(), "mixed: link small -> small: joins a device to itself");
    let uniform = Cluster::uniform("u", device("card", 1e12), 3, pcie).unwrap();
    assert_eq!(uniform.node_devices()[2].name, "card2");
    let text = uniform.to_json_string();
    assert!(text.contains("\"count\": 3") && text.contains("\"name\": \"card\""), "{text}");
    assert_eq!(Cluster::parse(&text, "u.json").unwrap(), uniform);
}

const GOOD: &str = r#"{
  "format": "ordo.cluster/1",
  "name": "pair",
  "devices": [
    {"name": "a", "kind": "gpu", "memory_bytes": "16GiB", "peak_flops": 15.7e12,
     "memory_bandwidth": 900e9},
    {"name": "b", "kind": "gpu", "memory_bytes": 17179869184, "peak_flops": 15.7e12,
     "memory_bandwidth": 900e9, "kernel_overhead_us": 5}
  ],
  "interconnect": {"latency_us": 10, "bandwidth_bytes_per_s": 12e9},
  "links": [{"from": "a", "to": "b", "latency_us": 7, "bandwidth_bytes_per_s": 48e9}]
}"#;

const COMPACT: &str = r#"{"format": "ordo.cluster/1", "name": "four",
  "device": {"kind": "gpu", "memory_bytes": "16GiB", "peak_flops": 15.7e12,
             "memory_bandwidth": 900e9},
  "count": 4,
  "interconnect": {"latency_us": 10, "bandwidth_bytes_per_s": 12e9}}"#;

fn edit(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from}");
    base.replacen(from, to, 1)
}

/// The message for `text`, which must be rejected; it must start with the file name and
/// mention every part.
fn rejected(text: &str, parts: &[&str]) -> ClusterError {
    let err = Cluster::parse(text, "bad.json").expect_err("must be rejected");
    let message = err.to_string();
    assert!(message.starts_with("bad.json: "), "{message}");
    assert_eq!(err.origin(), "bad.json");
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    err
}

#[test]
fn good_inputs_parse() {
    let pair = Cluster::parse(GOOD, "good.json").unwrap();
    assert_eq!(pair.memory_limits(), [16 * GIB, 16 * GIB]);
    // Left out: 5 µs and parallelism 1; device b has the old name `kernel_overhead_us`.
    assert_eq!(pair.node_devices()[0].launch_overhead_us, 5.0);
    assert_eq!(pair.node_devices()[0].parallelism, 1);
    assert_eq!(pair.node_devices()[1].launch_overhead_us, 5.0);
    assert_eq!(pair.link(1, 0).bandwidth_bytes_per_s, 48e9);
    let four = Cluster::parse(COMPACT, "four.json").unwrap();
    assert_eq!(four.node_devices()[3].name, "gpu3");
    let one_way = edit(GOOD, r#""to": "b","#, r#""to": "b", "one_way": true,"#);
    let one_way = Cluster::parse(&one_way, "good.json").unwrap();
    assert_eq!(one_way.link(0, 1).latency_us, 7.0);
    assert_eq!(one_way.link(1, 0).latency_us, 10.0);
}

#[test]
fn bad_inputs_name_the_file_and_the_device_or_link() {
    let err = rejected("{\"format\": ", &["not a valid cluster description"]);
    assert!(matches!(err, ClusterError::Json { line: 1, .. }), "{err:?}");
    rejected("[1, 2]", &["top level is a list"]);
    let err = rejected(&edit(GOOD, "ordo.cluster/1", "ordo.cluster/2"), &["\"ordo.cluster/2\""]);
    assert!(matches!(err, ClusterError::Format { .. }));
    rejected(&edit(GOOD, "\"format\": \"ordo.cluster/1\",", ""), &["no \"format\""]);

    // No devices.
    rejected(&edit(COMPACT, "\"count\": 4", "\"count\": 0"), &["no devices", "\"count\" is 0"]);
    let empty = r#"{"format": "ordo.cluster/1", "name": "none", "devices": []}"#;
    rejected(empty, &["no devices"]);
    rejected(&edit(COMPACT, "\"count\": 4,", ""), &["\"device\" needs a \"count\""]);

    // Numbers out of range, naming the device.
    let err = rejected(
        &edit(COMPACT, "\"peak_flops\": 15.7e12", "\"peak_flops\": 0"),
        &["bad.json: \"device\": \"peak_flops\" is 0", "FLOP/s"],
    );
    assert!(matches!(err, ClusterError::Device { .. }));
    let bad_b = "\"memory_bandwidth\": 900e9, \"kernel_overhead_us\": 5";
    rejected(
        &edit(GOOD, bad_b, "\"memory_bandwidth\": -900e9, \"kernel_overhead_us\": 5"),
        &["devices[1] (\"b\")", "\"memory_bandwidth\" is -900000000000"],
    );
    rejected(&edit(GOOD, "17179869184", "0"), &["devices[1] (\"b\")", "\"memory_bytes\" is 0"]);
    rejected(&edit(GOOD, "{\"name\": \"b\"", "{\"name\": \"a\""), &["devices[1] (\"a\")", "taken"]);

    // Links.
    let err = rejected(
        &edit(GOOD, "\"bandwidth_bytes_per_s\": 12e9", "\"bandwidth_bytes_per_s\": 0"),
        &["bad.json: \"interconnect\": \"bandwidth_bytes_per_s\" is 0"],
    );
    assert!(matches!(err, ClusterError::Link { .. }));
    rejected(
        &edit(GOOD, "\"bandwidth_bytes_per_s\": 48e9", "\"bandwidth_bytes_per_s\": -1"),
        &["links[0] (a <-> b)", "\"bandwidth_bytes_per_s\" is -1"],
    );
    rejected(
        &edit(GOOD, "\"latency_us\": 7", "\"latency_us\": -7"),
        &["links[0] (a <-> b)", "\"latency_us\" is -7"],
    );
    rejected(
        &edit(GOOD, "\"to\": \"b\"", "\"to\": \"z\""),
        &["links[0] (a <-> z)", "\"to\" names no device of the cluster (a, b)"],
    );
    rejected(&edit(GOOD, "\"to\": \"b\"", "\"to\": \"a\""), &["links[0] (a <-> a)", "itself"]);
    let twice = r#"{"from": "b", "to": "a", "one_way": true, "latency_us": 1,
                    "bandwidth_bytes_per_s": 1e9}, {"from": "a""#;
    rejected(&edit(GOOD, "{\"from\": \"a\"", twice), &["links[1] (a <-> b)", "b -> a", "links[0]"]);
    let unlinked =
        edit(GOOD, r#""interconnect": {"latency_us": 10, "bandwidth_bytes_per_s": 12e9},"#, "");
    let unlinked = edit(&unlinked, r#""to": "b","#, r#""to": "b", "one_way": true,"#);
    rejected(&unlinked, &["no link from b to a"]);

    // Shape, types and unknown keys.
    let both = edit(COMPACT, "\"count\": 4,", "\"count\": 4, \"devices\": [],");
    rejected(&both, &["not both"]);
    rejected(&edit(COMPACT, "\"count\"", "\"cuont\""), &["unknown field `cuont`", "line 4"]);
    rejected(&edit(COMPACT, "\"16GiB\"", "\"16XB\""), &["\"16XB\"", "unknown unit"]);
    rejected(&edit(COMPACT, "\"kind\": \"gpu\"", "\"kind\": \"tpu\""), &["unknown variant `tpu`"]);
    rejected(&edit(COMPACT, "\"count\": 4", "\"count\": -4"), &["-4"]);

    // Serde reports the same problems, with "cluster" as the origin.
    let bad = edit(COMPACT, "\"count\": 4", "\"count\": 0");
    let message = serde_json::from_str::<Cluster>(&bad).unwrap_err().to_string();
    assert!(message.contains("cluster: no devices"), "{message}");
}

#[test]
fn files_are_read_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let cluster = Cluster::builtin("h100x8-nvlink").unwrap();
    cluster.write(&path).unwrap();
    assert_eq!(Cluster::read(&path).unwrap(), cluster);

    std::fs::write(&path, edit(COMPACT, "\"peak_flops\": 15.7e12", "\"peak_flops\": -1")).unwrap();
    let message = Cluster::read(&path).unwrap_err().to_string();
    assert!(message.starts_with(&format!("{}: \"device\"", path.display())), "{message}");
    let missing = dir.path().join("missing.json");
    let err = Cluster::read(&missing).unwrap_err();
    assert!(matches!(err, ClusterError::File(ordo_cost::FileError::Read { .. })));
    assert!(err.to_string().contains("missing.json: cannot read the file"), "{err}");
}

#[test]
fn byte_counts() {
    let cases: [(&str, u64); 16] = [
        ("16GiB", 16 * GIB),
        ("16G", 16 * GIB),
        ("16g", 16 * GIB),
        ("16Gi", 16 * GIB),
        ("16GB", 16_000_000_000),
        ("16 GB", 16_000_000_000),
        ("512MiB", 512 << 20),
        ("512MB", 512_000_000),
        ("1.5GiB", 1_610_612_736),
        (".5KiB", 512),
        ("1.1KiB", 1126), // 1126.4, rounded down
        ("2TiB", 2 << 40),
        ("64KB", 64_000),
        ("4096", 4096),
        ("  4096 B ", 4096),
        ("unlimited", u64::MAX),
    ];
    for (text, bytes) in cases {
        assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
    }
    for (text, problem) in [
        ("", "empty"),
        ("lots", "unknown unit \"lots\""),
        ("16XB", "unknown unit \"XB\""),
        ("GiB", "no number"),
        ("-1GiB", "negative"),
        ("1.2.3", "more than one decimal point"),
        ("1e9", "unknown unit \"e9\""),
        ("16384PiB", "unknown unit"),
        ("17179869184GiB", "2^64 bytes or more"),
        ("100000000000000000000000000", "more than 25 digits"),
    ] {
        let err = parse_bytes(text).unwrap_err();
        assert!(err.to_string().contains(problem), "{text}: {err}");
        assert!(err.to_string().starts_with(&format!("cannot read {text:?}")), "{err}");
    }
    assert_eq!(format_bytes(16 * GIB), "16 GiB");
    assert_eq!(format_bytes(1536), "1.5 KiB");
    assert_eq!(format_bytes(999), "999 B");
    assert_eq!(format_bytes(u64::MAX), "unlimited");
}

/// x [64, 1024] -> fc1 (Linear 4096) -> relu, costed for a V100 and an H100 server.
#[test]
fn costgraph_for_v100_and_h100() {
    let mut b = GraphBuilder::new("tiny");
    let x = b.input("x", TensorFact::f32([64, 1024])).unwrap();
    let fc1 = b.linear("fc1", x, 4096).unwrap();
    b.relu("relu", fc1).unwrap();
    let graph = b.finish();

    let v100 = costgraph_for_cluster(&graph, &Cluster::builtin("v100x4-nvlink").unwrap());
    let h100 = costgraph_for_cluster(&graph, &Cluster::builtin("h100x4-nvlink").unwrap());
    assert_eq!(v100.graph["cluster"], "v100x4-nvlink");
    assert_eq!(h100.graph["cluster"], "h100x4-nvlink");
    let weights = |g: &ordo_cost::CostGraph| g.nodes.iter().map(|n| n.weight).collect::<Vec<_>>();
    // fc1: 537133056 FLOP and 18104320 B (input, output, weights and bias); relu: 2097152 B.
    // V100: fc1 max(34.21, 20.12) + 5 = 39.21; relu 2.33 + 5 = 7.33.
    assert_eq!(weights(&v100), [1, 39, 7]);
    // H100 (67e12 FLOP/s, 3.35e12 B/s): fc1 max(8.02, 5.40) + 5 = 13.02; relu 0.63 + 5 = 5.63.
    assert_eq!(weights(&h100), [1, 13, 6]);
    // fc1 and relu write 64 x 4096 = 262144 elements, more than a V100 keeps in flight
    // (163840), so they fill it; x (65536 elements) would fill 0.4 of it. An H100 keeps 270336
    // in flight: fc1 and relu fill 0.97 of it, which leaves their rounded times as they were.
    let occupancy =
        |g: &ordo_cost::CostGraph| g.nodes.iter().map(|n| n.occupancy).collect::<Vec<_>>();
    assert_eq!(occupancy(&v100), [0.4, 1.0, 1.0]);
    assert_eq!(occupancy(&h100), [65536.0 / 270336.0, 262144.0 / 270336.0, 262144.0 / 270336.0]);
    let links = |g: &ordo_cost::CostGraph| g.links.iter().map(|l| l.weight).collect::<Vec<_>>();
    // 262144 B and 1048576 B. V100 pair: 7 µs + B / 48e9: 12.46 and 28.85.
    assert_eq!(links(&v100), [12, 29]);
    // H100 pair: 7 µs + B / 130e9: 9.02 and 15.07.
    assert_eq!(links(&h100), [9, 15]);

    // One device: its roofline, and Baechi's transfer model (262144 B -> 179.98 µs).
    let link = LinkSpec { latency_us: 1.0, bandwidth_bytes_per_s: 1e9 };
    let one = Cluster::uniform("one", device("solo", 1e12), 1, link).unwrap();
    let solo = costgraph_for_cluster(&graph, &one);
    assert_eq!(links(&solo), [180, 318]);
    // fc1: 537.13 µs of FLOPs + 4 µs.
    assert_eq!(solo.nodes[1].weight, 541);
}
