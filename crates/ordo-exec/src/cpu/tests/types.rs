//! Element types held in a wider storage: integer kernels against arithmetic in `i128`
//! wrapped by hand, u64 bit patterns against `u64` arithmetic, f16 and bf16 rounding against
//! their bit layouts, bit operations against `i128`'s, and the errors of values a type cannot
//! hold.

use ordo_ir::op::{BitwiseKind, CompareKind, Reduce, ReduceKind};
use ordo_ir::{DType, Op, TensorFact};

use super::super::{KernelContext, Tensor, held_as, run};

const INTEGERS: [DType; 8] =
    [DType::I8, DType::U8, DType::I16, DType::U16, DType::I32, DType::U32, DType::I64, DType::U64];

/// `v` wrapped to `dtype` through `i128` (a second path to the kernels' `as` chains): the
/// value as the `i64` storage holds it.
fn wrapped(v: i128, dtype: DType) -> i64 {
    let bits = match dtype {
        DType::I8 | DType::U8 => 8,
        DType::I16 | DType::U16 => 16,
        DType::I32 | DType::U32 => 32,
        _ => 64,
    };
    let m = v.rem_euclid(1i128 << bits);
    let signed = !matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
    let v = if signed && m >= 1i128 << (bits - 1) { m - (1i128 << bits) } else { m };
    // u64 values past i64::MAX are held as their bit pattern.
    v as u64 as i64
}

/// The value an `i64` holding `dtype` stands for.
fn value(v: i64, dtype: DType) -> i128 {
    if dtype == DType::U64 { i128::from(v as u64) } else { i128::from(v) }
}

/// Values of `dtype` spread over its range, both ends included.
fn samples(dtype: DType) -> Vec<i64> {
    let raw: [i128; 10] =
        [0, 1, -1, 2, 7, -7, 100, -128, i128::from(i64::MAX), i128::from(u64::MAX) - 5];
    raw.iter().map(|&v| wrapped(v, dtype)).collect()
}

fn int_tensor(v: &[i64]) -> Tensor {
    Tensor::from_i64(&[v.len()], v.to_vec()).unwrap()
}

/// Runs `op` on `inputs` declared of `input_types`, its output declared `out`.
fn run_typed(
    op: &Op,
    inputs: &[Tensor],
    input_types: &[DType],
    out: DType,
) -> Result<Tensor, String> {
    let facts: Vec<TensorFact> = inputs
        .iter()
        .zip(input_types)
        .map(|(t, &d)| TensorFact::new(d, t.shape().to_vec()))
        .collect();
    let shape = if inputs.is_empty() { vec![] } else { inputs[0].shape().to_vec() };
    let outputs = [TensorFact::new(out, shape)];
    let ctx = KernelContext { inputs: &facts, outputs: &outputs, ..KernelContext::default() };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    run(op, &refs, &[], &mut [], &ctx).map(|mut o| o.remove(0)).map_err(|e| e.to_string())
}

#[test]
fn integer_arithmetic_wraps_to_every_type_as_i128_arithmetic_does() {
    for dtype in INTEGERS {
        let xs = samples(dtype);
        // Every pair, as two flat tensors.
        let a: Vec<i64> = xs.iter().flat_map(|&x| xs.iter().map(move |_| x)).collect();
        let b: Vec<i64> = xs.iter().flat_map(|_| xs.iter().copied()).collect();
        let (ta, tb) = (int_tensor(&a), int_tensor(&b));
        type Expect = fn(i128, i128) -> Option<i128>;
        let ops: [(Op, Expect); 5] = [
            (Op::Add, |x, y| Some(x + y)),
            // Modulo 2^128 keeps every product's bits modulo 2^64.
            (Op::Mul, |x, y| Some(x.wrapping_mul(y))),
            // Truncating division, C's and ONNX's; zero divisors are checked apart.
            (Op::Div, |x, y| (y != 0).then(|| x / y)),
            (Op::Max, |x, y| Some(x.max(y))),
            (Op::Min, |x, y| Some(x.min(y))),
        ];
        for (op, expect) in ops {
            let has_zero = b.contains(&0);
            let got = run_typed(&op, &[ta.clone(), tb.clone()], &[dtype, dtype], dtype);
            if op == Op::Div && has_zero {
                let e = got.expect_err("division by zero");
                assert!(e.contains("by zero"), "{e}");
                continue;
            }
            let got = got.unwrap();
            let got = got.as_i64().unwrap();
            for k in 0..a.len() {
                let want = expect(value(a[k], dtype), value(b[k], dtype)).unwrap();
                assert_eq!(
                    got[k],
                    wrapped(want, dtype),
                    "{dtype} {} of {} and {}",
                    op.name(),
                    value(a[k], dtype),
                    value(b[k], dtype)
                );
            }
        }
        // Division without zero divisors.
        let nonzero: Vec<i64> = b.iter().map(|&v| if v == 0 { 3 } else { v }).collect();
        let got = run_typed(&Op::Div, &[ta.clone(), int_tensor(&nonzero)], &[dtype, dtype], dtype)
            .unwrap();
        for (k, &g) in got.as_i64().unwrap().iter().enumerate() {
            let want = value(a[k], dtype) / value(nonzero[k], dtype);
            assert_eq!(g, wrapped(want, dtype), "{dtype} Div");
        }
    }
}

#[test]
fn bit_operations_keep_each_types_bits_as_i128_bit_operations_do() {
    for dtype in INTEGERS {
        let xs = samples(dtype);
        let a: Vec<i64> = xs.iter().flat_map(|&x| xs.iter().map(move |_| x)).collect();
        let b: Vec<i64> = xs.iter().flat_map(|_| xs.iter().copied()).collect();
        let (ta, tb) = (int_tensor(&a), int_tensor(&b));
        type Expect = fn(i128, i128) -> i128;
        let ops: [(BitwiseKind, Expect); 3] = [
            (BitwiseKind::And, |x, y| x & y),
            (BitwiseKind::Or, |x, y| x | y),
            (BitwiseKind::Xor, |x, y| x ^ y),
        ];
        for (kind, expect) in ops {
            let types = [dtype, dtype];
            let got =
                run_typed(&Op::Bitwise(kind), &[ta.clone(), tb.clone()], &types, dtype).unwrap();
            for (k, &g) in got.as_i64().unwrap().iter().enumerate() {
                let want = expect(value(a[k], dtype), value(b[k], dtype));
                assert_eq!(g, wrapped(want, dtype), "{dtype} {kind:?} of {} and {}", a[k], b[k]);
            }
        }
        let not = run_typed(&Op::Bitwise(BitwiseKind::Not), &[int_tensor(&xs)], &[dtype], dtype);
        for (k, &g) in not.unwrap().as_i64().unwrap().iter().enumerate() {
            assert_eq!(g, wrapped(!value(xs[k], dtype), dtype), "{dtype} Not of {}", xs[k]);
        }
    }
    // Shifts (ONNX's BitShift takes unsigned types): by every count up to the width, and past.
    for (dtype, bits) in [(DType::U8, 8), (DType::U16, 16), (DType::U32, 32), (DType::U64, 64)] {
        let xs = samples(dtype);
        let counts: Vec<i64> = (0..=bits + 1).collect();
        let a: Vec<i64> = xs.iter().flat_map(|&x| counts.iter().map(move |_| x)).collect();
        let n: Vec<i64> = xs.iter().flat_map(|_| counts.iter().copied()).collect();
        let types = [dtype, dtype];
        for kind in [BitwiseKind::ShiftLeft, BitwiseKind::ShiftRight] {
            let inputs = [int_tensor(&a), int_tensor(&n)];
            let got = run_typed(&Op::Bitwise(kind), &inputs, &types, dtype).unwrap();
            for (k, &g) in got.as_i64().unwrap().iter().enumerate() {
                let (x, count) = (value(a[k], dtype), n[k]);
                let want = match kind {
                    _ if count >= bits => 0,
                    BitwiseKind::ShiftLeft => x << count,
                    _ => x >> count,
                };
                assert_eq!(g, wrapped(want, dtype), "{dtype} {kind:?} of {x} by {count}");
            }
        }
    }
}

#[test]
fn top_k_of_integers_orders_signed_and_unsigned_values_as_their_types_do() {
    let big = u64::MAX - 1; // held as -2
    let values = int_tensor(&[3, big as i64, -7, 3, 0]);
    let top = |largest: bool, indices: bool, dtype: DType| {
        let op = Op::TopK { k: 3, axis: 0, largest, indices };
        let out = if indices { DType::I64 } else { dtype };
        let got = run_typed(&op, std::slice::from_ref(&values), &[dtype], out).unwrap();
        got.as_i64().unwrap().to_vec()
    };
    // As i64: -7 and -2 are the smallest; ties (the two 3s) by the lower index.
    assert_eq!(top(true, false, DType::I64), [3, 3, 0]);
    assert_eq!(top(true, true, DType::I64), [0, 3, 4]);
    assert_eq!(top(false, false, DType::I64), [-7, -2, 0]);
    // As u64: u64::MAX - 1 and then -7's bit pattern are the largest.
    assert_eq!(top(true, true, DType::U64), [1, 2, 0]);
    assert_eq!(top(false, true, DType::U64), [4, 0, 3]);
}

#[test]
fn u64_values_past_i64_compare_divide_and_cast_as_unsigned() {
    let big = u64::MAX - 1; // held as -2
    let a = int_tensor(&[big as i64, 5, big as i64]);
    let b = int_tensor(&[3, big as i64, 7]);
    let u = [DType::U64, DType::U64];
    let less = run_typed(&Op::Compare(CompareKind::Less), &[a.clone(), b.clone()], &u, DType::Bool)
        .unwrap();
    assert_eq!(less.as_bool().unwrap(), &[false, true, false]);
    let max = run_typed(&Op::Max, &[a.clone(), b.clone()], &u, DType::U64).unwrap();
    assert_eq!(max.as_i64().unwrap(), &[big as i64, big as i64, big as i64]);
    let div = run_typed(&Op::Div, &[a.clone(), b.clone()], &u, DType::U64).unwrap();
    let want = [big / 3, 0, big / 7].map(|v| v as i64);
    assert_eq!(div.as_i64().unwrap(), &want);
    let rem = run_typed(&Op::Mod { fmod: false }, &[a.clone(), b], &u, DType::U64).unwrap();
    assert_eq!(rem.as_i64().unwrap(), &[(big % 3) as i64, 5, (big % 7) as i64]);
    let cast = run_typed(&Op::cast(DType::F32), &[a], &[DType::U64], DType::F32).unwrap();
    assert_eq!(cast.as_f32().unwrap(), &[big as f32, 5.0, big as f32]);
    // The same bits declared i64 are negative.
    let signed = int_tensor(&[big as i64]);
    let cast = run_typed(&Op::cast(DType::F32), &[signed], &[DType::I64], DType::F32).unwrap();
    assert_eq!(cast.as_f32().unwrap(), &[-2.0]);
}

#[test]
fn half_types_round_each_output_to_nearest_even() {
    // 1 + 2^-11 lies halfway between two f16s (1 and 1 + 2^-10): ties go to the even one, 1;
    // 1 + 3 * 2^-11 goes to 1 + 2^-9. 65520 is past f16's largest (65504): infinity.
    let x = Tensor::from_f32(
        &[4],
        vec![1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 65520.0, 0.1],
    )
    .unwrap();
    let zero = Tensor::from_f32(&[4], vec![0.0; 4]).unwrap();
    let add = |out| {
        run_typed(&Op::Add, &[x.clone(), zero.clone()], &[out, out], out)
            .unwrap()
            .as_f32()
            .unwrap()
            .to_vec()
    };
    let h = add(DType::F16);
    assert_eq!(h[..3], [1.0, 1.0 + 2f32.powi(-9), f32::INFINITY]);
    // 0.1 in f16: 0x2E66, sign 0, exponent 11 (2^-4), mantissa 0x266.
    assert_eq!(h[3], (1.0 + 0x266 as f32 / 1024.0) * 2f32.powi(-4));
    // bf16 keeps 8 bits of mantissa: 0.1 is 0x3DCD.
    let b = add(DType::BF16);
    assert_eq!(b[3], f32::from_bits(0x3DCD_0000));
    assert_eq!(b[2], 65536.0);
    // f32 and f64 (held in f32) keep every bit.
    assert_eq!(add(DType::F32), x.as_f32().unwrap());
    assert_eq!(add(DType::F64), x.as_f32().unwrap());
}

#[test]
fn casts_narrow_to_the_target_type() {
    let x = Tensor::from_f32(&[4], vec![300.7, -1.5, 1e10, f32::NAN]).unwrap();
    let to_u8 = run_typed(&Op::cast(DType::U8), std::slice::from_ref(&x), &[DType::F32], DType::U8);
    // Truncation toward zero, then wrapping: 300 -> 44, -1 -> 255; 1e10 saturates to i64 first.
    assert_eq!(to_u8.unwrap().as_i64().unwrap(), &[44, 255, wrapped(10_000_000_000, DType::U8), 0]);
    let to_i16 =
        run_typed(&Op::cast(DType::I16), std::slice::from_ref(&x), &[DType::F32], DType::I16);
    assert_eq!(to_i16.unwrap().as_i64().unwrap()[..2], [300, -1]);
    let to_f16 = run_typed(&Op::cast(DType::F16), &[x], &[DType::F32], DType::F16).unwrap();
    assert_eq!(to_f16.as_f32().unwrap()[..3], [300.75, -1.5, f32::INFINITY]);
}

#[test]
fn a_fed_value_outside_its_type_is_an_error() {
    let fed = int_tensor(&[1, 300]);
    let facts = [TensorFact::new(DType::U8, vec![2])];
    let ctx = KernelContext { outputs: &facts, ..KernelContext::default() };
    let e = run(&Op::Input, &[&fed], &[], &mut [], &ctx).unwrap_err().to_string();
    assert!(e.contains("300") && e.contains("u8"), "{e}");
    let fine = int_tensor(&[1, 255]);
    assert!(run(&Op::Input, &[&fine], &[], &mut [], &ctx).is_ok());
    // An f16 input's storage is f32; an i64 tensor fed to it is refused.
    let facts = [TensorFact::new(DType::F16, vec![2])];
    let ctx = KernelContext { outputs: &facts, ..KernelContext::default() };
    assert!(run(&Op::Input, &[&fine], &[], &mut [], &ctx).is_err());
    assert_eq!(held_as(DType::F16), DType::F32);
    assert_eq!(held_as(DType::U4), DType::I64);
}

#[test]
fn integer_errors_name_the_operands() {
    let e =
        run_typed(&Op::Pow, &[int_tensor(&[2]), int_tensor(&[-1])], &[DType::I32; 2], DType::I32)
            .unwrap_err();
    assert!(e.contains("negative power") && e.contains("2 ^ -1"), "{e}");
    let p = run_typed(
        &Op::Pow,
        &[int_tensor(&[3, -2]), int_tensor(&[4, 3])],
        &[DType::I8; 2],
        DType::I8,
    )
    .unwrap();
    assert_eq!(p.as_i64().unwrap(), &[wrapped(81, DType::I8), -8]);
    let e = run_typed(&Op::Scale { factor: 0.5 }, &[int_tensor(&[2])], &[DType::I32], DType::I32)
        .unwrap_err();
    assert!(e.starts_with("Scale:"), "{e}");
}

#[test]
fn ops_that_would_read_u64_as_signed_are_refused_before_running() {
    let mut b = ordo_ir::GraphBuilder::new("u64");
    let x = b.input("x", TensorFact::new(DType::U64, [4])).unwrap();
    let f = b.op("f", Op::cast(DType::F32), &[x]).unwrap();
    let r = Op::Reduce(Reduce { kind: ReduceKind::Sum, axes: vec![0], keepdims: false });
    let y = b.op("sum", r, &[f]).unwrap();
    b.output(y);
    let graph = b.finish();
    assert_eq!(crate::missing_kernels(&graph), None);
    let mut b = ordo_ir::GraphBuilder::new("u64");
    let x = b.input("x", TensorFact::new(DType::U64, [4, 2])).unwrap();
    let arg = Op::ArgExtreme { max: true, axis: 1, keepdims: false, select_last: false };
    let y = b.op("argmax", arg, &[x]).unwrap();
    b.output(y);
    let graph = b.finish();
    let missing = crate::missing_kernels(&graph).expect("refused");
    assert!(missing.contains("u64 inputs of ArgMax") && missing.contains("`argmax`"), "{missing}");
}

#[test]
fn f16_and_bf16_narrowing_agrees_with_the_generic_float_formats() {
    // The kernels narrow f16 and bf16 with the `half` crate, the import's folding with
    // ordo_ir's generic rounding: the same values either way, specials included.
    let mut rng = fastrand::Rng::with_seed(7);
    let mut values: Vec<f32> = (0..20_000)
        .map(|_| f32::from_bits(rng.u32(..)))
        .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, 65504.0, 65520.0, 1e-8])
        .collect();
    values.retain(|v| !v.is_nan());
    for dtype in [DType::F16, DType::BF16] {
        let format = ordo_ir::element::FloatFormat::of(dtype).unwrap();
        let x = Tensor::from_f32(&[values.len()], values.clone()).unwrap();
        let zero = Tensor::from_f32(&[values.len()], vec![0.0; values.len()]).unwrap();
        // x + 0 keeps x (and turns -0 into +0 as IEEE addition does).
        let got = run_typed(&Op::Add, &[x, zero], &[dtype, dtype], dtype).unwrap();
        for (&v, &g) in values.iter().zip(got.as_f32().unwrap()) {
            let want = format.round(f64::from(v + 0.0)) as f32;
            assert_eq!(g.to_bits(), want.to_bits(), "{dtype}: {v:e} -> {g:e}, generic {want:e}");
        }
    }
}

#[test]
fn bit_casts_read_the_same_bits_as_another_type() {
    let floats = Tensor::from_f32(&[3], vec![1.0, -2.5, f32::INFINITY]).unwrap();
    let bits =
        run_typed(&Op::BitCast { to: DType::I32 }, &[floats], &[DType::F32], DType::I32).unwrap();
    // IEEE single: 1.0 is 0x3f800000, -2.5 is 0xc0200000 (negative as an i32), inf 0x7f800000.
    assert_eq!(bits.as_i64().unwrap(), &[0x3f80_0000, 0xc020_0000u32 as i32 as i64, 0x7f80_0000]);
    let back =
        run_typed(&Op::BitCast { to: DType::F32 }, &[bits], &[DType::I32], DType::F32).unwrap();
    assert_eq!(back.as_f32().unwrap(), &[1.0, -2.5, f32::INFINITY]);
    let bytes = int_tensor(&[-1, 127, -128]);
    let unsigned =
        run_typed(&Op::BitCast { to: DType::U8 }, &[bytes], &[DType::I8], DType::U8).unwrap();
    assert_eq!(unsigned.as_i64().unwrap(), &[255, 127, 128]);
    // f16's 1.0 is 0x3c00.
    let half = Tensor::from_f32(&[1], vec![1.0]).unwrap();
    let word = run_typed(&Op::BitCast { to: DType::U16 }, &[half], &[DType::F16], DType::U16);
    assert_eq!(word.unwrap().as_i64().unwrap(), &[0x3c00]);
    // f64 is held in f32: its bits are not there to read.
    let wide = Tensor::from_f32(&[1], vec![1.0]).unwrap();
    let e = run_typed(&Op::BitCast { to: DType::I64 }, &[wide], &[DType::F64], DType::I64);
    assert!(e.unwrap_err().contains("no bit cast of f64"));
}

#[test]
fn strings_run_as_ids_where_the_ids_of_the_result_are_the_result() {
    // Two string inputs, a gather of one and its equality with the other: computed on ids.
    let mut b = ordo_ir::GraphBuilder::new("strings");
    let words = b.input("words", TensorFact::new(DType::String, [4])).unwrap();
    let key = b.input("key", TensorFact::new(DType::String, [1])).unwrap();
    let picks = b.input("picks", TensorFact::new(DType::I64, [3])).unwrap();
    let picked = b.op("picked", Op::Gather { axis: 0 }, &[words, picks]).unwrap();
    let equal = b.op("equal", Op::Compare(CompareKind::Equal), &[picked, key]).unwrap();
    b.output(equal);
    let graph = b.finish();
    assert_eq!(crate::missing_kernels(&graph), None);
    assert_eq!(held_as(DType::String), DType::I64);
    // "a" = 0, "b" = 1, "c" = 2: words [a b c b], key [b], picks [3 0 1] -> [b a b] == b.
    let feeds = [
        ("words".to_string(), int_tensor(&[0, 1, 2, 1])),
        ("key".to_string(), int_tensor(&[1])),
        ("picks".to_string(), int_tensor(&[3, 0, 1])),
    ];
    let out = crate::sequential::infer(graph, Vec::new(), &feeds.into_iter().collect()).unwrap();
    assert_eq!(out[0].as_bool().unwrap(), &[true, false, true]);
    // Ordering strings by their ids would be wrong: refused, naming the node.
    let mut b = ordo_ir::GraphBuilder::new("strings");
    let x = b.input("x", TensorFact::new(DType::String, [2])).unwrap();
    let y = b.input("y", TensorFact::new(DType::String, [2])).unwrap();
    let less = b.op("less", Op::Compare(CompareKind::Less), &[x, y]).unwrap();
    b.output(less);
    let missing = crate::missing_kernels(&b.finish()).expect("refused");
    assert!(missing.contains("string tensors (`less`)"), "{missing}");
}
