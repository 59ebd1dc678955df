//! The CPU kernels' speed, side by side in one run, against two references: the naive f64
//! kernels of `cpu::reference` (the test oracle: direct loops), and for the kernels built on a
//! matrix product, `matrixmultiply::sgemm` (the workspace's GEMM library) on the same product,
//! the most such a kernel could reach on one thread. Also what narrowing costs: an `Add` of
//! f16 and of i8 tensors against one of f32 and i64.
//!
//!     cargo run --release -p ordo-exec --features reference --example kernel_speed
//!
//! Medians of 7 timed runs after one warm-up; one thread, as the kernels run.

use std::time::Instant;

use ordo_exec::cpu::reference::{self, Dense};
use ordo_exec::cpu::{KernelContext, Tensor, run};
use ordo_ir::op::{Conv2d, LayerNorm, Linear, UnaryOp};
use ordo_ir::{DType, Op, TensorFact};

const RUNS: usize = 7;

/// The median time of `f` over [`RUNS`] runs after a warm-up, in milliseconds.
fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[RUNS / 2]
}

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::random(&TensorFact::f32(shape), seed).expect("a small tensor")
}

/// The product `[m, k] x [k, n]` by `sgemm` alone.
fn sgemm_ms(m: usize, k: usize, n: usize) -> f64 {
    let (a, b) = (vec![0.5f32; m * k], vec![0.25f32; k * n]);
    let mut c = vec![0.0f32; m * n];
    median_ms(|| unsafe {
        // SAFETY: row-major a [m, k], b [k, n], c [m, n], each as long as its dims say.
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    })
}

struct Row {
    name: String,
    kernel_ms: f64,
    reference_ms: f64,
    gemm_ms: Option<f64>,
}

fn time_op(
    name: &str,
    op: &Op,
    inputs: &[Tensor],
    params: &[Tensor],
    gemm: Option<[usize; 3]>,
) -> Row {
    let ctx = KernelContext::default();
    let (i, p): (Vec<&Tensor>, Vec<&Tensor>) = (inputs.iter().collect(), params.iter().collect());
    let kernel_ms = median_ms(|| {
        run(op, &i, &p, &mut [], &ctx).expect("the kernel runs");
    });
    let (di, dp): (Vec<Dense>, Vec<Dense>) = (
        inputs.iter().map(Dense::from_tensor).collect(),
        params.iter().map(Dense::from_tensor).collect(),
    );
    let reference_ms = median_ms(|| {
        reference::forward(op, &di, &dp, &ctx);
    });
    Row {
        name: name.into(),
        kernel_ms,
        reference_ms,
        gemm_ms: gemm.map(|[m, k, n]| sgemm_ms(m, k, n)),
    }
}

/// `Add` of two tensors declared `dtype`, narrowed after the kernel as in a run.
fn typed_add_ms(dtype: DType, n: usize) -> f64 {
    let fact = TensorFact::new(dtype, vec![n]);
    let (a, b) = (Tensor::random(&fact, 1).unwrap(), Tensor::random(&fact, 2).unwrap());
    let facts = [fact.clone(), fact.clone()];
    let outputs = [fact];
    let ctx = KernelContext { inputs: &facts, outputs: &outputs, ..KernelContext::default() };
    median_ms(|| {
        run(&Op::Add, &[&a, &b], &[], &mut [], &ctx).expect("the kernel runs");
    })
}

fn main() {
    let mut rows = Vec::new();
    let (m, k, n) = (256, 512, 512);
    rows.push(time_op(
        "MatMul [256,512] x [512,512]",
        &Op::MatMul,
        &[rand(&[m, k], 1), rand(&[k, n], 2)],
        &[],
        Some([m, k, n]),
    ));
    let linear = Op::Linear(Linear { out_features: 768, bias: true });
    rows.push(time_op(
        "Linear [512,768] -> 768",
        &linear,
        &[rand(&[512, 768], 3)],
        &[rand(&[768, 768], 4), rand(&[768], 5)],
        Some([512, 768, 768]),
    ));
    // ResNet-50's 3x3 convolution of its first stage: 64 -> 64 channels on 56x56, padded.
    let conv = Op::Conv2d(Conv2d { padding: [1, 1], ..Conv2d::new(64, 3) });
    rows.push(time_op(
        "Conv2d 3x3 64->64 [1,64,56,56]",
        &conv,
        &[rand(&[1, 64, 56, 56], 6)],
        &[rand(&[64, 64, 3, 3], 7), rand(&[64], 8)],
        Some([64, 64 * 9, 56 * 56]),
    ));
    let conv1 = Op::Conv2d(Conv2d::new(256, 1));
    rows.push(time_op(
        "Conv2d 1x1 64->256 [1,64,56,56]",
        &conv1,
        &[rand(&[1, 64, 56, 56], 9)],
        &[rand(&[256, 64, 1, 1], 10), rand(&[256], 11)],
        Some([256, 64, 56 * 56]),
    ));
    let ln = Op::LayerNorm(LayerNorm::new(768));
    rows.push(time_op(
        "LayerNorm [512,768]",
        &ln,
        &[rand(&[512, 768], 12)],
        &[rand(&[768], 13), rand(&[768], 14)],
        None,
    ));
    rows.push(time_op(
        "Softmax [512,512]",
        &Op::Softmax { axis: -1 },
        &[rand(&[512, 512], 15)],
        &[],
        None,
    ));
    rows.push(time_op(
        "Add [1M]",
        &Op::Add,
        &[rand(&[1 << 20], 16), rand(&[1 << 20], 17)],
        &[],
        None,
    ));
    let erf = Op::Unary { func: UnaryOp::Erf };
    rows.push(time_op("Erf [1M]", &erf, &[rand(&[1 << 20], 18)], &[], None));

    println!(
        "| kernel | ordo ms | naive f64 reference ms | reference / ordo | sgemm ms | % of sgemm |"
    );
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let (gemm, share) = match r.gemm_ms {
            Some(g) => (format!("{g:.2}"), format!("{:.0}%", 100.0 * g / r.kernel_ms)),
            None => ("".into(), "".into()),
        };
        println!(
            "| {} | {:.2} | {:.1} | {:.1}x | {gemm} | {share} |",
            r.name,
            r.kernel_ms,
            r.reference_ms,
            r.reference_ms / r.kernel_ms
        );
    }
    let n = 1 << 20;
    let f32_ms = typed_add_ms(DType::F32, n);
    let f16_ms = typed_add_ms(DType::F16, n);
    let i64_ms = typed_add_ms(DType::I64, n);
    let i8_ms = typed_add_ms(DType::I8, n);
    let f8_ms = typed_add_ms(DType::F8E4M3FN, n);
    println!();
    println!("| Add [1M] of | ms | vs its storage type |");
    println!("|---|---|---|");
    println!("| f32 | {f32_ms:.2} | 1.00x |");
    println!("| f16 (rounded after) | {f16_ms:.2} | {:.2}x |", f16_ms / f32_ms);
    println!("| f8e4m3fn (rounded after) | {f8_ms:.2} | {:.2}x |", f8_ms / f32_ms);
    println!("| i64 | {i64_ms:.2} | 1.00x |");
    println!("| i8 (wrapped after) | {i8_ms:.2} | {:.2}x |", i8_ms / i64_ms);
}
