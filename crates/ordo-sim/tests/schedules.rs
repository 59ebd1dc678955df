//! One-device training schedules in their steady state, and the deferral the simulator picks.

use ordo_cost::{Cluster, StepMode};
use ordo_ir::OutletId;
use ordo_ir::op::Optimizer;
use ordo_place::{Devices, PlaceProblem};
use ordo_sched::OneDeviceSchedule;
use ordo_sim::{SimOptions, choose_deferral, steady_state};

/// MobileNet-V3 (batch 4)'s training graph costed for an A100, on one device with `memory`.
fn mobilenet(memory: u64) -> PlaceProblem {
    let forward = ordo_models::build("mobilenet_v3_large", Some(4), None).unwrap();
    let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
    let graph = ordo_ir::training::training_graph(&forward, loss, Optimizer::SgdMomentum).unwrap();
    let cluster = Cluster::builtin("a100x4-nvlink").unwrap();
    let costed = ordo_cost::costgraph_for_cluster(&graph, &cluster);
    let devices = Devices { memory: vec![memory], comm: cluster.comm(0, 1) };
    PlaceProblem::new(&costed, devices, StepMode::TrainingGraph).unwrap()
}

const SHARED: SimOptions =
    SimOptions { concurrent_kernels: true, channel: ordo_sim::Channel::BaechiTf };

#[test]
fn one_kernel_at_a_time_every_schedule_takes_the_work_of_a_step() {
    let problem = mobilenet(u64::MAX / 4);
    let work: u64 = problem.weights.iter().sum();
    let none = vec![false; problem.len()];
    let exclusive = SimOptions::default();
    for schedule in [OneDeviceSchedule::InOrder, OneDeviceSchedule::Ooo] {
        let steady = steady_state(&problem, schedule, &none, &exclusive).unwrap();
        assert_eq!(steady.step_time_us, work as f64, "{schedule:?}");
    }
}

#[test]
fn ooo_is_faster_when_kernels_share_the_device_and_deferral_respects_memory() {
    let problem = mobilenet(u64::MAX / 4);
    let none = vec![false; problem.len()];
    let inorder = steady_state(&problem, OneDeviceSchedule::InOrder, &none, &SHARED).unwrap();
    let ooo = steady_state(&problem, OneDeviceSchedule::Ooo, &none, &SHARED).unwrap();
    assert!(ooo.step_time_us < 0.95 * inorder.step_time_us, "{ooo:?} vs {inorder:?}");

    let choice = choose_deferral(&problem, &SHARED, 9).unwrap();
    assert_eq!(choice.tried.len(), 9);
    assert_eq!(choice.tried[0], (0, ooo));
    let best = choice.tried.iter().map(|(_, s)| s.step_time_us).fold(f64::INFINITY, f64::min);
    assert_eq!(choice.steady.step_time_us, best);
    let layers = ordo_sim::layers_with_weights(&problem);
    assert_eq!(choice.deferred, layers[..choice.deferred.len()]);

    // Deferring keeps activations into the next step: with memory for no more than k = 0
    // needs, the choice is k = 0.
    let tight = mobilenet(ooo.peak_memory_bytes);
    let deferring_costs_memory =
        choice.tried.iter().any(|(_, s)| s.peak_memory_bytes > ooo.peak_memory_bytes);
    assert!(deferring_costs_memory);
    let choice = choose_deferral(&tight, &SHARED, 9).unwrap();
    assert!(choice.steady.peak_memory_bytes <= ooo.peak_memory_bytes);
    // Below that, nothing fits and the error says so.
    let err = choose_deferral(&mobilenet(ooo.peak_memory_bytes - 1), &SHARED, 9).unwrap_err();
    assert!(err.to_string().contains("no schedule fits"), "{err}");
}

#[test]
fn the_layer_by_layer_refinement_keeps_only_flips_that_help_and_fit() {
    let problem = mobilenet(u64::MAX / 4);
    let start = choose_deferral(&problem, &SHARED, 5).unwrap();
    let refined = ordo_sim::refine_deferral(&problem, &start, &SHARED, 1000).unwrap();
    assert!(refined.steady.step_time_us <= start.steady.step_time_us);
    // The reported map is the one simulated.
    let mut deferred = vec![false; problem.len()];
    for &layer in &refined.deferred {
        deferred[layer] = true;
    }
    let again = steady_state(&problem, OneDeviceSchedule::Ooo, &deferred, &SHARED).unwrap();
    assert_eq!(again, refined.steady);
    // Under a limit that only the start fits, nothing that needs more is kept.
    let tight = mobilenet(start.steady.peak_memory_bytes);
    let refined = ordo_sim::refine_deferral(&tight, &start, &SHARED, 1000).unwrap();
    assert!(refined.steady.peak_memory_bytes <= start.steady.peak_memory_bytes);
}
