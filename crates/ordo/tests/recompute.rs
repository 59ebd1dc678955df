//! Activation recomputation: the recomputed training step trains bitwise as the one that keeps
//! its activations (the same kernels on the same values), holds less at its peak and takes
//! longer by the recomputed forward work; selective recomputation copies exactly the
//! attention's square tensors.

use ordo::{
    EngineOptions, Model, OneDeviceSchedule, Optimizer, Problem, Recompute, Runner, Size, StepMode,
    Strategy, Target,
};

const SPEC: &str = "llama:layers=3,hidden=32,heads=4,intermediate=64,vocab=50";

fn training(recompute: Recompute) -> Model {
    // Long sequences of narrow blocks: the activations, not the parameters, fill the memory.
    let size = Size { batch: Some(2), seq_len: Some(64), ..Size::default() };
    let model = Model::load(SPEC, size).unwrap().training(Optimizer::Adam, None).unwrap();
    model.with_recompute(recompute).unwrap()
}

fn problem(model: &Model) -> Problem {
    let target = Target::uniform(1, u64::MAX).unwrap();
    Problem::new(model, &target, StepMode::TrainingGraph).unwrap()
}

/// Losses and parameters after three steps.
fn train(model: &Model) -> (Vec<f32>, Vec<Vec<f32>>) {
    let problem = problem(model);
    let planned = ordo::plan(&problem, &Strategy::OneDevice(OneDeviceSchedule::InOrder)).unwrap();
    let mut runner = Runner::new(&problem, &planned, EngineOptions::default()).unwrap();
    let losses = (0..3).flat_map(|_| runner.step().unwrap().losses).collect();
    let params = runner.state().params.iter().map(|p| p.as_f32().unwrap().to_vec()).collect();
    (losses, params)
}

fn forward_nodes_in_blocks(model: &Model) -> usize {
    let graph = model.graph().unwrap();
    let sources = |op: &ordo_ir::Op| matches!(op, ordo_ir::Op::Input | ordo_ir::Op::Parameter);
    graph
        .nodes
        .iter()
        .filter(|n| n.role == ordo_ir::Role::Forward && !sources(&n.op))
        .filter(|n| ordo_sched::block_of(&n.name).is_some())
        .count()
}

#[test]
fn a_recomputed_step_trains_bitwise_as_the_kept_one() {
    let kept = training(Recompute::None);
    let (want_losses, want_params) = train(&kept);
    assert!(want_losses.iter().all(|l| l.is_finite()));
    assert!(want_losses[2] < want_losses[0], "{want_losses:?}");
    let blocks = forward_nodes_in_blocks(&kept);
    for recompute in [Recompute::Selective, Recompute::Full] {
        let model = training(recompute);
        let graph = model.graph().unwrap();
        ordo_ir::validate(graph).unwrap();
        let added = graph.nodes.len() - kept.graph().unwrap().nodes.len();
        let copies = graph.nodes.iter().filter(|n| n.name.ends_with(".recompute")).count();
        assert_eq!(added, copies);
        match recompute {
            // Per block: the scores' product, their scaling, the causal mask and the softmax.
            Recompute::Selective => assert_eq!(copies, 3 * 4),
            _ => assert_eq!(copies, blocks),
        }
        let (losses, params) = train(&model);
        assert_eq!(losses, want_losses, "{recompute:?}");
        assert_eq!(params, want_params, "{recompute:?}");
    }
}

#[test]
fn recomputation_trades_time_for_memory() {
    let simulate = |recompute| {
        let model = training(recompute);
        let problem = problem(&model);
        let planned =
            ordo::plan(&problem, &Strategy::OneDevice(OneDeviceSchedule::InOrder)).unwrap();
        let report = ordo::simulate(&planned, &Default::default()).unwrap();
        (report.step_time_us, report.peak_memory_bytes[0], problem)
    };
    let (none_us, none_peak, none) = simulate(Recompute::None);
    let (selective_us, selective_peak, _) = simulate(Recompute::Selective);
    let (full_us, full_peak, _) = simulate(Recompute::Full);
    assert!(
        full_peak < selective_peak && selective_peak < none_peak,
        "{full_peak} {selective_peak} {none_peak}"
    );
    assert!(none_us < selective_us && selective_us < full_us, "{none_us} {selective_us} {full_us}");
    // One device runs everything in turn: full recomputation adds exactly the blocks'
    // forward work once more.
    // (Problem node v is graph node v.)
    let graph = none.model.graph().unwrap();
    let sources = |op: &ordo_ir::Op| matches!(op, ordo_ir::Op::Input | ordo_ir::Op::Parameter);
    let blocks: u64 = graph
        .nodes
        .iter()
        .filter(|n| n.role == ordo_ir::Role::Forward && !sources(&n.op))
        .filter(|n| ordo_sched::block_of(&n.name).is_some())
        .map(|n| none.place.weights[n.id.index()])
        .sum();
    assert_eq!(full_us - none_us, blocks as f64);
}

#[test]
fn a_forward_graph_or_a_cost_graph_is_refused() {
    let size = Size { batch: Some(2), seq_len: Some(8), ..Size::default() };
    let forward = Model::load(SPEC, size).unwrap();
    let error = forward.with_recompute(Recompute::Full).unwrap_err().to_string();
    assert!(error.contains("training graph"), "{error}");
}

#[test]
fn selective_recomputation_takes_the_probabilities_dropout_too() {
    // GPT-2 drops out the attention's probabilities: selective recomputation copies that
    // dropout with the scores' product, scaling, mask and softmax, and nothing else.
    let size = Size { batch: Some(2), seq_len: Some(8), ..Size::default() };
    let model = Model::load("gpt2:layers=2,hidden=32,heads=4,vocab=50", size)
        .unwrap()
        .training(Optimizer::Adam, None)
        .unwrap()
        .with_recompute(Recompute::Selective)
        .unwrap();
    let graph = model.graph().unwrap();
    let mut copied: Vec<&str> = graph
        .nodes
        .iter()
        .filter_map(|n| n.name.strip_suffix(".recompute"))
        .filter_map(|name| name.strip_prefix("transformer.h.0.attn."))
        .collect();
    copied.sort_unstable();
    assert_eq!(copied, ["attn_dropout", "causal_mask", "scale", "scores", "softmax"]);
    let all = graph.nodes.iter().filter(|n| n.name.ends_with(".recompute")).count();
    assert_eq!(all, 2 * 5);
}
