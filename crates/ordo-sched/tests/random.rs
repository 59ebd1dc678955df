//! Plans of random layered graphs placed by several algorithms: the invariants every plan of a
//! placement keeps.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ordo_cost::{Optimizer, StepMode, read_costgraph, synth};
use ordo_place::{Algorithm, Devices, PlaceOptions, PlaceProblem, Placement, place};
use ordo_sched::{Plan, TaskId, TaskKind, build_plan, task_graph, task_order, validate};

/// Every placement of synthetic graphs of a few sizes on 2-4 devices, forward only and training,
/// and m-TOPO and m-ETF placements of three sample graphs on 4 devices.
fn cases() -> Vec<(String, PlaceProblem, Placement)> {
    let mut cases = Vec::new();
    for (seed, nodes, devices) in [(1, 40, 2), (2, 90, 3), (3, 150, 4), (4, 400, 4)] {
        let graph = synth(nodes, seed);
        for mode in [StepMode::ForwardOnly, StepMode::Training { optimizer: Optimizer::Adam }] {
            let devices = Devices::uniform(devices, u64::MAX / 8);
            let problem = PlaceProblem::new(&graph, devices, mode).unwrap();
            for &algo in Algorithm::all() {
                let placement = place(&problem, algo, &PlaceOptions::default()).unwrap();
                let label = format!("synth({nodes}, {seed}) {mode:?} {algo}");
                cases.push((label, problem.clone(), placement));
            }
        }
    }
    for name in ["inception_v3", "gnmt", "transformer"] {
        let path =
            format!("{}/../ordo-cost/tests/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let graph = read_costgraph(&path).unwrap();
        let problem =
            PlaceProblem::new(&graph, Devices::uniform(4, u64::MAX / 8), StepMode::ForwardOnly)
                .unwrap();
        for algo in [Algorithm::MTopo, Algorithm::MEtf] {
            let placement = place(&problem, algo, &PlaceOptions::default()).unwrap();
            cases.push((format!("{name} {algo}"), problem.clone(), placement));
        }
    }
    cases
}

/// Task id of each node's compute task, checking that each node has exactly one.
fn compute_tasks(label: &str, problem: &PlaceProblem, plan: &Plan) -> Vec<TaskId> {
    let mut of_node: HashMap<&str, Vec<TaskId>> = HashMap::new();
    for (t, task) in plan.tasks.iter().enumerate() {
        if let TaskKind::Compute { node, .. } = &task.kind {
            of_node.entry(node.as_str()).or_default().push(TaskId(t as u32));
        }
    }
    assert_eq!(of_node.len(), problem.len(), "{label}: nodes with compute tasks");
    let tasks: Vec<TaskId> = problem
        .names
        .iter()
        .map(|name| match of_node.get(name.as_str()).map(Vec::as_slice) {
            Some(&[t]) => t,
            other => panic!("{label}: node {name} has compute tasks {other:?}"),
        })
        .collect();
    tasks
}

fn placement_device(plan: &Plan, t: TaskId) -> usize {
    plan.streams[plan.tasks[t.0 as usize].streams[0].0 as usize].device
}

/// Checks that the task graph is acyclic with a Kahn pass of its own.
fn assert_acyclic(label: &str, plan: &Plan) {
    let preds = task_graph(plan);
    let mut waiting: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut succs = vec![Vec::new(); preds.len()];
    for (t, list) in preds.iter().enumerate() {
        for p in list {
            succs[p.0 as usize].push(t);
        }
    }
    let mut ready: Vec<usize> = (0..preds.len()).filter(|&t| waiting[t] == 0).collect();
    let mut ran = 0;
    while let Some(t) = ready.pop() {
        ran += 1;
        for &s in &succs[t] {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push(s);
            }
        }
    }
    assert_eq!(ran, plan.tasks.len(), "{label}: the task graph has a cycle");
    assert_eq!(task_order(plan).unwrap().len(), plan.tasks.len(), "{label}");
}

#[test]
fn plans_of_random_placements_keep_the_invariants() {
    let mut transfers = 0;
    for (label, problem, placement) in cases() {
        let plan = build_plan(&problem, &placement).unwrap_or_else(|e| panic!("{label}: {e}"));
        validate(&plan).unwrap();
        assert_eq!(plan, build_plan(&problem, &placement).unwrap(), "{label}: deterministic");
        let task_of = compute_tasks(&label, &problem, &plan);
        let device = &placement.device_of;
        for (v, &t) in task_of.iter().enumerate() {
            assert_eq!(placement_device(&plan, t), device[v], "{label}");
            assert_eq!(plan.tasks[t.0 as usize].duration_us, problem.weights[v]);
        }

        // Exactly one transfer per cross-device (tensor, destination) pair.
        let mut wanted = BTreeSet::new();
        for edge in &problem.edges {
            for &x in &edge.tensors {
                let from = device[problem.tensors[x].producer];
                if from != device[edge.target] {
                    wanted.insert((problem.tensors[x].name.as_str(), from, device[edge.target]));
                }
            }
        }
        let mut sent = BTreeMap::new();
        for task in &plan.tasks {
            if let TaskKind::Transfer { buffer, from, to } = task.kind {
                let name = plan.buffers[buffer.0 as usize].name.as_str();
                *sent.entry((name, from, to)).or_insert(0) += 1;
            }
        }
        assert!(sent.values().all(|&count| count == 1), "{label}: a pair sent twice");
        assert_eq!(sent.keys().copied().collect::<BTreeSet<_>>(), wanted, "{label}");
        transfers += sent.len();

        assert_acyclic(&label, &plan);

        // Every consumer reads the tensor's buffer on its own device.
        let buffer_at: HashMap<(&str, usize), usize> = plan
            .buffers
            .iter()
            .enumerate()
            .map(|(b, buf)| ((buf.name.as_str(), buf.device), b))
            .collect();
        assert_eq!(buffer_at.len(), plan.buffers.len(), "{label}: one copy per device");
        for edge in &problem.edges {
            for &x in &edge.tensors {
                let key = (problem.tensors[x].name.as_str(), device[edge.target]);
                let buffer = &plan.buffers[buffer_at[&key]];
                assert!(buffer.readers.contains(&task_of[edge.target]), "{label}: {key:?}");
            }
        }

        let mut persistent = vec![0u64; problem.devices.count()];
        for (v, memory) in problem.memory.iter().enumerate() {
            persistent[device[v]] += memory.persistent;
        }
        assert_eq!(plan.persistent_bytes, persistent, "{label}");
        let retain = matches!(problem.mode, StepMode::Training { .. });
        assert!(plan.buffers.iter().all(|b| b.retained == retain), "{label}");
    }
    assert!(transfers > 100, "the placements should cross devices: {transfers} transfers");
}
