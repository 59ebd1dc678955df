//! The profiler: one measurement per node of a small zoo model's training graph, in graph
//! order, with the outputs' real sizes; bad options and feeds are errors.

use ordo_exec::{
    ExecError, Observers, ProfileMode, ProfileOptions, Program, TrainState, profile,
    synthetic_feeds,
};
use ordo_ir::OutletId;
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_models::Variant;

fn program(name: &str) -> Program {
    let forward = ordo_models::build_variant(name, Variant::Small, None, None).unwrap();
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    Program::new(training_graph(&forward, loss, Optimizer::SgdMomentum).unwrap()).unwrap()
}

#[test]
fn every_node_is_measured_with_its_outputs_sizes() {
    let program = program("mobilenet_v3_large");
    let state = TrainState::new(&program, 3).unwrap();
    let feeds = synthetic_feeds(program.graph(), 3).unwrap();
    for (mode, warmup) in
        [(ProfileMode::InStep, 1), (ProfileMode::InStep, 0), (ProfileMode::BackToBack, 1)]
    {
        let options = ProfileOptions {
            reps: 2,
            warmup,
            mode,
            warmup_seconds: 0.0,
            timed_seconds: 0.0,
            ..ProfileOptions::default()
        };
        let profiled = profile(&program, &state, &feeds, &options, Observers::default()).unwrap();
        assert_eq!((profiled.reps, profiled.warmup), (2, warmup), "{mode:?}: exactly as asked");
        assert_eq!(profiled.step_us.len(), 2);
        let measured = profiled.nodes;
        let graph = program.graph();
        assert_eq!(measured.len(), graph.nodes.len());
        for (m, node) in measured.iter().zip(&graph.nodes) {
            assert_eq!(m.name, node.name);
            assert!(m.time_us.is_finite() && m.time_us >= 0.0, "{}: {}", m.name, m.time_us);
            let bytes: Vec<u64> = node.outputs.iter().map(|f| f.bytes()).collect();
            assert_eq!(m.output_bytes, bytes, "{mode:?}: {}", m.name);
            assert_eq!(m.temporary_bytes, 0, "no meter, no temporary bytes");
        }
    }
}

#[test]
fn no_timed_call_and_a_missing_feed_are_errors() {
    let program = program("gnmt");
    let state = TrainState::new(&program, 1).unwrap();
    let mut feeds = synthetic_feeds(program.graph(), 1).unwrap();
    let options = ProfileOptions { reps: 0, ..ProfileOptions::default() };
    let err = profile(&program, &state, &feeds, &options, Observers::default()).unwrap_err();
    assert!(matches!(err, ExecError::Config(_)), "{err}");
    feeds.remove("tgt");
    let quick = ProfileOptions { warmup_seconds: 0.0, timed_seconds: 0.0, ..Default::default() };
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let options = ProfileOptions { timed_seconds: bad, ..quick };
        let err = profile(&program, &state, &feeds, &options, Observers::default()).unwrap_err();
        assert!(err.to_string().contains("timed time"), "{err}");
    }
    let err = profile(&program, &state, &feeds, &quick, Observers::default()).unwrap_err();
    assert!(matches!(&err, ExecError::Feed { name, .. } if name == "tgt"), "{err}");
}

#[test]
fn a_transfer_between_two_cpu_devices_costs_something_finite() {
    let link = ordo_exec::measure_link(3).unwrap();
    assert!(link.fixed_us.is_finite() && link.fixed_us >= 0.0, "{link:?}");
    assert!(link.us_per_byte.is_finite() && link.us_per_byte >= 0.0, "{link:?}");
    // A 4 MiB copy cannot be free: memory bandwidth is finite.
    assert!(link.time_us(4 << 20) > 0, "{link:?}");
}

/// Timed calls go on for `timed_seconds` (more than `reps`), each node's median is scaled so
/// that they add up to the median pass, and the spread is that of the passes; a progress
/// report sees every timed pass.
#[test]
fn a_timed_profile_makes_more_calls_and_adds_up_to_its_median_step() {
    let program = program("gnmt");
    let state = TrainState::new(&program, 2).unwrap();
    let feeds = synthetic_feeds(program.graph(), 2).unwrap();
    let options = ProfileOptions {
        reps: 3,
        warmup: 1,
        warmup_seconds: 0.05,
        timed_seconds: 0.2,
        ..ProfileOptions::default()
    };
    let seen = std::cell::Cell::new(0);
    let progress = |made: usize, planned: usize| {
        assert_eq!(planned, 3);
        seen.set(made);
    };
    let observers = Observers { heap: None, progress: Some(&progress) };
    let profiled = profile(&program, &state, &feeds, &options, observers).unwrap();
    assert!(profiled.reps > 3, "0.2 s of gnmt-small passes: {}", profiled.reps);
    assert_eq!(seen.get(), profiled.reps);
    assert_eq!(profiled.step_us.len(), profiled.reps);
    let mut steps = profiled.step_us.clone();
    steps.sort_by(f64::total_cmp);
    let median = steps[steps.len() / 2];
    let median =
        if steps.len() % 2 == 1 { median } else { (steps[steps.len() / 2 - 1] + median) / 2.0 };
    let sum: f64 = profiled.nodes.iter().map(|n| n.time_us).sum();
    assert!((sum - median).abs() <= 1e-6 * median, "{sum} vs {median}");
    assert_eq!(profiled.spread, ordo_exec::spread(&profiled.step_us));
    assert!(profiled.spread >= 0.0 && profiled.spread.is_finite());
}

/// The interquartile range over the median: 0 for equal values and fewer than four, and the
/// textbook value otherwise.
#[test]
fn spread_is_the_interquartile_range_over_the_median() {
    assert_eq!(ordo_exec::spread(&[5.0; 8]), 0.0);
    assert_eq!(ordo_exec::spread(&[1.0, 100.0, 3.0]), 0.0);
    // Sorted 1..=8: quartiles at indices 2 and 6 (3 and 7), median 4.5.
    let values: Vec<f64> = (1..=8).rev().map(f64::from).collect();
    assert!((ordo_exec::spread(&values) - 4.0 / 4.5).abs() < 1e-12);
}

/// Inputs of narrow types (held in a wider storage) get synthetic feeds of their storage, and
/// the profile counts the bytes the graph declares for them, not the storage's.
#[test]
fn narrow_types_are_fed_and_measured_at_their_declared_sizes() {
    use ordo_ir::{DType, GraphBuilder, Op, TensorFact};
    let mut b = GraphBuilder::new("narrow");
    let mut outputs = Vec::new();
    for (name, dtype) in [("half", DType::F16), ("nibble", DType::I4), ("byte", DType::F8E4M3FN)] {
        let x = b.input(name, TensorFact::new(dtype, [2, 3])).unwrap();
        outputs.push(b.op(&format!("{name}_twice"), Op::Add, &[x, x]).unwrap());
    }
    let flag = b.input("flag", TensorFact::new(DType::Bool, [2, 3])).unwrap();
    outputs.push(b.op("not", Op::Not, &[flag]).unwrap());
    for o in outputs {
        b.output(o);
    }
    let program = Program::new(b.finish()).unwrap();
    let state = TrainState::new(&program, 1).unwrap();
    let feeds = synthetic_feeds(program.graph(), 1).unwrap();
    let options = ProfileOptions { warmup_seconds: 0.0, timed_seconds: 0.0, ..Default::default() };
    let profiled = profile(&program, &state, &feeds, &options, Observers::default()).unwrap();
    for (m, node) in profiled.nodes.iter().zip(&program.graph().nodes) {
        let bytes: Vec<u64> = node.outputs.iter().map(|f| f.bytes()).collect();
        assert_eq!(m.output_bytes, bytes, "{}", m.name);
    }
    let half = profiled.nodes.iter().find(|m| m.name == "half_twice").unwrap();
    assert_eq!(half.output_bytes, [12], "six f16 elements");
}
