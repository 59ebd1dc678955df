//! Every kind of bad input is rejected with a message naming the file, the node or link, and
//! the attribute.

use ordo_cost::{CostGraphError, parse_costgraph, read_costgraph};

/// A valid graph: a -> b -> c, a -> c.
const GOOD: &str = r#"{"directed": true, "multigraph": false, "graph": {},
  "nodes": [
    {"id": 0, "name": "a", "weight": 5, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [4096]},
    {"id": 1, "name": "b", "weight": 7, "temporary_memory": 0, "persistent_memory": 64,
     "output_memory": [8192]},
    {"id": 2, "name": "c", "weight": 9, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [16]}
  ],
  "links": [
    {"source": 0, "target": 1, "weight": 135,
     "tensor": [{"name": "a:0", "num_bytes": 4096, "weight": 135}]},
    {"source": 1, "target": 2, "weight": 135,
     "tensor": [{"name": "b:0", "num_bytes": 8192, "weight": 135}]},
    {"source": 0, "target": 2, "weight": 135,
     "tensor": [{"name": "a:0", "num_bytes": 4096, "weight": 135}]}
  ]}"#;

/// `GOOD` with one piece of text replaced; the piece must be there.
fn edit(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

/// The error for `text`, which must be rejected.
fn error(text: &str) -> (CostGraphError, String) {
    let err = parse_costgraph(text, "bad.json").expect_err("must be rejected");
    let message = err.to_string();
    assert!(message.starts_with("bad.json: "), "{message}");
    (err, message)
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{message:?} does not mention {part:?}");
    }
}

#[test]
fn good_graph_is_accepted() {
    let graph = parse_costgraph(GOOD, "good.json").unwrap();
    assert_eq!((graph.nodes.len(), graph.links.len()), (3, 3));
}

#[test]
fn not_json() {
    let (err, message) = error("this is not JSON");
    assert!(matches!(err, CostGraphError::Json { line: 1, .. }), "{err:?}");
    assert_mentions(&message, &["not valid JSON", "line 1"]);
}

#[test]
fn top_level_not_an_object() {
    let (_, message) = error("[1, 2, 3]");
    assert_eq!(message, "bad.json: the top level is a list, not an object");
}

#[test]
fn truncated_json() {
    let (err, message) = error(&GOOD[..GOOD.len() / 2]);
    assert!(matches!(err, CostGraphError::Json { .. }), "{err:?}");
    assert_mentions(&message, &["not valid JSON", "EOF"]);
}

#[test]
fn missing_attribute() {
    let (_, message) = error(&edit(r#""weight": 7, "#, ""));
    assert_eq!(message, r#"bad.json: node 1 ("b"): attribute "weight" is missing"#);
}

#[test]
fn missing_tensor_attribute() {
    let (_, message) = error(&edit(r#""num_bytes": 8192, "#, ""));
    assert_mentions(&message, &[r#"edge 1 ("b") -> 2 ("c")"#, r#""tensor[0].num_bytes""#]);
}

#[test]
fn wrong_type() {
    let (_, message) = error(&edit(r#""persistent_memory": 64"#, r#""persistent_memory": "64""#));
    assert_eq!(
        message,
        r#"bad.json: node 1 ("b"): attribute "persistent_memory" must be a non-negative integer, found a string "64""#
    );
}

#[test]
fn fractional_number() {
    let (_, message) = error(&edit(r#""weight": 9"#, r#""weight": 9.5"#));
    assert_mentions(&message, &[r#"node 2 ("c")"#, r#""weight""#, "9.5"]);
}

#[test]
fn wrong_type_of_edge_list() {
    let (_, message) =
        error(&edit(r#""tensor": [{"name": "b:0""#, r#""tensor": 3, "x": [{"name": "b:0""#));
    assert_mentions(&message, &[r#"edge 1 ("b") -> 2 ("c")"#, r#""tensor""#, "the number 3"]);
}

#[test]
fn edge_to_unknown_node() {
    let (_, message) = error(&edit(r#""source": 1, "target": 2"#, r#""source": 1, "target": 42"#));
    assert_eq!(
        message,
        r#"bad.json: edge 1 ("b") -> 42: attribute "target" is 42, which is no node's id"#
    );
}

#[test]
fn edge_from_unknown_node() {
    let (_, message) = error(&edit(r#""source": 1, "target": 2"#, r#""source": 9, "target": 2"#));
    assert_mentions(&message, &[r#"edge 9 -> 2 ("c")"#, r#""source""#, "no node"]);
}

/// The sample with its edge 0 -> 2 made `source` -> `target`, carrying `c`'s output.
fn rewired(source: u32, target: u32) -> String {
    let ends = format!(r#""source": {source}, "target": {target}"#);
    edit(r#""source": 0, "target": 2"#, &ends).replacen(
        r#""name": "a:0", "num_bytes": 4096, "weight": 135}]}
  ]"#,
        r#""name": "c:0", "num_bytes": 16, "weight": 135}]}
  ]"#,
        1,
    )
}

#[test]
fn cycle() {
    let text = rewired(2, 0);
    let (err, message) = error(&text);
    let CostGraphError::Cycle { cycle, .. } = &err else { panic!("{err:?}") };
    assert_eq!(cycle.len(), 4, "{message}");
    assert_eq!(cycle.first(), cycle.last());
    assert_mentions(&message, &["lies on a cycle", "0 -> 1 -> 2 -> 0"]);
    assert!(
        message.contains(r#"node 0 ("a")"#)
            || message.contains(r#"node 1 ("b")"#)
            || message.contains(r#"node 2 ("c")"#),
        "{message}"
    );
}

#[test]
fn self_loop() {
    let text = rewired(2, 2);
    let (_, message) = error(&text);
    assert_mentions(&message, &[r#"node 2 ("c") lies on a cycle"#, "2 -> 2"]);
}

#[test]
fn negative_size() {
    let (_, message) = error(&edit("[8192]", "[8192, -5]"));
    assert_eq!(
        message,
        r#"bad.json: node 1 ("b"): attribute "output_memory" has a negative entry -5"#
    );
}

#[test]
fn negative_scalar() {
    let (_, message) = error(&edit(
        r#""temporary_memory": 0, "persistent_memory": 64"#,
        r#""temporary_memory": -1, "persistent_memory": 64"#,
    ));
    assert_mentions(&message, &[r#"node 1 ("b")"#, r#""temporary_memory""#, "negative (-1)"]);
}

#[test]
fn zero_weight() {
    let (_, message) = error(&edit(r#""weight": 9"#, r#""weight": 0"#));
    assert_mentions(&message, &[r#"node 2 ("c")"#, r#""weight""#, "at least 1"]);
}

#[test]
fn duplicate_id() {
    let (_, message) = error(&edit(r#""id": 2"#, r#""id": 1"#));
    assert_eq!(message, r#"bad.json: node 1 ("c"): attribute "id" repeats the id of node 1 ("b")"#);
}

#[test]
fn negative_id() {
    let (_, message) = error(&edit(r#""id": 2"#, r#""id": -2"#));
    assert_eq!(message, r#"bad.json: node at position 2 ("c"): attribute "id" is negative (-2)"#);
}

#[test]
fn duplicate_name() {
    let (_, message) = error(&edit(r#""name": "c""#, r#""name": "a""#));
    assert_eq!(message, r#"bad.json: node 2 ("a"): attribute "name" repeats the name of node 0"#);
}

#[test]
fn links_and_edges_missing() {
    let (_, message) = error(&edit(r#""links": ["#, r#""lynx": ["#));
    assert_mentions(&message, &[r#"attribute "links" is missing"#, "\"edges\""]);
}

#[test]
fn links_and_edges_both_present() {
    let (_, message) = error(&edit(r#""graph": {},"#, r#""graph": {}, "edges": [],"#));
    assert_mentions(&message, &[r#""edges""#, r#""links""#]);
}

#[test]
fn nodes_missing() {
    let (_, message) = error(&edit(r#""nodes": ["#, r#""nodez": ["#));
    assert_eq!(message, r#"bad.json: attribute "nodes" is missing"#);
}

#[test]
fn duplicate_link() {
    let (_, message) = error(&edit(r#""source": 0, "target": 2"#, r#""source": 0, "target": 1"#));
    assert_mentions(&message, &[r#"edge 0 ("a") -> 1 ("b")"#, "at most one link"]);
}

#[test]
fn link_weight_not_sum_of_tensors() {
    let (_, message) = error(&edit(
        r#""weight": 135,
     "tensor": [{"name": "b:0""#,
        r#""weight": 136,
     "tensor": [{"name": "b:0""#,
    ));
    assert_mentions(&message, &[r#"edge 1 ("b") -> 2 ("c")"#, r#""weight""#, "sum to 135"]);
}

#[test]
fn tensor_with_two_producers() {
    let (_, message) = error(&edit(r#"[{"name": "b:0""#, r#"[{"name": "a:0""#));
    assert_mentions(
        &message,
        &[r#"edge 1 ("b") -> 2 ("c")"#, r#""tensor[0].name""#, "one producer"],
    );
}

#[test]
fn undirected_graph() {
    let (_, message) = error(&edit(r#""directed": true"#, r#""directed": false"#));
    assert_mentions(&message, &[r#"attribute "directed""#]);
}

#[test]
fn wrong_colocation_group() {
    let (_, message) = error(&edit(
        r#""output_memory": [16]"#,
        r#""output_memory": [16], "colocation_group": [1]"#,
    ));
    assert_mentions(&message, &[r#"node 2 ("c")"#, r#""colocation_group""#, "the number 1"]);
}

#[test]
fn missing_file() {
    let err = read_costgraph("/nonexistent/dir/graph.json").expect_err("no such file");
    assert!(err.to_string().starts_with("/nonexistent/dir/graph.json: cannot read"), "{err}");
}

#[test]
fn garbage_never_panics() {
    let samples = [
        "",
        "null",
        "{}",
        "{\"nodes\": {}}",
        "{\"nodes\": [], \"links\": 5}",
        "{\"nodes\": [1], \"links\": []}",
        "{\"nodes\": [{}], \"links\": []}",
        "{\"nodes\": [], \"links\": [{}]}",
        "{\"nodes\": [], \"links\": [7]}",
        "{\"graph\": 1, \"nodes\": [], \"links\": []}",
        "[[[[[[[[[[[[[[[[[[[[",
        "{\"nodes\": [{\"id\": 1e400}], \"links\": []}",
        "{\"nodes\": [{\"id\": 18446744073709551616}], \"links\": []}",
    ];
    for text in samples {
        assert!(parse_costgraph(text, "g.json").is_err(), "{text}");
    }
    let deep = "[".repeat(100_000);
    assert!(parse_costgraph(&deep, "g.json").is_err());
    assert!(parse_costgraph("{\"nodes\": [], \"links\": []}", "g.json").unwrap().nodes.is_empty());
}

#[test]
fn edge_missing_source() {
    let (_, message) = error(&edit(r#""source": 1, "target": 2"#, r#""target": 2"#));
    assert_eq!(
        message,
        r#"bad.json: edge at position 1 (? -> 2 ("c")): attribute "source" is missing"#
    );
}

#[test]
fn node_not_an_object() {
    let (_, message) = error(&edit(r#""nodes": ["#, r#""nodes": [17, "#));
    assert_eq!(
        message,
        r#"bad.json: attribute "nodes" has the number 17 at position 0, not an object"#
    );
}
