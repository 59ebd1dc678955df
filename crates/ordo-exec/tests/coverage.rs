//! Every node of every zoo model's training graph, under every optimizer, has a CPU kernel:
//! [`supports`] is the kernels' own dispatch, and for gradients it also checks that the
//! saved tensors the training builder gives are those the kernel reads.

use ordo_exec::cpu::supports;
use ordo_ir::op::Optimizer;
use ordo_ir::training::training_graph;
use ordo_ir::{Op, OutletId};

#[test]
fn every_training_graph_node_of_the_zoo_has_a_kernel() {
    let mut seen = std::collections::BTreeSet::new();
    for spec in ordo_models::zoo() {
        let forward =
            ordo_models::build(spec.name, Some(1), spec.default_seq_len.map(|_| 8)).unwrap();
        let loss = OutletId::new(forward.find("loss").unwrap().id, 0);
        for optimizer in [Optimizer::Sgd, Optimizer::SgdMomentum, Optimizer::Adam] {
            let g = training_graph(&forward, loss, optimizer).unwrap();
            for node in &g.nodes {
                if let Err(e) = supports(&node.op) {
                    panic!("{}: node `{}`: {e}", spec.name, node.name);
                }
                seen.insert(ordo_exec::cpu::op_label(&node.op));
            }
        }
    }
    // The zoo exercises the backward of every family, so the check means something.
    for label in
        ["GradInput(0) of Conv2d", "GradParams of Lstm", "GradInput(1) of MatMul", "Update"]
    {
        assert!(seen.contains(label), "no {label} in the zoo: {seen:?}");
    }
    assert!(supports(&Op::Input).is_ok());
}
