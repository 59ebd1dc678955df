//! The profiler: one measurement per node of a small zoo model's training graph, in graph
//! order, with the outputs' real sizes; bad options and feeds are errors.

use ordo_exec::{
    ExecError, ProfileMode, ProfileOptions, Program, TrainState, profile, synthetic_feeds,
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
        let options = ProfileOptions { reps: 2, warmup, mode, ..ProfileOptions::default() };
        let measured = profile(&program, &state, &feeds, &options, None).unwrap();
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
    let err = profile(&program, &state, &feeds, &options, None).unwrap_err();
    assert!(matches!(err, ExecError::Config(_)), "{err}");
    feeds.remove("tgt");
    let err = profile(&program, &state, &feeds, &ProfileOptions::default(), None).unwrap_err();
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
