//! The data-sized ops (`Range`, `NonZero`, `NonMaxSuppression`): their values against ones
//! written out by hand, and the run-time check of the planned size, which names the values.

use ordo_ir::op::{NonMaxSuppression, Unique, UniquePart};
use ordo_ir::{DType, Op, TensorFact};

use super::super::{KernelContext, Tensor, run};

/// `op` over `inputs` of `dtypes`, its output declared `out`.
fn run_op(op: &Op, inputs: &[Tensor], dtypes: &[DType], out: TensorFact) -> Result<Tensor, String> {
    let facts: Vec<TensorFact> =
        inputs.iter().zip(dtypes).map(|(t, &d)| TensorFact::new(d, t.shape().to_vec())).collect();
    let outputs = [out];
    let ctx = KernelContext { inputs: &facts, outputs: &outputs, ..KernelContext::default() };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    run(op, &refs, &[], &mut [], &ctx).map(|mut o| o.remove(0)).map_err(|e| e.to_string())
}

/// `Range` of run-time scalars against `start + i * delta` written out, with its run-time check
/// of the planned length.
#[test]
fn range_gives_the_planned_length_or_names_the_values() {
    let range = |len: usize, values: [Tensor; 3], dtype: DType| {
        run_op(&Op::Range { len }, &values, &[dtype; 3], TensorFact::new(dtype, vec![len]))
    };
    let ints = |v: [i64; 3]| v.map(|x| Tensor::from_i64(&[], vec![x]).unwrap());
    let floats = |v: [f32; 3]| v.map(|x| Tensor::from_f32(&[], vec![x]).unwrap());
    // ceil((1 - 10) / -3) = 3: 10, 7, 4 (i32, as ONNX's negative-delta case).
    let t = range(3, ints([10, 1, -3]), DType::I32).unwrap();
    assert_eq!(t.as_i64().unwrap(), &[10, 7, 4]);
    // ceil((10 - 1) / 3) = 3 exactly: 1, 4, 7 (the limit is excluded).
    assert_eq!(range(3, ints([1, 10, 3]), DType::I64).unwrap().as_i64().unwrap(), &[1, 4, 7]);
    // An empty range when delta points away from the limit.
    assert_eq!(range(0, ints([1, 10, -1]), DType::I64).unwrap().as_i64().unwrap(), &[] as &[i64]);
    let t = range(4, floats([0.5, 2.0, 0.4]), DType::F32).unwrap();
    let want: Vec<f32> = (0..4).map(|i| (0.5 + f64::from(i) * f64::from(0.4f32)) as f32).collect();
    assert_eq!(t.as_f32().unwrap(), want.as_slice());
    // Values that give another length than the plan's, and a zero step: errors naming them.
    let e = range(2, ints([0, 10, 3]), DType::I64).unwrap_err();
    assert!(e.contains("start 0, limit 10, delta 3 give 4 elements; the plan holds 2"), "{e}");
    let e = range(2, floats([0.0, 1.0, 0.0]), DType::F32).unwrap_err();
    assert!(e.contains("delta 0: the range has no length"), "{e}");
    let e = range(2, ints([0, 1, 0]), DType::I64).unwrap_err();
    assert!(e.contains("delta is 0"), "{e}");
}

#[test]
fn non_zero_gives_row_major_coordinates_or_names_the_count() {
    let x = Tensor::from_f32(&[2, 3], vec![0.0, 1.5, 0.0, -2.0, 0.0, 3.0]).unwrap();
    let out = TensorFact::new(DType::I64, vec![2, 3]);
    let t =
        run_op(&Op::NonZero { count: 3 }, std::slice::from_ref(&x), &[DType::F32], out).unwrap();
    // (0, 1), (1, 0), (1, 2): rows first, then columns.
    assert_eq!(t.as_i64().unwrap(), &[0, 1, 1, 1, 0, 2]);
    let bools = Tensor::from_bool(&[3], vec![true, false, true]).unwrap();
    let out = TensorFact::new(DType::I64, vec![1, 2]);
    let t = run_op(&Op::NonZero { count: 2 }, &[bools], &[DType::Bool], out).unwrap();
    assert_eq!(t.as_i64().unwrap(), &[0, 2]);
    let out = TensorFact::new(DType::I64, vec![2, 4]);
    let e = run_op(&Op::NonZero { count: 4 }, &[x], &[DType::F32], out).unwrap_err();
    assert!(e.contains("3 nonzero elements; the plan holds 4"), "{e}");
}

#[test]
fn non_max_suppression_keeps_the_best_boxes_that_do_not_overlap() {
    // Four boxes (two corners each): 1 overlaps 0 by IoU 0.90, 2 is apart, 3 sits inside 2
    // with IoU 0.25. Class 0 scores 1 highest, class 1 scores 0 and 3 alike.
    let boxes = Tensor::from_f32(
        &[1, 4, 4],
        vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.05, 0.95, 1.0, 2.0, 2.0, 4.0, 4.0, 2.0, 2.0, 3.0, 3.0],
    )
    .unwrap();
    let scores =
        Tensor::from_f32(&[1, 2, 4], vec![0.8, 0.9, 0.3, 0.2, 0.5, 0.1, 0.4, 0.5]).unwrap();
    let nms = |count, iou, score| NonMaxSuppression {
        count,
        center_point_box: false,
        max_per_class: 3,
        iou_threshold: iou,
        score_threshold: score,
    };
    let run_nms = |n: NonMaxSuppression| {
        let out = TensorFact::new(DType::I64, vec![n.count, 3]);
        run_op(&Op::NonMaxSuppression(n), &[boxes.clone(), scores.clone()], &[DType::F32; 2], out)
    };
    // IoU above 0.5 suppresses: class 0 keeps 1 (not 0), 2, 3; class 1 keeps 0 and 3 (tied,
    // the lower index first), then 2 (1 overlaps 0). At most 3 per class.
    let t = run_nms(nms(6, 0.5, None)).unwrap();
    let want = [0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 0, 0, 1, 3, 0, 1, 2];
    assert_eq!(t.as_i64().unwrap(), &want);
    // IoU above 0.2 also suppresses 3 under 2; scores above 0.45 only.
    let t = run_nms(nms(3, 0.2, Some(0.45))).unwrap();
    assert_eq!(t.as_i64().unwrap(), &[0, 0, 1, 0, 1, 0, 0, 1, 3]);
    let e = run_nms(nms(4, 0.2, Some(0.45))).unwrap_err();
    assert!(e.contains("3 boxes selected; the plan holds 4"), "{e}");
}

#[test]
fn unique_finds_distinct_slices_in_either_order_or_names_the_count() {
    // Rows of [4, 2]: (2, 1), (0, 5), (2, 1), (0, 3): three distinct rows.
    let x = Tensor::from_i64(&[4, 2], vec![2, 1, 0, 5, 2, 1, 0, 3]).unwrap();
    let part = |axis, sorted, count, part| {
        let u = Unique { axis, sorted, count, part };
        let out = Op::Unique(u.clone()).infer(&[&TensorFact::new(DType::I64, vec![4, 2])]);
        let out = out.map_err(|e| e.to_string())?.remove(0);
        run_op(&Op::Unique(u), std::slice::from_ref(&x), &[DType::I64], out)
    };
    let ints = |t: Tensor| t.as_i64().unwrap().to_vec();
    // Sorted rows: (0, 3), (0, 5), (2, 1).
    assert_eq!(ints(part(Some(0), true, 3, UniquePart::Values).unwrap()), [0, 3, 0, 5, 2, 1]);
    assert_eq!(ints(part(Some(0), true, 3, UniquePart::Indices).unwrap()), [3, 1, 0]);
    assert_eq!(ints(part(Some(0), true, 3, UniquePart::Inverse).unwrap()), [2, 1, 2, 0]);
    assert_eq!(ints(part(Some(0), true, 3, UniquePart::Counts).unwrap()), [1, 1, 2]);
    // In order of first occurrence: (2, 1), (0, 5), (0, 3).
    assert_eq!(ints(part(Some(0), false, 3, UniquePart::Values).unwrap()), [2, 1, 0, 5, 0, 3]);
    assert_eq!(ints(part(Some(0), false, 3, UniquePart::Inverse).unwrap()), [0, 1, 0, 2]);
    // Flattened: 0, 1, 2, 3, 5 (five distinct elements); columns: (2, 0, 2, 0), (1, 5, 1, 3).
    assert_eq!(ints(part(None, true, 5, UniquePart::Values).unwrap()), [0, 1, 2, 3, 5]);
    assert_eq!(ints(part(Some(1), true, 2, UniquePart::Counts).unwrap()), [1, 1]);
    let e = part(None, true, 4, UniquePart::Counts).unwrap_err();
    assert!(e.contains("5 distinct elements; the plan holds 4"), "{e}");
    // Floats: -0 equals 0, NaN sorts last.
    let f = Tensor::from_f32(&[4], vec![f32::NAN, 0.0, -0.0, -1.0]).unwrap();
    let u = Unique { axis: None, sorted: true, count: 3, part: UniquePart::Counts };
    let out = TensorFact::new(DType::I64, vec![3]);
    assert_eq!(ints(run_op(&Op::Unique(u), &[f], &[DType::F32], out).unwrap()), [1, 2, 1]);
}
