//! Roles and forward layers in cost graphs: the `role` and `layer` attributes, their checks,
//! and how a training graph's export fills them.

use ordo_cost::{CostGraph, CostGraphError, costgraph_from_graph, parse_costgraph, to_json_string};
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_ir::{Graph, Role};

/// f -> f.dx -> f.dw -> f.update, the last three belonging to layer f.
const GRAPH: &str = r#"{"directed": true, "multigraph": false, "graph": {},
  "nodes": [
    {"id": 0, "name": "f", "weight": 5, "temporary_memory": 0, "persistent_memory": 64,
     "output_memory": [4096]},
    {"id": 1, "name": "f.dx", "weight": 7, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [4096], "role": "dx", "layer": 0},
    {"id": 2, "name": "f.dw", "weight": 9, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [64], "role": "dw", "layer": 0},
    {"id": 3, "name": "f.update", "weight": 3, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [0], "role": "update", "layer": 0}
  ],
  "links": [
    {"source": 0, "target": 1, "weight": 135,
     "tensor": [{"name": "f:0", "num_bytes": 4096, "weight": 135}]},
    {"source": 1, "target": 2, "weight": 135,
     "tensor": [{"name": "f.dx:0", "num_bytes": 4096, "weight": 135}]},
    {"source": 2, "target": 3, "weight": 134,
     "tensor": [{"name": "f.dw:0", "num_bytes": 64, "weight": 134}]}
  ]}"#;

/// `GRAPH` with one piece of text replaced; the piece must be there.
fn edit(from: &str, to: &str) -> String {
    assert!(GRAPH.contains(from), "{from}");
    GRAPH.replacen(from, to, 1)
}

/// The message for `text`, which must be rejected for an attribute of a node.
fn node_error(text: &str) -> String {
    let err = parse_costgraph(text, "bad.json").expect_err("must be rejected");
    assert!(matches!(err, CostGraphError::Node { .. }), "{err:?}");
    err.to_string()
}

#[test]
fn role_and_layer_round_trip() {
    let graph = parse_costgraph(GRAPH, "g.json").unwrap();
    let read: Vec<(Role, Option<u64>)> = graph.nodes.iter().map(|n| (n.role, n.layer)).collect();
    assert_eq!(
        read,
        [(Role::Forward, None), (Role::Dx, Some(0)), (Role::Dw, Some(0)), (Role::Update, Some(0))]
    );
    let text = to_json_string(&graph);
    for written in [r#""role":"dx","layer":0"#, r#""role":"dw","layer":0"#, r#""role":"update""#] {
        assert!(text.contains(written), "{written} missing from {text}");
    }
    assert!(!text.contains("forward"), "the default role is not written: {text}");
    assert_eq!(text.matches("\"layer\"").count(), 3, "{text}");
    assert_eq!(parse_costgraph(&text, "g.json").unwrap(), graph);

    // Every role survives the trip, as its serde name.
    let mut graph = graph;
    for role in [Role::Forward, Role::Dx, Role::Dw, Role::Update, Role::Comm] {
        graph.nodes[3].role = role;
        graph.nodes[3].layer = (role != Role::Forward).then_some(0);
        let text = to_json_string(&graph);
        let name = serde_json::to_value(role).unwrap();
        let name = name.as_str().unwrap();
        assert_eq!(text.contains(&format!("\"role\":\"{name}\"")), role != Role::Forward, "{text}");
        assert_eq!(parse_costgraph(&text, "g.json").unwrap(), graph, "{role:?}");
    }

    // An explicit "forward" and null read as the defaults.
    let text = edit(r#""role": "dx", "layer": 0"#, r#""role": "forward", "layer": null"#);
    let node = &parse_costgraph(&text, "g.json").unwrap().nodes[1];
    assert_eq!((node.role, node.layer), (Role::Forward, None));
    let text = edit(r#""role": "dx", "layer": 0"#, r#""role": null"#);
    assert_eq!(parse_costgraph(&text, "g.json").unwrap().nodes[1].role, Role::Forward);
}

#[test]
fn a_bad_role_names_the_node() {
    let roles = r#"must be one of "forward", "dx", "dw", "update", "comm""#;
    for (value, found) in [
        (r#""backward""#, r#"a string "backward""#),
        (r#""DX""#, r#"a string "DX""#),
        ("3", "the number 3"),
    ] {
        let message = node_error(&edit(r#""role": "dw""#, &format!(r#""role": {value}"#)));
        assert_eq!(
            message,
            format!(r#"bad.json: node 2 ("f.dw"): attribute "role" {roles}, found {found}"#)
        );
    }
}

#[test]
fn a_bad_layer_names_the_node() {
    let start = r#"bad.json: node 2 ("f.dw"): attribute "layer" "#;
    let cases = [
        (r#""layer": 42"#, "is 42, which is no node's id".to_string()),
        (r#""layer": -1"#, "is negative (-1)".to_string()),
        (r#""layer": "f""#, r#"must be a non-negative integer, found a string "f""#.to_string()),
        (
            r#""layer": 1"#,
            r#"is 1, but node 1 ("f.dx") has role "dx"; a layer is a forward node"#.into(),
        ),
        (
            r#""layer": 2"#,
            r#"is 2, but node 2 ("f.dw") has role "dw"; a layer is a forward node"#.into(),
        ),
    ];
    for (value, problem) in cases {
        let message =
            node_error(&edit(r#""role": "dw", "layer": 0"#, &format!(r#""role": "dw", {value}"#)));
        assert_eq!(message, format!("{start}{problem}"));
    }
    // A forward node belongs to no layer, not even its own.
    let message = node_error(&edit(r#""role": "dw", "layer": 0"#, r#""layer": 0"#));
    assert_eq!(
        message,
        format!(
            "{start}is 0 on a forward node; only nodes of another role (dx, dw, update, comm) \
             belong to a forward layer"
        )
    );

    // A graph built in memory is checked as well.
    let mut graph = parse_costgraph(GRAPH, "g.json").unwrap();
    graph.nodes[3].layer = Some(7);
    let message = graph.validate("mem").unwrap_err().to_string();
    assert_eq!(
        message,
        r#"mem: node 3 ("f.update"): attribute "layer" is 7, which is no node's id"#
    );
    graph.nodes[3].layer = None;
    graph.nodes[0].layer = Some(0);
    let message = graph.validate("mem").unwrap_err().to_string();
    assert!(message.starts_with(r#"mem: node 0 ("f"): attribute "layer" is 0 on a forward node"#));
}

/// x [4, 8] -> fc1 (8 -> 16) -> relu -> fc2 (16 -> 3) -> loss against integer labels, and
/// its training graph.
fn mlp_training() -> (Graph, Graph) {
    let (forward, loss) = ordo_ir::samples::mlp();
    let training = training_graph(&forward, loss, Optimizer::Adam).unwrap();
    (forward, training)
}

fn cost_node<'g>(cost: &'g CostGraph, name: &str) -> &'g ordo_cost::CostNode {
    cost.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node `{name}`"))
}

#[test]
fn export_carries_roles_and_layers_of_a_training_graph() {
    let (forward, training) = mlp_training();
    let cost = costgraph_from_graph(&training);
    cost.validate("mlp").unwrap();
    assert_eq!(cost.nodes.len(), training.nodes.len());
    for (node, ir) in cost.nodes.iter().zip(&training.nodes) {
        assert_eq!(node.name, ir.name);
        assert_eq!(node.role, ir.role, "{}", ir.name);
        assert_eq!(node.layer, ir.layer.map(|l| u64::from(l.0)), "{}", ir.name);
    }
    let of = |name: &str| {
        let node = cost_node(&cost, name);
        (node.role, node.layer.map(|l| cost.nodes[l as usize].name.as_str()))
    };
    assert_eq!(of("fc2"), (Role::Forward, None));
    assert_eq!(of("fc2.dw"), (Role::Dw, Some("fc2")));
    assert_eq!(of("fc2.dx"), (Role::Dx, Some("fc2")));
    assert_eq!(of("relu.dx"), (Role::Dx, Some("relu")));
    assert_eq!(of("fc1.dw"), (Role::Dw, Some("fc1")));
    assert_eq!(of("fc1.weight.update"), (Role::Update, Some("fc1")));
    assert_eq!(of("loss.grad"), (Role::Dx, Some("loss")));
    assert!(cost.nodes.iter().all(|n| (n.role == Role::Forward) == n.layer.is_none()));

    // The file keeps them.
    let text = to_json_string(&cost);
    assert_eq!(parse_costgraph(&text, "mlp.json").unwrap(), cost);
    // A forward-only graph writes neither attribute.
    let text = to_json_string(&costgraph_from_graph(&forward));
    assert!(!text.contains("\"role\"") && !text.contains("\"layer\""), "{text}");
}
