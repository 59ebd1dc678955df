//! m-ETF: hand-checked graphs, Baechi's sample graphs, and properties on random graphs.

mod common;

use std::time::Instant;

use common::{BYTES_AS_US, check_order, graph, problem, problem_with, random_links, sample};
use ordo_cost::{ColocationGroup, CostGraph, CostNode, Optimizer, StepMode};
use ordo_place::{
    Devices, PlaceError, PlaceProblem, Placement, group_need, m_etf, m_sct, simulate,
    simulate_with_order,
};
use proptest::prelude::*;

/// m-ETF's result with its makespan checked against its own model replayed on its order.
fn etf(p: &PlaceProblem) -> Placement {
    let placement = m_etf(p).unwrap();
    let replay = simulate_with_order(p, &placement.device_of, &placement.order).unwrap();
    assert_eq!(placement.makespan_us, replay.makespan_us);
    assert_eq!(placement.peak_memory_bytes, replay.peak_memory_bytes);
    placement
}

#[test]
fn a_fork_with_expensive_communication_stays_on_one_device() {
    // a's result costs 1000 µs to move: b and c run after it on device 0, 10 + 10 + 10 µs.
    let g =
        graph(&[("a", 10), ("b", 10), ("c", 10)], &[(0, 1, &[(0, 1000)]), (0, 2, &[(0, 1000)])]);
    let p = problem(&g, 2);
    let placement = etf(&p);
    assert_eq!(placement.device_of, [0, 0, 0]);
    assert_eq!(placement.order, [vec![0, 1, 2], vec![]]);
    assert_eq!(placement.makespan_us, 30);
    assert_eq!(simulate(&p, &placement.device_of).makespan_us, 30);
}

#[test]
fn a_fork_with_cheap_communication_splits() {
    // At 10, b starts on device 0; c's input can be on device 1 at 10 + 5, before device 0 is
    // free again at 110.
    let g = graph(&[("a", 10), ("b", 100), ("c", 100)], &[(0, 1, &[(0, 5)]), (0, 2, &[(1, 5)])]);
    let p = problem(&g, 2);
    let placement = etf(&p);
    assert_eq!(placement.device_of, [0, 0, 1]);
    assert_eq!(placement.makespan_us, 115);
    assert_eq!(simulate(&p, &placement.device_of).makespan_us, 115);
}

#[test]
fn a_shared_tensor_is_sent_once_to_a_device() {
    // a feeds its one tensor (100 µs to move) to b, c and e. b keeps device 0 busy until 160;
    // c gets the tensor on device 1 at 110. e then finds it there and runs at 120 on device 1
    // (had it to be sent again it would arrive at 210, and e would wait for device 0 at 160).
    let g = graph(
        &[("a", 10), ("b", 150), ("c", 10), ("e", 10)],
        &[(0, 1, &[(0, 100)]), (0, 2, &[(0, 100)]), (0, 3, &[(0, 100)])],
    );
    let p = problem(&g, 2);
    let placement = etf(&p);
    assert_eq!(placement.device_of, [0, 0, 1, 1]);
    assert_eq!(placement.order, [vec![0, 1], vec![2, 3]]);
    assert_eq!(placement.makespan_us, 160);
    let replay = simulate_with_order(&p, &placement.device_of, &placement.order).unwrap();
    assert_eq!(replay.start_us, [0, 10, 110, 120]);
    assert_eq!(simulate(&p, &placement.device_of).makespan_us, 160);
}

#[test]
fn two_remote_inputs_queue_on_the_receiving_channel() {
    // a and b (devices 0 and 1) each feed c 100 µs of data and keep their devices busy with a
    // long local successor. m-ETF costs each of c's in-edges alone (Baechi's dry run), so c is
    // due on device 2 at 10 + 100; the two transfers then queue on device 2's channel and c
    // starts at 210.
    let g = graph(
        &[("a", 10), ("b", 10), ("a2", 1000), ("b2", 1000), ("c", 2000)],
        &[
            (0, 2, &[(0, 100_000)]),
            (0, 4, &[(1, 100)]),
            (1, 3, &[(0, 100_000)]),
            (1, 4, &[(1, 100)]),
        ],
    );
    let p = problem(&g, 3);
    let placement = etf(&p);
    assert_eq!(placement.device_of, [0, 1, 0, 1, 2]);
    let replay = simulate_with_order(&p, &placement.device_of, &placement.order).unwrap();
    assert_eq!(replay.start_us[4], 210);
    assert_eq!(placement.makespan_us, 2210);
    assert_eq!(simulate(&p, &placement.device_of).makespan_us, 2210);
}

#[test]
fn baechis_simulator_books_a_producers_transfers_when_it_finishes() {
    // p (device 0) feeds L (locally), q and r. m-ETF starts r on device 2 at 20 (its 10 µs
    // tensor sent first) and q on device 1 at 1000, when z is done: makespan 10 + 10 + 2000.
    // Baechi's simulator sends p's tensors as soon as p finishes, in link order: q's 500 µs
    // first, so r's input arrives at 520 and r ends at 2520.
    let g = graph(
        &[("p", 10), ("z", 1000), ("L", 1000), ("q", 10), ("r", 2000)],
        &[(0, 2, &[(0, 100_000)]), (0, 3, &[(1, 500)]), (0, 4, &[(2, 10)])],
    );
    let p = problem(&g, 3);
    let placement = etf(&p);
    assert_eq!(placement.device_of, [0, 1, 0, 1, 2]);
    assert_eq!(placement.makespan_us, 2020);
    let baechi = simulate(&p, &placement.device_of);
    assert_eq!(baechi.start_us[4], 520);
    assert_eq!(baechi.makespan_us, 2520);
}

#[test]
fn a_colocation_group_runs_where_its_first_op_started() {
    let mut g = graph(&[("a", 10), ("b", 10)], &[]);
    assert_eq!(etf(&problem(&g, 2)).device_of, [0, 1]);
    for node in &mut g.nodes {
        node.colocation_group = ColocationGroup::List(vec!["g".into()]);
    }
    let placement = etf(&problem(&g, 2));
    assert_eq!(placement.device_of, [0, 0]);
    assert_eq!(placement.makespan_us, 20);
}

#[test]
fn a_group_that_does_not_fit_skips_a_device() {
    let mut g = graph(&[("a", 10)], &[]);
    g.nodes[0].persistent_memory = 500;
    let placement = etf(&problem_with(&g, &[100, 1000], StepMode::ForwardOnly));
    assert_eq!(placement.device_of, [1]);
    assert_eq!(placement.peak_memory_bytes, [0, 500]);
}

#[test]
fn a_node_larger_than_every_device_is_rejected_up_front() {
    let mut g = graph(&[("a", 10), ("b", 10)], &[(0, 1, &[(0, 1)])]);
    g.nodes[1].output_memory = vec![2000];
    match m_etf(&problem_with(&g, &[1000, 500], StepMode::ForwardOnly)) {
        Err(PlaceError::NodeTooLarge { node, needed, available, shortfall }) => {
            assert_eq!((node.as_str(), needed, available, shortfall), ("b", 2000, 1000, 1000));
        }
        other => panic!("expected NodeTooLarge, got {other:?}"),
    }
}

#[test]
fn groups_that_fit_alone_but_not_together_run_out_of_memory() {
    let mut g = graph(&[("a", 10), ("b", 10), ("c", 10)], &[(0, 2, &[(0, 1)])]);
    g.nodes[0].persistent_memory = 60;
    g.nodes[1].persistent_memory = 60;
    match m_etf(&problem_with(&g, &[100], StepMode::ForwardOnly)) {
        Err(PlaceError::OutOfMemory { algo, unplaced, total, first }) => {
            assert_eq!((algo, unplaced, total, first.as_str()), ("m-etf", 1, 3, "b"));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn an_op_waits_until_memory_is_freed() {
    // a and c each output 60 bytes; the device holds 100. c must wait until b, a's only
    // consumer, has finished and a's output is freed, although c comes first in rank.
    let mut g = graph(&[("a", 10), ("c", 10), ("b", 10)], &[(0, 2, &[(0, 1)])]);
    g.nodes[0].output_memory = vec![60];
    g.nodes[1].output_memory = vec![60];
    let p = problem_with(&g, &[100], StepMode::ForwardOnly);
    assert_eq!(p.topo_rank, [0, 1, 2]);
    let placement = etf(&p);
    assert_eq!(placement.order, [vec![0, 2, 1]]);
    assert_eq!(placement.makespan_us, 30);
    assert_eq!(placement.peak_memory_bytes, [60]);
    let unlimited = etf(&problem_with(&g, &[1000], StepMode::ForwardOnly));
    assert_eq!(unlimited.order, [vec![0, 1, 2]]);
    assert_eq!(unlimited.peak_memory_bytes, [120]);
}

#[test]
fn baechi_sample_graphs() {
    // Baechi's m-ETF on its sample graphs (4 devices, unlimited memory): the makespan Baechi
    // reports (its simulator on the placement, in ms to 0.01) and m-ETF's own estimate.
    let expected = [
        ("resnet50", 25.94, 25_940, 25_940),
        ("inception_v3", 31.80, 31_804, 31_804),
        ("transformer", 87.58, 87_575, 87_575),
        ("gnmt", 135.69, 135_691, 101_728),
        ("synth_1k", 356.27, 356_271, 376_505),
    ];
    for (name, baechi_ms, simulated, own) in expected {
        let p = sample(name);
        let placement = etf(&p);
        let makespan = simulate(&p, &placement.device_of).makespan_us;
        assert!((makespan as f64 - baechi_ms * 1000.0).abs() <= 5.0, "{name}: {makespan} µs");
        assert_eq!((makespan, placement.makespan_us), (simulated, own), "{name}");
        assert_eq!(placement.algo, "m-etf");
    }
}

/// A random DAG: two outputs per node, links carrying one or both, some colocation groups,
/// and device memory between the largest group's need and a few times it.
fn random_problem(seed: u64, max_nodes: usize) -> PlaceProblem {
    let mut rng = fastrand::Rng::with_seed(seed);
    let n = rng.usize(1..=max_nodes);
    let groups = rng.usize(1..=n);
    let grouped = rng.bool();
    let mut g = CostGraph::default();
    for i in 0..n {
        let mut node = CostNode::new(i as u64, format!("n{i}"), rng.u64(1..200));
        node.output_memory = vec![rng.u64(0..300), rng.u64(0..300)];
        node.persistent_memory = if rng.bool() { rng.u64(0..200) } else { 0 };
        node.temporary_memory = if rng.u8(0..4) == 0 { rng.u64(0..100) } else { 0 };
        if grouped && rng.bool() {
            node.colocation_group =
                ColocationGroup::List(vec![format!("g{}", rng.usize(0..groups))]);
        }
        g.nodes.push(node);
    }
    let density = 0.05 + 0.4 * rng.f64();
    random_links(&mut rng, &mut g, density, &BYTES_AS_US);
    let mode = if rng.bool() {
        StepMode::ForwardOnly
    } else {
        StepMode::Training { optimizer: Optimizer::SgdMomentum }
    };
    let m = rng.usize(1..=4);
    let unlimited = problem_with(&g, &vec![u64::MAX / 4; m], mode);
    let need =
        (0..unlimited.groups.len()).map(|k| group_need(&unlimited, k).bytes()).max().unwrap_or(0);
    let memory: Vec<u64> = if rng.u8(0..4) == 0 {
        vec![u64::MAX / 4; m]
    } else {
        (0..m).map(|_| need + (need as f64 * 3.0 * rng.f64()) as u64).collect()
    };
    problem_with(&g, &memory, mode)
}

/// Checks a successful placement: every node on a device, groups together, each device's
/// order listing exactly its nodes, m-ETF's model replayed on it giving its makespan and
/// peaks, peaks within the limits, and makespans no better than the lower bound.
fn check(p: &PlaceProblem, placement: &Placement) -> Result<(), TestCaseError> {
    let m = p.devices.count();
    prop_assert_eq!(placement.device_of.len(), p.len());
    prop_assert!(placement.device_of.iter().all(|&d| d < m));
    for members in &p.groups {
        prop_assert!(
            members.iter().all(|&v| placement.device_of[v] == placement.device_of[members[0]])
        );
    }
    check_order(p, placement)?;
    let replay = simulate_with_order(p, &placement.device_of, &placement.order).unwrap();
    prop_assert_eq!(replay.makespan_us, placement.makespan_us);
    prop_assert_eq!(&replay.peak_memory_bytes, &placement.peak_memory_bytes);
    for d in 0..m {
        prop_assert!(placement.peak_memory_bytes[d] <= p.devices.memory[d]);
    }
    let simulated = simulate(p, &placement.device_of);
    prop_assert!(placement.makespan_us >= ordo_place::lower_bounds(p).best_us());
    prop_assert!(simulated.makespan_us >= ordo_place::lower_bounds(p).best_us());
    if p.memory.iter().all(|memory| memory.retain_outputs) {
        // Outputs never freed: the peak does not depend on the timeline.
        for d in 0..m {
            prop_assert!(simulated.peak_memory_bytes[d] <= p.devices.memory[d]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The incremental m-ETF and the straightforward one (m-SCT without favorites, which
    /// recomputes everything at every step as Baechi does) agree, errors included.
    #[test]
    fn incremental_m_etf_matches_the_straightforward_one(seed in any::<u64>()) {
        let p = random_problem(seed, 40);
        let fast = m_etf(&p);
        let reference = m_sct(&p, 0.0);
        match (&fast, &reference) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(&a.device_of, &b.device_of);
                prop_assert_eq!(&a.order, &b.order);
                prop_assert_eq!(a.makespan_us, b.makespan_us);
                prop_assert_eq!(&a.peak_memory_bytes, &b.peak_memory_bytes);
                check(&p, a)?;
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string().replace("m-sct", "m-etf"), b.to_string().replace("m-sct", "m-etf")),
            _ => prop_assert!(false, "m-etf {fast:?} but the reference {reference:?}"),
        }
    }

    /// With unlimited memory m-ETF always places everything.
    #[test]
    fn unlimited_memory_always_succeeds(seed in any::<u64>(), m in 1usize..5) {
        let mut p = random_problem(seed, 60);
        p.devices.memory = vec![u64::MAX / 4; m];
        let placement = m_etf(&p).unwrap();
        check(&p, &placement)?;
        if m == 1 {
            // One device never waits: it always has a ready op until the end.
            prop_assert_eq!(placement.makespan_us, p.total_work_us());
            prop_assert_eq!(simulate(&p, &placement.device_of).makespan_us, p.total_work_us());
        }
    }
}

#[test]
fn out_of_memory_ends_the_search() {
    // Many groups that each fit alone but not all together: m-ETF stops with an error.
    let mut g = graph(&[], &[]);
    for i in 0..50 {
        let mut node = CostNode::new(i, format!("n{i}"), 10);
        node.persistent_memory = 30;
        g.nodes.push(node);
    }
    match m_etf(&problem_with(&g, &[100, 100], StepMode::ForwardOnly)) {
        Err(PlaceError::OutOfMemory { unplaced, total, .. }) => {
            assert_eq!((unplaced, total), (44, 50))
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

/// Times m-ETF on layered random graphs of 10,000 and 100,000 nodes on 4 devices (targets: 1 s
/// and 30 s on one core, release build). Run with `cargo test --release -p ordo-place --test
/// etf -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed() {
    for (n, limit) in [(10_000, 1.0), (100_000, 30.0)] {
        let graph = ordo_cost::synth(n, 1);
        let p = PlaceProblem::new(&graph, Devices::uniform(4, u64::MAX / 4), StepMode::ForwardOnly)
            .unwrap();
        let clock = Instant::now();
        let placement = m_etf(&p).unwrap();
        let seconds = clock.elapsed().as_secs_f64();
        let simulated = simulate(&p, &placement.device_of).makespan_us;
        println!(
            "m-etf on synth({n}, 1): {seconds:.3} s, makespan {} µs (Baechi's simulator {} µs)",
            placement.makespan_us, simulated
        );
        assert!(seconds < limit, "{n} nodes took {seconds:.3} s");
    }
}
