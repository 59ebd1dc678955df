//! The training-graph builder on small hand-made graphs.

use ordo_ir::op::{Grad, Optimizer, Saved, Wrt};
use ordo_ir::training::{check_gradients, training_graph};
use ordo_ir::{DType, Graph, GraphBuilder, IrError, Node, Op, OutletId, Role, TensorFact};

use ordo_ir::samples::mlp;

fn node<'g>(g: &'g Graph, name: &str) -> &'g Node {
    g.find(name).unwrap_or_else(|| panic!("no node `{name}`"))
}

fn grad(node: &Node) -> &Grad {
    match &node.op {
        Op::Grad(g) => g,
        other => panic!("`{}` is {other:?}", node.name),
    }
}

fn names(g: &Graph, outlets: &[OutletId]) -> Vec<String> {
    outlets.iter().map(|o| g.node(o.node).name.clone()).collect()
}

#[test]
fn an_mlp_gets_dx_dw_and_updates_with_roles_layers_and_saved_tensors() {
    let (forward, loss) = mlp();
    let g = training_graph(&forward, loss, Optimizer::Adam).unwrap();
    // Forward nodes keep their ids and role.
    for n in &forward.nodes {
        assert_eq!(g.node(n.id).name, n.name);
        assert_eq!(g.node(n.id).role, Role::Forward);
    }
    let role_of =
        |name: &str| (node(&g, name).role, node(&g, name).layer.map(|l| g.node(l).name.clone()));
    let layer = |name: &str| Some(name.to_string());
    assert_eq!(role_of("loss.grad"), (Role::Dx, layer("loss")));
    assert_eq!(role_of("loss.dx"), (Role::Dx, layer("loss")));
    assert_eq!(role_of("fc2.dx"), (Role::Dx, layer("fc2")));
    assert_eq!(role_of("fc2.dw"), (Role::Dw, layer("fc2")));
    assert_eq!(role_of("relu.dx"), (Role::Dx, layer("relu")));
    assert_eq!(role_of("fc1.dw"), (Role::Dw, layer("fc1")));
    assert_eq!(role_of("fc1.weight.update"), (Role::Update, layer("fc1")));
    // No gradient flows into the data: no fc1.dx, no gradient for the labels.
    assert!(g.find("fc1.dx").is_none());
    assert_eq!(g.nodes.iter().filter(|n| n.role == Role::Dx).count(), 4);

    // What each gradient reads: dY first, then the saved tensors.
    let fc2_dx = node(&g, "fc2.dx");
    assert_eq!(grad(fc2_dx).wrt, Wrt::Input(0));
    assert_eq!(names(&g, &fc2_dx.inputs), ["loss.dx"]);
    assert_eq!(fc2_dx.params, node(&g, "fc2").params, "dX multiplies by the weights");
    assert_eq!(fc2_dx.outputs, [TensorFact::f32([4, 16])]);
    let fc2_dw = node(&g, "fc2.dw");
    assert_eq!(grad(fc2_dw).wrt, Wrt::Params);
    assert_eq!(names(&g, &fc2_dw.inputs), ["loss.dx", "relu"]);
    assert!(fc2_dw.params.is_empty());
    assert_eq!(fc2_dw.outputs, [TensorFact::f32([3, 16]), TensorFact::f32([3])]);
    let relu_dx = node(&g, "relu.dx");
    assert_eq!(grad(relu_dx).saved, [Saved::Output]);
    assert_eq!(names(&g, &relu_dx.inputs), ["fc2.dx", "relu"]);
    assert_eq!(names(&g, &node(&g, "fc1.dw").inputs), ["relu.dx", "x"]);
    assert_eq!(names(&g, &node(&g, "loss.dx").inputs), ["loss.grad", "fc2", "labels"]);

    // One update per parameter, reading its gradient; the outputs are the loss and the updates.
    let updates: Vec<&Node> = g.nodes.iter().filter(|n| n.role == Role::Update).collect();
    assert_eq!(updates.len(), 4);
    for u in &updates {
        assert_eq!(u.op, Op::Update(ordo_ir::op::Update { optimizer: Optimizer::Adam }));
        assert_eq!(g.fact(u.inputs[0]), Some(&g.param(u.params[0]).fact));
        assert_eq!(u.name, format!("{}.update", g.param(u.params[0]).name));
    }
    assert_eq!(names(&g, &g.outputs)[0], "loss");
    assert_eq!(g.outputs.len(), 5);
    assert_eq!(check_gradients(&g).unwrap(), 5);
}

#[test]
fn backward_flops_are_twice_the_products() {
    let (forward, loss) = mlp();
    let g = training_graph(&forward, loss, Optimizer::Sgd).unwrap();
    let flops = |name: &str| {
        let n = node(&g, name);
        n.op.flops(&g.input_facts(n).unwrap(), &n.outputs)
    };
    assert_eq!(flops("fc2.dx"), flops("fc2"));
    assert_eq!(flops("fc2.dw"), flops("fc2"));
    assert_eq!(flops("fc1.dw"), flops("fc1"));
    assert_eq!(flops("fc1.weight.update"), 2 * 16 * 8);
}

#[test]
fn fan_out_and_tied_weights_sum_their_gradients() {
    let mut b = GraphBuilder::new("tied");
    let x = b.input("x", TensorFact::f32([2, 5])).unwrap();
    let h = b.linear_no_bias("a", x, 5).unwrap();
    let tied = b.params_of(h.node).to_vec();
    let linear = b.graph().node(h.node).op.clone();
    let y = b.op_with_params("b", linear, &[h], &tied).unwrap();
    let z = b.add("sum", h, y).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [2])).unwrap();
    let loss = b.cross_entropy("loss", z, labels).unwrap();
    let g = training_graph(&b.finish(), loss, Optimizer::SgdMomentum).unwrap();
    // `a`'s output feeds `b` and `sum`: its gradients are added before a's dW.
    let sum = node(&g, "a.grad_sum");
    assert_eq!(sum.op, Op::Add);
    assert_eq!(names(&g, &sum.inputs), ["sum.dx0", "b.dx"]);
    assert_eq!(names(&g, &node(&g, "a.dw").inputs), ["a.grad_sum", "x"]);
    // The one weight gets both layers' gradients, summed, and one update.
    let grad_sum = node(&g, "a.weight.grad_sum");
    assert_eq!(names(&g, &grad_sum.inputs), ["b.dw", "a.dw"]);
    assert_eq!(grad_sum.role, Role::Dw);
    assert_eq!(g.nodes.iter().filter(|n| n.role == Role::Update).count(), 1);
    assert_eq!(names(&g, &node(&g, "a.weight.update").inputs), ["a.weight.grad_sum"]);
    check_gradients(&g).unwrap();
}

fn training_error(forward: &Graph, loss: OutletId) -> String {
    match training_graph(forward, loss, Optimizer::Adam) {
        Err(e @ IrError::Training { .. }) => e.to_string(),
        other => panic!("expected a training error, got {other:?}"),
    }
}

#[test]
fn bad_models_and_losses_are_named() {
    // No parameters at all.
    let mut b = GraphBuilder::new("free");
    let x = b.input("x", TensorFact::f32([2, 3])).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [2])).unwrap();
    let loss = b.cross_entropy("loss", x, labels).unwrap();
    let message = training_error(&b.finish(), loss);
    assert!(message.contains("no trainable parameters"), "{message}");

    // Parameters, but the loss does not depend on them.
    let mut b = GraphBuilder::new("detached");
    let x = b.input("x", TensorFact::f32([2, 3])).unwrap();
    b.linear("unused", x, 3).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I64, [2])).unwrap();
    let loss = b.cross_entropy("loss", x, labels).unwrap();
    let message = training_error(&b.finish(), loss);
    assert!(message.contains("`loss` does not depend on any trainable parameter"), "{message}");

    // A loss that is not a scalar.
    let (forward, _) = mlp();
    let logits = OutletId::new(node(&forward, "fc2").id, 0);
    let message = training_error(&forward, logits);
    assert!(message.contains("the loss `fc2` must be a float scalar"), "{message}");
}

#[test]
fn check_gradients_finds_a_gradient_of_the_wrong_shape() {
    let (forward, loss) = mlp();
    let mut g = training_graph(&forward, loss, Optimizer::Adam).unwrap();
    let id = node(&g, "relu.dx").id;
    let wrong = TensorFact::f32([4, 15]);
    g.nodes[id.index()].outputs = vec![wrong.clone()];
    if let Op::Grad(grad) = &mut g.nodes[id.index()].op {
        grad.produces = vec![wrong];
    }
    let message = check_gradients(&g).unwrap_err().to_string();
    assert!(message.contains("`relu.dx`: produces"), "{message}");
}
