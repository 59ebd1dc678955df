//! Behaviour fixtures: the `--json` outputs of `compare`, `simulate` and `run` (its losses) for
//! every zoo model and every shipped cost-graph sample, recorded once and compared on every
//! test run, so that a redesign that moves code keeps placements, step times, peaks and losses
//! identical.
//!
//! Wall-clock fields (`*_seconds`, the search time in `auto`'s note, measured step times) are
//! dropped before comparing, and so are a simulation report's per-task timeline and what `run`
//! measures (step times, the engine's peaks); everything else must match exactly.
//!
//! To record the fixtures again after an intended change of behaviour:
//! `ORDO_BLESS=1 cargo test -p ordo-cli --test golden`, and say in the commit why they changed.

mod common;

use std::path::PathBuf;

use serde_json::{Value, json};

use common::{ordo, stderr};

const MODELS: [&str; 8] = [
    "resnet50",
    "inception_v3",
    "densenet121",
    "mobilenet_v3_large",
    "transformer",
    "gnmt",
    "bert_base",
    "gpt2_small",
];

const SAMPLES: [&str; 5] = ["resnet50", "inception_v3", "transformer", "gnmt", "synth_1k"];

/// `auto`'s budget in the fixtures (with `--reproducible`: a fixed number of simulations and
/// no deadline, so the result is the same on every machine and build), small enough for a
/// debug build.
const BUDGET: &str = "0.1s";

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn sample(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ordo-cost/tests/fixtures")
        .join(format!("{name}.json"));
    path.to_string_lossy().into_owned()
}

/// Runs `ordo args` and returns its JSON output, or `{"error": <stderr>}` when it fails (a
/// failure is behaviour too, and must stay the same).
fn output(args: &[&str]) -> Value {
    let out = ordo(args);
    if !out.status.success() {
        return json!({ "error": stderr(&out).trim() });
    }
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("ordo {args:?}: stdout is not JSON: {e}"))
}

/// Drops what depends on the wall clock or the machine, and writes paths into this crate
/// relative to it (`<crate>/...`), so that fixtures hold in any checkout.
fn normalise(value: &mut Value) {
    match value {
        Value::String(text) => {
            *text = text.replace(env!("CARGO_MANIFEST_DIR"), "<crate>");
        }
        Value::Object(map) => {
            // A placement's `order` lists every node on its device: `device_of` repeats it.
            if map.contains_key("order") {
                map.remove("device_of");
            }
            map.retain(|key, _| {
                !key.ends_with("_seconds")
                    && !key.starts_with("measured")
                    && key != "timeline"
                    && key != "tasks"
            });
            if let Some(Value::String(note)) = map.get_mut("note")
                && let Some(at) = note.find(", search ")
            {
                note.truncate(at);
            }
            map.values_mut().for_each(normalise);
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// Compares `ordo args` with fixture `name` (or records it under `ORDO_BLESS`).
fn check(name: &str, args: &[&str]) -> Option<String> {
    let mut value = output(args);
    normalise(&mut value);
    if args[0] == "run"
        && let Value::Object(map) = &mut value
    {
        // Measured figures (step times, the engine's peaks) vary from run to run.
        map.retain(|key, _| !matches!(key.as_str(), "step_us" | "peak_memory_bytes"));
    }
    let path = fixture_dir().join(format!("{name}.json"));
    if std::env::var_os("ORDO_BLESS").is_some() {
        std::fs::create_dir_all(fixture_dir()).expect("fixture directory");
        let text = serde_json::to_string(&value).expect("JSON serialises") + "\n";
        std::fs::write(&path, text).expect("fixture written");
        return None;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (record it with ORDO_BLESS=1)", path.display()));
    let expected: Value = serde_json::from_str(&text).expect("a fixture is JSON");
    (value != expected)
        .then(|| format!("{name}: `ordo {}` differs from its fixture", args.join(" ")))
}

fn check_all(cases: Vec<(String, Vec<String>)>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, args)| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            check(name, &args)
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The words of `command`, with `target` (a model name or a file path, which may hold spaces)
/// as the second.
fn args(command: &str, target: &str, rest: &str) -> Vec<String> {
    let mut words = vec![command.to_string(), target.to_string()];
    words.extend(rest.split_whitespace().map(str::to_string));
    words
}

#[test]
fn compare_is_unchanged_on_every_model_and_sample() {
    let mut cases = Vec::new();
    for model in MODELS {
        let rest = format!("--devices 4 --budget {BUDGET} --reproducible --json");
        cases.push((format!("compare-{model}"), args("compare", model, &rest)));
        let rest = format!(
            "--small --train --devices 2 --memory 64MiB --budget {BUDGET} --reproducible --json"
        );
        cases.push((format!("compare-{model}-small-train"), args("compare", model, &rest)));
        let rest = "--small --train --devices 1 --schedules --json";
        cases.push((format!("schedules-{model}-small"), args("compare", model, rest)));
    }
    for name in SAMPLES {
        let rest = format!("--devices 4 --forward-only --budget {BUDGET} --reproducible --json");
        cases.push((format!("compare-sample-{name}"), args("compare", &sample(name), &rest)));
    }
    check_all(cases);
}

#[test]
fn data_parallel_and_pipelines_are_unchanged() {
    let mut cases = Vec::new();
    for model in ["resnet50", "bert_base", "gnmt"] {
        let rest = "--train --cluster v100x4-nvlink --data-parallel 4 --network-gbps 10 --json";
        cases.push((format!("data-parallel-{model}"), args("compare", model, rest)));
    }
    for model in ["resnet50", "bert_base", "transformer"] {
        let rest = "--train --batch 32 --cluster a100x8-nvlink --pipeline 4 --micro-batches 8 \
                    --json";
        cases.push((format!("pipeline-{model}"), args("compare", model, rest)));
    }
    check_all(cases);
}

#[test]
fn simulate_is_unchanged_on_every_model() {
    let mut cases = Vec::new();
    for model in MODELS {
        let rest = "--small --train --devices 2 --algo m-etf --json";
        cases.push((format!("simulate-{model}-small-train"), args("simulate", model, rest)));
        let rest = "--small --train --devices 1 --schedule ooo --json";
        cases.push((format!("simulate-{model}-ooo"), args("simulate", model, rest)));
    }
    for name in SAMPLES {
        let rest = "--devices 4 --algo m-sct --json";
        cases.push((format!("simulate-sample-{name}"), args("simulate", &sample(name), rest)));
    }
    check_all(cases);
}

#[test]
fn run_losses_are_unchanged_on_every_model() {
    let mut cases = Vec::new();
    // The roofline's costs (a run profiles the model first by default, and measured times
    // would move the placement from machine to machine; the losses would not move).
    for model in MODELS {
        let rest = "--small --train --steps 2 --devices cpu:2 --algo m-etf --json --roofline \
                    --warmup-seconds 0";
        cases.push((format!("run-{model}-small"), args("run", model, rest)));
    }
    let rest = "--small --train --steps 2 --data-parallel 2 --json --roofline --warmup-seconds 0";
    cases.push(("run-resnet50-data-parallel".into(), args("run", "resnet50", rest)));
    let rest =
        "--small --train --steps 2 --schedule ooo --workers 2 --json --roofline --warmup-seconds 0";
    cases.push(("run-bert_base-ooo".into(), args("run", "bert_base", rest)));
    check_all(cases);
}
