//! The training graph of every zoo model: gradients shaped like what they differentiate, one
//! update per trainable parameter the loss depends on, and backward FLOPs about twice forward.

use ordo_ir::op::Optimizer;
use ordo_ir::training::{check_gradients, training_graph};
use ordo_ir::{Graph, Op, OutletId, Role};

fn flops(g: &Graph, role: Role) -> u64 {
    g.nodes
        .iter()
        .filter(|n| n.role == role)
        .map(|n| n.op.flops(&g.input_facts(n).unwrap(), &n.outputs))
        .sum()
}

#[test]
fn every_zoo_model_has_a_checked_training_graph() {
    for spec in ordo_models::zoo() {
        let name = spec.name;
        let forward = ordo_models::build(name, Some(2), spec.default_seq_len.map(|_| 16)).unwrap();
        let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
        let g = training_graph(&forward, loss, Optimizer::Adam).unwrap();
        let grads = g.nodes.iter().filter(|n| matches!(n.op, Op::Grad(_))).count();
        assert_eq!(check_gradients(&g).unwrap(), grads, "{name}");
        assert!(grads > forward.nodes.len() / 2, "{name}: {grads} gradients");

        // Every trainable parameter is updated, except BERT's pooler, which the masked-LM loss
        // does not use.
        let updated: Vec<&str> = g
            .nodes
            .iter()
            .filter(|n| n.role == Role::Update)
            .map(|n| g.param(n.params[0]).name.as_str())
            .collect();
        let missing: Vec<&str> = forward
            .params
            .iter()
            .filter(|p| p.trainable && !updated.contains(&p.name.as_str()))
            .map(|p| p.name.as_str())
            .collect();
        let expected: &[&str] =
            if name == "bert_base" { &["pooler.dense.weight", "pooler.dense.bias"] } else { &[] };
        assert_eq!(missing, expected, "{name}");
        assert!(
            forward
                .params
                .iter()
                .filter(|p| !p.trainable)
                .all(|p| !updated.contains(&p.name.as_str()))
        );

        // Every backward node belongs to a forward layer; dX and dW cost about the forward.
        assert!(g.nodes.iter().filter(|n| n.role != Role::Forward).all(|n| n.layer.is_some()));
        let (fwd, dx, dw) = (flops(&g, Role::Forward), flops(&g, Role::Dx), flops(&g, Role::Dw));
        let ratio = (dx + dw) as f64 / fwd as f64;
        assert!((1.9..=2.05).contains(&ratio), "{name}: backward / forward FLOPs = {ratio:.3}");
    }
}
