//! Benchmark (ignored; `cargo test --release -p ordo-cli --test pipeline_accuracy -- --ignored
//! --nocapture`): every pipeline schedule executed on two CPU devices by `ordo run`, its
//! measured step next to the simulator's prediction from one `ordo profile` of the
//! micro-batch's training graph, as a user gets them; and whether the schedule predicted
//! fastest measures fastest.
//!
//! Each model is profiled once; then `ROUNDS` rounds run every schedule once each (41 steps,
//! the median step), interleaved so that a slow period of the machine hits every schedule
//! alike. A row's measured time is the median of its rounds' medians.

use std::process::Command;

fn ordo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

const ROUNDS: usize = 5;
const SCHEDULES: [&str; 5] = ["gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2"];
/// Global batch, micro-batches, stages.
const BATCH: usize = 8;
const MICRO_BATCHES: usize = 4;
const STAGES: usize = 2;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[test]
#[ignore = "benchmark"]
fn pipeline_schedules_measured_against_their_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let mut errors = Vec::new();
    println!(
        "{:<12} {:<13} {:>11} {:>12} {:>7}  round medians ms",
        "model", "schedule", "measured ms", "predicted ms", "error"
    );
    for model in ["gpt2_small", "bert_base", "transformer"] {
        let profile = dir.path().join(format!("{model}.json"));
        let profile = profile.to_str().unwrap();
        let micro_batch = (BATCH / MICRO_BATCHES).to_string();
        ordo(&[
            "profile",
            model,
            "--small",
            "--train",
            "--batch",
            &micro_batch,
            "--reps",
            "11",
            "--out",
            profile,
        ]);
        let (batch, m, s) = (BATCH.to_string(), MICRO_BATCHES.to_string(), STAGES.to_string());
        let mut measured = vec![Vec::new(); SCHEDULES.len()];
        let mut predicted = vec![0.0; SCHEDULES.len()];
        for _ in 0..ROUNDS {
            for (k, schedule) in SCHEDULES.iter().enumerate() {
                let v = ordo(&[
                    "run",
                    model,
                    "--small",
                    "--train",
                    "--batch",
                    &batch,
                    "--pipeline",
                    &s,
                    "--micro-batches",
                    &m,
                    "--schedule",
                    schedule,
                    "--steps",
                    "41",
                    "--json",
                    "--profile",
                    profile,
                ]);
                measured[k].push(v["measured_step_us"].as_f64().unwrap());
                predicted[k] = v["predicted_step_us"].as_f64().unwrap();
            }
        }
        let mut rows = Vec::new();
        for (k, schedule) in SCHEDULES.iter().enumerate() {
            let m = median(measured[k].clone());
            let error = (predicted[k] - m) / m * 100.0;
            errors.push(error.abs());
            let rounds: Vec<String> =
                measured[k].iter().map(|t| format!("{:.2}", t / 1e3)).collect();
            println!(
                "{model:<12} {schedule:<13} {:>11.3} {:>12.3} {error:>6.1}%  {}",
                m / 1e3,
                predicted[k] / 1e3,
                rounds.join(" ")
            );
            rows.push((*schedule, m, predicted[k]));
        }
        let fastest = |key: fn(&(&str, f64, f64)) -> f64| {
            rows.iter().min_by(|a, b| key(a).total_cmp(&key(b))).map(|r| r.0).unwrap()
        };
        let (by_prediction, by_measure) = (fastest(|r| r.2), fastest(|r| r.1));
        println!(
            "{model:<12} fastest predicted {by_prediction}, fastest measured {by_measure}{}",
            if by_prediction == by_measure { " (agree)" } else { "" }
        );
    }
    println!("median |error| {:.1}%", median(errors));
}
