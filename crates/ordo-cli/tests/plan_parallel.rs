//! `ordo plan-parallel`: the best plans, in order, each one the simulation of its
//! configuration gives; rejections named; bad requests refused.

mod common;

use common::*;

const MODEL: &str = "llama:layers=4,hidden=64,heads=4,intermediate=128,vocab=256";

fn plan(extra: &[&str]) -> std::process::Output {
    let base = ["plan-parallel", MODEL, "--cluster", "h100x8-ib-ndr", "--seq-len", "16"];
    ordo(&[&base[..], extra].concat())
}

/// `ordo simulate` of a plan's `config` (a candidate's JSON) at the global batch of 32, with
/// `extra`.
fn simulate_config(config: &serde_json::Value, extra: &[&str]) -> std::process::Output {
    let count = |key: &str| config[key].as_u64().unwrap().to_string();
    let (d, s, m) = (count("data"), count("stages"), count("micro_batches"));
    let schedule = config["schedule"].as_str().unwrap();
    let model = [MODEL, "--seq-len", "16", "--train", "--optimizer", "adam", "--batch", "32"];
    let cluster = ["--cluster", "h100x8-ib-ndr", "--nodes", "1"];
    // Simulated per block, as the planner simulates by default.
    let plan =
        ["--pipeline", &s, "--micro-batches", &m, "--schedule", schedule, "--granularity", "block"];
    let copies = ["--data-parallel", &d, "--all-reduce", "nccl", "--bucket", "25MiB"];
    let modulo: &[&str] = if config["interleaved"] == true { &["--modulo", "1"] } else { &[] };
    ordo(&[&["simulate"][..], &model, &cluster, &plan, &copies, modulo, extra].concat())
}

#[test]
fn the_best_plans_come_first_and_match_their_simulation() {
    let args = ["--nodes", "1", "--batch", "32", "--max-micro-batches", "4", "--json"];
    let v = json(&plan(&[&args[..], &["--top", "1000"]].concat()));
    let candidates = v["candidates"].as_array().unwrap();
    assert!(!candidates.is_empty());
    let steps: Vec<f64> = candidates.iter().map(|c| c["step_time_us"].as_f64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    assert!(v["simulated"].as_u64().unwrap() > 0);
    // The best pipeline without tensor parallelism (which `ordo simulate` does not take),
    // simulated on its own by `ordo simulate`: the same step.
    let whole = |c: &&serde_json::Value| c["config"]["tensor"] == 1;
    let best = candidates
        .iter()
        .filter(whole)
        .find(|c| c["config"]["stages"].as_u64().unwrap() > 1)
        .unwrap();
    let out = simulate_config(&best["config"], &["--json"]);
    assert_eq!(json(&out)["step_time_us"], best["step_time_us"]);
    // And the best interleaved pipeline.
    let interleaved = candidates.iter().filter(whole).find(|c| c["config"]["interleaved"] == true);
    let interleaved = interleaved.expect("an interleaved pipeline among the candidates");
    let out = simulate_config(&interleaved["config"], &["--json"]);
    assert_eq!(json(&out)["step_time_us"], interleaved["step_time_us"]);
    // The table: a header, the plans, rejections with reasons.
    let out = plan(&["--nodes", "1", "--batch", "32", "--max-micro-batches", "4"]);
    let text = stdout(&out);
    assert!(text.contains("configurations simulated") && text.contains("step ms"), "{text}");
    assert!(text.contains("rejected dp 1 x tp 1 x pp 8"), "{text}");
    // Tensor parallelism is searched, and reported where it cannot split the model.
    assert!(candidates.iter().any(|c| c["config"]["tensor"] == 2), "no tp 2");
    let rejected = v["rejected"].as_array().unwrap();
    let eight = rejected.iter().find(|r| r["config"]["tensor"] == 8).expect("tp 8 rejected");
    assert!(eight["reason"].as_str().unwrap().contains("do not divide heads 4"), "{eight}");
}

#[test]
fn the_best_plan_exports_its_schedule_and_process_groups() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("best");
    let export_arg = export.to_str().unwrap();
    let args = ["--nodes", "1", "--batch", "32", "--max-micro-batches", "4", "--export"];
    let args = [&["--tensor-parallel", "1"][..], &args].concat();
    let v = json(&plan(&[&args[..], &[export_arg, "--json"]].concat()));
    let best = &v["candidates"][0];
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(export.join("plan.json")).unwrap()).unwrap();
    let config = &best["config"];
    for key in ["data", "tensor", "stages", "micro_batches", "schedule", "interleaved"] {
        assert_eq!(written[key], config[key], "{key}");
    }
    assert_eq!(written["predicted"]["step_time_us"], best["step_time_us"]);
    let (data, stages) = (config["data"].as_u64().unwrap(), config["stages"].as_u64().unwrap());
    // Every rank in one pipeline group and one data group; a stage's copies a pipeline apart.
    let groups =
        |key: &str| -> Vec<Vec<u64>> { serde_json::from_value(written[key].clone()).unwrap() };
    let (pipelines, copies) = (groups("pipeline_groups"), groups("data_groups"));
    assert_eq!((pipelines.len() as u64, copies.len() as u64), (data, stages));
    let mut ranks: Vec<u64> = pipelines.concat();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..data * stages).collect::<Vec<_>>());
    for (s, group) in copies.iter().enumerate() {
        assert_eq!(group, &(0..data).map(|d| d * stages + s as u64).collect::<Vec<_>>());
    }
    let micro = 32 / (data * config["micro_batches"].as_u64().unwrap());
    assert_eq!(written["micro_batch_size"], micro);
    // A pipeline's schedule: what `ordo simulate --pytorch-schedule` writes for the same plan.
    assert!(stages > 1, "the tiny model's best is a pipeline: {best}");
    let csv = dir.path().join("simulated.csv");
    let out = simulate_config(config, &["--pytorch-schedule", csv.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(export.join("schedule.csv")).unwrap(),
        std::fs::read_to_string(&csv).unwrap()
    );
}

#[test]
fn bad_requests_are_refused_naming_the_option() {
    let cases: [(&[&str], &str); 6] = [
        (&["--batch", "8", "--tensor-parallel", "0"], "--tensor-parallel must be at least 1"),
        (&["--batch", "0"], "--batch"),
        (&["--batch", "8", "--gpus", "0"], "--gpus must be at least 1"),
        (&["--batch", "8", "--gpus", "1000"], "--gpus 1000: cluster `h100x8-ib-ndr` has 128"),
        (&["--batch", "8", "--nodes", "0"], "--nodes 0"),
        (&["--batch", "8", "--all-reduce", "mesh"], "mesh"),
    ];
    for (extra, culprit) in cases {
        let out = plan(extra);
        assert!(!out.status.success(), "{extra:?}");
        assert!(stderr(&out).contains(culprit), "{extra:?}: {}", stderr(&out));
    }
}
