//! The sample cost graphs: they load, with the right sizes, and survive a round trip.

use std::path::PathBuf;

use ordo_cost::{ColocationGroup, parse_costgraph, read_costgraph, to_json_string};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// (file, nodes, links), counted with Python's `json` module.
const SAMPLES: [(&str, usize, usize); 5] = [
    ("resnet50.json", 175, 190),
    ("inception_v3.json", 310, 344),
    ("transformer.json", 617, 681),
    ("gnmt.json", 227, 232),
    ("synth_1k.json", 1000, 2074),
];

#[test]
fn samples_load_with_their_sizes() {
    for (file, nodes, links) in SAMPLES {
        let graph = read_costgraph(fixture(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(graph.nodes.len(), nodes, "{file}");
        assert_eq!(graph.links.len(), links, "{file}");
    }
}

#[test]
fn samples_round_trip() {
    for (file, _, _) in SAMPLES {
        let graph = read_costgraph(fixture(file)).unwrap();
        let text = to_json_string(&graph);
        let back = parse_costgraph(&text, file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, graph, "{file}");
        assert_eq!(to_json_string(&back), text, "{file}");
    }
}

#[test]
fn written_file_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let graph = read_costgraph(fixture("gnmt.json")).unwrap();
    let path = dir.path().join("gnmt.json");
    ordo_cost::write_costgraph(&graph, &path).unwrap();
    assert_eq!(read_costgraph(&path).unwrap(), graph);
}

#[test]
fn resnet50_attributes() {
    let graph = read_costgraph(fixture("resnet50.json")).unwrap();
    assert_eq!(graph.graph["source"], "onnx");
    let conv = &graph.nodes[0];
    assert_eq!((conv.id, conv.name.as_str()), (0, "/conv1/Conv"));
    assert_eq!(conv.op_type.as_deref(), Some("Conv"));
    assert_eq!(conv.weight, 486);
    assert_eq!(conv.persistent_memory, 37632);
    assert_eq!(conv.output_memory, [102760448]);
    assert_eq!(conv.flops, Some(7552892928));
    assert_eq!(conv.colocation_group, ColocationGroup::List(vec!["/conv1/Conv".into()]));
    let bn = &graph.nodes[1];
    assert_eq!(bn.output_memory, [102760448, 256, 256]);
    let link = &graph.links[0];
    assert_eq!((link.source, link.target, link.weight), (0, 1, 18158));
    assert_eq!(link.tensor.len(), 1);
    assert_eq!(link.tensor[0].name, "/conv1/Conv_output_0");
    assert_eq!(link.tensor[0].num_bytes, 102760448);
}

#[test]
fn edges_key_is_accepted() {
    let text = std::fs::read_to_string(fixture("resnet50.json")).unwrap();
    let links = parse_costgraph(&text, "resnet50.json").unwrap();
    let renamed = text.replacen("\"links\":", "\"edges\":", 1);
    assert_ne!(renamed, text);
    let edges = parse_costgraph(&renamed, "resnet50.json").unwrap();
    assert_eq!(edges, links);
    assert!(to_json_string(&edges).contains("\"links\":"));
}

#[test]
fn unknown_attributes_and_group_forms_are_kept() {
    let text = r#"{"directed": true, "multigraph": false, "graph": {"note": [1, 2]},
        "nodes": [
          {"id": 7, "name": "a", "weight": 3, "temporary_memory": 1, "persistent_memory": 2,
           "output_memory": [10, 0], "colocation_group": "shared", "device": "/gpu:0"},
          {"id": 3, "name": "b", "weight": 1, "temporary_memory": 0, "persistent_memory": 0,
           "output_memory": [], "op_type": null, "extra": {"deep": [true, null, 1.5]}},
          {"id": 5, "name": "c", "weight": 1, "temporary_memory": 0, "persistent_memory": 0,
           "output_memory": [], "colocation_group": ["shared", "c"]}
        ],
        "links": [{"source": 7, "target": 3, "weight": 0, "tensor": [], "control": true},
                  {"source": 3, "target": 5, "weight": 9,
                   "tensor": [{"name": "b:0", "num_bytes": 0, "weight": 9, "dtype": "f32"}]}],
        "custom": "kept"}"#;
    let graph = parse_costgraph(text, "hand.json").unwrap();
    assert_eq!(graph.nodes[0].colocation_group, ColocationGroup::Name("shared".into()));
    assert_eq!(graph.nodes[0].colocation_groups(), ["shared"]);
    assert_eq!(graph.nodes[1].colocation_group, ColocationGroup::Implicit);
    assert_eq!(graph.nodes[1].colocation_groups(), ["b"]);
    assert_eq!(graph.nodes[2].colocation_groups(), ["shared", "c"]);
    assert_eq!(graph.nodes[0].extra["device"], "/gpu:0");
    assert_eq!(graph.nodes[0].memory(), 11);
    assert_eq!(graph.links[0].extra["control"], true);
    assert_eq!(graph.links[1].tensor[0].extra["dtype"], "f32");
    assert_eq!(graph.extra["custom"], "kept");
    let written = to_json_string(&graph);
    assert!(written.contains(r#""colocation_group":"shared""#), "{written}");
    assert!(!written.contains(r#""name":"b","colocation_group""#), "{written}");
    assert_eq!(parse_costgraph(&written, "hand.json").unwrap(), graph);
}
