//! Baechi's execution simulator (`simulate`) and m-ETF's replay of a given order
//! (`simulate_with_order`).

mod common;

use common::{BYTES_AS_US, graph, problem, random_links, sample};
use ordo_cost::{CostGraph, CostNode};
use ordo_place::{
    Capacity, PlaceError, m_topo, makespan_with_order, simulate, simulate_with_order,
};
use proptest::prelude::*;

#[test]
fn a_tensor_crosses_to_a_device_once() {
    // a (device 0) feeds b and c (device 1) the same tensor: it arrives once, at 10 + 50.
    let shared =
        graph(&[("a", 10), ("b", 20), ("c", 20)], &[(0, 1, &[(0, 50)]), (0, 2, &[(0, 50)])]);
    let s = simulate(&problem(&shared, 2), &[0, 1, 1]);
    assert_eq!((s.start_us, s.finish_us), (vec![0, 60, 80], vec![10, 80, 100]));
    assert_eq!(s.order, [vec![0], vec![1, 2]]);
    assert_eq!(s.makespan_us, 100);
    // Two different tensors are both sent, one after the other on device 0's channel.
    let distinct =
        graph(&[("a", 10), ("b", 20), ("c", 20)], &[(0, 1, &[(0, 50)]), (0, 2, &[(1, 50)])]);
    let s = simulate(&problem(&distinct, 2), &[0, 1, 1]);
    assert_eq!(s.start_us, [0, 60, 110]);
    assert_eq!(s.makespan_us, 130);
}

#[test]
fn transfers_into_a_device_queue_on_its_channel() {
    // a (device 0) and b (device 1) both send 100 µs to c (device 2): the second transfer
    // starts when the first has been received.
    let g = graph(&[("a", 10), ("b", 10), ("c", 10)], &[(0, 2, &[(0, 100)]), (1, 2, &[(0, 100)])]);
    let s = simulate(&problem(&g, 3), &[0, 1, 2]);
    assert_eq!(s.start_us, [0, 0, 210]);
    assert_eq!(s.makespan_us, 220);
}

#[test]
fn transfers_out_of_a_device_queue_on_its_channel() {
    // a sends 100 µs to b (device 1), then 100 µs to c (device 2), in link order.
    let g = graph(&[("a", 10), ("b", 10), ("c", 10)], &[(0, 1, &[(0, 100)]), (0, 2, &[(1, 100)])]);
    let s = simulate(&problem(&g, 3), &[0, 1, 2]);
    assert_eq!(s.start_us, [0, 110, 210]);
    // In the other link order, c's tensor goes first.
    let g = graph(&[("a", 10), ("b", 10), ("c", 10)], &[(0, 2, &[(1, 100)]), (0, 1, &[(0, 100)])]);
    let s = simulate(&problem(&g, 3), &[0, 1, 2]);
    assert_eq!(s.start_us, [0, 210, 110]);
}

#[test]
fn ops_are_taken_by_ready_time_then_rank() {
    // p (rank 2) waits for x's tensor until 5 + 20; q (rank 3) is ready at 1 on the same
    // device, so it runs first although its rank is larger.
    let g = graph(
        &[("x", 5), ("y", 1), ("p", 10), ("q", 10)],
        &[(0, 2, &[(0, 20)]), (1, 3, &[(0, 1)])],
    );
    let p = problem(&g, 2);
    assert_eq!(p.topo_rank, [0, 1, 2, 3]);
    let s = simulate(&p, &[0, 1, 1, 1]);
    assert_eq!(s.order[1], [1, 3, 2]);
    assert_eq!(s.start_us, [0, 0, 25, 1]);
    assert_eq!(s.makespan_us, 35);
}

#[test]
fn memory_follows_the_time_based_rules() {
    // A chain a -> b -> c on one device: a has 1000 persistent bytes, outputs 100, 200, 300
    // and b 10 temporary bytes. At b's start: 1000 + 100 + 200 + 10. At c's start a's output
    // and b's temporary are gone: 1000 + 200 + 300 = 1500, the peak. c's output is never freed.
    let mut g = graph(&[("a", 5), ("b", 5), ("c", 5)], &[(0, 1, &[(0, 1)]), (1, 2, &[(0, 1)])]);
    g.nodes[0].persistent_memory = 1000;
    for (node, out) in g.nodes.iter_mut().zip([100, 200, 300]) {
        node.output_memory = vec![out];
    }
    g.nodes[1].temporary_memory = 10;
    let mut p = problem(&g, 1);
    assert_eq!(simulate(&p, &[0, 0, 0]).peak_memory_bytes, [1500]);
    // Outputs kept for the whole step (training): 1000 + 100 + 200 + 300.
    for memory in &mut p.memory {
        memory.retain_outputs = true;
    }
    assert_eq!(simulate(&p, &[0, 0, 0]).peak_memory_bytes, [1600]);
    // On two devices (1 µs transfers): a runs 0-5 on device 0, b 6-11 on device 1, c 12-17
    // on device 0. a's output is freed at 11, before c allocates its own. The received 1-byte
    // copies count on their receivers from the send's start until their reader finishes: on
    // device 1 a's (5-11, with b's 200 + 10), on device 0 b's (11-17, with c's 300).
    let p = problem(&g, 2);
    let s = simulate(&p, &[0, 1, 0]);
    assert_eq!(s.start_us, [0, 6, 12]);
    assert_eq!(s.peak_memory_bytes, [1000 + 300 + 1, 200 + 10 + 1]);
}

#[test]
fn baechi_m_topo_placements_simulate_to_baechis_makespans() {
    // Baechi's m-TOPO on its sample graphs, 4 devices, simulated by Baechi's VirtualScheduler.
    let expected =
        [("resnet50", 75899), ("inception_v3", 51694), ("transformer", 124315), ("gnmt", 113444)];
    for (name, makespan) in expected.into_iter().chain([("synth_1k", 401947)]) {
        let p = sample(name);
        let placement = m_topo(&p, Capacity::Uniform).unwrap();
        assert_eq!(simulate(&p, &placement).makespan_us, makespan, "{name}");
    }
}

#[test]
fn simulate_with_order_follows_the_given_order() {
    // Two independent ops on one device, in either order; and a join that waits for both.
    let g = graph(&[("a", 10), ("b", 20), ("c", 5)], &[(0, 2, &[(0, 1)]), (1, 2, &[(0, 1)])]);
    let p = problem(&g, 1);
    let ab = simulate_with_order(&p, &[0, 0, 0], &[vec![0, 1, 2]]).unwrap();
    assert_eq!(ab.start_us, [0, 10, 30]);
    let ba = simulate_with_order(&p, &[0, 0, 0], &[vec![1, 0, 2]]).unwrap();
    assert_eq!(ba.start_us, [20, 0, 30]);
    assert_eq!(makespan_with_order(&p, &[0, 0, 0], &[vec![1, 0, 2]]).unwrap(), 35);
    // Across devices, a tensor is sent when its consumer starts: b's result reaches device 0
    // at 20 + 1.
    let p = problem(&g, 2);
    let s = simulate_with_order(&p, &[0, 1, 0], &[vec![0, 2], vec![1]]).unwrap();
    assert_eq!(s.start_us, [0, 0, 21]);
}

#[test]
fn simulate_with_order_rejects_bad_orders() {
    let g = graph(&[("a", 10), ("b", 20)], &[(0, 1, &[(0, 1)])]);
    let p = problem(&g, 2);
    let invalid = |result: Result<_, PlaceError>| match result {
        Err(PlaceError::Invalid(message)) => message,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert!(invalid(simulate_with_order(&p, &[0, 0], &[vec![1, 0], vec![]])).contains("deadlocks"));
    assert!(invalid(simulate_with_order(&p, &[0, 0], &[vec![0], vec![]])).contains("`b`"));
    assert!(invalid(simulate_with_order(&p, &[0, 1], &[vec![0, 1], vec![]])).contains("b"));
    assert!(invalid(simulate_with_order(&p, &[0, 2], &[vec![0], vec![1]])).contains("device 2"));
    assert!(invalid(simulate_with_order(&p, &[0, 0], &[vec![0, 1]])).contains("1 devices"));
}

#[test]
#[should_panic(expected = "one device per node")]
fn simulate_panics_on_a_short_placement() {
    let g = graph(&[("a", 10), ("b", 20)], &[]);
    simulate(&problem(&g, 1), &[0]);
}

/// A random DAG with up to `max_nodes` nodes, two outputs per node and links carrying one or
/// both, in shuffled link order.
fn random_graph(seed: u64, max_nodes: usize) -> CostGraph {
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = rng.usize(1..=max_nodes);
    let mut g = CostGraph::default();
    for i in 0..n {
        let mut node = CostNode::new(i as u64, format!("n{i}"), rng.u64(1..200));
        node.output_memory = vec![rng.u64(0..300), rng.u64(0..300)];
        node.persistent_memory = rng.u64(0..100);
        g.nodes.push(node);
    }
    let density = 0.1 + 0.4 * rng.f64();
    random_links(&mut rng, &mut g, density, &BYTES_AS_US);
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every simulated schedule respects the edges (with at least the cheapest tensor's
    /// transfer time across devices), runs one op at a time per device in its listed order,
    /// and cannot beat the lower bound.
    #[test]
    fn simulated_schedules_are_feasible(seed in any::<u64>(), m in 1usize..4) {
        let g = random_graph(seed, 30);
        let p = problem(&g, m);
        let mut rng = fastrand::Rng::with_seed(seed);
        let device_of: Vec<usize> = (0..p.len()).map(|_| rng.usize(0..m)).collect();
        for s in [
            simulate(&p, &device_of),
            {
                let order = simulate(&p, &device_of).order;
                simulate_with_order(&p, &device_of, &order).unwrap()
            },
        ] {
            for e in &p.edges {
                let (u, v) = (e.source, e.target);
                let delay = if device_of[u] == device_of[v] {
                    0
                } else {
                    e.tensors.iter().map(|&t| p.tensors[t].comm_us).min().unwrap_or(0)
                };
                prop_assert!(s.start_us[v] >= s.finish_us[u] + delay);
            }
            let mut listed = vec![false; p.len()];
            for (d, order) in s.order.iter().enumerate() {
                for pair in order.windows(2) {
                    prop_assert!(s.start_us[pair[1]] >= s.finish_us[pair[0]]);
                }
                for &v in order {
                    prop_assert_eq!(device_of[v], d);
                    prop_assert!(!listed[v]);
                    listed[v] = true;
                    prop_assert_eq!(s.finish_us[v], s.start_us[v] + p.weights[v]);
                }
            }
            prop_assert!(listed.iter().all(|&l| l));
            prop_assert_eq!(s.makespan_us, s.finish_us.iter().copied().max().unwrap_or(0));
            prop_assert!(s.makespan_us >= ordo_place::lower_bounds(&p).best_us());
            let persistent: u64 = (0..p.len()).filter(|&v| device_of[v] == 0).map(|v| p.memory[v].persistent).sum();
            prop_assert!(s.peak_memory_bytes[0] >= persistent);
        }
    }
}
