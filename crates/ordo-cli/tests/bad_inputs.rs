//! The corpus of bad inputs: hundreds of broken cost graphs, clusters, plans, profiles, ONNX
//! files and options, each run through the `ordo` binary. None may panic, abort or run past 30 s, and every refusal
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
    /// Whether it must be refused (otherwise accepting it is fine if nothing crashes).
    refuse: bool,
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
        Some(0) if case.refuse => Err("accepted, but it must be refused".into()),
        Some(0) => Ok(false),
        None => Err(format!("killed by a signal: {stderr}")),
        Some(101) => Err(format!("panicked: {stderr}")),
        Some(_) if stderr.contains("panicked") => Err(format!("panicked: {stderr}")),
        Some(_) => {
            // The import's notes may come first (what it approximated, for the user to know);
            // then the refusal, one `error:` line.
            let error = stderr
                .lines()
                .skip_while(|l| l.starts_with("note: "))
                .collect::<Vec<_>>()
                .join("\n");
            if !error.starts_with("error:") {
                return Err(format!("a refusal that is not an `error:` line: {stderr}"));
            }
            let lower = error.to_lowercase();
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
                    refuse: false,
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
    "parallelism": @parallelism@, "half_precision_flops": @half_precision_flops@},
  "count": @count@,
  "interconnect": {"latency_us": @latency_us@, "bandwidth_bytes_per_s": @bandwidth_bytes_per_s@}}"#;

const CLUSTER_FIELDS: [(&str, &str); 9] = [
    ("memory_bytes", "\"16GiB\""),
    ("peak_flops", "14e12"),
    ("half_precision_flops", "112e12"),
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
                refuse: false,
            });
        }
    }
    cases
}

/// A valid cluster of two nodes of two devices, with markers in its network.
const NODES_CLUSTER: &str = r#"{"format": "ordo.cluster/1", "name": "corpus-nodes",
  "device": {"kind": "gpu", "memory_bytes": "16GiB", "peak_flops": 14e12,
    "memory_bandwidth": 900e9},
  "count": 2,
  "interconnect": {"latency_us": 7, "bandwidth_bytes_per_s": 48e9},
  "nodes": @nodes@,
  "network": {"topology": @topology@, "oversubscription": @oversubscription@,
    "latency_us": @latency_us@, "bandwidth_bytes_per_s": @bandwidth_bytes_per_s@}}"#;

const NODES_FIELDS: [(&str, &str); 5] = [
    ("nodes", "2"),
    ("topology", "\"fat-tree\""),
    ("oversubscription", "1"),
    ("latency_us", "5"),
    ("bandwidth_bytes_per_s", "25e9"),
];

/// Clusters of nodes with a bad network, placed on and simulated data parallel.
fn nodes_cluster_cases(dir: &Path, graph: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let values =
        ["-1", "0", "0.5", "1e308", "1e-300", "\"x\"", "null", "true", "1e400", "4294967297"];
    for (field, _) in NODES_FIELDS {
        for (k, value) in values.iter().enumerate() {
            let mut text = NODES_CLUSTER.to_string();
            for (f, good) in NODES_FIELDS {
                text = text.replace(&format!("@{f}@"), if f == field { value } else { good });
            }
            let path = write(dir, &format!("nodes-{field}-{k}.json"), &text);
            let culprit = vec![path.clone(), field.to_string()];
            let place = strings(&["place", graph, "--cluster", &path, "--algo", "m-etf"]);
            let data_parallel = strings(&[
                "simulate",
                "resnet50",
                "--small",
                "--train",
                "--cluster",
                &path,
                "--data-parallel",
                "4",
                "--all-reduce",
                "nccl",
            ]);
            for args in [place, data_parallel] {
                let label = format!("nodes cluster {field} = {value}, {}", args[0]);
                cases.push(Case { label, args, culprit: culprit.clone(), refuse: false });
            }
        }
    }
    // The network is needed for more than one node, and a node count is at least 1.
    let mut text = NODES_CLUSTER.to_string();
    for (f, good) in NODES_FIELDS {
        text = text.replace(&format!("@{f}@"), good);
    }
    let without = text.replace(
        r#""network": {"topology": "fat-tree", "oversubscription": 1,
    "latency_us": 5, "bandwidth_bytes_per_s": 25e9}"#,
        r#""description": "no network""#,
    );
    assert!(without.contains("no network"));
    let path = write(dir, "nodes-no-network.json", &without);
    cases.push(Case {
        label: "nodes cluster without a network".into(),
        args: strings(&["place", graph, "--cluster", &path]),
        culprit: vec![path.clone(), "network".into()],
        refuse: true,
    });
    let path = write(dir, "nodes-good.json", &text);
    for (nodes, culprit) in
        [("0", "nodes"), ("-1", "nodes"), ("1000000", "at most"), ("x", "nodes")]
    {
        cases.push(Case {
            label: format!("--nodes {nodes}"),
            args: strings(&["place", graph, "--cluster", &path, "--nodes", nodes]),
            culprit: vec![culprit.into()],
            refuse: true,
        });
    }
    cases.push(Case {
        label: "--nodes without --cluster".into(),
        args: strings(&["place", graph, "--devices", "2", "--nodes", "2"]),
        culprit: vec!["--cluster".into()],
        refuse: true,
    });
    cases.push(Case {
        label: "a cluster of 8,192 devices placed whole".into(),
        args: strings(&["place", graph, "--cluster", "h100x8-ib-ndr", "--nodes", "1024"]),
        culprit: vec!["--devices".into(), "1024".into()],
        refuse: true,
    });
    for algorithm in ["rng", "", "RING"] {
        cases.push(Case {
            label: format!("--all-reduce {algorithm:?}"),
            args: strings(&[
                "simulate",
                "resnet50",
                "--small",
                "--train",
                "--data-parallel",
                "2",
                "--all-reduce",
                algorithm,
            ]),
            culprit: vec!["all-reduce".into()],
            refuse: true,
        });
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
            refuse: false,
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
            refuse: false,
        });
    }
    let text = std::fs::read_to_string(&plan_path).unwrap();
    let truncated = write(dir, "plan-truncated.json", &text[..text.len() / 2]);
    cases.push(Case {
        label: "plan: truncated".into(),
        args: strings(&["simulate", &truncated]),
        culprit: vec![truncated.clone()],
        refuse: false,
    });
    cases
}

/// Options that make no sense, with the option a refusal must name.
/// A valid profile of `gnmt --small`'s forward graph, measured here (one quick call per node),
/// then edited: (label, edit, culprit).
type ProfileEdit = (&'static str, fn(&mut serde_json::Value), &'static str);

fn profile_edits() -> Vec<ProfileEdit> {
    use serde_json::json;
    let mut edits: Vec<ProfileEdit> = vec![
        ("no format", |p| p["format"] = json!(null), "format"),
        ("a newer format", |p| p["format"] = json!("ordo.profile/9"), "ordo.profile/9"),
        ("not a profile", |p| p["format"] = json!("ordo.plan/1"), "format"),
        ("no nodes", |p| p["nodes"] = json!([]), "node"),
        ("a node missing", |p| drop(p["nodes"].as_array_mut().unwrap().pop()), "node"),
        (
            "a node twice",
            |p| {
                let first = p["nodes"][0].clone();
                p["nodes"].as_array_mut().unwrap().push(first);
            },
            "twice",
        ),
        ("an unknown node", |p| p["nodes"][0]["name"] = json!("no such node"), "no such node"),
        ("wrong output count", |p| p["nodes"][0]["output_bytes"] = json!([1, 2, 3]), "sizes"),
        ("nodes not a list", |p| p["nodes"] = json!({}), "nodes"),
        ("link without cost", |p| p["link"] = json!({"fixed_us": 1.0}), "us_per_byte"),
    ];
    // Every number of the format with values no measurement gives.
    macro_rules! number {
        ($label:literal, $field:literal, $($path:tt)+) => {
            edits.push(($label, |p| p$($path)+ = json!(-1.0), $field));
            edits.push((concat!($label, " huge"), |p| p$($path)+ = json!(1e300), $field));
            edits.push((concat!($label, " text"), |p| p$($path)+ = json!("fast"), $field));
        };
    }
    number!("node time", "time_us", ["nodes"][0]["time_us"]);
    number!("temporary bytes", "temporary_bytes", ["nodes"][0]["temporary_bytes"]);
    number!("output bytes", "output_bytes", ["nodes"][0]["output_bytes"][0]);
    number!("spread", "spread", ["spread"]);
    number!("concurrency slowdown", "concurrency_slowdown", ["concurrency_slowdown"]);
    number!("step overhead", "step_overhead_us", ["step_overhead_us"]);
    number!("link fixed cost", "fixed_us", ["link"]["fixed_us"]);
    number!("link cost per byte", "us_per_byte", ["link"]["us_per_byte"]);
    number!("reps", "reps", ["reps"]);
    number!("batch", "batch", ["batch"]);
    edits.push(("slowdown below 1", |p| p["concurrency_slowdown"] = json!(0.5), "concurrency"));
    edits
}

fn profile_cases(dir: &Path) -> Vec<Case> {
    let good = dir.join("profile-good.json");
    let good = good.to_str().expect("a UTF-8 path").to_string();
    let made = Command::new(env!("CARGO_BIN_EXE_ordo"))
        .args(["profile", "gnmt", "--small", "--reps", "1", "--warmup", "0"])
        .args(["--warmup-seconds", "0", "--timed-seconds", "0", "--out", &good])
        .output()
        .expect("ordo runs");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let mut base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    // The fields a profile has only when measured, so that every edit meets one.
    base["link"] = serde_json::json!({"fixed_us": 5.0, "us_per_byte": 0.0001});
    base["concurrency_slowdown"] = serde_json::json!(1.1);
    base["spread"] = serde_json::json!(0.03);
    base["step_overhead_us"] = serde_json::json!(20.0);
    let mut cases = Vec::new();
    for (k, (label, edit, culprit)) in profile_edits().into_iter().enumerate() {
        let mut profile = base.clone();
        edit(&mut profile);
        let path = write(dir, &format!("profile-{k}.json"), &profile.to_string());
        cases.push(Case {
            label: format!("profile: {label}"),
            args: strings(&["place", "gnmt", "--small", "--devices", "2", "--profile", &path]),
            culprit: vec![path.clone(), culprit.to_string()],
            refuse: false,
        });
    }
    for (k, text) in ["", "{", "[1, 2]", "null", "\u{0}"].iter().enumerate() {
        let path = write(dir, &format!("profile-text-{k}.json"), text);
        cases.push(Case {
            label: format!("profile text {text:?}"),
            args: strings(&["run", "gnmt", "--small", "--steps", "1", "--profile", &path]),
            culprit: vec![path],
            refuse: false,
        });
    }
    cases
}

/// Hugging Face `config.json` files: the LLaMA-2 70B configuration with one field broken,
/// and texts that are no configuration. Each is inspected (building the whole graph) and
/// simulated on its small variant; a refusal names the file and the field.
fn hugging_face_cases(dir: &Path) -> Vec<Case> {
    let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ordo-models/tests/configs");
    let base: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(configs.join("llama-2-70b-hf.json")).expect("the fixture"),
    )
    .expect("JSON");
    let edits: [(&str, serde_json::Value, &str); 14] = [
        ("num_key_value_heads", serde_json::json!(7), "kv_heads"),
        ("num_key_value_heads", serde_json::json!(0), "kv_heads"),
        ("num_attention_heads", serde_json::json!(0), "heads"),
        ("num_attention_heads", serde_json::json!(3), "heads"),
        ("hidden_size", serde_json::json!(8190), "hidden"),
        ("hidden_size", serde_json::json!(-1), "hidden_size"),
        ("hidden_size", serde_json::json!(1.5), "hidden_size"),
        ("hidden_size", serde_json::json!("8192"), "hidden_size"),
        ("num_hidden_layers", serde_json::json!(0), "layers"),
        ("intermediate_size", serde_json::Value::Null, "intermediate_size"),
        ("vocab_size", serde_json::json!(0), "vocab"),
        ("rms_norm_eps", serde_json::json!(-1.0), "norm_eps"),
        ("tie_word_embeddings", serde_json::json!("no"), "tie_word_embeddings"),
        ("model_type", serde_json::json!("t5"), "model_type"),
    ];
    let mut cases = Vec::new();
    for (k, (field, value, culprit)) in edits.into_iter().enumerate() {
        let mut config = base.clone();
        config[field] = value.clone();
        let path = write(dir, &format!("hf-{k}.json"), &config.to_string());
        let simulate = ["simulate", &path, "--small", "--devices", "2"];
        for args in [&["inspect", &path, "--summary"][..], &simulate] {
            cases.push(Case {
                label: format!("config.json: {field} = {value}"),
                args: strings(args),
                culprit: vec![path.clone(), culprit.to_string()],
                refuse: true,
            });
        }
    }
    // Sizes the graph cannot take: no positions, more tokens than positions.
    let good = configs.join("llama-2-7b-hf.json");
    let good = good.to_str().expect("a UTF-8 path");
    for (args, culprit) in [
        (&["inspect", good, "--seq-len", "5000"][..], "exceeds the 4096 positions"),
        (&["inspect", good, "--batch", "0"], "batch"),
        (&["inspect", good, "--dim", "x=2"], "--dim"),
    ] {
        cases.push(Case {
            label: format!("config.json: {}", args[2..].join(" ")),
            args: strings(args),
            culprit: vec![culprit.to_string()],
            refuse: true,
        });
    }
    cases
}

/// ONNX files: the repository's broken fixtures, and a small valid model cut short at many
/// lengths and with bytes overwritten at many places. A mutant may still be a valid model (it
/// is then accepted); none may crash.
fn onnx_cases(dir: &Path) -> Vec<Case> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ordo-onnx/tests/fixtures");
    let mut cases = Vec::new();
    for name in [
        "bad_conv_weight",
        "bad_huge_constant",
        "bad_initializer_length",
        "bad_opset",
        "bad_output_shape",
        "bad_symbolic_dim",
        "cycle",
    ] {
        let path = fixtures.join(format!("{name}.onnx"));
        let path = path.to_str().expect("a UTF-8 path").to_string();
        for args in [
            vec!["inspect", &path],
            vec!["run", &path, "--train", "--steps", "1", "--roofline", "--warmup-seconds", "0"],
        ] {
            cases.push(Case {
                label: format!("onnx {name}: {}", args[0]),
                args: strings(&args),
                culprit: vec![path.clone()],
                refuse: false,
            });
        }
    }
    // One node with senseless attributes or constants each (`fixtures/gen_bad_attrs.py`),
    // and weights outside the model's folder: refused naming the node (or tensor) and what.
    for (name, culprit) in [
        ("bad_attrs/pad_mode", "`pad`: mode `mirror`"),
        ("bad_attrs/nll_reduction", "`nll`: reduction `average`"),
        ("bad_attrs/einsum_equation", "`einsum`"),
        ("bad_attrs/einsum_label", "`einsum`: subscripts `b1j`"),
        ("bad_attrs/gather_indices", "`gather`"),
        ("bad_attrs/random_bounds", "`random`: low 2 and high 1"),
        // A Cast to strings is planned; `run` names the string tensor it cannot compute.
        ("bad_attrs/cast_string", "no CPU kernel: string tensors (`cast`)"),
        ("bad_attrs/bernoulli_ints", "`bernoulli`: i64 probabilities"),
        ("bad_attrs/range_step", "`range`: delta is 0"),
        ("bad_attrs/onehot_depth", "`onehot`: depth 0: expected a positive integer"),
        ("bad_attrs/onehot_values", "`onehot`: values must hold two elements"),
        ("bad_attrs/scatter_reduction", "`scatter`: reduction `mean`"),
        ("bad_attrs/cast_round_mode", "`cast`: round_mode `sideways`"),
        ("bad_attrs/dropout_ratio", "`dropout`: ratio 1.5: expected at least 0 and below 1"),
        // A Range of run-time bounds with no declared size.
        (
            "bad_attrs/range_unsized",
            "`range` (Range): its start (input 0) is not a constant scalar, and the file declares no 1-D size",
        ),
        ("bad_attrs/maxpool_storage_order", "`pool`: storage_order 2: expected 0 or 1"),
        // Integer convolutions whose bias, zero points or groups do not fit.
        ("bad_attrs/qlinearconv_bias", "`qconv` (QLinearConv): bias f32[4]: expected i32[4]"),
        (
            "bad_attrs/convinteger_zero_points",
            "`iconv` (ConvInteger): w_zero_point u8[5]: expected one value or [4]",
        ),
        ("bad_attrs/convinteger_groups", "`iconv` (ConvInteger): input u8[1,4,5,5] and weight"),
        ("bad_attrs/deform_offset", "offset f32[1,10,3,3]: expected f32[1,18,3,3]"),
        (
            "bad_attrs/deform_offset_group",
            "`deform`: offset_group 3: expected a positive divisor of the 4 channels",
        ),
        ("bad_attrs/roialign_mode", "`roi`: mode `median`: expected avg or max"),
        // Planned, and `run` refuses it, the import's note saying why it has no kernel.
        (
            "bad_attrs/roialign_adaptive",
            "RoiAlign (`roi`) (why: `roi` (RoiAlign): sampling_ratio 0",
        ),
        // Below opset 7, an operator changed since the model's opset.
        (
            "bad_attrs/old_opset_add",
            "opset 3: ordo imports opsets 7 and later, and an older model whose every operator is unchanged up to opset 7; these changed: `Add` (new versions at opset 6, 7)",
        ),
        // Control flow ordo cannot resolve at import (`fixtures/gen_control_flow.py`).
        ("bad_attrs/loop_runtime_trips", "`loop` (Loop): its trip count `m` is computed at run"),
        ("bad_attrs/loop_forever", "`loop`: it has neither a trip count nor a condition"),
        ("bad_attrs/if_shapes", "output 0 as f32[4,8] and f32[4,4]"),
        ("bad_attrs/sequence_position", "`at`: position 5 is out of range"),
        ("bad_attrs/loop_nested_huge", "expands to more than 100000 nodes"),
        // String tensors and operators (planned, never run).
        (
            "bad_attrs/string_count",
            "tensor `words`: shape [3] needs 3 strings, but the tensor holds 2",
        ),
        ("bad_attrs/tfidf_counts", "`tfidf`: ngram_counts [0, 5]"),
        (
            "bad_attrs/split_unbounded",
            "`split` (StringSplit): its output's size depends on the data, nothing bounds it",
        ),
        ("bad_attrs/concat_floats", "`concat`: input 0 is f32, not strings"),
        (
            "bad_attrs/image_decoder",
            "`decode` (ImageDecoder): its output's size depends on the data, nothing bounds it",
        ),
        // Bit operations: a shift with no direction it knows, an AND of floats.
        ("bad_attrs/bitshift_direction", "`shift`: direction `UP`: expected LEFT or RIGHT"),
        ("bad_attrs/bitwise_floats", "BitwiseAnd takes integers, got f32[2,3,4]"),
        // Quantization scales that fit neither per axis nor per block.
        ("bad_attrs/quantize_scale_shape", "a scale of shape [5] for an input of shape [2, 3, 4]"),
        ("bad_attrs/dequantize_blocks", "blocks of 2 along axis 1 need [2, 2]"),
        // Operators written as IR ops, each refusing what it cannot mean.
        ("bad_attrs/gridsample_mode", "`sample`: mode `quadratic`"),
        ("bad_attrs/gridsample_padding", "`sample`: padding_mode `mirror`"),
        ("bad_attrs/lrn_size", "`lrn`: no `size`"),
        ("bad_attrs/gru_direction", "`gru`: direction `sideways`"),
        ("bad_attrs/gru_hidden", "`gru` (GRU): hidden_size 5 for R f32[1,12,4]"),
        ("bad_attrs/bn_momentum", "`bn`: momentum 2 is not in [0, 1]"),
        ("bad_attrs/reverse_lengths", "`reverse`: sequence length 9 outside 0..=3"),
        ("bad_attrs/maxunpool_index", "`unpool`: index 40 outside the unpooled [1, 1, 4, 4]"),
        ("bad_attrs/col2im_block", "`col2im` (Col2Im): input f32[1,9,4]"),
        ("bad_attrs/compress_condition", "a condition of 5 values for an axis of 3"),
        ("bad_attrs/affine_grid_size", "theta f32[2,3,4]: expected [2, 2, 3] floats"),
        ("bad_attrs/maxunpool_strides", "`unpool`: kernel_shape [2, 2], strides [2]"),
        ("external/bad_location", "`../convnet.onnx` is not inside the model's folder"),
    ] {
        let path = fixtures.join(format!("{name}.onnx"));
        let path = path.to_str().expect("a UTF-8 path").to_string();
        let runs = ["cast_string", "roialign_adaptive"];
        let args = if name.starts_with("external") || runs.iter().any(|r| name.ends_with(r)) {
            vec!["run", &path, "--roofline", "--warmup-seconds", "0"]
        } else {
            vec!["inspect", &path]
        };
        cases.push(Case {
            label: format!("onnx {name}: {}", args[0]),
            args: strings(&args),
            refuse: true,
            culprit: vec![path.clone(), culprit.to_string()],
        });
    }
    // Valid models whose constant tables (a ReverseSequence's indices over 2^38 elements, a
    // 65536-point DFT's matrix) would exceed what ordo keeps: planned as opaque ops, never an
    // allocation that aborts.
    for name in ["bad_attrs/reverse_huge", "bad_attrs/dft_huge"] {
        let path = fixtures.join(format!("{name}.onnx"));
        let path = path.to_str().expect("a UTF-8 path").to_string();
        cases.push(Case {
            label: format!("onnx {name}: inspect"),
            args: strings(&["inspect", &path]),
            culprit: vec![path.clone()],
            refuse: false,
        });
    }
    let good = std::fs::read(fixtures.join("convnet.onnx")).expect("the convnet fixture");
    let n = good.len();
    for k in 1..=20 {
        let path = dir.join(format!("cut-{k}.onnx"));
        std::fs::write(&path, &good[..n * k / 21]).unwrap();
        let path = path.to_str().unwrap().to_string();
        cases.push(Case {
            label: format!("onnx cut at {}/21", k),
            args: strings(&["place", &path, "--devices", "2"]),
            culprit: vec![path],
            refuse: false,
        });
    }
    for k in 0..30 {
        let mut bytes = good.clone();
        let at = (k * 7919 + 13) % n;
        bytes[at] = bytes[at].wrapping_add(0x55) | 0x80;
        let path = dir.join(format!("flip-{k}.onnx"));
        std::fs::write(&path, &bytes).unwrap();
        let path = path.to_str().unwrap().to_string();
        cases.push(Case {
            label: format!("onnx byte {at} overwritten"),
            args: strings(&["inspect", &path]),
            culprit: vec![path],
            refuse: false,
        });
    }
    cases
}

fn option_cases(graph: &str) -> Vec<Case> {
    // `run` of a small ResNet-50 training graph with `extra` options.
    // Roofline costs: a run would profile the model first, seconds per case in a debug build.
    let train = |extra: &[&'static str]| {
        [&["run", "resnet50", "--small", "--train", "--roofline"][..], extra].concat()
    };
    // A small transformer's 2-stage pipeline, its PyTorch schedule written to `csv`.
    let pipeline = |command: &'static str, csv: &'static str| {
        let base = ["--small", "--batch", "8", "--train", "--pipeline", "2"];
        [&[command, "transformer"][..], &base, &["--pytorch-schedule", csv]].concat()
    };
    // The planner on a tiny LLaMA and one node of eight H100s, with `extra`.
    let planner = |extra: &[&'static str]| {
        let model = "llama:layers=2,hidden=32,heads=2,intermediate=64,vocab=64";
        let base = ["plan-parallel", model, "--cluster", "h100x8-ib-ndr", "--nodes", "1"];
        [&base[..], &["--seq-len", "8"], extra].concat()
    };
    // A small transformer's 2-stage pipeline in copies: `--data-parallel` and `extra`.
    let pipeline_copies = |extra: &[&'static str]| {
        let base = ["simulate", "transformer", "--small", "--train", "--batch", "8"];
        [&base[..], &["--pipeline", "2", "--micro-batches", "2", "--data-parallel"], extra].concat()
    };
    // `export-schedule` of the small transformer with `extra`, written to s.csv unless told.
    let export = |extra: &[&'static str]| {
        let base = ["export-schedule", "transformer", "--small"];
        let out = if extra.contains(&"-o") { &[][..] } else { &["-o", "s.csv"][..] };
        [&base[..], extra, out].concat()
    };
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
        (
            vec!["compare", "resnet50", "--small", "--devices", "2", "--memory", "1KiB"],
            "no placer placed",
        ),
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
        (planner(&["--batch", "0"]), "batch"),
        (planner(&["--batch", "-3"]), "batch"),
        (planner(&["--batch", "8", "--gpus", "0"]), "gpus"),
        (planner(&["--batch", "8", "--gpus", "100000"]), "gpus"),
        (planner(&["--batch", "8", "--nodes", "0"]), "nodes"),
        (planner(&["--batch", "8", "--max-micro-batches", "0"]), "micro"),
        (planner(&["--batch", "8", "--tensor-parallel", "0"]), "tensor-parallel"),
        (planner(&["--batch", "8", "--tensor-parallel", "-2"]), "tensor-parallel"),
        (planner(&["--batch", "8", "--recompute", "sometimes"]), "--recompute sometimes"),
        (planner(&["--batch", "8", "--recompute", ""]), "--recompute"),
        (planner(&["--batch", "8", "--granularity", "coarse"]), "--granularity \"coarse\""),
        (train(&["--pipeline", "2", "--micro-batches", "2", "--granularity", ""]), "--granularity"),
        (
            train(&["--pipeline", "2", "--micro-batches", "2", "--granularity", "block"]),
            "per block",
        ),
        (vec!["published", "--table", "nope"], "--table nope"),
        (vec!["published", "--model", "3T"], "--model 3T"),
        (planner(&["--batch", "8", "--precision", "fp8"]), "fp8"),
        (planner(&["--batch", "8", "--export", "/dev/null/plan"]), "/dev/null/plan"),
        (
            vec!["plan-parallel", "no_such_model", "--cluster", "h100x8-ib-ndr", "--batch", "8"],
            "no_such_model",
        ),
        (vec!["plan-parallel", "resnet50", "--cluster", "no-such", "--batch", "8"], "no-such"),
        (pipeline_copies(&["0"]), "data-parallel"),
        (pipeline_copies(&["3"]), "data-parallel"),
        (pipeline_copies(&["100000000000"]), "data-parallel"),
        (pipeline_copies(&["2", "--first-k", "1"]), "first-k"),
        (pipeline_copies(&["2", "--bucket", "-1"]), "bucket"),
        (pipeline_copies(&["2", "--all-reduce", "ring2"]), "all-reduce"),
        (pipeline_copies(&["2", "--network-gbps", "0"]), "network-gbps"),
        (vec!["conformance", ".", "--rtol", "-1"], "rtol"),
        (vec!["synth", "--nodes", "0", "--out", "/dev/null"], "nodes"),
        (vec!["inspect", "resnet50", "--seq-len", "64"], "seq-len"),
        (vec!["place", "mobilenet_v3_large", "--seq-len", "8", "--devices", "2"], "seq-len"),
        (vec!["place", graph, "--devices", "2", "--budget", "1e300s"], "budget"),
        (vec!["place", graph, "--devices", "2", "--json", "out.json"], "out.json"),
        (vec!["place", graph, "--devices", "2", "--out", "-"], "--out"),
        (vec!["profile", "gnmt", "--small", "--out", "p.json", "--timed-seconds", "-1s"], "timed"),
        (vec!["profile", "gnmt", "--small", "--out", "p.json", "--warmup-seconds", "x"], "warmup"),
        (train(&["--warmup-seconds", "NaN"]), "warmup-seconds"),
        (vec!["run", "resnet50", "--small", "--roofline", "--profile", "p.json"], "roofline"),
        (vec!["compare", graph, "--devices", "2", "--svg", "/no/such/dir/c.svg"], "c.svg"),
        (vec!["simulate", graph, "--devices", "2", "--svg", "/no/such/dir/g.svg"], "g.svg"),
        (vec!["simulate", graph, "--devices", "2", "--pytorch-schedule", "s.csv"], "pipeline"),
        (export(&["--stages", "1"]), "--stages 1"),
        (export(&["--stages", "2", "--batch", "6"]), "multiple of --micro-batches"),
        (export(&["--stages", "2", "--batch", "8", "--memory", "10KB"]), "at its peak"),
        (export(&["--stages", "2", "--batch", "8", "--schedule", "ooo"]), "--pipeline takes"),
        (export(&["--stages", "2", "--batch", "8", "-o", "/no/such/dir/s.csv"]), "s.csv"),
        (vec!["inspect", "resnet50", "--small", "--dim", "N"], "NAME=SIZE"),
        (vec!["inspect", "resnet50", "--small", "--dim", "=3"], "name is empty"),
        (vec!["inspect", "resnet50", "--small", "--dim", "N=0"], "size 0"),
        (vec!["inspect", "resnet50", "--small", "--dim", "N=-1"], "whole number"),
        (vec!["inspect", "resnet50", "--small", "--dim", "N=x"], "whole number"),
        (vec!["inspect", "resnet50", "--small", "--dim", "N=4"], "ONNX files"),
        (pipeline("simulate", "/no/such/dir/s.csv"), "s.csv"),
        (pipeline("compare", "s.csv"), "simulate"),
    ];
    table
        .into_iter()
        .map(|(args, culprit)| Case {
            label: args.join(" "),
            args: strings(&args),
            culprit: vec![culprit.to_string()],
            refuse: false,
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
    cases.extend(nodes_cluster_cases(&dir, &graph));
    cases.extend(plan_cases(&dir, &graph));
    cases.extend(option_cases(&graph));
    cases.extend(profile_cases(&dir));
    cases.extend(onnx_cases(&dir));
    cases.extend(hugging_face_cases(&dir));
    assert!(cases.len() >= 400, "the corpus shrank to {} cases", cases.len());
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
