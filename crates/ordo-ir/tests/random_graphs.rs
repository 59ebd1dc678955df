//! Property tests on random DAGs.

use ordo_ir::{Graph, GraphBuilder, IrError, NodeId, OutletId, TensorFact, validate};
use proptest::prelude::*;

/// A random DAG of Adds and Relus over one shape; `picks[i]` chooses the inputs of node i among
/// the earlier nodes.
fn random_dag(picks: &[(usize, usize, bool)]) -> Graph {
    let mut b = GraphBuilder::new("random");
    let mut outs = vec![b.input("x", TensorFact::f32([3])).unwrap()];
    for (i, &(p, q, binary)) in picks.iter().enumerate() {
        let a = outs[p % outs.len()];
        let out = if binary {
            b.add(&format!("n{i}"), a, outs[q % outs.len()]).unwrap()
        } else {
            b.relu(&format!("n{i}"), a).unwrap()
        };
        outs.push(out);
    }
    b.finish()
}

proptest! {
    #[test]
    fn topo_order_respects_every_edge(picks in prop::collection::vec((0usize..64, 0usize..64, any::<bool>()), 1..60)) {
        let g = random_dag(&picks);
        validate(&g).unwrap();
        let order = g.topo_order().unwrap();
        prop_assert_eq!(order.len(), g.nodes.len());
        let mut position = vec![0; g.nodes.len()];
        for (i, id) in order.iter().enumerate() {
            position[id.index()] = i;
        }
        for node in &g.nodes {
            for input in &node.inputs {
                prop_assert!(position[input.node.index()] < position[node.id.index()]);
            }
        }
    }

    #[test]
    fn a_back_edge_always_makes_a_cycle(picks in prop::collection::vec((0usize..64, 0usize..64, any::<bool>()), 2..60), from in 0usize..64) {
        let mut g = random_dag(&picks);
        // The last node reads the chosen node and the chosen node reads the last one.
        let last = g.nodes.len() - 1;
        let target = 1 + from % (last - 1).max(1);
        g.nodes[last].inputs[0] = OutletId::new(NodeId(target as u32), 0);
        g.nodes[target].inputs[0] = OutletId::new(NodeId(last as u32), 0);
        let is_cycle = matches!(validate(&g), Err(IrError::Cycle { .. }));
        prop_assert!(is_cycle);
    }
}
