//! Inference through the sequential interpreter (`sequential::infer`, what `ordo conformance`
//! runs ONNX's node tests on): inference mode, feeds checked against the graph's inputs.

use ordo_exec::cpu::Tensor;
use ordo_exec::sequential::infer;
use ordo_exec::{ExecError, Feeds, initial_params};
use ordo_ir::{DType, Graph, GraphBuilder, TensorFact};

/// `x -> linear -> dropout`, and a cross-entropy on `i32` labels.
fn graph() -> Graph {
    let mut b = GraphBuilder::new("infer");
    let x = b.input("x", TensorFact::f32([2, 3])).unwrap();
    let h = b.linear("fc", x, 4).unwrap();
    let d = b.dropout("drop", h, 0.5).unwrap();
    let labels = b.input("labels", TensorFact::new(DType::I32, [2])).unwrap();
    let loss = b.cross_entropy("loss", d, labels).unwrap();
    b.output(h);
    b.output(d);
    b.output(loss);
    b.finish()
}

fn feeds() -> Feeds {
    let x = Tensor::from_f32(&[2, 3], vec![0.5, -1.0, 2.0, 0.25, 3.0, -0.75]).unwrap();
    // `i32` values are held widened to `i64`.
    let labels = Tensor::from_i64(&[2], vec![1, 3]).unwrap();
    [("x".to_string(), x), ("labels".to_string(), labels)].into()
}

#[test]
fn inference_turns_dropout_off_and_reads_widened_integer_inputs() {
    let g = graph();
    let params = initial_params(&g, 4).unwrap();
    let out = infer(g, params, &feeds()).unwrap();
    assert_eq!(out[0], out[1], "dropout in inference mode is the identity");
    assert!(out[2].as_f32().unwrap()[0].is_finite());
}

#[test]
fn inference_names_what_is_wrong() {
    let g = graph();
    let params = initial_params(&g, 4).unwrap();
    let e = infer(g.clone(), params[..1].to_vec(), &feeds()).unwrap_err();
    assert!(matches!(e, ExecError::Config(_)), "{e}");
    assert!(e.to_string().contains("1 parameter values for 2 parameters"), "{e}");

    let mut bad = feeds();
    bad.insert("x".into(), Tensor::from_f32(&[3, 2], vec![0.0; 6]).unwrap());
    let e = infer(g.clone(), params.clone(), &bad).unwrap_err();
    assert!(
        e.to_string().contains("input `x`")
            && e.to_string().contains("fed f32[3,2], expects f32[2,3]"),
        "{e}"
    );

    let mut missing = feeds();
    missing.remove("labels");
    let e = infer(g, params, &missing).unwrap_err();
    assert!(e.to_string().contains("input `labels`: no tensor is fed to it"), "{e}");
}

/// A size that cannot be had is an error, never an abort: more than the machine has, or more
/// elements than an address space.
#[test]
fn impossible_tensors_are_errors() {
    let huge = Tensor::full(&[1 << 40, 1 << 10], 0.0).unwrap_err().to_string();
    assert!(huge.contains("needs 4503599627370496 bytes"), "{huge}");
    let overflow = Tensor::zeros(&TensorFact::f32([usize::MAX, 2])).unwrap_err().to_string();
    assert!(overflow.contains("do not fill shape"), "{overflow}");
    let ids = Tensor::random_ids(&[1 << 40, 1 << 10], 7, 0).unwrap_err().to_string();
    assert!(ids.contains("bytes"), "{ids}");
}
