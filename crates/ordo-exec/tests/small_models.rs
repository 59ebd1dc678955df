//! Every zoo model's small variant trains with the sequential reference: a few steps on a fixed
//! synthetic batch lower the loss, and every loss and updated parameter stays finite.

use ordo_exec::cpu::Hyper;
use ordo_exec::sequential::run_step;
use ordo_exec::{Program, RunSettings, TrainState, synthetic_feeds};
use ordo_ir::OutletId;
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_models::Variant;

const STEPS: usize = 8;

fn losses(name: &str) -> Vec<f32> {
    let forward = ordo_models::build_variant(name, Variant::Small, None, None).unwrap();
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    let program = Program::new(training_graph(&forward, loss, Optimizer::Adam).unwrap()).unwrap();
    let mut state = TrainState::new(&program, 1).unwrap();
    let feeds = synthetic_feeds(program.graph(), 2).unwrap();
    let settings =
        RunSettings { hyper: Hyper { lr: 0.01, ..Hyper::default() }, ..Default::default() };
    (0..STEPS)
        .map(|_| {
            let out = run_step(&program, &mut state, &feeds, &settings)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for (t, o) in out.outputs.iter().zip(&program.graph().outputs) {
                let values = t.as_f32().unwrap_or(&[]);
                let node = &program.graph().node(o.node).name;
                assert!(values.iter().all(|v| v.is_finite()), "{name}: `{node}` is not finite");
            }
            out.loss().unwrap()
        })
        .collect()
}

#[test]
fn every_small_variant_learns_its_batch() {
    for spec in ordo_models::zoo() {
        let losses = losses(spec.name);
        let (first, last) = (losses[0], losses[STEPS - 1]);
        assert!(last < 0.8 * first, "{}: the loss does not fall: {losses:?}", spec.name);
    }
}

/// Benchmark: node count of each small variant's training graph and the median time of a
/// sequential training step (`cargo test -p ordo-exec --test small_models [--release] --
/// --ignored --nocapture`).
#[test]
#[ignore = "benchmark"]
fn small_variant_step_times() {
    for spec in ordo_models::zoo() {
        let forward = ordo_models::build_variant(spec.name, Variant::Small, None, None).unwrap();
        let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
        let program =
            Program::new(training_graph(&forward, loss, Optimizer::Adam).unwrap()).unwrap();
        let mut state = TrainState::new(&program, 1).unwrap();
        let feeds = synthetic_feeds(program.graph(), 2).unwrap();
        let settings = RunSettings::default();
        let mut times: Vec<f64> = (0..7)
            .map(|_| {
                let start = std::time::Instant::now();
                run_step(&program, &mut state, &feeds, &settings).unwrap();
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{:<20} forward nodes {:>4}  training nodes {:>5}  step {:>8.2} ms (median of 7)",
            spec.name,
            forward.nodes.len(),
            program.graph().nodes.len(),
            times[3]
        );
    }
}
