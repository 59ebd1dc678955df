//! `ordo profile` end to end, and `--profile` on the commands that cost a graph; `--small`.

mod common;

use common::*;

use std::path::Path;
use std::process::Output;

use ordo_cost::Profile;
use ordo_models::Variant;

fn ok(out: Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ordo failed: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failure(out: Output) -> String {
    assert!(!out.status.success(), "ordo succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn profile_training_graph(model: &str, dir: &Path) -> (String, Profile) {
    let path = dir.join(format!("{model}.json")).display().to_string();
    let args = ["profile", model, "--small", "--train", "--reps", "3", "--warmup", "1"];
    ok(ordo(&[&args[..], &["--out", &path]].concat()));
    let profile = Profile::read(&path).unwrap();
    (path, profile)
}

#[test]
fn a_profile_costs_the_simulated_step() {
    let dir = tempfile::tempdir().unwrap();
    let (path, profile) = profile_training_graph("gnmt", dir.path());
    assert_eq!(profile.model, "gnmt-small (training graph)");
    assert_eq!(profile.batch, ordo_models::SMALL_BATCH);
    assert!(profile.temporary_measured);
    // One entry per node of the training graph, in its order.
    let forward = ordo_models::build_variant("gnmt", Variant::Small, None, None).unwrap();
    let loss = ordo_ir::OutletId::new(forward.find("loss").unwrap().id, 0);
    let optimizer = ordo_ir::op::Optimizer::SgdMomentum;
    let training = ordo_ir::training::training_graph(&forward, loss, optimizer).unwrap();
    let names: Vec<&str> = profile.nodes.iter().map(|n| n.name.as_str()).collect();
    let expected: Vec<&str> = training.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, expected);
    // An LSTM allocates its gates and states besides its output.
    let lstm = profile.nodes.iter().find(|n| n.name == "encoder.rnn_layers.0").unwrap();
    assert!(lstm.temporary_bytes > 0, "{lstm:?}");

    // One device, one stream, in order: the step is the sum of the profiled times.
    let args = ["simulate", "gnmt", "--small", "--train", "--devices", "1"];
    let more = ["--schedule", "inorder", "--json", "--profile", &path];
    let report: serde_json::Value = serde_json::from_str(&ok(ordo(&[&args[..], &more].concat())))
        .expect("simulate prints JSON");
    // (Whole µs with the rounding errors carried from node to node, so within a µs.)
    let sum: f64 = profile.nodes.iter().map(|n| n.time_us).sum();
    let step = report["step_time_us"].as_f64().unwrap();
    assert!((step - sum).abs() <= 1.0, "{step} against {sum}");
    // The roofline's step differs.
    let roofline: serde_json::Value =
        serde_json::from_str(&ok(ordo(&[&args[..], &more[..3]].concat()))).unwrap();
    assert_ne!(roofline["step_time_us"], report["step_time_us"]);

    // place and plan take it too.
    let args = ["place", "gnmt", "--small", "--train", "--devices", "2", "--algo", "m-etf"];
    let text = ok(ordo(&[&args[..], &["--profile", &path]].concat()));
    assert!(text.contains("gnmt-small"), "{text}");
    let args = ["plan", "gnmt", "--small", "--train", "--devices", "2", "--algo", "m-etf"];
    ok(ordo(&[&args[..], &["--profile", &path]].concat()));
}

#[test]
fn a_profile_of_another_graph_or_size_is_an_error_naming_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = profile_training_graph("gnmt", dir.path());
    // The forward graph has none of the backward nodes the profile lists.
    let err = failure(ordo(&["place", "gnmt", "--small", "--devices", "1", "--profile", &path]));
    assert!(err.contains("not in the graph") && err.contains("in all"), "{err}");
    // Another model: names missing both ways.
    let err = failure(ordo(&[
        "compare",
        "bert_base",
        "--small",
        "--train",
        "--devices",
        "2",
        "--profile",
        &path,
    ]));
    assert!(err.contains("not in the profile") && err.contains("`input_ids`"), "{err}");
    // Same names at another batch size.
    let args = ["simulate", "gnmt", "--small", "--batch", "3", "--train", "--devices", "1"];
    let err = failure(ordo(&[&args[..], &["--profile", &path]].concat()));
    assert!(err.contains("other sizes") && err.contains("batch 2"), "{err}");
    // Not a profile.
    let err = failure(ordo(&["place", "gnmt", "--small", "--devices", "1", "--profile", "/"]));
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn small_selects_the_small_variant_everywhere() {
    let text = ok(ordo(&["inspect", "resnet50", "--small", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let graph = ordo_models::build_variant("resnet50", Variant::Small, None, None).unwrap();
    assert_eq!(v["nodes"], graph.nodes.len());
    assert_eq!(v["params"], ordo_ir::graph_stats(&graph).params);
    let args = ["simulate", "inception_v3", "--small", "--devices", "2", "--algo", "m-etf"];
    let text = ok(ordo(&args));
    assert!(text.contains("inception_v3-small"), "{text}");
}
