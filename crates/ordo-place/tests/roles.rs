//! Roles and forward layers in placement problems: from a training graph's cost graph, and
//! through the reductions.

mod common;

use common::{baechi_problem, chain_links, memory_graph as graph};
use ordo_cost::{CostGraph, StepMode, costgraph_from_graph};
use ordo_ir::Role;
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_place::reduce::{coplace, fuse, reduce};
use ordo_place::{Devices, PlaceProblem, ProblemError};

const TRAINING: StepMode = StepMode::Training { optimizer: Optimizer::Adam };

/// The cost graph of the training graph of x [4, 8] -> fc1 (8 -> 16) -> relu -> fc2 (16 -> 3)
/// -> loss against integer labels.
fn mlp_training() -> CostGraph {
    let (forward, loss) = ordo_ir::samples::mlp();
    let training = training_graph(&forward, loss, Optimizer::Adam).unwrap();
    costgraph_from_graph(&training)
}

fn index(p: &PlaceProblem, name: &str) -> usize {
    p.names.iter().position(|n| n == name).unwrap_or_else(|| panic!("no node `{name}`"))
}

/// Every layer is a forward node other than the node itself; forward nodes have none.
fn assert_layers_are_forward(p: &PlaceProblem) {
    assert_eq!((p.roles.len(), p.layer_of.len()), (p.len(), p.len()));
    for (v, layer) in p.layer_of.iter().enumerate() {
        if p.roles[v] == Role::Forward {
            assert_eq!(*layer, None, "{}", p.names[v]);
        }
        if let Some(l) = *layer {
            assert_ne!(l, v, "{}", p.names[v]);
            assert_eq!(p.roles[l], Role::Forward, "layer of {}", p.names[v]);
        }
    }
}

#[test]
fn a_training_graph_gives_each_node_its_role_and_layer() {
    let cost = mlp_training();
    let p = baechi_problem(&cost, &[u64::MAX; 2], TRAINING);
    let of = |name: &str| {
        let v = index(&p, name);
        (p.roles[v], p.layer_of[v].map(|l| p.names[l].as_str()))
    };
    assert_eq!(of("fc2"), (Role::Forward, None));
    assert_eq!(of("x"), (Role::Forward, None));
    assert_eq!(of("fc2.dw"), (Role::Dw, Some("fc2")));
    assert_eq!(p.layer_of[index(&p, "fc2.dw")], Some(index(&p, "fc2")));
    assert_eq!(of("fc2.dx"), (Role::Dx, Some("fc2")));
    assert_eq!(of("relu.dx"), (Role::Dx, Some("relu")));
    assert_eq!(of("fc1.dw"), (Role::Dw, Some("fc1")));
    assert_eq!(of("fc1.weight.update"), (Role::Update, Some("fc1")));
    assert_eq!(p.roles.iter().filter(|&&r| r == Role::Update).count(), 4);
    assert!(p.roles.iter().all(|&r| r != Role::Comm));
    assert_layers_are_forward(&p);

    // The reductions keep the rule.
    assert_eq!(coplace(&p).problem.roles, p.roles);
    assert_eq!(coplace(&p).problem.layer_of, p.layer_of);
    let reduced = reduce(&p).unwrap();
    assert_layers_are_forward(&reduced.problem);
}

#[test]
fn indices_follow_the_node_order_not_the_ids() {
    // Ids 10, 20, 30 at positions 0, 1, 2: the layer id 10 is index 0.
    let mut cost =
        graph(&[("f", 1, 0, 0, 8), ("f.dx", 1, 0, 0, 8), ("f.dw", 1, 0, 0, 8)], &[], &[]);
    for (node, id) in cost.nodes.iter_mut().zip([10, 20, 30]) {
        node.id = id;
    }
    (cost.nodes[1].role, cost.nodes[1].layer) = (Role::Dx, Some(10));
    (cost.nodes[2].role, cost.nodes[2].layer) = (Role::Dw, None);
    cost.validate("mem").unwrap();
    let p = baechi_problem(&cost, &[u64::MAX; 2], TRAINING);
    assert_eq!(p.roles, [Role::Forward, Role::Dx, Role::Dw]);
    assert_eq!(p.layer_of, [None, Some(0), None]);
}

#[test]
fn a_bad_layer_is_refused_naming_the_node() {
    let base = graph(&[("f", 1, 0, 0, 8), ("f.dw", 1, 0, 0, 8)], &chain_links(2), &[]);
    let cases: [(Role, u64, Role, &str); 3] = [
        (
            Role::Dw,
            5,
            Role::Forward,
            r#"node 1 ("f.dw"): attribute "layer" is 5, which is no node's id"#,
        ),
        (
            Role::Forward,
            0,
            Role::Forward,
            r#"node 1 ("f.dw"): attribute "layer" is 0 on a forward node"#,
        ),
        (
            Role::Dw,
            0,
            Role::Dx,
            r#"node 1 ("f.dw"): attribute "layer" is 0, but node 0 ("f") is not a forward node"#,
        ),
    ];
    for (role, layer, layer_role, expected) in cases {
        let mut cost = base.clone();
        (cost.nodes[1].role, cost.nodes[1].layer) = (role, Some(layer));
        cost.nodes[0].role = layer_role;
        assert!(cost.validate("mem").is_err(), "{expected}");
        let err = PlaceProblem::new(&cost, Devices::uniform(2, u64::MAX), TRAINING).unwrap_err();
        assert!(matches!(&err, ProblemError::Invalid(m) if m == expected), "{err:?}");
    }
}

/// f -> g -> g.dx -> g.dw -> f.dw -> f.update, with the given weights of f.dw and f.update and
/// colocation groups.
fn backward_chain(weights: [u64; 2], groups: &[(usize, &str)]) -> PlaceProblem {
    let nodes = [
        ("f", 10, 0, 0, 8),
        ("g", 10, 0, 0, 8),
        ("g.dx", 5, 0, 0, 8),
        ("g.dw", 20, 0, 0, 8),
        ("f.dw", weights[0], 0, 0, 8),
        ("f.update", weights[1], 0, 0, 8),
    ];
    let mut cost = graph(&nodes, &chain_links(6), groups);
    let tags = [(Role::Dx, 1), (Role::Dw, 1), (Role::Dw, 0), (Role::Update, 0)];
    for (node, (role, layer)) in cost.nodes[2..].iter_mut().zip(tags) {
        (node.role, node.layer) = (role, Some(layer));
    }
    baechi_problem(&cost, &[u64::MAX; 2], TRAINING)
}

#[test]
fn fused_nodes_are_forward_if_any_member_is_else_take_the_heaviest_members_role() {
    // g.dx joins g; f.update joins f.dw.
    let groups = [(1, "A"), (2, "A"), (4, "B"), (5, "B")];
    let fused = fuse(&backward_chain([8, 3], &groups)).unwrap();
    assert_eq!(fused.node_of, [0, 1, 1, 2, 3, 3]);
    let p = &fused.problem;
    assert_eq!(p.names, ["f", "g", "g.dw", "f.dw"]);
    assert_eq!(p.roles, [Role::Forward, Role::Forward, Role::Dw, Role::Dw]);
    // g.dw's layer g is now the fused node 1; f.dw and f.update agree on f.
    assert_eq!(p.layer_of, [None, None, Some(1), Some(0)]);
    assert_layers_are_forward(p);

    // The heavier update gives its role; on a tie the first member does.
    let p = fuse(&backward_chain([3, 8], &groups)).unwrap().problem;
    assert_eq!((p.roles[3], p.layer_of[3]), (Role::Update, Some(0)));
    let p = fuse(&backward_chain([5, 5], &groups)).unwrap().problem;
    assert_eq!((p.roles[3], p.layer_of[3]), (Role::Dw, Some(0)));

    // Members of layers g and f: no one layer.
    let groups = [(1, "A"), (2, "A"), (3, "B"), (4, "B"), (5, "B")];
    let fused = fuse(&backward_chain([8, 3], &groups)).unwrap();
    assert_eq!(fused.node_of, [0, 1, 1, 2, 2, 2]);
    assert_eq!(fused.problem.roles, [Role::Forward, Role::Forward, Role::Dw]);
    assert_eq!(fused.problem.layer_of, [None, None, None]);

    // Everything in one node: forward.
    let fused = reduce(&backward_chain([8, 3], &[])).unwrap();
    assert_eq!(fused.node_of, [0; 6]);
    assert_eq!((fused.problem.roles, fused.problem.layer_of), (vec![Role::Forward], vec![None]));
}
