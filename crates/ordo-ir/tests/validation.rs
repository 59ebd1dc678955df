//! Every class of bad graph is rejected with an error that names the offending node.

use ordo_ir::{
    DType, Graph, GraphBuilder, IrError, NodeId, Op, OutletId, ParamId, TensorFact, validate,
};

/// `x -> fc1 -> relu -> fc2`, valid.
fn small_graph() -> Graph {
    let mut b = GraphBuilder::new("mlp");
    let x = b.input("x", TensorFact::f32([4, 16])).unwrap();
    let h = b.linear("fc1", x, 8).unwrap();
    let h = b.relu("relu", h).unwrap();
    b.linear("fc2", h, 2).unwrap();
    b.finish()
}

#[test]
fn a_built_graph_is_valid_and_survives_a_json_round_trip() {
    let g = small_graph();
    validate(&g).unwrap();
    let text = serde_json::to_string(&g).unwrap();
    let back: Graph = serde_json::from_str(&text).unwrap();
    assert_eq!(back, g);
    validate(&back).unwrap();
}

#[test]
fn a_cycle_is_reported_with_a_node_on_it() {
    let mut g = small_graph();
    // fc1 now reads relu's output: fc1 -> relu -> fc1.
    g.nodes[1].inputs[0] = OutletId::new(NodeId(2), 0);
    let err = validate(&g).unwrap_err();
    match err {
        IrError::Cycle { node } => assert!(node == "fc1" || node == "relu", "{node}"),
        other => panic!("expected a cycle, got {other}"),
    }
}

#[test]
fn a_dangling_input_names_the_reader() {
    let mut g = small_graph();
    g.nodes[2].inputs[0] = OutletId::new(NodeId(99), 0);
    let err = validate(&g).unwrap_err();
    assert_eq!(
        err,
        IrError::DanglingInput { node: "relu".into(), input: OutletId::new(NodeId(99), 0) }
    );
    assert!(err.to_string().contains("`relu`"));
}

#[test]
fn a_missing_output_slot_is_dangling_too() {
    let mut g = small_graph();
    g.nodes[2].inputs[0] = OutletId::new(NodeId(1), 3);
    assert!(matches!(validate(&g), Err(IrError::DanglingInput { node, .. }) if node == "relu"));
}

#[test]
fn a_shape_mismatch_names_the_node_and_the_shapes() {
    let mut b = GraphBuilder::new("bad");
    let x = b.input("x", TensorFact::f32([2, 3])).unwrap();
    let y = b.input("y", TensorFact::f32([4])).unwrap();
    let err = b.add("sum", x, y).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`sum`") && text.contains("f32[2,3]") && text.contains("f32[4]"),
        "{text}"
    );
}

#[test]
fn a_dtype_mismatch_names_the_node() {
    let mut b = GraphBuilder::new("bad");
    let x = b.input("x", TensorFact::f32([2, 3])).unwrap();
    let y = b.input("y", TensorFact::new(DType::I64, [2, 3])).unwrap();
    let err = b.mul("prod", x, y).unwrap_err();
    assert!(matches!(&err, IrError::Shape { node, op: "Mul", .. } if node == "prod"), "{err}");
}

#[test]
fn a_stored_fact_that_disagrees_with_inference_is_rejected() {
    let mut g = small_graph();
    g.nodes[3].outputs[0] = TensorFact::f32([4, 3]);
    let err = validate(&g).unwrap_err();
    assert_eq!(
        err,
        IrError::FactMismatch {
            node: "fc2".into(),
            slot: 0,
            stored: "f32[4,3]".into(),
            inferred: "f32[4,2]".into()
        }
    );
}

#[test]
fn a_changed_input_shape_is_caught_downstream() {
    let mut g = small_graph();
    g.nodes[0].outputs[0] = TensorFact::f32([4, 17]);
    // fc1's stored output is still [4, 8], but its weight is [8, 16]: parameter check fails.
    let err = validate(&g).unwrap_err();
    assert!(matches!(&err, IrError::Shape { node, .. } if node == "fc1"), "{err}");
}

#[test]
fn duplicate_node_names_are_rejected_by_builder_and_validator() {
    let mut b = GraphBuilder::new("dup");
    let x = b.input("x", TensorFact::f32([2])).unwrap();
    b.relu("r", x).unwrap();
    assert_eq!(
        b.relu("r", x).unwrap_err(),
        IrError::DuplicateName { kind: "node", name: "r".into() }
    );
    let mut g = small_graph();
    g.nodes[2].name = "fc1".into();
    assert_eq!(
        validate(&g).unwrap_err(),
        IrError::DuplicateName { kind: "node", name: "fc1".into() }
    );
}

#[test]
fn a_missing_parameter_is_rejected() {
    let mut g = small_graph();
    g.nodes[1].params[0] = ParamId(42);
    assert_eq!(
        validate(&g).unwrap_err(),
        IrError::DanglingParam { node: "fc1".into(), param: ParamId(42) }
    );
}

#[test]
fn tied_parameters_must_have_the_required_shape() {
    let mut b = GraphBuilder::new("tied");
    let ids = b.input("ids", TensorFact::new(DType::I64, [2, 5])).unwrap();
    let e = b.embedding("wte", ids, 100, 16).unwrap();
    let wte = b.params_of(e.node).to_vec();
    let logits = b
        .op_with_params("lm_head", Op::Linear(ordo_ir::op::Linear::new(100).no_bias()), &[e], &wte)
        .unwrap();
    assert_eq!(b.fact(logits).shape, vec![2, 5, 100]);
    // A head of another width cannot reuse the [100, 16] table.
    let err = b
        .op_with_params("bad_head", Op::Linear(ordo_ir::op::Linear::new(99).no_bias()), &[e], &wte)
        .unwrap_err();
    assert!(matches!(&err, IrError::Shape { node, .. } if node == "bad_head"), "{err}");
    let g = b.finish();
    validate(&g).unwrap();
    assert_eq!(ordo_ir::graph_stats(&g).params, 1600, "a tied weight is counted once");
}

#[test]
fn bad_ids_and_outputs_are_rejected() {
    let mut g = small_graph();
    g.nodes[2].id = NodeId(7);
    assert_eq!(validate(&g).unwrap_err(), IrError::BadId { index: 2, id: NodeId(7) });
    let mut g = small_graph();
    g.outputs.push(OutletId::new(NodeId(3), 1));
    assert!(matches!(validate(&g), Err(IrError::DanglingOutput { .. })));
}
