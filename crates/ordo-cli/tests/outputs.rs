//! One grammar for outputs: `--json` prints JSON on standard output and nothing else, `--out`
//! writes a file, every file written is named, pictures work for every strategy, and every
//! output says where its costs came from.

mod common;

use common::*;

fn sample(name: &str) -> String {
    format!("{}/../ordo-cost/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// `place` and `plan`: `--json` is the document alone; `--out` writes the same document and
/// names the file after the summary; `--out -` and the old `--json FILE` are refused clearly.
#[test]
fn json_prints_and_out_writes_the_same_document() {
    let dir = tempfile::tempdir().unwrap();
    let graph = sample("gnmt");
    for command in ["place", "plan"] {
        let base = [command, &graph, "--devices", "2", "--forward-only", "--algo", "m-etf"];
        let printed = json(&ordo(&[&base[..], &["--json"]].concat()));
        let path = dir.path().join(format!("{command}.json"));
        let path = path.to_str().unwrap();
        let out = ordo(&[&base[..], &["--out", path]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.trim_end().ends_with(&format!("wrote {path}")), "{text}");
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // The placement carries its wall time; everything else is the same document.
        let strip = |mut v: serde_json::Value| {
            v.as_object_mut().unwrap().remove("placement_seconds");
            v
        };
        assert_eq!(strip(written), strip(printed), "{command}");
        let out = ordo(&[&base[..], &["--out", "-"]].concat());
        assert!(!out.status.success());
        assert!(stderr(&out).contains("--json prints the JSON on standard output"), "{command}");
        let out = ordo(&[&base[..], &["--json", path]].concat());
        assert!(!out.status.success(), "{command}: `--json FILE` must not pass silently");
        assert!(stderr(&out).contains(path), "{}", stderr(&out));
    }
}

/// `simulate --svg/--trace` with a pipeline and with data parallelism: the chart has a title
/// naming the strategy and a legend, and every file written is named in the output.
#[test]
fn pipelines_and_data_parallel_are_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 2] = [
        (
            "pipeline",
            &[
                "bert_base",
                "--small",
                "--train",
                "--devices",
                "4",
                "--pipeline",
                "2",
                "--micro-batches",
                "2",
            ],
        ),
        ("dp", &["resnet50", "--small", "--train", "--devices", "1", "--data-parallel", "2"]),
    ];
    for (name, args) in cases {
        let svg = dir.path().join(format!("{name}.svg"));
        let trace = dir.path().join(format!("{name}.json"));
        let (svg, trace) = (svg.to_str().unwrap(), trace.to_str().unwrap());
        let out = ordo(&[&["simulate"][..], args, &["--svg", svg, "--trace", trace]].concat());
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let text = stdout(&out);
        let chart = std::fs::read_to_string(svg).unwrap();
        let title = match name {
            "pipeline" => "2-stage pipeline, 2 micro-batches",
            _ => "one step on 2 data-parallel devices",
        };
        assert!(chart.contains(title), "{name}: the chart's title names the strategy");
        assert!(chart.contains(">compute</text>"), "{name}: a legend");
        let events: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(trace).unwrap()).unwrap();
        assert!(!events["traceEvents"].as_array().unwrap().is_empty());
        let memory = format!("{}-memory-0.svg", svg.trim_end_matches(".svg"));
        for file in [svg, trace, memory.as_str()] {
            assert!(std::path::Path::new(file).exists(), "{file}");
            assert!(text.contains(&format!("wrote {file}")), "{name}: {file} not named\n{text}");
        }
    }
}

/// `compare --svg`: a bar chart with a bar (or a reason) per placer and the lower bound.
#[test]
fn compare_draws_a_bar_chart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compare.svg");
    let path = path.to_str().unwrap();
    let graph = sample("inception_v3");
    let out = ordo(&[
        "compare",
        &graph,
        "--devices",
        "2",
        "--forward-only",
        "--budget",
        "100ms",
        "--svg",
        path,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("wrote {path}")));
    let chart = std::fs::read_to_string(path).unwrap();
    for algo in
        ["m-topo", "m-topo-real", "m-etf", "m-sct", "single", "round-robin", "balanced", "auto"]
    {
        assert!(chart.contains(&format!(">{algo}</text>")), "{algo}");
    }
    assert!(chart.contains("lower bound") && chart.contains("step time (ms)"));
    // Two bars (step, memory) per placer with a result (the 7 fast placers and auto), a
    // reason for each without one.
    let without = chart.matches("no result: ").count();
    assert_eq!(chart.matches("<rect").count(), 2 * (8 - without));
}

/// Every planning output says where its node times came from: a cost graph's own, a
/// roofline's estimate, or a profile's measurement.
#[test]
fn outputs_say_where_the_costs_came_from() {
    let graph = sample("gnmt");
    let out = ordo(&["place", &graph, "--devices", "2", "--forward-only", "--algo", "m-etf"]);
    assert!(stdout(&out).contains("costs            the cost graph's own times"));
    let out = ordo(&["simulate", "gnmt", "--small", "--devices", "2", "--algo", "m-etf"]);
    assert!(stdout(&out).contains("ordo's default roofline: estimated"), "{}", stdout(&out));
    let compare = json(&ordo(&["compare", "gnmt", "--small", "--devices", "2", "--json"]));
    assert!(compare["costs"].as_str().unwrap().contains("roofline"));
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let profile = profile.to_str().unwrap();
    let quick = ["--timed-seconds", "0.05s", "--warmup-seconds", "0s"];
    let out = ordo(&[&["profile", "gnmt", "--small", "--out", profile][..], &quick].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(profile).unwrap()).unwrap();
    assert!(written["spread"].as_f64().unwrap() >= 0.0);
    assert!(written["concurrency_slowdown"].as_f64().unwrap() >= 1.0);
    assert!(written["reps"].as_u64().unwrap() >= 5);
    let out = ordo(&["place", "gnmt", "--small", "--devices", "2", "--profile", profile]);
    assert!(stdout(&out).contains("costs            measured: profile of `gnmt-small"));
}

/// `run` profiles the model before it plans unless given a profile or `--roofline`, warms
/// up without changing the losses, and says which costs it used.
#[test]
fn run_measures_its_costs_by_default_and_says_so() {
    let base = ["run", "gnmt", "--small", "--train", "--steps", "2", "--json"];
    let quick = ["--warmup-seconds", "0.05s"];
    let profiled = json(&ordo(&[&base[..], &quick].concat()));
    assert!(profiled["costs"].as_str().unwrap().starts_with("measured: profile of `gnmt-small"));
    assert!(profiled["warmup_steps"].as_u64().unwrap() >= 1);
    let roofline = json(&ordo(&[&base[..], &["--roofline", "--warmup-seconds", "0"]].concat()));
    assert!(roofline["costs"].as_str().unwrap().starts_with("roofline of cluster `cpu`"));
    assert_eq!(roofline["warmup_steps"], 0);
    assert_eq!(profiled["losses"], roofline["losses"], "warming up must not train");
    let out = ordo(&[&base[..], &["--roofline", "--profile", "p.json"]].concat());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--roofline"), "{}", stderr(&out));
    for bad in ["-1s", "NaNs", "2days", "1e9s"] {
        let out = ordo(&[&base[..], &["--warmup-seconds", bad]].concat());
        assert!(!out.status.success(), "{bad}");
        assert!(stderr(&out).contains("--warmup-seconds"), "{bad}: {}", stderr(&out));
    }
}

/// `export-schedule` writes the same CSV as `simulate --train --pipeline --pytorch-schedule`.
#[test]
fn export_schedule_writes_what_simulate_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let common = ["transformer", "--small", "--batch", "8", "--micro-batches", "4"];
    let out = ordo(
        &[
            &["export-schedule"][..],
            &common,
            &["--stages", "2", "--schedule", "zb-h2", "--modulo", "1", "-o", a],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ordo(
        &[
            &["simulate"][..],
            &common,
            &["--train", "--pipeline", "2", "--schedule", "zb-h2", "--modulo", "1"],
            &["--pytorch-schedule", b],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let (a, b) = (std::fs::read_to_string(a).unwrap(), std::fs::read_to_string(b).unwrap());
    assert_eq!(a, b);
    assert!(a.lines().count() == 2 && a.contains("1W3"), "{a}");
}

/// `simulate --pipeline S --pytorch-schedule FILE` writes one CSV row of actions per stage,
/// each stage's forward and backward of every micro-batch once, and names the file.
#[test]
fn pipelines_are_written_as_pytorch_schedules() {
    let dir = tempfile::tempdir().unwrap();
    for (schedule, kinds) in [("1f1b", "FB"), ("zb-h1", "FIW")] {
        let path = dir.path().join(format!("{schedule}.csv"));
        let path = path.to_str().unwrap();
        let out = ordo(&[
            "simulate",
            "transformer",
            "--small",
            "--batch",
            "8",
            "--train",
            "--pipeline",
            "2",
            "--micro-batches",
            "4",
            "--schedule",
            schedule,
            "--pytorch-schedule",
            path,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains(&format!("wrote {path}")), "{}", stdout(&out));
        let csv = std::fs::read_to_string(path).unwrap();
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), 2, "{csv}");
        for (rank, row) in rows.iter().enumerate() {
            assert_eq!(row.len(), 4 * kinds.len(), "{csv}");
            for kind in kinds.chars() {
                for mb in 0..4 {
                    let action = format!("{rank}{kind}{mb}");
                    assert_eq!(row.iter().filter(|a| **a == action).count(), 1, "{action}: {csv}");
                }
            }
        }
    }
}
