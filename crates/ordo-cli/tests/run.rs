//! `ordo run` end to end: losses, measured and predicted step times, traces, and errors.

mod common;

use common::*;

fn losses(v: &serde_json::Value) -> Vec<f64> {
    v["losses"].as_array().unwrap().iter().map(|l| l.as_f64().unwrap()).collect()
}

/// Costs from the roofline and no warm-up: these tests check losses, plans and errors, not the
/// prediction's accuracy, and profiling first would make each run a few seconds longer.
const QUICK: [&str; 3] = ["--roofline", "--warmup-seconds", "0"];

/// `ordo run` with `args` and [`QUICK`].
fn quick(args: &[&str]) -> std::process::Output {
    ordo(&[args, &QUICK[..]].concat())
}

fn run(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["run", "resnet50", "--small", "--train", "--steps", "3", "--json"];
    args.extend_from_slice(extra);
    json(&quick(&args))
}

#[test]
fn training_lowers_the_loss_identically_for_every_placement_and_schedule() {
    let reference = run(&["--devices", "cpu:1", "--algo", "single", "--lr", "0.05"]);
    let want = losses(&reference);
    assert_eq!(want.len(), 3);
    assert!(want[2] < want[0], "the loss falls: {want:?}");
    for extra in [
        &["--devices", "cpu:2", "--algo", "m-etf", "--workers", "2"][..],
        &["--devices", "cpu:3", "--algo", "round-robin", "--sync", "device-wait"],
        &["--devices", "cpu:2", "--algo", "m-topo", "--order", "model"],
        &["--schedule", "ooo", "--workers", "2"],
        &["--schedule", "ooo", "--defer", "3", "--unroll", "3"],
        &["--schedule", "ooo", "--defer", "41", "--unroll", "3", "--workers", "2"],
    ] {
        let mut args = extra.to_vec();
        args.extend(["--lr", "0.05"]);
        assert_eq!(losses(&run(&args)), want, "{extra:?}");
    }
    assert!(reference["measured_step_us"].as_f64().unwrap() > 0.0);
    assert!(reference["predicted_step_us"].as_f64().unwrap() > 0.0);
    assert_eq!(reference["step_us"].as_array().unwrap().len(), 3);
}

#[test]
fn every_pipeline_schedule_trains_identically_and_1f1b_holds_less() {
    let pipeline = |rest: &str| {
        let base = "run gpt2_small --small --train --batch 8 --pipeline 2 --steps 3 --json";
        let words: Vec<&str> = base.split_whitespace().chain(rest.split_whitespace()).collect();
        quick(&words)
    };
    let gpipe = json(&pipeline("--micro-batches 4 --schedule gpipe"));
    let want = losses(&gpipe);
    assert_eq!(want.len(), 3);
    assert!(want.iter().all(|l| l.is_finite()), "{want:?}");
    assert!(gpipe["plan"].as_str().unwrap().contains("2-stage pipeline, 4 micro-batches, gpipe"));
    let peak = |v: &serde_json::Value| v["peak_memory_bytes"][0].as_u64().unwrap();
    for rest in [
        "--schedule 1f1b",
        "--schedule fast-forward",
        "--schedule fast-forward --workers 2",
        "--schedule 1f1b --modulo 1 --sync device-wait",
        "--schedule zb-h1",
        "--schedule zb-h2 --workers 2",
    ] {
        let v = json(&pipeline(&format!("--micro-batches 4 {rest}")));
        assert_eq!(losses(&v), want, "{rest}");
        // The engine's peaks are the plan's: 1F1B keeps fewer micro-batches in flight.
        if rest == "--schedule 1f1b" {
            assert!(peak(&v) < peak(&gpipe), "1f1b {} vs gpipe {}", peak(&v), peak(&gpipe));
        }
    }
    // Misuse is named in the user's words.
    let out = pipeline("--micro-batches 3");
    assert!(stderr(&out).contains("multiple of --micro-batches (3)"), "{}", stderr(&out));
    let out = pipeline("--micro-batches 2 --schedule ooo");
    let expected = "gpipe, 1f1b, fast-forward, zb-h1 or zb-h2, not ooo";
    assert!(stderr(&out).contains(expected), "{}", stderr(&out));
}

#[test]
fn data_parallel_replicas_report_their_mean_loss() {
    let dp = |rest: &str| {
        let base = "run gpt2_small --small --train --steps 2 --data-parallel 2 --json";
        json(&quick(&base.split_whitespace().chain(rest.split_whitespace()).collect::<Vec<_>>()))
    };
    let v = dp("");
    assert_eq!(v["devices"], 2);
    let want = losses(&v);
    assert!(want.iter().all(|l| l.is_finite()));
    // Reverse first-k, buckets, and the deferred updates applied in the next step's forward
    // pass (two steps a plan) train identically.
    for rest in ["--first-k 4 --bucket 64KiB", "--first-k 4 --unroll 2", "--unroll 2 --workers 2"] {
        assert_eq!(losses(&dp(rest)), want, "{rest}");
    }
}

#[test]
fn the_trace_is_in_the_simulators_format_and_lies_beside_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let predicted = dir.path().join("predicted.json");
    let out = ordo(&[
        "run",
        "inception_v3",
        "--small",
        "--train",
        "--devices",
        "cpu:2",
        "--algo",
        "m-etf",
        "--trace",
        path.to_str().unwrap(),
        "--predicted-trace",
        predicted.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tasks = |path: &std::path::Path| {
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let events = trace["traceEvents"].as_array().unwrap().clone();
        assert!(events.iter().any(|e| e["ph"] == "s"), "transfers are drawn as flows");
        let mut tasks: Vec<(String, i64)> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| (e["name"].as_str().unwrap().to_string(), e["pid"].as_i64().unwrap()))
            .collect();
        tasks.sort();
        tasks
    };
    let (measured, simulated) = (tasks(&path), tasks(&predicted));
    assert!(measured.len() > 100, "{} task events", measured.len());
    // The same tasks on the same devices in both.
    assert_eq!(measured, simulated);
}

#[test]
fn bad_runs_are_clear_errors() {
    let err = |args: &[&str]| {
        let out = quick(args);
        assert!(!out.status.success(), "{args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["run", "resnet50", "--small", "--devices", "gpu:2"]);
    assert!(e.contains("--devices gpu:2"), "{e}");
    let e = err(&["run", "resnet50", "--small", "--train", "--memory", "1KiB"]);
    assert!(e.contains("short"), "{e}");
    let e = err(&["run", "resnet50", "--small", "--steps", "0"]);
    assert!(e.contains("--steps"), "{e}");
    let e =
        err(&["run", "resnet50", "--small", "--train", "--schedule", "ooo", "--devices", "cpu:2"]);
    assert!(e.contains("--schedule ooo runs on one device"), "{e}");
    // Data-parallel and pipeline settings that make no sense name the option and the reason.
    for (rest, expected) in [
        ("--data-parallel 2 --first-k 1000", "reverse first-k defers 1000 layers"),
        ("--data-parallel 2 --bucket lots", "--bucket lots"),
        ("--pipeline 2 --micro-batches 0", "--micro-batches must be at least 1"),
        ("--pipeline 2 --micro-batches 2 --modulo 0", "groups of 0 units"),
        ("--pipeline 9 --micro-batches 2", "only 5 units"),
        ("--pipeline 1 --micro-batches 2", "at least 2 stages"),
        ("--first-k 2", "--data-parallel"),
        ("--pipeline 2 --data-parallel 2", "cannot be used with"),
        ("--schedule inorder --defer 2", "--defer needs --schedule ooo"),
        ("--schedule ooo --defer 1000", "--defer 1000: the model has 41 layers with weights"),
        ("--schedule ooo --defer 2 --unroll 1", "--unroll 1"),
        ("--schedule ooo --defer 2 --steps 3", "multiple of --unroll 2"),
        ("--unroll 2", "--unroll applies to --defer and --data-parallel"),
        ("--data-parallel 2 --unroll 0", "--unroll 0"),
    ] {
        let mut args = vec!["run", "resnet50", "--small", "--train"];
        args.extend(rest.split_whitespace());
        let e = err(&args);
        assert!(e.contains(expected), "{rest}: {e}");
    }
    // Pipeline schedules are named as the user wrote them, and the advice names commands
    // that take --pipeline.
    for schedule in ["gpipe", "1f1b", "fast-forward"] {
        let e = err(&["run", "resnet50", "--small", "--train", "--schedule", schedule]);
        assert!(e.contains(&format!("--schedule {schedule} is a pipeline schedule")), "{e}");
        assert!(e.contains("give --pipeline S"), "{e}");
    }
    let e =
        err(&["run", "resnet50", "--small", "--train", "--schedule", "ooo", "--order", "model"]);
    assert!(e.contains("--order model"), "{e}");
}

#[test]
fn imported_onnx_models_train_alike_on_one_and_several_devices() {
    for name in ["convnet.onnx", "transformer_block.onnx", "lstm.onnx"] {
        let path = format!("{}/../ordo-onnx/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let base =
            ["run", path.as_str(), "--train", "--loss", "cross-entropy", "--steps", "3", "--json"];
        let one = losses(&json(&quick(
            &[&base[..], &["--devices", "cpu:1", "--algo", "single"]].concat(),
        )));
        assert!(one.iter().all(|l| l.is_finite()), "{name}: {one:?}");
        let three = ["--devices", "cpu:3", "--algo", "round-robin", "--workers", "2"];
        assert_eq!(losses(&json(&quick(&[&base[..], &three].concat()))), one, "{name}");
    }
}

#[test]
fn an_onnx_file_runs_at_another_batch() {
    let path = format!(
        "{}/../ordo-onnx/tests/fixtures/weights_as_inputs.onnx",
        env!("CARGO_MANIFEST_DIR")
    );
    let base = ["run", path.as_str(), "--train", "--loss", "cross-entropy", "--steps", "2"];
    let v = json(&quick(&[&base[..], &["--batch", "3", "--json"]].concat()));
    let at_three = losses(&v);
    assert_eq!(at_three.len(), 2);
    assert!(at_three.iter().all(|l| l.is_finite()), "{at_three:?}");
    // Another batch is another input, so another loss than at the file's batch of 4.
    let own = losses(&json(&quick(&[&base[..], &["--json"]].concat())));
    assert_ne!(own, at_three);
    let inspected = ordo(&["inspect", path.as_str(), "--batch", "3"]);
    assert!(String::from_utf8_lossy(&inspected.stdout).contains("f32[3,3,8,8]"));

    let tokens = format!("{}/../ordo-onnx/tests/fixtures/tokens.onnx", env!("CARGO_MANIFEST_DIR"));
    let base = ["run", tokens.as_str(), "--train", "--loss", "cross-entropy", "--steps", "2"];
    let sized = ["--batch", "3", "--seq-len", "5", "--json"];
    let one = losses(&json(&quick(&[&base[..], &sized, &["--devices", "cpu:1"]].concat())));
    let two = ["--devices", "cpu:2", "--algo", "round-robin"];
    assert_eq!(losses(&json(&quick(&[&base[..], &sized, &two].concat()))), one);
    assert!(one.iter().all(|l| l.is_finite()), "{one:?}");
}
