//! Data parallelism over pipelines: one pipeline standing for its `D` copies (each stage's
//! gradients all-reduced among the stage's copies by symmetry) against the plan that holds
//! every copy, on every schedule; the order of the reductions; one copy.

use ordo_cost::{AllReduceAlgorithm, Cluster, Collectives, CommModel, StepMode};
use ordo_ir::OutletId;
use ordo_ir::op::Optimizer;
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{
    Pipeline, PipelineReplicas, PipelineSchedule, TaskKind, materialised_pipeline_plan,
    pipeline_plan, replicated_pipeline_plan, validate,
};
use ordo_sim::{SimOptions, simulate};

/// The small transformer's training graph (one micro-batch of 2), costed for an H100 node.
fn problem(stages: usize) -> PlaceProblem {
    let cluster = Cluster::builtin("h100x8-ib-ndr").unwrap();
    let small = ordo_models::Variant::Small;
    let forward = ordo_models::build_variant("transformer", small, Some(2), None).unwrap();
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    let graph = ordo_ir::training::training_graph(&forward, loss, Optimizer::Adam).unwrap();
    let costed = ordo_cost::costgraph_for_cluster(&graph, &cluster);
    let devices = Devices { memory: vec![u64::MAX / 4; stages], comm: cluster.comm(0, 1) };
    PlaceProblem::new(&costed, devices, StepMode::TrainingGraph).unwrap()
}

fn replicas(replicas: usize, network: Collectives, bucket_bytes: u64) -> PipelineReplicas {
    PipelineReplicas { replicas, network, bucket_bytes }
}

#[test]
fn one_pipeline_by_symmetry_simulates_what_every_copy_materialised_does() {
    let problem = problem(4);
    let options = SimOptions::default();
    // Two copies of a 4-stage pipeline to a node of eight, the largest group's layout for all.
    let nodes = Cluster::builtin("h100x8-ib-ndr").unwrap().collectives(64, 4);
    // A slow network, so that the all-reduces weigh on the step.
    let slow = Collectives::flat(CommModel { us_per_byte: 0.01, fixed_us: 20.0 });
    let networks = [slow, nodes.with_algorithm(AllReduceAlgorithm::Nccl)];
    for schedule in PipelineSchedule::ALL {
        let pipeline = Pipeline::new(4, 4, schedule);
        for copies in [2, 3, 8, 64] {
            for (network, bucket_bytes) in [(networks[0], 0), (networks[1], 64 << 10)] {
                let config = replicas(copies, network, bucket_bytes);
                let label = format!("{} x{copies}, {network}", schedule.name());
                let one = replicated_pipeline_plan(&problem, &pipeline, &config).unwrap();
                validate(&one.plan).unwrap();
                assert_eq!(one.plan.devices, 4, "{label}");
                let all = materialised_pipeline_plan(&problem, &pipeline, &config).unwrap();
                assert_eq!(all.devices, 4 * copies, "{label}");
                let (one, all) =
                    (simulate(&one.plan, &options).unwrap(), simulate(&all, &options).unwrap());
                assert_eq!(one.step_time_us, all.step_time_us, "{label}");
                for (d, &peak) in all.peak_memory_bytes.iter().enumerate() {
                    assert_eq!(peak, one.peak_memory_bytes[d % 4], "{label}: device {d}");
                }
            }
        }
    }
}

#[test]
fn each_stage_reduces_its_own_gradients_once_and_its_updates_wait() {
    let problem = problem(4);
    let pipeline = Pipeline::new(4, 4, PipelineSchedule::OneFOneB);
    let slow = Collectives::flat(CommModel { us_per_byte: 0.01, fixed_us: 20.0 });
    let planned = replicated_pipeline_plan(&problem, &pipeline, &replicas(16, slow, 0)).unwrap();
    let plain = pipeline_plan(&problem, &pipeline).unwrap();
    let report = simulate(&planned.plan, &SimOptions::default()).unwrap();
    let plan = &planned.plan;
    let split = &planned.split.problem;
    let updates = (0..split.len()).filter(|&v| split.roles[v] == ordo_ir::Role::Update).count();
    let mut reduced = Vec::new();
    let mut first_start = vec![f64::INFINITY; 4];
    for (t, task) in plan.tasks.iter().enumerate() {
        let TaskKind::AllReduce { buffers, replicas } = &task.kind else { continue };
        assert_eq!(*replicas, Some(16));
        assert_eq!(task.streams.len(), 1);
        let device = plan.streams[task.streams[0].0 as usize].device;
        for &b in buffers {
            let buffer = &plan.buffers[b.0 as usize];
            assert_eq!(buffer.device, device, "{}", task.name);
            reduced.push(b);
            let timing = &report.tasks;
            assert!(timing[buffer.producer.0 as usize].finish_us <= timing[t].start_us);
            for &reader in buffer.readers.iter().filter(|&&r| r.0 as usize != t) {
                assert!(timing[t].finish_us <= timing[reader.0 as usize].start_us, "{}", task.name);
            }
        }
        first_start[device] = first_start[device].min(report.tasks[t].start_us);
        assert_eq!(task.duration_us, slow.all_reduce_us(16, task_bytes(plan, buffers)));
    }
    reduced.sort_unstable();
    let count = reduced.len();
    reduced.dedup();
    assert_eq!(reduced.len(), count, "a gradient reduced twice");
    // Every update reads reduced gradients: as many as the plain pipeline's update inputs.
    assert!(count >= updates, "{count} gradients for {updates} updates");
    // 1F1B: the last stage finishes its backward first and reduces first; stage 0 last.
    assert!(first_start[3] < first_start[0], "{first_start:?}");
    // On this slow network the reductions lengthen the step.
    let alone = simulate(&plain.plan, &SimOptions::default()).unwrap();
    assert!(
        alone.step_time_us < report.step_time_us,
        "{} {}",
        alone.step_time_us,
        report.step_time_us
    );
    // One copy is the plain pipeline's plan.
    let one = replicated_pipeline_plan(&problem, &pipeline, &replicas(1, slow, 0)).unwrap();
    assert_eq!(one.plan, plain.plan);
}

fn task_bytes(plan: &ordo_sched::Plan, buffers: &[ordo_sched::BufferId]) -> u64 {
    buffers.iter().map(|b| plan.buffers[b.0 as usize].bytes).sum()
}
