//! Pipelines run: every schedule, contiguous and modulo allocation, on the engine gives
//! bitwise the losses, parameters and optimizer state of the sequential reference that runs
//! the same micro-batches one after the other and accumulates their gradients in the same
//! order.

use ordo::{
    EngineOptions, Model, Optimizer, Pipeline, PipelineSchedule, Problem, Runner, Size, StepMode,
    Strategy, Target,
};
use ordo_exec::{RunSettings, TrainState, sequential};

const STEPS: usize = 3;

fn problem(model: &str, micro_batches: usize, stages: usize) -> Problem {
    // Small variants run at batch 2 by default; the pipeline's global batch is
    // 2 * micro_batches, so that each micro-batch is the small default.
    let model = Model::zoo(model, Size::small()).expect("zoo model");
    let training = model.training(Optimizer::SgdMomentum, None).expect("training graph");
    let cpu = ordo::cluster("cpu").expect("the shipped cpu cluster");
    let target = Target::uniform(stages, u64::MAX).expect("devices").costed_by(cpu);
    let _ = micro_batches;
    Problem::new(&training, &target, StepMode::TrainingGraph).expect("problem")
}

/// Runs `pipeline` on the engine and the sequential reference and compares them bitwise.
fn check(model: &str, pipeline: Pipeline) {
    let label = format!(
        "{model}: {} stages, {} micro-batches, {}, modulo {:?}",
        pipeline.stages,
        pipeline.micro_batches,
        pipeline.schedule.name(),
        pipeline.modulo
    );
    let problem = problem(model, pipeline.micro_batches, pipeline.stages);
    let planned = ordo::plan(&problem, &Strategy::Pipeline(pipeline)).expect(&label);
    let options = EngineOptions::default();
    let settings: RunSettings = options.settings;
    let mut runner = Runner::new(&problem, &planned, options).expect(&label);
    let program = runner.program().clone();
    let feeds = runner.feeds()[0].clone();
    let mut reference = TrainState::new(&program, settings.seed).expect(&label);
    for step in 1..=STEPS {
        let ran = runner.step().unwrap_or_else(|e| panic!("{label}, step {step}: {e}"));
        let expected = sequential::run_step(&program, &mut reference, &feeds, &settings)
            .unwrap_or_else(|e| panic!("{label}, reference step {step}: {e}"));
        // Every output (a loss per micro-batch first) equal to the reference's.
        let outputs = &ran.run.outputs[0].outputs;
        assert_eq!(outputs.len(), expected.outputs.len(), "{label}");
        for (k, (got, want)) in outputs.iter().zip(&expected.outputs).enumerate() {
            assert_eq!(got.as_f32(), want.as_f32(), "{label}, step {step}: output {k} differs");
        }
        for loss in &outputs[..pipeline.micro_batches] {
            assert_eq!(loss.shape(), &[] as &[usize], "{label}: a loss is a scalar");
        }
        assert!(ran.loss.is_finite(), "{label}, step {step}: loss {}", ran.loss);
    }
    let state = runner.state();
    assert_eq!(state.step, reference.step, "{label}");
    for (p, (got, want)) in state.params.iter().zip(&reference.params).enumerate() {
        assert_eq!(got.as_f32(), want.as_f32(), "{label}: parameter {p} differs");
    }
    assert_eq!(state.slots, reference.slots, "{label}: optimizer state differs");
}

#[test]
fn every_pipeline_schedule_runs_bitwise_equal_to_the_sequential_reference() {
    for model in ["bert_base", "gpt2_small", "gnmt", "resnet50"] {
        for schedule in PipelineSchedule::ALL {
            check(model, Pipeline::new(2, 3, schedule));
        }
    }
}

#[test]
fn modulo_allocation_and_dw_on_a_sub_stream_run_too() {
    for schedule in PipelineSchedule::ALL {
        check("bert_base", Pipeline::new(2, 2, schedule).with_modulo(1));
        check("transformer", Pipeline::new(2, 4, schedule).with_dw_on_sub_stream());
    }
}

/// Fed the same batch to both of its micro-batches, a 2-micro-batch pipeline computes each
/// gradient as `g/2 + g/2`, which is `g` exactly (halving is exact in floating point, and so
/// is adding two equal halves): its step must update the parameters bitwise as one step of the
/// unsplit graph on that batch does. An independent check of the micro-batching, the gradient
/// accumulation and the loss scaling (ResNet-50: no dropout, whose masks differ per copy).
#[test]
fn two_micro_batches_of_one_batch_step_exactly_as_the_unsplit_graph() {
    use ordo_exec::{Executable, Program, copied_feeds, synthetic_feeds};

    let problem = problem("resnet50", 2, 2);
    let graph = problem.model.graph().expect("a zoo model has a graph").clone();
    let settings = RunSettings::default();
    let whole = Program::new(graph.clone()).expect("program");
    let feeds = synthetic_feeds(&graph, 7).expect("feeds");
    let mut expected = TrainState::new(&whole, 0).expect("state");
    sequential::run_step(&whole, &mut expected, &feeds, &settings).expect("reference step");

    for schedule in PipelineSchedule::ALL {
        let pipeline = Pipeline::new(2, 2, schedule);
        let planned = ordo::plan(&problem, &Strategy::Pipeline(pipeline)).expect("plan");
        let program = ordo::program(&graph, &planned).expect("micro-batched program");
        // Each input's copy for micro-batch m (by provenance) gets the batch.
        let doubled = copied_feeds(&graph, program.graph(), program.provenance(), &feeds);
        assert_eq!(doubled.len(), 2 * feeds.len());
        let exe = Executable::new(program.clone(), &planned.plan, EngineOptions::default())
            .expect("bind");
        let mut state = TrainState::new(&program, 0).expect("state");
        let run = exe.run_step(&mut state, &[doubled]).expect("pipeline step");
        let loss = run.outputs[0].outputs[0].as_f32().map(<[f32]>::to_vec);
        assert_eq!(loss, run.outputs[0].outputs[1].as_f32().map(<[f32]>::to_vec));
        for (p, (got, want)) in state.params.iter().zip(&expected.params).enumerate() {
            let name = &graph.params[p].name;
            assert_eq!(got.as_f32(), want.as_f32(), "{}: {name} differs", schedule.name());
        }
    }
}

/// The micro-batched problem and the micro-batched graph are laid out by one rule: for every
/// zoo model's training graph, each node of the problem copies the same node, for the same
/// micro-batch, as the graph's node of the same index (what the runtime binds them by), and
/// a plan made for another graph is refused.
#[test]
fn micro_batched_problems_and_graphs_have_one_provenance() {
    for spec in ordo_models::zoo() {
        let problem = problem(spec.name, 3, 1);
        let graph = problem.model.graph().expect("a zoo model has a graph");
        for m in [1, 3] {
            let split = ordo_sched::micro_batch(&problem.place, m).expect(spec.name);
            let copied = ordo_ir::transform::micro_batch(graph, m).expect(spec.name);
            assert_eq!(split.provenance, copied.provenance, "{}, {m} micro-batches", spec.name);
            let names: Vec<&str> = copied.graph.nodes.iter().map(|n| n.name.as_str()).collect();
            assert_eq!(split.problem.names, names, "{}, {m} micro-batches", spec.name);
        }
    }
    let gpt2 = problem("gpt2_small", 2, 2);
    let planned =
        ordo::plan(&gpt2, &Strategy::Pipeline(Pipeline::new(2, 2, PipelineSchedule::OneFOneB)))
            .expect("plan");
    let other = problem("bert_base", 2, 2);
    let Err(err) = ordo::program(other.model.graph().unwrap(), &planned) else {
        panic!("a plan of gpt2_small's micro-batches ran bert_base's graph");
    };
    assert!(err.to_string().contains("was not made from"), "{err}");
}
