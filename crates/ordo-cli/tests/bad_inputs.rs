//! The corpus of bad inputs: hundreds of broken cost graphs, clusters, plans and options, each
//! run through the `ordo` binary. None may panic, abort or run past 30 s, and every refusal
//! must be an `error:` line naming its culprit (the field, the option). A value that is
//! merely unusual may be accepted; what is accepted must not crash a later stage.
//!
//! Each family is a valid input plus a table of edits; grow the tables with every reader.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one case may run.
const LIMIT: Duration = Duration::from_secs(30);

/// One run of `ordo`.
struct Case {
    label: String,
    args: Vec<String>,
    /// What a refusal must mention (all of it).
    culprit: Vec<String>,
}

/// Runs a case: never a panic, an abort, a signal or a hang; a refusal names the culprit.
/// Returns whether it was refused.
fn check(case: &Case) -> Result<bool, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(&case.args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start ordo: {e}"))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            return Err(format!("ran past {LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    use std::io::Read;
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    match status.code() {
        Some(0) => Ok(false),
        None => Err(format!("killed by a signal: {stderr}")),
        Some(101) => Err(format!("panicked: {stderr}")),
        Some(_) if stderr.contains("panicked") => Err(format!("panicked: {stderr}")),
        Some(_) => {
            if !stderr.starts_with("error:") {
                return Err(format!("a refusal that is not an `error:` line: {stderr}"));
            }
            let lower = stderr.to_lowercase();
            match case.culprit.iter().find(|c| !lower.contains(&c.to_lowercase())) {
                Some(missing) => Err(format!("does not name `{missing}`: {stderr}")),
                None => Ok(true),
            }
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a corpus file");
    path.display().to_string()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Values that break (or strain) a numeric field, as raw JSON.
const NUMBERS: [&str; 11] = [
    "-1",
    "1.5",
    "\"x\"",
    "null",
    "true",
    "[]",
    "1e400",
    "18446744073709551616",
    "18446744073709551615",
    "1e308",
    "0",
];

/// A valid cost graph, `a -> b -> c` and `a -> c`, with `@FIELD@` markers where the table
/// puts values.
const GRAPH: &str = r#"{"directed": true, "multigraph": false, "graph": {},
  "nodes": [
    {"id": 0, "name": "a", "weight": @weight@, "temporary_memory": @temporary_memory@,
     "persistent_memory": @persistent_memory@, "output_memory": [@output_memory@],
     "occupancy": @occupancy@},
    {"id": 1, "name": "b", "weight": 7, "temporary_memory": 0, "persistent_memory": 64,
     "output_memory": [8192]},
    {"id": 2, "name": "c", "weight": 9, "temporary_memory": 0, "persistent_memory": 0,
     "output_memory": [16]}
  ],
  "links": [
    {"source": @source@, "target": 1, "weight": @link_weight@,
     "tensor": [{"name": "a:0", "num_bytes": @num_bytes@, "weight": @tensor_weight@}]},
    {"source": 1, "target": 2, "weight": 135,
     "tensor": [{"name": "b:0", "num_bytes": 8192, "weight": 135}]},
    {"source": 0, "target": 2, "weight": @link_weight@,
     "tensor": [{"name": "a:0", "num_bytes": @num_bytes@, "weight": @tensor_weight@}]}
  ]}"#;

const GRAPH_FIELDS: [(&str, &str); 9] = [
    ("weight", "5"),
    ("temporary_memory", "0"),
    ("persistent_memory", "0"),
    ("output_memory", "4096"),
    ("occupancy", "1.0"),
    ("source", "0"),
    ("link_weight", "135"),
    ("num_bytes", "4096"),
    ("tensor_weight", "135"),
];

/// `GRAPH` with `field` set to `value` and every other field to its valid value.
fn graph_with(field: &str, value: &str) -> String {
    let mut text = GRAPH.to_string();
    for (f, good) in GRAPH_FIELDS {
        text = text.replace(&format!("@{f}@"), if f == field { value } else { good });
    }
    text
}

/// The name a message uses for a table field.
fn field_name(field: &str) -> &str {
    match field {
        "link_weight" | "tensor_weight" => "weight",
        other => other,
    }
}

fn graph_cases(dir: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    for (field, _) in GRAPH_FIELDS {
        for (k, value) in NUMBERS.iter().enumerate() {
            let path = write(dir, &format!("graph-{field}-{k}.json"), &graph_with(field, value));
            let culprit = vec![path.clone(), field_name(field).to_string()];
            for command in [&["inspect"][..], &["place", "--devices", "2", "--algo", "m-etf"]] {
                let mut args = strings(command);
                args.insert(1, path.clone());
                cases.push(Case {
                    label: format!("cost graph {field} = {value}, {}", command[0]),
                    args,
                    culprit: culprit.clone(),
                });
            }
        }
    }
    cases
}

/// A valid cluster of two devices, with markers.
const CLUSTER: &str = r#"{"format": "ordo.cluster/1", "name": "corpus",
  "device": {"kind": "gpu", "memory_bytes": @memory_bytes@, "peak_flops": @peak_flops@,
    "memory_bandwidth": @memory_bandwidth@, "launch_overhead_us": @launch_overhead_us@,
    "parallelism": @parallelism@},
  "count": @count@,
  "interconnect": {"latency_us": @latency_us@, "bandwidth_bytes_per_s": @bandwidth_bytes_per_s@}}"#;

const CLUSTER_FIELDS: [(&str, &str); 8] = [
    ("memory_bytes", "\"16GiB\""),
    ("peak_flops", "14e12"),
    ("memory_bandwidth", "900e9"),
    ("launch_overhead_us", "5"),
    ("parallelism", "1024"),
    ("count", "2"),
    ("latency_us", "10"),
    ("bandwidth_bytes_per_s", "12e9"),
];

fn cluster_cases(dir: &Path, graph: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let values = ["-1", "0", "1e308", "1e-300", "\"x\"", "null", "true", "1e400"];
    for (field, _) in CLUSTER_FIELDS {
        for (k, value) in values.iter().enumerate() {
            let mut text = CLUSTER.to_string();
            for (f, good) in CLUSTER_FIELDS {
                text = text.replace(&format!("@{f}@"), if f == field { value } else { good });
            }
            let path = write(dir, &format!("cluster-{field}-{k}.json"), &text);
            cases.push(Case {
                label: format!("cluster {field} = {value}"),
                args: strings(&["place", graph, "--cluster", &path, "--algo", "m-etf"]),
                culprit: vec![path.clone(), field.to_string()],
            });
        }
    }
    cases
}

/// Edits of a valid plan of the corpus graph on two devices: (label, edit, culprit).
type PlanEdit = (&'static str, fn(&mut serde_json::Value), &'static str);

fn plan_edits() -> Vec<PlanEdit> {
    use serde_json::json;
    vec![
        ("format", |p| p["format"] = json!("ordo.plan/9"), "format"),
        ("no devices", |p| p["devices"] = json!(0), "device"),
        ("stream device", |p| p["streams"][0]["device"] = json!(99), "stream 0"),
        ("stream task", |p| p["streams"][0]["tasks"][0] = json!(999), "task 999"),
        ("task stream", |p| p["tasks"][0]["streams"][0] = json!(999), "stream 999"),
        ("task wait", |p| p["tasks"][0]["waits"] = json!([999]), "event 999"),
        ("event task", |p| p["events"] = json!([{"after": 999}]), "task 999"),
        ("buffer producer", |p| p["buffers"][0]["producer"] = json!(999), "task 999"),
        ("buffer device", |p| p["buffers"][0]["device"] = json!(99), "device"),
        ("occupancy", |p| p["tasks"][0]["occupancy"] = json!(-1.0), "occupancy"),
        ("duration", |p| p["tasks"][0]["duration_us"] = json!(-1), "duration_us"),
        ("tasks not a list", |p| p["tasks"] = json!({}), "tasks"),
        (
            "no waits at all",
            |p| {
                for t in p["tasks"].as_array_mut().into_iter().flatten() {
                    t["waits"] = json!([]);
                }
            },
            "before its producer",
        ),
        (
            "streams reversed",
            |p| {
                for s in p["streams"].as_array_mut().into_iter().flatten() {
                    if let Some(tasks) = s["tasks"].as_array_mut() {
                        tasks.reverse();
                    }
                }
            },
            "plan",
        ),
        ("empty object", |p| *p = json!({}), "format"),
    ]
}

fn plan_cases(dir: &Path, graph: &str) -> Vec<Case> {
    let plan_path = dir.join("plan.json");
    let out = common::ordo(&[
        "plan",
        graph,
        "--devices",
        "2",
        "--algo",
        "round-robin",
        "--out",
        &plan_path.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let mut cases = Vec::new();
    for (label, edit, culprit) in plan_edits() {
        let mut plan = good.clone();
        edit(&mut plan);
        let path = write(dir, &format!("plan-{}.json", label.replace(' ', "-")), &plan.to_string());
        cases.push(Case {
            label: format!("plan: {label}"),
            args: strings(&["simulate", &path]),
            culprit: vec![culprit.to_string()],
        });
    }
    // Options that place a model, given with a plan whose placement is fixed.
    let plan_arg = plan_path.display().to_string();
    for options in [&["--devices", "2", "--algo", "m-sct"][..], &["--memory", "1GiB"], &["--train"]]
    {
        let mut args = strings(&["simulate", &plan_arg]);
        args.extend(strings(options));
        cases.push(Case {
            label: format!("plan with {}", options.join(" ")),
            args,
            culprit: vec![options[0].to_string(), "would be ignored".into()],
        });
    }
    let text = std::fs::read_to_string(&plan_path).unwrap();
    let truncated = write(dir, "plan-truncated.json", &text[..text.len() / 2]);
    cases.push(Case {
        label: "plan: truncated".into(),
        args: strings(&["simulate", &truncated]),
        culprit: vec![truncated.clone()],
    });
    cases
}

/// Options that make no sense, with the option a refusal must name.
fn option_cases(graph: &str) -> Vec<Case> {
    // `run` of a small ResNet-50 training graph with `extra` options.
    let train =
        |extra: &[&'static str]| [&["run", "resnet50", "--small", "--train"][..], extra].concat();
    let table: Vec<(Vec<&str>, &str)> = vec![
        (vec!["place", graph, "--devices", "0"], "devices"),
        (vec!["place", graph, "--devices", "100000"], "devices"),
        (vec!["place", graph, "--devices", "-2"], "devices"),
        (vec!["place", graph, "--devices", "2", "--algo", "m-foo"], "m-foo"),
        (vec!["place", graph, "--devices", "2", "--memory", "-5GiB"], "memory"),
        (vec!["place", graph, "--devices", "2", "--memory", "0"], "memory"),
        (vec!["place", graph, "--devices", "2", "--budget", "-1s"], "budget"),
        (vec!["place", graph, "--devices", "2", "--sct-threshold", "-1"], "sct-threshold"),
        (vec!["place", graph, "--devices", "2", "--sct-threshold", "NaN"], "sct-threshold"),
        (vec!["place", "no-such-file.json", "--devices", "2"], "no-such-file"),
        (vec!["place", "no_such_model", "--devices", "2"], "no_such_model"),
        (train(&["--lr", "NaN"]), "lr"),
        (train(&["--lr", "-1"]), "lr"),
        (train(&["--workers", "0"]), "worker"),
        (train(&["--workers", "10000"]), "worker"),
        (train(&["--data-parallel", "100000"]), "data-parallel"),
        (train(&["--steps", "0"]), "steps"),
        (vec!["run", "resnet50", "--small", "--batch", "0"], "batch"),
        (train(&["--pipeline", "2", "--micro-batches", "0"]), "micro-batches"),
        (train(&["--pipeline", "2", "--micro-batches", "3"]), "micro-batches"),
        (train(&["--pipeline", "9999"]), "pipeline"),
        (vec!["conformance", ".", "--rtol", "-1"], "rtol"),
        (vec!["synth", "--nodes", "0", "--out", "/dev/null"], "nodes"),
        (vec!["inspect", "resnet50", "--seq-len", "64"], "seq-len"),
        (vec!["place", "mobilenet_v3_large", "--seq-len", "8", "--devices", "2"], "seq-len"),
    ];
    table
        .into_iter()
        .map(|(args, culprit)| Case {
            label: args.join(" "),
            args: strings(&args),
            culprit: vec![culprit.to_string()],
        })
        .collect()
}

#[test]
fn no_bad_input_crashes_hangs_or_goes_unexplained() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir: PathBuf = dir.path().to_path_buf();
    let graph = write(&dir, "good.json", &graph_with("", ""));
    let mut cases = graph_cases(&dir);
    cases.extend(cluster_cases(&dir, &graph));
    cases.extend(plan_cases(&dir, &graph));
    cases.extend(option_cases(&graph));
    assert!(cases.len() >= 300, "the corpus shrank to {} cases", cases.len());
    let mut failures = Vec::new();
    let mut refused = 0;
    for case in &cases {
        match check(case) {
            Ok(true) => refused += 1,
            Ok(false) => {}
            Err(problem) => {
                failures.push(format!("{} ({}): {problem}", case.label, case.args.join(" ")))
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // Most of the corpus is nonsense that must be refused.
    assert!(
        refused * 10 >= cases.len() * 7,
        "only {refused} of {} cases were refused",
        cases.len()
    );
}
