//! Random training graphs x pipeline schedules x stage counts x allocations, run on the engine
//! under a watchdog: every run ends (no deadlock), and its losses and parameters are bitwise
//! those of the sequential reference over the same micro-batches.

use std::sync::mpsc;
use std::time::Duration;

use ordo::{
    EngineOptions, Model, Optimizer, Pipeline, PipelineSchedule, Problem, Runner, StepMode,
    Strategy, Target,
};
use ordo_exec::{TrainState, sequential};
use ordo_ir::{DType, Graph, GraphBuilder, TensorFact};

/// Runs per test: each a random graph, schedule, stage count, micro-batch count and allocation.
const RUNS: u64 = 400;

/// An MLP of `blocks` numbered blocks (`block.{i}`: a linear layer, maybe a ReLU, maybe a
/// residual from an earlier block), between an embedding layer and a head with its loss.
fn random_graph(rng: &mut fastrand::Rng, blocks: usize, batch: usize) -> Graph {
    let mut b = GraphBuilder::new("random");
    let x = b.input("x", TensorFact::f32([batch, 8])).unwrap();
    let mut h = b.linear("embed", x, 8).unwrap();
    let mut outs = vec![h];
    for i in 0..blocks {
        h = b.linear(&format!("block.{i}.fc"), h, 8).unwrap();
        if rng.bool() {
            h = b.relu(&format!("block.{i}.relu"), h).unwrap();
        }
        if rng.u8(..4) == 0 {
            let earlier = outs[rng.usize(..outs.len())];
            h = b.add(&format!("block.{i}.residual"), h, earlier).unwrap();
        }
        outs.push(h);
    }
    let logits = b.linear("head", h, 3).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [batch])).unwrap();
    let loss = b.cross_entropy("loss", logits, labels).unwrap();
    b.output(loss);
    b.finish()
}

/// One random run; `Err` names what differed.
fn one_run(seed: u64) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let stages = rng.usize(2..=4);
    let blocks = stages + rng.usize(0..4);
    let schedule = PipelineSchedule::ALL[rng.usize(..PipelineSchedule::ALL.len())];
    let mut pipeline = Pipeline::new(stages, rng.usize(1..=5), schedule);
    if rng.bool() && blocks + 2 >= 2 * stages {
        pipeline = pipeline.with_modulo(1);
    }
    if rng.bool() {
        pipeline = pipeline.with_dw_on_sub_stream();
    }
    let label = format!("run {seed}: {blocks} blocks, {pipeline:?}");
    let batch = rng.usize(1..=3);
    let graph = random_graph(&mut rng, blocks, batch);
    let optimizer = [Optimizer::Sgd, Optimizer::SgdMomentum, Optimizer::Adam][rng.usize(..3)];
    let training = Model::from_graph(graph).training(optimizer, None).map_err(|e| e.to_string())?;
    let target = Target::uniform(stages, u64::MAX).map_err(|e| e.to_string())?;
    let problem = Problem::new(&training, &target, StepMode::TrainingGraph)
        .map_err(|e| format!("{label}: {e}"))?;
    let planned =
        ordo::plan(&problem, &Strategy::Pipeline(pipeline)).map_err(|e| format!("{label}: {e}"))?;
    let options = EngineOptions { workers_per_device: rng.usize(1..=2), ..Default::default() };
    let settings = options.settings;
    let mut runner =
        Runner::new(&problem, &planned, options).map_err(|e| format!("{label}: {e}"))?;
    let program = runner.program().clone();
    let feeds = runner.feeds()[0].clone();
    let mut reference = TrainState::new(&program, settings.seed).map_err(|e| e.to_string())?;
    for step in 0..2 {
        let ran = runner.step().map_err(|e| format!("{label}, step {step}: {e}"))?;
        let want = sequential::run_step(&program, &mut reference, &feeds, &settings)
            .map_err(|e| format!("{label}: {e}"))?;
        let got: Vec<_> = ran.run.outputs[0].outputs.iter().map(|t| t.as_f32()).collect();
        let want: Vec<_> = want.outputs.iter().map(|t| t.as_f32()).collect();
        if got != want {
            return Err(format!("{label}, step {step}: outputs differ"));
        }
    }
    let same =
        runner.state().params.iter().zip(&reference.params).all(|(a, b)| a.as_f32() == b.as_f32());
    if !same || runner.state().slots != reference.slots {
        return Err(format!("{label}: parameters or optimizer state differ"));
    }
    Ok(())
}

#[test]
fn random_pipelines_all_end_and_match_the_reference() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for seed in 0..RUNS {
            if tx.send((seed, one_run(seed))).is_err() {
                return;
            }
        }
    });
    for expected in 0..RUNS {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok((seed, result)) => {
                assert_eq!(seed, expected);
                if let Err(e) = result {
                    panic!("{e}");
                }
            }
            Err(e) => panic!("run {expected} did not end within 30 s ({e}): a deadlock?"),
        }
    }
}
