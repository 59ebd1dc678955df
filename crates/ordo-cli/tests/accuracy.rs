//! Benchmark (ignored; `cargo test --release -p ordo-cli --test accuracy -- --ignored
//! --nocapture`): the simulator's prediction of a step against the step `ordo run` measures,
//! as a user gets them: one `ordo profile --reps 11`, then one `ordo run --steps 21 --profile`
//! of each plan, for every zoo model's small variant, on one device (inorder, and ooo with two
//! workers) and on two (m-ETF). `TRIES` tries, each with its own profile; every (model, plan,
//! try) is one error, and the summary gives their median and largest magnitudes. Each profile's
//! own spread (what it reports) is printed beside, and so is a second run of the same plan right
//! after the first: how much the machine alone moves a measurement (the floor of any
//! prediction's error).

use std::process::Command;

fn ordo(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ordo")).args(args).output().expect("ordo runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Profile-and-run tries per model.
const TRIES: usize = 3;

const PLANS: [(&str, &[&str]); 3] = [
    ("1 device inorder", &["--schedule", "inorder"]),
    ("1 device ooo, 2 workers", &["--schedule", "ooo", "--workers", "2"]),
    ("2 devices m-etf", &["--devices", "cpu:2", "--algo", "m-etf"]),
];

#[test]
#[ignore = "benchmark"]
fn predicted_vs_measured_step_times_of_the_small_zoo() {
    let dir = tempfile::tempdir().unwrap();
    let (mut errors, mut reruns, mut unwarned) = (Vec::new(), Vec::new(), Vec::new());
    println!(
        "{:<20} {:<24} {:>5} {:>12} {:>13} {:>7} {:>8} {:>7}",
        "model", "plan", "try", "measured ms", "predicted ms", "error", "spread", "rerun"
    );
    for spec in ordo_models::zoo() {
        for attempt in 0..TRIES {
            let profile = dir.path().join(format!("{}-{attempt}.json", spec.name));
            let profile = profile.to_str().unwrap();
            ordo(&["profile", spec.name, "--small", "--train", "--reps", "11", "--out", profile]);
            let written: serde_json::Value =
                serde_json::from_slice(&std::fs::read(profile).unwrap()).unwrap();
            let spread = written["spread"].as_f64().unwrap_or(f64::NAN);
            for (label, plan) in PLANS {
                let mut args = vec![
                    "run",
                    spec.name,
                    "--small",
                    "--train",
                    "--steps",
                    "21",
                    "--json",
                    "--profile",
                    profile,
                ];
                args.extend_from_slice(plan);
                let v = ordo(&args);
                let measured = v["measured_step_us"].as_f64().unwrap();
                let predicted = v["predicted_step_us"].as_f64().unwrap();
                let again = ordo(&args)["measured_step_us"].as_f64().unwrap();
                let error = (predicted - measured) / measured;
                let rerun = (again - measured) / measured;
                errors.push(error.abs());
                reruns.push(rerun.abs());
                if spread <= ordo_exec::WIDE_SPREAD {
                    unwarned.push(error.abs());
                }
                println!(
                    "{:<20} {label:<24} {attempt:>5} {:>12.3} {:>13.3} {:>6.1}% {:>7.1}% {:>6.1}%",
                    spec.name,
                    measured / 1e3,
                    predicted / 1e3,
                    error * 100.0,
                    spread * 100.0,
                    rerun * 100.0
                );
            }
        }
    }
    for (what, values) in [
        ("prediction", &mut errors),
        ("prediction where the profile did not warn", &mut unwarned),
        ("rerun", &mut reruns),
    ] {
        if values.is_empty() {
            continue;
        }
        values.sort_by(f64::total_cmp);
        let over = |limit: f64| values.iter().filter(|&&e| e > limit).count();
        println!(
            "{what}: median |error| {:.1}%, largest {:.1}%, {} of {} over 10%, {} over 25%",
            values[values.len() / 2] * 100.0,
            values.last().unwrap() * 100.0,
            over(0.10),
            values.len(),
            over(0.25)
        );
    }
}
