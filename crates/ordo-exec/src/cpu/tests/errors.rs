//! Bad arguments give errors naming the op, never panics; kernels are deterministic.

use ordo_ir::op::{Conv2d, Embedding, Grad, Lstm, Optimizer, Saved, Update, Wrt};
use ordo_ir::{Op, TensorFact};

use super::super::{KernelContext, KernelError, Tensor, op_label, run, supports};
use super::cases;
use super::{ctx, params_for, rand};

fn err(op: &Op, inputs: &[&Tensor], params: &[&Tensor]) -> KernelError {
    run(op, inputs, params, &mut [], &ctx()).unwrap_err()
}

#[test]
fn wrong_counts_shapes_and_dtypes() {
    let x = rand(&[2, 3], 1);
    assert!(matches!(err(&Op::Add, &[&x], &[]), KernelError::Count { expected: 2, got: 1, .. }));
    let op = Op::Conv2d(Conv2d::new(4, 3));
    assert!(matches!(err(&op, &[&x], &[]), KernelError::Shape { .. }));
    let img = rand(&[1, 2, 5, 5], 2);
    let e = err(&op, &[&img], &[]);
    assert!(
        matches!(e, KernelError::Count { what: "parameter(s)", expected: 2, got: 0, .. }),
        "{e}"
    );
    let bad_w = rand(&[4, 2, 3, 2], 3);
    let b = rand(&[4], 3);
    assert!(err(&op, &[&img], &[&bad_w, &b]).to_string().starts_with("Conv2d: parameter 0"));
    let ids = Tensor::from_i64(&[2, 3], vec![0; 6]).unwrap();
    let e = err(&Op::Unary { func: ordo_ir::op::UnaryOp::Relu }, &[&ids], &[]);
    assert!(e.to_string().starts_with("Relu:"), "{e}");
    let e = err(&Op::Mul, &[&x, &ids], &[]);
    assert!(matches!(e, KernelError::Shape { .. } | KernelError::DType { .. }), "{e}");
    let mask = Tensor::from_bool(&[2, 3], vec![true; 6]).unwrap();
    let e = err(&Op::Mul, &[&ids, &mask], &[]);
    assert!(e.to_string().starts_with("Mul:"), "{e}");
    let e = err(&Op::Softmax { axis: 1 }, &[&ids], &[]);
    assert!(e.to_string().starts_with("Softmax:"), "{e}");
}

#[test]
fn bad_values_and_missing_context() {
    let op = Op::Embedding(Embedding::new(4, 2));
    let table = rand(&[4, 2], 1);
    let ids = Tensor::from_i64(&[2], vec![1, 4]).unwrap();
    assert!(matches!(err(&op, &[&ids], &[&table]), KernelError::Value { .. }));
    let x = rand(&[3], 1);
    assert!(matches!(err(&Op::Dropout { p: 1.5 }, &[&x], &[]), KernelError::Value { .. }));
    assert!(matches!(err(&Op::Fill { value: 1.0 }, &[], &[]), KernelError::Context { .. }));
    let logits = rand(&[2, 3], 1);
    let labels = Tensor::from_i64(&[2], vec![0, 3]).unwrap();
    assert!(matches!(
        err(&Op::CrossEntropyLoss, &[&logits, &labels], &[]),
        KernelError::Value { .. }
    ));
    let adam = Op::Update(Update { optimizer: Optimizer::Adam });
    let mut state = super::super::init_state(Optimizer::Adam, &x.fact()).unwrap();
    let ctx0 = KernelContext { step: 0, ..ctx() };
    let e = run(&adam, &[&x], &[&x], &mut state, &ctx0).unwrap_err();
    assert!(matches!(e, KernelError::Context { .. }));
    let e = run(&adam, &[&x], &[&x], &mut [], &ctx()).unwrap_err();
    assert!(matches!(e, KernelError::Count { what: "state slot(s)", .. }));
    assert!(Tensor::from_f32(&[2, 2], vec![0.0; 3]).is_err());
}

fn grad(of: Op, wrt: Wrt, saved: Vec<Saved>, produces: Vec<TensorFact>) -> Op {
    Op::Grad(Grad { of: Box::new(of), wrt, saved, produces, flops: 0 })
}

#[test]
fn unsupported_gradients_and_what_the_ir_cannot_give() {
    let emb = Op::Embedding(Embedding::new(4, 2));
    let e = supports(&grad(emb, Wrt::Input(0), vec![], vec![])).unwrap_err();
    assert!(e.to_string().starts_with("GradInput(0) of Embedding"), "{e}");
    let wrong_saved = grad(Op::Softmax { axis: -1 }, Wrt::Input(0), vec![Saved::Input(0)], vec![]);
    assert!(matches!(supports(&wrong_saved), Err(KernelError::Unsupported { .. })));
    // Concat's input gradient needs the forward inputs' facts.
    let dy = rand(&[2, 5], 1);
    let cat = grad(Op::Concat { axis: 1 }, Wrt::Input(1), vec![], vec![TensorFact::f32([2, 3])]);
    assert!(matches!(err(&cat, &[&dy], &[]), KernelError::Context { .. }));
    // Lstm's parameter gradient needs the forward weights.
    let lstm = Op::Lstm(Lstm::new(2));
    let x = [rand(&[3, 1, 2], 1)];
    let y = rand(&[3, 1, 2], 2);
    let specs: Vec<TensorFact> = params_for(&lstm, &x, 1).iter().map(Tensor::fact).collect();
    let g = grad(lstm, Wrt::Params, vec![Saved::Input(0), Saved::Output], specs);
    assert!(matches!(err(&g, &[&y, &x[0], &y], &[]), KernelError::Context { .. }));
    assert_eq!(op_label(&g), "GradParams of Lstm");
}

#[test]
fn same_inputs_give_bitwise_the_same_outputs_on_any_thread() {
    let cases = cases::all(7);
    let here: Vec<Vec<Tensor>> =
        cases.iter().map(|c| super::run_op(&c.op, &c.inputs, &c.params, &ctx())).collect();
    let there = std::thread::spawn(move || {
        cases.iter().map(|c| super::run_op(&c.op, &c.inputs, &c.params, &ctx())).collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    for (a, b) in here.iter().flatten().zip(there.iter().flatten()) {
        let bits =
            |t: &Tensor| t.as_f32().map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        assert_eq!(bits(a), bits(b));
    }
}
