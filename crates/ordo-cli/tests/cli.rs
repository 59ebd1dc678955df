//! The `ordo` binary end to end: output, JSON, exit codes and error messages.

mod common;

use common::*;

use std::path::Path;
use std::process::Command;

#[test]
fn models_lists_the_whole_zoo() {
    let out = ordo(&["models"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for spec in ordo_models::zoo() {
        assert!(text.contains(spec.name), "{} missing from\n{text}", spec.name);
    }
    assert!(text.contains("25,557,032"), "resnet50's parameter count is shown:\n{text}");
}

#[test]
fn inspect_json_reports_nodes_params_and_flops() {
    let v = json(&ordo(&["inspect", "resnet50", "--json", "--batch", "1"]));
    assert_eq!(v["params"], 25_557_032);
    let graph = ordo_models::build("resnet50", Some(1), None).unwrap();
    assert_eq!(v["nodes"], graph.nodes.len());
    assert_eq!(v["flops"], ordo_ir::graph_stats(&graph).flops);
    assert_eq!(v["per_node"].as_array().unwrap().len(), graph.nodes.len());
}

#[test]
fn inspect_text_has_a_summary_and_a_node_table() {
    let out = ordo(&["inspect", "gpt2_small", "--seq-len", "64", "--batch", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("124,439,808"), "{text}");
    assert!(text.contains("transformer.h.11.mlp.c_proj"), "node table lists the layers");
}

#[test]
fn an_unknown_model_is_an_error_that_lists_the_zoo() {
    let out = ordo(&["inspect", "resnet5"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("unknown model `resnet5`") && err.contains("resnet50"), "{err}");
}

#[test]
fn a_missing_file_is_named_once_with_its_cause() {
    let out = ordo(&["inspect", "/no/such/graph.json"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("/no/such/graph.json: cannot read the file"), "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "the cause is printed once: {err}");
}

#[test]
fn a_zero_batch_is_an_error() {
    let out = ordo(&["inspect", "resnet50", "--batch", "0"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("batch size must be at least 1"), "{}", stderr(&out));
}

#[test]
fn export_writes_a_cost_graph_that_inspect_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gnmt.json");
    let path = path.to_str().unwrap();
    let out = ordo(&["export", "gnmt", "--batch", "4", "--seq-len", "5", "--costgraph", path]);
    assert!(out.status.success(), "{}", stderr(&out));
    let graph = ordo_models::build("gnmt", Some(4), Some(5)).unwrap();
    let v = json(&ordo(&["inspect", path, "--json"]));
    assert_eq!(v["nodes"], graph.nodes.len());
    assert_eq!(v["flops"], ordo_ir::graph_stats(&graph).flops);
}

#[test]
fn synth_writes_the_requested_number_of_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let path = path.to_str().unwrap();
    let out = ordo(&["synth", "--nodes", "500", "--seed", "7", "--out", path]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&ordo(&["inspect", path, "--json"]))["nodes"], 500);
}

/// Writes `text` to a file and returns `ordo inspect`'s stderr, asserting it failed.
fn inspect_error(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    let out = ordo(&["inspect", path.to_str().unwrap()]);
    assert!(!out.status.success(), "accepted:\n{text}");
    let err = stderr(&out);
    assert!(err.contains(file), "the error names the file: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn node(id: i64, name: &str, output: i64) -> String {
    format!(
        r#"{{"id":{id},"name":"{name}","weight":10,"temporary_memory":0,"persistent_memory":0,"output_memory":[{output}]}}"#
    )
}

fn link(s: i64, t: i64) -> String {
    format!(
        r#"{{"source":{s},"target":{t},"weight":134,"tensor":[{{"name":"t{s}","num_bytes":4,"weight":134}}]}}"#
    )
}

fn graph(nodes: &[String], links: &[String]) -> String {
    format!(
        r#"{{"directed":true,"multigraph":false,"graph":{{}},"nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    )
}

#[test]
fn bad_cost_graphs_are_errors_that_name_the_file_and_the_culprit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = graph(&[node(0, "a", 4), node(1, "b", 4)], &[link(0, 1)]);
    // The well-formed base case loads.
    let path = d.join("ok.json");
    std::fs::write(&path, &ok).unwrap();
    assert!(ordo(&["inspect", path.to_str().unwrap()]).status.success());

    inspect_error(d, "not_json.json", "this is not json");
    let err = inspect_error(d, "missing.json", &ok.replace(r#""weight":10,"#, ""));
    assert!(err.contains("weight"), "{err}");
    let err = inspect_error(d, "unknown.json", &graph(&[node(0, "a", 4)], &[link(0, 5)]));
    assert!(err.contains('5'), "{err}");
    let err = inspect_error(
        d,
        "cycle.json",
        &graph(&[node(0, "a", 4), node(1, "b", 4)], &[link(0, 1), link(1, 0)]),
    );
    assert!(err.contains("cycle"), "{err}");
    let err = inspect_error(d, "negative.json", &graph(&[node(0, "a", -5)], &[]));
    assert!(err.contains("output_memory") && err.contains("\"a\""), "{err}");
    let err = inspect_error(d, "dup.json", &graph(&[node(0, "a", 4), node(0, "b", 4)], &[]));
    assert!(err.contains("\"id\"") && err.contains("repeats"), "{err}");
}

#[test]
fn a_closed_pipe_ends_ordo_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["inspect", "densenet121"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// `simulate --steady-state` reports what `compare --schedules` reports for the same schedule,
/// and `simulate` without it one step from an empty start (which takes at least as long as a
/// step of a long run, whose first work overlaps the step before).
#[test]
fn simulate_reports_one_step_or_the_steady_state_as_asked() {
    let compare = json(&ordo(&[
        "compare",
        "gnmt",
        "--small",
        "--train",
        "--schedules",
        "--devices",
        "1",
        "--json",
    ]));
    for schedule in ["inorder", "ooo"] {
        let row = compare["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["schedule"] == schedule)
            .unwrap()
            .clone();
        let base = ["simulate", "gnmt", "--small", "--train", "--schedule", schedule, "--json"];
        let steady = json(&ordo(&[&base[..], &["--steady-state"]].concat()));
        assert_eq!(steady["measures"], "steady state");
        assert_eq!(steady["step_time_us"], row["step_time_us"], "{schedule}");
        assert_eq!(steady["peak_memory_bytes"], row["peak_memory_bytes"], "{schedule}");
        let one = json(&ordo(&base));
        assert!(one["step_time_us"].as_f64().unwrap() >= steady["step_time_us"].as_f64().unwrap());
    }
}
