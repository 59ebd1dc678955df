//! `ordo plan-parallel`: the best plans, in order, each one the simulation of its
//! configuration gives; rejections named; bad requests refused.

mod common;

use common::*;

const MODEL: &str = "llama:layers=4,hidden=64,heads=4,intermediate=128,vocab=256";

fn plan(extra: &[&str]) -> std::process::Output {
    let base = ["plan-parallel", MODEL, "--cluster", "h100x8-ib-ndr", "--seq-len", "16"];
    ordo(&[&base[..], extra].concat())
}

#[test]
fn the_best_plans_come_first_and_match_their_simulation() {
    let args = ["--nodes", "1", "--batch", "32", "--max-micro-batches", "4", "--json"];
    let v = json(&plan(&args));
    let candidates = v["candidates"].as_array().unwrap();
    assert!(!candidates.is_empty());
    let steps: Vec<f64> = candidates.iter().map(|c| c["step_time_us"].as_f64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
    assert!(v["simulated"].as_u64().unwrap() > 0);
    // The best pipeline, simulated on its own by `ordo simulate`: the same step.
    let best = candidates.iter().find(|c| c["config"]["stages"].as_u64().unwrap() > 1).unwrap();
    let config = &best["config"];
    let count = |key: &str| config[key].as_u64().unwrap().to_string();
    let (d, s, m) = (count("data"), count("stages"), count("micro_batches"));
    let schedule = config["schedule"].as_str().unwrap();
    let out = ordo(&[
        "simulate",
        MODEL,
        "--seq-len",
        "16",
        "--train",
        "--optimizer",
        "adam",
        "--batch",
        "32",
        "--cluster",
        "h100x8-ib-ndr",
        "--nodes",
        "1",
        "--pipeline",
        &s,
        "--micro-batches",
        &m,
        "--schedule",
        schedule,
        "--data-parallel",
        &d,
        "--all-reduce",
        "nccl",
        "--bucket",
        "25MiB",
        "--json",
    ]);
    assert_eq!(json(&out)["step_time_us"], best["step_time_us"]);
    // The table: a header, the plans, rejections with reasons.
    let out = plan(&["--nodes", "1", "--batch", "32", "--max-micro-batches", "4"]);
    let text = stdout(&out);
    assert!(text.contains("configurations simulated") && text.contains("step ms"), "{text}");
    assert!(text.contains("rejected dp 1 x pp 8"), "{text}");
}

#[test]
fn bad_requests_are_refused_naming_the_option() {
    let cases: [(&[&str], &str); 5] = [
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
