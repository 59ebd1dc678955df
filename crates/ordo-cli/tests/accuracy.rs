//! Benchmark (ignored; `cargo test --release -p ordo-cli --test accuracy -- --ignored
//! --nocapture`): the simulator's prediction of a step against the step `ordo run` measures,
//! with node times from `ordo profile`, for every zoo model's small variant, on one device
//! (inorder, and ooo with two workers) and on two (m-ETF). Each plan runs in five processes
//! and the median of their median steps is compared: on a virtual machine a whole process can
//! land in a slow period of its host (kernels or hand-overs slower by a third), and one such
//! run should not decide a row.

use std::process::Command;

fn ordo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Processes per plan.
const RUNS: usize = 5;

#[test]
#[ignore = "benchmark"]
fn predicted_vs_measured_step_times_of_the_small_zoo() {
    let dir = tempfile::tempdir().unwrap();
    let mut errors = Vec::new();
    println!(
        "{:<20} {:<24} {:>12} {:>13} {:>7}",
        "model", "plan", "measured ms", "predicted ms", "error"
    );
    for spec in ordo_models::zoo() {
        let profile = dir.path().join(format!("{}.json", spec.name));
        let profile = profile.to_str().unwrap();
        ordo(&["profile", spec.name, "--small", "--train", "--reps", "11", "--out", profile]);
        for (label, plan) in [
            ("1 device inorder", &["--schedule", "inorder"][..]),
            ("1 device ooo, 2 workers", &["--schedule", "ooo", "--workers", "2"]),
            ("2 devices m-etf", &["--devices", "cpu:2", "--algo", "m-etf"]),
        ] {
            let mut args = vec![
                "run",
                spec.name,
                "--small",
                "--train",
                "--steps",
                "41",
                "--json",
                "--profile",
                profile,
            ];
            args.extend_from_slice(plan);
            let runs: Vec<serde_json::Value> = (0..RUNS).map(|_| ordo(&args)).collect();
            let mut medians: Vec<f64> =
                runs.iter().map(|v| v["measured_step_us"].as_f64().unwrap()).collect();
            medians.sort_by(f64::total_cmp);
            let measured = medians[RUNS / 2];
            let predicted = runs[0]["predicted_step_us"].as_f64().unwrap();
            let error = (predicted - measured) / measured;
            errors.push(error.abs());
            println!(
                "{:<20} {label:<24} {:>12.3} {:>13.3} {:>6.1}%",
                spec.name,
                measured / 1e3,
                predicted / 1e3,
                error * 100.0
            );
        }
    }
    errors.sort_by(f64::total_cmp);
    println!("median |error| {:.1}%", errors[errors.len() / 2] * 100.0);
}
