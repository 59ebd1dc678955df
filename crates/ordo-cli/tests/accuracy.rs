//! Benchmark (ignored; `cargo test --release -p ordo-cli --test accuracy -- --ignored
//! --nocapture`): the simulator's prediction of a step against the step `ordo run` measures,
//! with node times from `ordo profile`, for every zoo model's small variant, on one device
//! (inorder, and ooo with two workers) and on two (m-ETF).
//!
//! On a virtual machine a whole process can land in a slow period of its host (kernels or
//! hand-overs slower by a third for a second or more), and so can a profile, which then skews
//! every prediction made from it. So each model goes through `ROUNDS` rounds of a fresh profile
//! followed by one run of each plan with it, and each row compares the fastest of its rounds'
//! measured median steps with the fastest of their predictions: both sides as the undisturbed
//! machine gives them. The spread of the measured medians is printed beside.

use std::process::Command;

fn ordo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Profile-and-run rounds per model.
const ROUNDS: usize = 5;

const PLANS: [(&str, &[&str]); 3] = [
    ("1 device inorder", &["--schedule", "inorder"]),
    ("1 device ooo, 2 workers", &["--schedule", "ooo", "--workers", "2"]),
    ("2 devices m-etf", &["--devices", "cpu:2", "--algo", "m-etf"]),
];

#[test]
#[ignore = "benchmark"]
fn predicted_vs_measured_step_times_of_the_small_zoo() {
    let dir = tempfile::tempdir().unwrap();
    let mut errors = Vec::new();
    println!(
        "{:<20} {:<24} {:>12} {:>13} {:>7}  measured medians ms",
        "model", "plan", "measured ms", "predicted ms", "error"
    );
    for spec in ordo_models::zoo() {
        // Per plan, each round's (measured median, prediction) in µs.
        let mut rounds: Vec<Vec<(f64, f64)>> = vec![Vec::new(); PLANS.len()];
        for round in 0..ROUNDS {
            let profile = dir.path().join(format!("{}-{round}.json", spec.name));
            let profile = profile.to_str().unwrap();
            ordo(&["profile", spec.name, "--small", "--train", "--reps", "11", "--out", profile]);
            for (p, (_, plan)) in PLANS.iter().enumerate() {
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
                let v = ordo(&args);
                let measured = v["measured_step_us"].as_f64().unwrap();
                rounds[p].push((measured, v["predicted_step_us"].as_f64().unwrap()));
            }
        }
        for ((label, _), pairs) in PLANS.iter().zip(&rounds) {
            let fastest =
                |pick: fn(&(f64, f64)) -> f64| pairs.iter().map(pick).fold(f64::INFINITY, f64::min);
            let (measured, predicted) = (fastest(|p| p.0), fastest(|p| p.1));
            let error = (predicted - measured) / measured;
            errors.push(error.abs());
            let spread: Vec<String> = pairs.iter().map(|p| format!("{:.2}", p.0 / 1e3)).collect();
            println!(
                "{:<20} {label:<24} {:>12.3} {:>13.3} {:>6.1}%  {}",
                spec.name,
                measured / 1e3,
                predicted / 1e3,
                error * 100.0,
                spread.join(" ")
            );
        }
    }
    errors.sort_by(f64::total_cmp);
    println!("median |error| {:.1}%", errors[errors.len() / 2] * 100.0);
}
