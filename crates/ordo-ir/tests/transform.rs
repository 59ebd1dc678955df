//! The step-structure passes: copies, their wiring and their provenance.

use ordo_ir::op::Optimizer;
use ordo_ir::transform::{micro_batch, unroll};
use ordo_ir::{Graph, IrError, NodeId, Role, validate};

/// The sample MLP's training graph (Adam).
fn training() -> Graph {
    let (forward, loss) = ordo_ir::samples::mlp();
    ordo_ir::training::training_graph(&forward, loss, Optimizer::Adam).unwrap()
}

fn find(graph: &Graph, name: &str) -> NodeId {
    graph.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no `{name}`")).id
}

#[test]
fn micro_batches_copy_the_step_accumulate_gradients_and_update_once() {
    let graph = training();
    let updates = graph.nodes.iter().filter(|n| n.role == Role::Update).count();
    let copied = micro_batch(&graph, 3).unwrap();
    // (No `validate`: an accumulating copy's extra inputs are not its op's arguments.)
    let out = &copied.graph;
    let n = graph.nodes.len();
    assert_eq!(out.nodes.len(), 3 * (n - updates) + updates);
    assert_eq!(copied.provenance.len(), out.nodes.len());
    assert_eq!(copied.provenance.micro_batches(), 3);
    assert_eq!(copied.provenance.steps(), 1);
    for (i, node) in out.nodes.iter().enumerate() {
        let origin = &graph.nodes[copied.provenance.origin[i].index()];
        assert_eq!(node.op, origin.op, "{} copies {}", node.name, origin.name);
        let expected = match copied.provenance.micro_batch[i] {
            Some(m) => format!("{}/mb{m}", origin.name),
            None => origin.name.clone(),
        };
        assert_eq!(node.name, expected);
        assert_eq!(copied.provenance.micro_batch[i].is_none(), node.role == Role::Update);
    }
    // Micro-batch 1's dW adds into micro-batch 0's; the update reads the last one's.
    let (dw0, dw1, dw2) =
        (find(out, "fc1.dw/mb0"), find(out, "fc1.dw/mb1"), find(out, "fc1.dw/mb2"));
    let node = |id: NodeId| &out.nodes[id.index()];
    assert_eq!(copied.accumulated[dw0.index()], 0);
    assert_eq!(copied.accumulated[dw1.index()], node(dw1).outputs.len());
    let accumulated_from = &node(dw1).inputs[node(dw1).inputs.len() - 1];
    assert_eq!(accumulated_from.node, dw0);
    let update = find(out, "fc1.weight.update");
    assert!(node(update).inputs.iter().any(|o| o.node == dw2));
    assert!(!node(update).inputs.iter().any(|o| o.node == dw0 || o.node == dw1));
    // Each copy's layer is its own micro-batch's forward node; the update's micro-batch 0's.
    assert_eq!(node(dw2).layer, Some(find(out, "fc1/mb2")));
    assert_eq!(node(update).layer, Some(find(out, "fc1/mb0")));
    // Each output once per micro-batch, micro-batch 0 first.
    let copies = |o: &ordo_ir::OutletId| match graph.nodes[o.node.index()].role {
        Role::Update => 1,
        _ => 3,
    };
    assert_eq!(out.outputs.len(), graph.outputs.iter().map(copies).sum::<usize>());
    let loss = graph.outputs[0].node;
    let first: Vec<NodeId> =
        out.outputs[..3].iter().map(|o| copied.provenance.origin[o.node.index()]).collect();
    assert_eq!(first, vec![loss; 3], "the first outputs are the micro-batches' losses");
    assert_eq!(out.params, graph.params);
}

#[test]
fn one_micro_batch_is_the_graph_renamed() {
    let graph = training();
    let copied = micro_batch(&graph, 1).unwrap();
    assert_eq!(copied.graph.nodes.len(), graph.nodes.len());
    assert!(copied.accumulated.iter().all(|&k| k == 0));
}

#[test]
fn unrolled_steps_are_copies_in_order() {
    let graph = training();
    let n = graph.nodes.len();
    let unrolled = unroll(&graph, 3).unwrap();
    validate(&unrolled.graph).unwrap();
    assert_eq!(unrolled.graph.nodes.len(), 3 * n);
    assert_eq!(unrolled.provenance.steps(), 3);
    for (i, node) in unrolled.graph.nodes.iter().enumerate() {
        let (s, v) = (i / n, i % n);
        assert_eq!(unrolled.provenance.step[i] as usize, s);
        assert_eq!(unrolled.provenance.origin[i], NodeId(v as u32));
        assert_eq!(node.name, format!("{}#{s}", graph.nodes[v].name));
        assert!(
            node.inputs.iter().all(|o| o.node.index() / n == s),
            "{} reads another step",
            node.name
        );
    }
    assert_eq!(unroll(&graph, 1).unwrap().graph, graph);
}

#[test]
fn zero_copies_are_refused_naming_the_model() {
    let graph = training();
    for err in [micro_batch(&graph, 0).unwrap_err(), unroll(&graph, 0).unwrap_err()] {
        assert!(matches!(&err, IrError::Transform { model, .. } if model == "mlp"), "{err}");
    }
}
