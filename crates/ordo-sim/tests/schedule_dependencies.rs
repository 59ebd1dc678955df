//! Every training schedule respects every dependency of the graph it runs: on random training
//! graphs and on every zoo model, for one-device (in order, out of order, with deferral) and
//! data-parallel plans (with reverse first-k and buckets), each edge's consumer starts after its
//! producer has finished, on every device, in the simulated timeline.

use std::collections::HashMap;

use ordo_cost::{Cluster, CommModel, StepMode};
use ordo_ir::op::Optimizer;
use ordo_ir::{DType, Graph, GraphBuilder, OutletId, TensorFact};
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::{
    DataParallel, OneDeviceSchedule, Plan, TaskKind, data_parallel_plan, steady_plan, unroll,
};
use ordo_sim::{SimOptions, layers_with_weights, simulate};
use proptest::prelude::*;

/// A random model: Linear layers of width 8, ReLUs and residual Adds over earlier values
/// (`picks[i]` chooses node i's kind and inputs), then a Linear to 3 classes and the loss.
fn random_model(picks: &[(u8, usize, usize)]) -> (Graph, OutletId) {
    let mut b = GraphBuilder::new("random");
    let mut values = vec![b.input("x", TensorFact::f32([4, 8])).unwrap()];
    for (i, &(kind, p, q)) in picks.iter().enumerate() {
        let a = values[p % values.len()];
        let name = format!("n{i}");
        let out = match kind % 3 {
            0 => b.linear(&name, a, 8),
            1 => b.relu(&name, a),
            _ => b.add(&name, a, values[q % values.len()]),
        };
        values.push(out.unwrap());
    }
    let last = *values.last().unwrap();
    let logits = b.linear("head", last, 3).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [4])).unwrap();
    let loss = b.cross_entropy("loss", logits, labels).unwrap();
    b.output(loss);
    (b.finish(), loss)
}

fn problem_of(forward: &Graph, loss: OutletId) -> PlaceProblem {
    let graph = ordo_ir::training::training_graph(forward, loss, Optimizer::Adam).unwrap();
    let cluster = Cluster::builtin("a100x4-nvlink").unwrap();
    let costed = ordo_cost::costgraph_for_cluster(&graph, &cluster);
    let devices = Devices { memory: vec![u64::MAX / 4], comm: cluster.comm(0, 1) };
    PlaceProblem::new(&costed, devices, StepMode::TrainingGraph).unwrap()
}

/// Checks that in `plan`, simulated with `options`, every edge of `problem` unrolled over
/// `steps` steps is respected on every device that runs the graph.
fn assert_dependencies_kept(
    problem: &PlaceProblem,
    plan: &Plan,
    steps: usize,
    options: &SimOptions,
) -> Result<(), TestCaseError> {
    let unrolled = unroll(problem, steps).unwrap();
    let report = simulate(plan, options).unwrap();
    let mut timing: HashMap<(usize, &str), (f64, f64)> = HashMap::new();
    for (t, task) in plan.tasks.iter().enumerate() {
        if let TaskKind::Compute { node, .. } = &task.kind {
            let device = plan.streams[task.streams[0].0 as usize].device;
            let span = (report.tasks[t].start_us, report.tasks[t].finish_us);
            prop_assert!(timing.insert((device, node.as_str()), span).is_none());
        }
    }
    prop_assert_eq!(timing.len(), plan.devices * unrolled.len());
    for device in 0..plan.devices {
        for edge in &unrolled.edges {
            let source = timing[&(device, unrolled.names[edge.source].as_str())];
            let target = timing[&(device, unrolled.names[edge.target].as_str())];
            prop_assert!(
                source.1 <= target.0,
                "device {device}: `{}` ends at {} after `{}` starts at {}",
                unrolled.names[edge.source],
                source.1,
                unrolled.names[edge.target],
                target.0
            );
        }
    }
    Ok(())
}

/// The first `k` layers with weights of `problem` marked deferred.
fn first(problem: &PlaceProblem, k: usize) -> Vec<bool> {
    let mut deferred = vec![false; problem.len()];
    for &layer in layers_with_weights(problem).iter().take(k) {
        deferred[layer] = true;
    }
    deferred
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn one_device_schedules_keep_every_dependency(
        picks in prop::collection::vec((0u8..3, 0usize..32, 0usize..32), 1..24),
        deferral in prop::collection::vec(any::<bool>(), 32),
        concurrent_kernels in any::<bool>(),
    ) {
        let (forward, loss) = random_model(&picks);
        let problem = problem_of(&forward, loss);
        let layers = layers_with_weights(&problem);
        let mut deferred = vec![false; problem.len()];
        for (i, &layer) in layers.iter().enumerate() {
            deferred[layer] = deferral[i % deferral.len()];
        }
        let options = SimOptions { concurrent_kernels, ..SimOptions::default() };
        for steps in [1, 2] {
            let none = vec![false; problem.len()];
            let inorder = steady_plan(&problem, OneDeviceSchedule::InOrder, &none, steps).unwrap();
            assert_dependencies_kept(&problem, &inorder, steps, &options)?;
            let ooo = steady_plan(&problem, OneDeviceSchedule::Ooo, &deferred, steps).unwrap();
            assert_dependencies_kept(&problem, &ooo, steps, &options)?;
        }
    }

    #[test]
    fn data_parallel_schedules_keep_every_dependency(
        picks in prop::collection::vec((0u8..3, 0usize..32, 0usize..32), 1..24),
        replicas in 2usize..4,
        k in 0usize..16,
        bucket_bytes in prop::sample::select(vec![0u64, 256, 1 << 20]),
        ooo in any::<bool>(),
    ) {
        let (forward, loss) = random_model(&picks);
        let problem = problem_of(&forward, loss);
        let first_k = k % (layers_with_weights(&problem).len() + 1);
        let schedule = if ooo { OneDeviceSchedule::Ooo } else { OneDeviceSchedule::InOrder };
        let config = DataParallel {
            replicas,
            network: CommModel { us_per_byte: 0.01, fixed_us: 5.0 }.into(),
            bucket_bytes,
            first_k,
            schedule,
        };
        let options = SimOptions { concurrent_kernels: ooo, ..SimOptions::default() };
        for steps in [1, 2] {
            let plan = data_parallel_plan(&problem, &config, steps).unwrap();
            assert_dependencies_kept(&problem, &plan, steps, &options)?;
        }
    }
}

#[test]
fn every_zoo_model_keeps_its_dependencies_under_every_schedule() {
    for spec in ordo_models::zoo() {
        let forward = ordo_models::build(spec.name, Some(2), None).unwrap();
        let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
        let problem = problem_of(&forward, loss);
        let half = layers_with_weights(&problem).len() / 2;
        let options = SimOptions { concurrent_kernels: true, ..SimOptions::default() };
        let ooo = steady_plan(&problem, OneDeviceSchedule::Ooo, &first(&problem, half), 2).unwrap();
        assert_dependencies_kept(&problem, &ooo, 2, &options).unwrap();
        let config = DataParallel {
            replicas: 2,
            network: CommModel { us_per_byte: 0.001, fixed_us: 25.0 }.into(),
            bucket_bytes: 1 << 20,
            first_k: half,
            schedule: OneDeviceSchedule::InOrder,
        };
        let plan = data_parallel_plan(&problem, &config, 2).unwrap();
        assert_dependencies_kept(&problem, &plan, 2, &SimOptions::default()).unwrap();
    }
}
