//! Pipelines planned per block against the node-level plans they stand for: the same stages,
//! a step within 2%, peaks at most 0.5% lower (a merged node's sends arrive later) and
//! at most 10% higher, for every schedule.

use ordo::{
    Granularity, Model, Optimizer, Pipeline, PipelineSchedule, Problem, Size, StepMode, Target,
};
use ordo_sim::SimOptions;

/// One micro-batch of zoo model `model` in bf16 on `stages` H100s of a node.
fn problem(model: &str, stages: usize) -> Problem {
    let model = Model::zoo(model, Size::default().with_batch(1)).expect("zoo model");
    let training = model.training(Optimizer::Adam, None).expect("training graph");
    let training = training.in_precision(ordo::Precision::Bf16).expect("bf16");
    let h100 = ordo::cluster("h100x8-nvlink").expect("cluster");
    let target = Target::cluster(h100, Some(stages)).expect("target");
    Problem::new(&training, &target, StepMode::TrainingGraph).expect("problem")
}

fn simulate(problem: &Problem, pipeline: Pipeline) -> ordo::PipelineReport {
    ordo::simulate_pipeline(problem, &pipeline, &SimOptions::default()).expect("simulated").1
}

#[test]
fn a_pipeline_per_block_predicts_what_the_node_level_plan_does() {
    for (model, stages) in [("gpt2_small", 4), ("bert_base", 3), ("resnet50", 4)] {
        let problem = problem(model, stages);
        for schedule in PipelineSchedule::ALL {
            for micro_batches in [4, 8] {
                let label = format!("{model}, {} x {micro_batches}", schedule.name());
                let pipeline = Pipeline::new(stages, micro_batches, schedule);
                let node = simulate(&problem, pipeline.with_granularity(Granularity::Node));
                let block = simulate(&problem, pipeline.with_granularity(Granularity::Block));
                assert!(!node.per_block && block.per_block, "{label}");
                assert_eq!(block.stage_of_unit, node.stage_of_unit, "{label}");
                let error = block.step_time_us / node.step_time_us - 1.0;
                assert!(error.abs() < 0.02, "{label}: step {:+.2}%", error * 100.0);
                for (s, (&b, &n)) in
                    block.peak_memory_bytes.iter().zip(&node.peak_memory_bytes).enumerate()
                {
                    let over = b as f64 / n as f64 - 1.0;
                    assert!((-0.005..0.10).contains(&over), "{label}: stage {s} peak {over:+.3}");
                }
            }
        }
    }
}

#[test]
fn auto_plans_per_block_past_its_task_count_and_a_run_per_node() {
    let problem = problem("gpt2_small", 2);
    let nodes = problem.place.len();
    let below = Granularity::AUTO_TASKS / nodes;
    let pipeline = |m: usize| Pipeline::new(2, m, PipelineSchedule::OneFOneB);
    assert!(!pipeline(below).per_block(&problem.place));
    assert!(pipeline(below + 1).per_block(&problem.place));
    assert!(!pipeline(below + 1).with_granularity(Granularity::Node).per_block(&problem.place));
    // A plan to run has a kernel per task: planned per node whatever the granularity asked.
    let strategy = ordo::Strategy::Pipeline(pipeline(4).with_granularity(Granularity::Block));
    let planned = ordo::plan(&problem, &strategy).expect("plan");
    let split = planned.micro_batched.expect("a pipeline's micro-batches");
    let per_node = ordo_sched::micro_batch(&problem.place, 4).expect("micro-batches");
    assert_eq!(split.problem.names, per_node.problem.names);
}
