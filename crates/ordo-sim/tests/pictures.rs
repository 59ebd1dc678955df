//! The Chrome trace and the SVG charts.

mod common;

use std::collections::{BTreeSet, HashMap};

use ordo_sched::TaskKind;
use ordo_sim::{SimOptions, chrome_trace_json, gantt_svg, memory_svg, simulate};
use serde_json::Value;

#[test]
fn trace_has_one_complete_event_per_task_and_one_thread_per_stream() {
    let plan = common::random_plan(3, 60, 3, 2, 8);
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    let trace: Value = serde_json::from_str(&chrome_trace_json(&plan, &report)).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let of = |ph: &str| events.iter().filter(move |e| e["ph"] == ph).collect::<Vec<_>>();

    let complete = of("X");
    assert_eq!(complete.len(), plan.tasks.len());
    let tasks: BTreeSet<u64> =
        complete.iter().map(|e| e["args"]["task"].as_u64().unwrap()).collect();
    assert_eq!(tasks.len(), plan.tasks.len());
    for e in &complete {
        let t = e["args"]["task"].as_u64().unwrap() as usize;
        assert_eq!(e["name"], plan.tasks[t].name);
        assert_eq!(e["ts"].as_f64().unwrap(), report.tasks[t].start_us);
        let stream = &plan.streams[plan.tasks[t].streams[0].0 as usize];
        assert_eq!(e["pid"].as_u64().unwrap() as usize, stream.device);
    }

    let threads: Vec<_> = of("M").into_iter().filter(|e| e["name"] == "thread_name").collect();
    assert_eq!(threads.len(), plan.streams.len());
    let tids: BTreeSet<u64> = threads.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    assert_eq!(tids.len(), plan.streams.len());
    let processes = of("M").into_iter().filter(|e| e["name"] == "process_name").count();
    assert_eq!(processes, plan.devices);

    let transfers: Vec<usize> = (0..plan.tasks.len())
        .filter(|&t| matches!(plan.tasks[t].kind, TaskKind::Transfer { .. }))
        .collect();
    assert!(!transfers.is_empty());
    let (starts, ends) = (of("s"), of("f"));
    assert_eq!(starts.len(), transfers.len());
    assert_eq!(ends.len(), transfers.len());
    assert_eq!(of("B").len(), transfers.len());
    assert_eq!(of("E").len(), transfers.len());
    // Each flow goes from the sender's tx thread to the receiver's rx thread.
    let ends: HashMap<u64, &Value> = ends.iter().map(|e| (e["id"].as_u64().unwrap(), *e)).collect();
    for s in starts {
        let t = s["id"].as_u64().unwrap() as usize;
        let task = &plan.tasks[t];
        assert_eq!(s["tid"].as_u64().unwrap(), task.streams[0].0 as u64);
        assert_eq!(ends[&(t as u64)]["tid"].as_u64().unwrap(), task.streams[1].0 as u64);
    }
}

#[test]
fn gantt_chart_has_a_rect_per_task_and_stream() {
    let plan = common::random_plan(5, 40, 2, 2, 5);
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    let svg = gantt_svg(&plan, &report, "test plan");
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    let placements: usize = plan.tasks.iter().map(|t| t.streams.len()).sum();
    // One rect per task and stream, plus one legend swatch per kind of stream in the plan.
    let kinds: BTreeSet<&str> = plan
        .streams
        .iter()
        .map(|stream| match stream.kind {
            ordo_sched::StreamKind::Compute => "compute",
            ordo_sched::StreamKind::SubCompute => "sub",
            ordo_sched::StreamKind::Tx { .. } | ordo_sched::StreamKind::Rx { .. } => "transfer",
            ordo_sched::StreamKind::Collective => "collective",
        })
        .collect();
    assert_eq!(svg.matches("<rect").count(), placements + kinds.len());
    assert!(svg.contains("test plan: step "), "the title names the plan and its step time");
    assert!(svg.contains(&format!("step {:.3} ms", report.step_time_us / 1000.0)));
    assert!(svg.contains(">compute</text>") && svg.contains(">transfer (tx and rx)</text>"));
    assert_eq!(svg.matches("<title>").count(), placements);
    for t in 0..plan.tasks.len() {
        assert!(svg.contains(&format!("data-task=\"{t}\"")), "task {t} missing");
    }
    assert!(svg.contains("time (ms)"));
    assert_eq!(svg.matches("<svg").count(), 1);
    assert_eq!(svg.matches('<').count(), svg.matches('>').count());
}

#[test]
fn names_are_escaped() {
    let mut b = common::Builder::new(1);
    let c = b.stream(0, ordo_sched::StreamKind::Compute);
    b.compute("a<b & \"c\"", c, 2);
    let plan = b.build();
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    let svg = gantt_svg(&plan, &report, "test plan");
    assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
    assert!(!svg.contains("a<b"));
}

#[test]
fn memory_plot_per_device() {
    let plan = common::random_plan(9, 40, 2, 2, 5);
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    for d in 0..plan.devices {
        let svg = memory_svg(&report, d, None).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("time (ms)"));
        assert!(svg.contains("memory (MiB)"), "peaks are under 1 GiB");
        assert_eq!(svg.matches("<path").count(), 1);
        // One horizontal and one vertical move per point after the first.
        let moves = svg.matches(" H").count();
        assert_eq!(moves, report.memory_timeline[d].len() - 1);
    }
    assert!(memory_svg(&report, plan.devices, None).is_none());
}

#[test]
fn memory_plot_switches_to_gib() {
    let mut b = common::Builder::new(1);
    b.plan.persistent_bytes = vec![3 << 30];
    let c = b.stream(0, ordo_sched::StreamKind::Compute);
    b.compute("a", c, 2);
    let report = simulate(&b.build(), &SimOptions::default()).unwrap();
    let svg = memory_svg(&report, 0, None).unwrap();
    assert!(svg.contains("memory (GiB)"));
    assert!(svg.contains("peak 3.000 GiB"));
}

#[test]
fn report_json_has_the_top_level_keys() {
    let plan = common::random_plan(1, 10, 2, 1, 3);
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    let json: Value = serde_json::to_value(&report).unwrap();
    for key in ["step_time_us", "lower_bound_us", "peak_memory_bytes", "busy_fraction"] {
        assert!(json.get(key).is_some(), "{key}");
    }
    let back: ordo_sim::Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

#[test]
fn memory_plot_draws_the_limit_or_names_it() {
    let plan = common::random_plan(9, 40, 2, 2, 5);
    let report = simulate(&plan, &SimOptions::default()).unwrap();
    let peak = report.peak_memory_bytes[0];
    // A limit near the peak is a dashed line inside the plot.
    let near = memory_svg(&report, 0, Some(peak + peak / 4)).unwrap();
    assert!(near.contains("stroke-dasharray") && near.contains("memory limit"));
    assert!(near.contains(", limit "));
    // A limit far above it is only named in the title; no limit says so.
    let far = memory_svg(&report, 0, Some(peak * 10)).unwrap();
    assert!(!far.contains("stroke-dasharray") && far.contains(", limit "));
    let none = memory_svg(&report, 0, Some(u64::MAX)).unwrap();
    assert!(none.contains("no memory limit") && !none.contains("stroke-dasharray"));
}

#[test]
fn compare_chart_has_two_bars_per_result_and_a_reason_otherwise() {
    use ordo_sim::{CompareBar, compare_svg};
    let bars = vec![
        CompareBar { name: "fast".into(), result: Ok((1500.0, 3 << 30)) },
        CompareBar { name: "slow <b>".into(), result: Ok((4500.0, 1 << 30)) },
        CompareBar { name: "broken".into(), result: Err("did not fit & stopped".into()) },
    ];
    let svg = compare_svg("three placers", &bars, 1000.0, Some(4 << 30));
    assert_eq!(svg.matches("<rect").count(), 4);
    assert!(svg.contains("1.50 ms") && svg.contains("4.50 ms"));
    assert!(svg.contains("3.00 GiB") && svg.contains("1.00 GiB"));
    assert!(svg.contains("no result: did not fit &amp; stopped"));
    assert!(svg.contains("slow &lt;b&gt;") && !svg.contains("slow <b>"));
    assert!(svg.contains("lower bound") && svg.contains("memory limit"));
    assert_eq!(svg.matches('<').count(), svg.matches('>').count());
    // The slowest bar fills the panel; the faster one a third of it.
    let width = |label: &str| -> f64 {
        let at = svg.find(&format!("<title>{label}")).unwrap();
        let rect = &svg[svg[..at].rfind("<rect").unwrap()..at];
        let w = rect.split("width=\"").nth(1).unwrap().split('"').next().unwrap();
        w.parse().unwrap()
    };
    assert!((width("fast: 1.50 ms") * 3.0 - width("slow &lt;b&gt;: 4.50 ms")).abs() < 0.1);
}
