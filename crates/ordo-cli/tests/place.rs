//! `ordo place` and `ordo compare` end to end.

mod common;

use common::*;

use std::process::Output;

fn fixture(name: &str) -> String {
    format!("{}/../ordo-cost/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `ordo COMMAND` on one of Baechi's sample cost graphs with `devices` devices, forward only
/// (Baechi's setting), followed by `extra` arguments.
fn on_sample(command: &str, sample: &str, devices: usize, extra: &[&str]) -> Output {
    let (path, devices) = (fixture(&format!("{sample}.json")), devices.to_string());
    let mut args = vec![command, &path, "--devices", &devices, "--forward-only"];
    args.extend_from_slice(extra);
    ordo(&args)
}

#[test]
fn place_json_has_the_documented_keys_and_places_every_node() {
    let v = json(&ordo(&[
        "place",
        "resnet50",
        "--batch",
        "8",
        "--devices",
        "2",
        "--memory",
        "8GiB",
        "--algo",
        "m-etf",
        "--json",
    ]));
    assert_eq!(v["format"], "ordo.placement/1");
    assert_eq!(v["algo"], "m-etf");
    let graph = ordo_models::build("resnet50", Some(8), None).unwrap();
    let device_of = v["device_of"].as_object().unwrap();
    assert_eq!(device_of.len(), graph.nodes.len());
    for node in &graph.nodes {
        assert!(device_of[&node.name].as_u64().unwrap() < 2, "{}", node.name);
    }
    let ordered: usize =
        v["order"].as_array().unwrap().iter().map(|o| o.as_array().unwrap().len()).sum();
    assert_eq!(ordered, graph.nodes.len());
    let limit = 8u64 << 30;
    for peak in v["peak_memory_bytes"].as_array().unwrap() {
        assert!(peak.as_u64().unwrap() <= limit);
    }
    assert!(v["makespan_us"].as_u64().unwrap() >= v["lower_bound_us"].as_u64().unwrap());
    assert!(v["placement_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["mode"], "training");
}

#[test]
fn forward_only_on_baechis_resnet50_sample_matches_baechi() {
    // Baechi's own placer on this graph, 4 devices, unlimited memory: m-TOPO 75.90 ms,
    // m-ETF 25.94 ms.
    for (algo, expected_us) in [("m-topo", 75_900), ("m-etf", 25_940)] {
        let v = json(&on_sample("place", "resnet50", 4, &["--algo", algo, "--json"]));
        let makespan = v["makespan_us"].as_i64().unwrap();
        assert!((makespan - expected_us).abs() <= 10, "{algo}: {makespan} us");
    }
}

#[test]
fn baechis_own_estimate_is_reported_beside_ours() {
    // On Baechi's gnmt sample m-ETF's own schedule (101.73 ms) beats what Baechi's virtual
    // scheduler makes of the same placement (135.69 ms, the number Baechi reports).
    let v = json(&on_sample("place", "gnmt", 4, &["--algo", "m-etf", "--json"]));
    assert!((v["baechi_makespan_us"].as_i64().unwrap() - 135_690).abs() <= 10, "{v}");
    assert!((v["makespan_us"].as_i64().unwrap() - 101_730).abs() <= 10, "{v}");
}

#[test]
fn training_placements_need_more_memory_than_forward_only() {
    let peak = |extra: &[&str]| {
        let mut args = vec![
            "place",
            "bert_base",
            "--batch",
            "4",
            "--seq-len",
            "64",
            "--devices",
            "1",
            "--algo",
            "single",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&ordo(&args))["peak_memory_bytes"][0].as_u64().unwrap()
    };
    let forward = peak(&["--forward-only"]);
    let momentum = peak(&[]);
    let adam = peak(&["--optimizer", "adam"]);
    // BERT-base has 109,482,240 parameters of 4 bytes: gradients add at least that much, and
    // Adam's second moment as much again over momentum.
    assert!(momentum >= forward + 2 * 109_482_240 * 4, "{forward} -> {momentum}");
    assert!(adam >= momentum + 109_482_240 * 4, "{momentum} -> {adam}");
}

#[test]
fn a_node_bigger_than_every_device_is_named_with_the_shortfall() {
    let out = ordo(&["place", "gnmt", "--devices", "4", "--memory", "1MiB", "--algo", "m-etf"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("needs") && err.contains("short"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let err = stderr(&ordo(&["place", "resnet50", "--devices", "0", "--algo", "m-etf"]));
    assert!(err.contains("at least 1"), "{err}");
    let err = stderr(&ordo(&["place", "resnet50", "--devices", "100000", "--algo", "m-etf"]));
    assert!(err.contains("at most 1024"), "{err}");
    let err = stderr(&ordo(&["place", "resnet50", "--devices", "2", "--algo", "m-best"]));
    assert!(err.contains("unknown algorithm `m-best`") && err.contains("m-sct"), "{err}");
    let err = stderr(&ordo(&["place", "resnet50", "--cluster", "tpu9", "--algo", "m-etf"]));
    assert!(err.contains("unknown cluster `tpu9`") && err.contains("a100x8-nvlink"), "{err}");
    let err = stderr(&ordo(&["place", "resnet50", "--devices", "2", "--memory", "lots"]));
    assert!(err.contains("lots"), "{err}");
    let err = stderr(&ordo(&["place", "resnet50", "--cluster", "a100x4-nvlink", "--devices", "8"]));
    assert!(err.contains("only 4 devices"), "{err}");
}

#[test]
fn a_cluster_sets_devices_memory_and_speed() {
    let step = |cluster: &str| {
        let v =
            json(&ordo(&["place", "resnet50", "--cluster", cluster, "--algo", "m-etf", "--json"]));
        assert_eq!(v["devices"], 4);
        v["makespan_us"].as_u64().unwrap()
    };
    assert!(step("h100x4-nvlink") < step("v100x4-nvlink"), "an H100 is faster than a V100");
}

#[test]
fn compare_runs_every_algorithm() {
    let v = json(&on_sample("compare", "gnmt", 4, &["--json", "--budget", "200ms"]));
    let results = v["results"].as_array().unwrap();
    let names = ["m-topo", "m-topo-real", "m-etf", "m-sct", "single", "round-robin", "balanced"];
    // auto is never worse than any of the others, simulated.
    let step = |algo: &str| {
        let row = results.iter().find(|r| r["algo"] == algo).unwrap();
        row["simulated_step_us"].as_f64().unwrap()
    };
    let best = names.iter().map(|algo| step(algo)).fold(f64::INFINITY, f64::min);
    assert!(step("auto") <= best, "auto {} vs best {best}", step("auto"));
    for algo in names.into_iter().chain(["auto"]) {
        let row =
            results.iter().find(|r| r["algo"] == algo).unwrap_or_else(|| panic!("{algo} missing"));
        assert!(
            row["makespan_us"].as_u64().unwrap() >= v["lower_bound_us"].as_u64().unwrap(),
            "{algo}"
        );
        let simulated = row["simulated_step_us"].as_f64().unwrap();
        assert!(simulated >= v["lower_bound_us"].as_f64().unwrap() - 1e-6, "{algo}: {simulated}");
    }
}

#[test]
fn a_reduced_placement_still_places_every_node() {
    let full = json(&on_sample("place", "transformer", 4, &["--algo", "m-etf", "--json"]));
    let reduced =
        json(&on_sample("place", "transformer", 4, &["--algo", "m-etf", "--reduce", "--json"]));
    let nodes = |v: &serde_json::Value| v["device_of"].as_object().unwrap().len();
    assert_eq!(nodes(&reduced), nodes(&full));
    let ordered: usize =
        reduced["order"].as_array().unwrap().iter().map(|o| o.as_array().unwrap().len()).sum();
    assert_eq!(ordered, nodes(&full));
    assert!(reduced["makespan_us"].as_u64() >= reduced["lower_bound_us"].as_u64());
}

#[test]
fn plan_json_is_a_valid_plan_with_one_compute_task_per_node() {
    let out = on_sample("plan", "transformer", 4, &["--algo", "m-etf", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: ordo_sched::Plan = serde_json::from_slice(&out.stdout).unwrap();
    ordo_sched::validate(&plan).unwrap();
    assert_eq!(plan.format, "ordo.plan/1");
    let compute = plan
        .tasks
        .iter()
        .filter(|t| matches!(t.kind, ordo_sched::TaskKind::Compute { .. }))
        .count();
    let graph = ordo_cost::read_costgraph(fixture("transformer.json")).unwrap();
    assert_eq!(compute, graph.nodes.len());
}

#[test]
fn simulate_reports_json_and_writes_trace_and_svgs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    let svg = dir.path().join("g.svg");
    let v = json(&on_sample(
        "simulate",
        "resnet50",
        2,
        &[
            "--algo",
            "m-etf",
            "--json",
            "--trace",
            trace.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    ));
    let step = v["step_time_us"].as_f64().unwrap();
    assert!(step >= v["lower_bound_us"].as_f64().unwrap());
    assert_eq!(v["peak_memory_bytes"].as_array().unwrap().len(), 2);
    assert_eq!(v["busy_fraction"]["devices"].as_array().unwrap().len(), 2);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(trace["traceEvents"].as_array().unwrap().len() >= 175);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    assert!(dir.path().join("g-memory-1.svg").exists());
}

#[test]
fn simulate_takes_a_plan_file_and_channel_models_differ_as_expected() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let out =
        on_sample("plan", "inception_v3", 4, &["--algo", "m-etf", "--out", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let step = |channel: &str| {
        json(&ordo(&["simulate", plan.to_str().unwrap(), "--channel", channel, "--json"]))
            ["step_time_us"]
            .as_f64()
            .unwrap()
    };
    // No contention can only be faster than one shared channel per device.
    assert!(step("pytorch") <= step("tf"));
    assert!(step("pytorch") <= step("duplex"));
    // The placer's estimate is the simulated step under the default channel model.
    let placed = json(&on_sample("place", "inception_v3", 4, &["--algo", "m-etf", "--json"]));
    assert_eq!(step("tf"), placed["makespan_us"].as_f64().unwrap());

    // Checked against the graph it came from, and against another.
    let (plan, own, other) =
        (plan.to_str().unwrap(), fixture("inception_v3.json"), fixture("resnet50.json"));
    let out = ordo(&["simulate", plan, "--graph", &own, "--forward-only"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ordo(&["simulate", plan, "--graph", &other, "--forward-only"]);
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(message.contains("the plan does not match the graph"), "{message}");
    assert!(message.contains("which is not in the graph"), "{message}");
}

#[test]
fn train_places_the_training_graph_and_it_fits_in_simulation() {
    let args = ["resnet50", "--train", "--batch", "8", "--devices", "4", "--memory", "600MiB"];
    let placed = json(&ordo(&[&["place"][..], &args, &["--algo", "m-etf", "--json"]].concat()));
    assert_eq!(placed["mode"], "training-graph");
    let device_of = placed["device_of"].as_object().unwrap();
    for node in ["conv1", "conv1.dw", "fc.dx", "layer1.0.conv1.dx", "fc.weight.update"] {
        assert!(device_of.contains_key(node), "{node} is placed");
    }
    assert!(!device_of.contains_key("conv1.dx"), "no gradient flows into the images");
    let limit = 600 * 1024 * 1024;
    let peaks: Vec<u64> = placed["peak_memory_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert!(peaks.iter().all(|&p| p <= limit), "{peaks:?}");

    let simulated =
        json(&ordo(&[&["simulate"][..], &args, &["--algo", "m-etf", "--json"]].concat()));
    assert_eq!(
        simulated["step_time_us"].as_f64().unwrap(),
        placed["makespan_us"].as_f64().unwrap()
    );
    let simulated_peaks: Vec<u64> = simulated["peak_memory_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    // The same peaks but for the 4-byte loss, which nothing reads: the placer keeps an unread
    // output to the end of the step, the plan frees it when its producer finishes.
    for (simulated, placer) in simulated_peaks.iter().zip(&peaks) {
        assert!(simulated <= placer && placer - simulated <= 4, "{simulated_peaks:?} {peaks:?}");
    }

    let out = ordo(&["place", &fixture("resnet50.json"), "--devices", "2", "--train"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a cost graph"), "{}", stderr(&out));
    let out = on_sample("place", "resnet50", 2, &["--train"]);
    assert!(stderr(&out).contains("'--forward-only' cannot be used with '--train'"));
}

#[test]
fn ooo_beats_inorder_on_one_device_only_when_kernels_can_share_it() {
    let step = |schedule: &str, concurrent: bool| {
        let mut args = vec!["simulate", "mobilenet_v3_large", "--batch", "4", "--train"];
        args.extend(["--devices", "1", "--cluster", "a100x4-nvlink", "--schedule", schedule]);
        args.push("--json");
        if concurrent {
            args.push("--concurrent-kernels");
        }
        let report = json(&ordo(&args));
        let work: f64 = report["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["finish_us"].as_f64().unwrap() - t["start_us"].as_f64().unwrap())
            .sum();
        (report["step_time_us"].as_f64().unwrap(), work)
    };
    // One kernel at a time: both schedules keep the device busy, so the step is the work.
    let (inorder, work) = step("inorder", false);
    assert_eq!(inorder, work);
    assert_eq!(step("ooo", false).0, inorder);
    // Kernels that leave the GPU partly idle overlap: dW beside dX is faster.
    let (inorder_shared, _) = step("inorder", true);
    let (ooo_shared, _) = step("ooo", true);
    assert_eq!(inorder_shared, inorder, "one stream cannot overlap");
    assert!(ooo_shared < 0.99 * inorder, "ooo {ooo_shared} µs vs inorder {inorder} µs");
}

#[test]
fn compare_schedules_reports_the_speedup_over_inorder() {
    let v = json(&ordo(&[
        "compare",
        "mobilenet_v3_large",
        "--train",
        "--batch",
        "4",
        "--devices",
        "1",
        "--cluster",
        "a100x4-nvlink",
        "--schedules",
        "--concurrent-kernels",
        "--json",
    ]));
    let rows = v["schedules"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["schedule"].as_str().unwrap()).collect();
    assert_eq!(names, ["inorder", "ooo", "ooo-deferred", "ooo-per-layer"]);
    assert!(rows[3]["step_time_us"].as_f64().unwrap() <= rows[2]["step_time_us"].as_f64().unwrap());
    assert_eq!(rows[0]["speedup"].as_f64(), Some(1.0));
    let step = |i: usize| rows[i]["step_time_us"].as_f64().unwrap();
    assert!((rows[1]["speedup"].as_f64().unwrap() - step(0) / step(1)).abs() < 1e-9);
    assert!(step(1) < step(0));
    // The search tried k = 0 (plain ooo) and kept the fastest deferral it found.
    let tried = v["deferral_search"].as_array().unwrap();
    assert_eq!(tried[0]["k"], 0);
    assert_eq!(tried[0]["step_time_us"].as_f64().unwrap(), step(1));
    let best =
        tried.iter().map(|t| t["step_time_us"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    assert_eq!(step(2), best);
    let deferred = rows[2]["deferred_layers"].as_array().unwrap().len();
    assert!(tried.iter().any(|t| t["k"] == deferred));
    let out = ordo(&["compare", "resnet50", "--devices", "1", "--schedules"]);
    assert!(!out.status.success(), "--schedules needs --train");
}

#[test]
fn data_parallel_reports_the_chosen_first_k_and_its_search() {
    let args = [
        "resnet50",
        "--train",
        "--batch",
        "8",
        "--data-parallel",
        "4",
        "--network-gbps",
        "10",
        "--json",
    ];
    let v = json(&ordo(&[&["simulate"], &args[..]].concat()));
    assert_eq!(v["replicas"], 4);
    assert_eq!(v["first_k_chosen"], true);
    let tried = v["first_k_search"].as_array().unwrap();
    assert_eq!(tried[0]["k"], 0);
    let step = v["step_time_us"].as_f64().unwrap();
    let best =
        tried.iter().map(|t| t["step_time_us"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    assert_eq!(step, best);
    assert!(tried.iter().any(|t| t["k"] == v["first_k"]));
    let default = v["default_order"]["step_time_us"].as_f64().unwrap();
    assert_eq!(default, tried[0]["step_time_us"].as_f64().unwrap());
    // Communication only adds to one device's step.
    assert!(v["one_device"]["step_time_us"].as_f64().unwrap() <= step);

    // A fixed k is simulated as asked, and compare shows the same numbers.
    let fixed = json(&ordo(&[&["simulate"], &args[..], &["--first-k", "0"]].concat()));
    assert_eq!(fixed["first_k"], 0);
    assert_eq!(fixed["step_time_us"].as_f64().unwrap(), default);
    let compared = json(&ordo(&[&["compare"], &args[..]].concat()));
    assert_eq!(compared["step_time_us"], v["step_time_us"]);
}

#[test]
fn data_parallel_on_a_cluster_of_nodes_reduces_over_its_network() {
    let simulate = |replicas: &str, all_reduce: &str| {
        let args = ["simulate", "resnet50", "--small", "--train", "--cluster", "a100x8-ib-hdr"];
        let rest = ["--data-parallel", replicas, "--all-reduce", all_reduce, "--first-k", "0"];
        json(&ordo(&[&args[..], &rest[..], &["--nodes", "64", "--json"]].concat()))
    };
    let ring = simulate("512", "ring");
    let network = &ring["network"];
    assert_eq!(network["replicas_per_node"], 8);
    assert_eq!(network["all_reduce"], "ring");
    // 200 Gb/s HDR at 90%: 22.5 GB/s, 10 µs.
    let between = &network["between_nodes"];
    assert!((between["us_per_byte"].as_f64().unwrap() - 1e6 / 22.5e9).abs() < 1e-12);
    assert_eq!(between["latency_us"], 10.0);
    let step = |v: &serde_json::Value| v["step_time_us"].as_f64().unwrap();
    let tree = simulate("512", "tree");
    assert!(step(&tree) < step(&ring), "{} {}", step(&tree), step(&ring));
    assert_eq!(step(&simulate("512", "nccl")), step(&tree));
    // Within one node: NVLink, as the one-node cluster has it; no network in the output.
    let inside = simulate("8", "ring");
    assert!(inside["network"].get("between_nodes").is_none());
    let args = ["simulate", "resnet50", "--small", "--train", "--cluster", "a100x8-nvlink"];
    let rest = ["--data-parallel", "8", "--first-k", "0", "--json"];
    assert_eq!(step(&inside), step(&json(&ordo(&[&args[..], &rest[..]].concat()))));
}

#[test]
fn data_parallel_over_a_pipeline_reduces_each_stage_among_its_copies() {
    let simulate = |batch: &str, extra: &[&str]| {
        let base = ["simulate", "transformer", "--small", "--train", "--batch", batch];
        let pipeline = ["--pipeline", "2", "--micro-batches", "4", "--schedule", "1f1b", "--json"];
        json(&ordo(&[&base[..], &pipeline[..], extra].concat()))
    };
    let step = |v: &serde_json::Value| v["step_time_us"].as_f64().unwrap();
    // Each of 4 copies runs a quarter of the batch of 32: the pipeline alone at 8, plus the
    // stages' all-reduces, which a slow network lengthens.
    let alone = simulate("8", &[]);
    assert!(alone.get("replicas").is_none());
    let slow = ["--data-parallel", "4", "--network-gbps", "1", "--network-latency-us", "50"];
    let copies = simulate("32", &slow);
    assert_eq!(copies["replicas"], 4);
    assert_eq!(copies["network"]["latency_us"], 50.0);
    let fast = simulate("32", &["--data-parallel", "4", "--network-gbps", "1000000"]);
    assert!(step(&alone) <= step(&fast), "{} {}", step(&alone), step(&fast));
    assert!(step(&fast) < step(&copies), "{} {}", step(&fast), step(&copies));
    assert_eq!(fast["peak_memory_bytes"], alone["peak_memory_bytes"]);
    // compare shows every schedule with the copies.
    let args = ["compare", "transformer", "--small", "--train", "--batch", "32", "--pipeline", "2"];
    let compared =
        json(&ordo(&[&args[..], &slow[..], &["--micro-batches", "4", "--json"]].concat()));
    let rows = compared["schedules"].as_array().expect("one row per schedule");
    let one_f_one_b = rows.iter().find(|r| r["schedule"] == "1f1b").unwrap();
    assert_eq!(step(one_f_one_b), step(&copies));
    assert!(rows.iter().all(|r| r["replicas"] == 4));

    // Refused: a batch the copies do not divide, reverse first-k, a run.
    let base = ["simulate", "transformer", "--small", "--train", "--pipeline", "2"];
    let out = ordo(&[&base[..], &["--batch", "6", "--data-parallel", "4"]].concat());
    assert!(stderr(&out).contains("the batch (6) must be a multiple of --data-parallel (4)"));
    let out =
        ordo(&[&base[..], &["--batch", "8", "--data-parallel", "2", "--first-k", "2"]].concat());
    assert!(stderr(&out).contains("--first-k 2: reverse first-k across the steps"));
    let run =
        ["run", "transformer", "--small", "--train", "--pipeline", "2", "--data-parallel", "2"];
    assert!(!ordo(&run).status.success());
}

#[test]
fn bad_data_parallel_settings_are_errors() {
    let run = |extra: &[&str]| {
        let base = ["simulate", "resnet50", "--train", "--batch", "2", "--data-parallel"];
        ordo(&[&base[..], extra].concat())
    };
    let out = run(&["0"]);
    assert!(
        stderr(&out).contains("--data-parallel 0: data parallelism needs at least one replica"),
        "{}",
        stderr(&out)
    );
    let out = run(&["2", "--first-k", "500"]);
    assert!(stderr(&out).contains("500 layers"), "{}", stderr(&out));
    let out = run(&["2", "--first-k", "some"]);
    assert!(stderr(&out).contains("--first-k some"), "{}", stderr(&out));
    let out = run(&["2", "--bucket", "lots"]);
    assert!(stderr(&out).contains("--bucket lots"), "{}", stderr(&out));
    let out = run(&["2", "--network-gbps", "0"]);
    assert!(stderr(&out).contains("positive bandwidth"), "{}", stderr(&out));
    let out = ordo(&["simulate", "resnet50", "--data-parallel", "2"]);
    assert!(!out.status.success(), "--data-parallel needs --train");
    // A schedule that does not fit the memory it was given is refused, not reported.
    let out = run(&["2", "--first-k", "50", "--devices", "1", "--memory", "200MiB"]);
    assert!(stderr(&out).contains("more than the device's 200.0 MiB"), "{}", stderr(&out));
    let tight = ["--devices", "1", "--memory", "100MiB", "--schedule", "ooo"];
    let out = ordo(&[&["simulate", "resnet50", "--train", "--batch", "2"], &tight[..]].concat());
    assert!(stderr(&out).contains("more than device 0's 100.0 MiB"), "{}", stderr(&out));
}

#[test]
fn pipeline_schedules_side_by_side_and_one_at_a_time() {
    let args = ["bert_base", "--train", "--batch", "8", "--pipeline", "4", "--micro-batches", "4"];
    let v = json(&ordo(&[&["compare"], &args[..], &["--json"]].concat()));
    let rows = v["schedules"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["schedule"].as_str().unwrap()).collect();
    assert_eq!(names, ["gpipe", "1f1b", "fast-forward", "zb-h1", "zb-h2"]);
    assert_eq!(rows[0]["speedup"].as_f64(), Some(1.0));
    let peak = |i: usize| -> Vec<u64> {
        let peaks = rows[i]["peak_memory_bytes"].as_array().unwrap();
        peaks.iter().map(|p| p.as_u64().unwrap()).collect()
    };
    assert_eq!(peak(0).len(), 4);
    // 1F1B keeps fewer micro-batches in flight than GPipe.
    assert!(peak(1).iter().zip(peak(0)).all(|(one, all)| *one <= all));
    // `simulate` gives the same step as the compared row.
    let one = json(&ordo(&[&["simulate"], &args[..], &["--schedule", "1f1b", "--json"]].concat()));
    assert_eq!(one["step_time_us"], rows[1]["step_time_us"]);
}

#[test]
fn bad_pipeline_settings_are_errors() {
    let run = |extra: &[&str]| {
        let base = ["simulate", "bert_base", "--train", "--batch", "8", "--pipeline"];
        ordo(&[&base[..], extra].concat())
    };
    let out = run(&["4", "--micro-batches", "3"]);
    assert!(stderr(&out).contains("multiple of --micro-batches (3)"), "{}", stderr(&out));
    let out = run(&["4", "--micro-batches", "0"]);
    assert!(stderr(&out).contains("at least 1"), "{}", stderr(&out));
    let out = run(&["40", "--micro-batches", "2"]);
    assert!(stderr(&out).contains("only 12 units"), "{}", stderr(&out));
    for stages in ["0", "1"] {
        let out = run(&[stages, "--micro-batches", "2"]);
        let expected = format!("--pipeline {stages}: a pipeline needs at least 2 stages");
        assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    }
    let out = run(&["4", "--schedule", "ooo"]);
    assert!(stderr(&out).contains("gpipe, 1f1b, fast-forward, zb-h1 or zb-h2"), "{}", stderr(&out));
    let out = run(&["4", "--memory", "10MiB"]);
    assert!(stderr(&out).contains("more than its device's"), "{}", stderr(&out));
    let out = ordo(&["simulate", "bert_base", "--train", "--devices", "1", "--schedule", "gpipe"]);
    assert!(stderr(&out).contains("--schedule gpipe needs --pipeline S"), "{}", stderr(&out));
}

#[test]
fn auto_is_the_default_and_says_where_it_started() {
    let out = on_sample("place", "inception_v3", 4, &["--budget", "100ms", "--reproducible"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("with auto"), "{text}");
    assert!(text.contains("auto started from m-etf"), "{text}");
    let v = json(&on_sample(
        "place",
        "inception_v3",
        4,
        &["--budget", "100ms", "--reproducible", "--json"],
    ));
    assert_eq!(v["algo"], "auto");
    // The same seed and budget give the same placement.
    let again = json(&on_sample(
        "place",
        "inception_v3",
        4,
        &["--budget", "100ms", "--reproducible", "--json"],
    ));
    assert_eq!(v["device_of"], again["device_of"]);
    let out = on_sample("place", "inception_v3", 4, &["--budget", "soon"]);
    assert!(stderr(&out).contains("--budget soon"), "{}", stderr(&out));
    let out = on_sample("place", "inception_v3", 4, &["--algo", "m-best"]);
    assert!(stderr(&out).contains("auto"), "{}", stderr(&out));
}

#[test]
fn memory_overrides_a_clusters_device_memory() {
    let placed = |memory: &str| {
        let mut args = vec!["place", "resnet50", "--cluster", "v100x4-pcie", "--algo", "m-topo"];
        if !memory.is_empty() {
            args.extend(["--memory", memory]);
        }
        ordo(&args)
    };
    let out = placed("8GiB");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("of cluster `v100x4-pcie` with 8.0 GiB each"),
        "{}",
        stdout(&out)
    );
    // The cluster's own 16 GiB fit; 40 MiB cannot hold the input, and the error says so.
    assert!(placed("").status.success());
    let out = placed("40MiB");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the largest device has 41943040"), "{}", stderr(&out));
}
