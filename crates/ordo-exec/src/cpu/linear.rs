//! Dense layers and batched matrix products, on `matrixmultiply`'s GEMM.

use ordo_ir::op::{Grad, Linear};
use ordo_ir::{Op, TensorFact};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, Mat, broadcast_strides, for_each_broadcast, gemm, numel, tensor};

/// Rows (product of leading dimensions) and columns (last dimension) of `shape`.
fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape.split_last() {
        Some((&k, lead)) => (numel(lead), k),
        None => (1, 1),
    }
}

/// `y = x W^T + b` over the last dimension.
pub(crate) fn linear(op: &Op, l: &Linear, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    let out = c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let x = c.input_f32(0)?;
    let (m, k) = rows_cols(c.inputs[0].shape());
    let n = l.out_features;
    let mut y = vec![0.0f32; m * n];
    if l.bias {
        let b = c.param_f32(1)?;
        y.chunks_exact_mut(n.max(1)).for_each(|row| row.copy_from_slice(&b[..row.len()]));
    }
    let beta = if l.bias { 1.0 } else { 0.0 };
    gemm(m, k, n, Mat::rows(x, k), Mat::t(c.param_f32(0)?, k), beta, &mut y);
    Ok(vec![tensor(&out.shape, y)?])
}

/// `dx = dy W`.
pub(crate) fn linear_grad_input(
    of: &Op,
    l: &Linear,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let x = c.produced(g, 0)?.clone();
    let dy = c.check_dy(of, std::slice::from_ref(&x))?;
    c.check_params(of, std::slice::from_ref(&x))?;
    let (m, k) = rows_cols(&x.shape);
    let n = l.out_features;
    let mut dx = vec![0.0f32; m * k];
    gemm(m, n, k, Mat::rows(dy, n), Mat::rows(c.param_f32(0)?, k), 0.0, &mut dx);
    Ok(vec![tensor(&x.shape, dx)?])
}

/// `dW = dy^T x`, `db = sum(dy)` over rows.
pub(crate) fn linear_grad_params(
    of: &Op,
    l: &Linear,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let xf = c.inputs[1].fact();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    let x = c.input_f32(1)?;
    let (m, k) = rows_cols(&xf.shape);
    let n = l.out_features;
    check_products(&c, of, &xf, g)?;
    let mut dw = vec![0.0f32; n * k];
    gemm(n, m, k, Mat::t(dy, n), Mat::rows(x, k), 0.0, &mut dw);
    let mut out = vec![tensor(&[n, k], dw)?];
    if l.bias {
        let mut db = vec![0.0f32; n];
        dy.chunks_exact(n.max(1)).for_each(|row| db.iter_mut().zip(row).for_each(|(b, d)| *b += d));
        out.push(tensor(&[n], db)?);
    }
    Ok(out)
}

/// The inputs of a parameter gradient that reads (`dy`, `x`), checked
/// ([`Call::dy_and_input`]), and its products checked against the parameters
/// ([`check_products`]): `x`'s fact and `dy`.
pub(crate) fn param_grad_inputs<'c>(
    c: &'c Call,
    of: &Op,
    g: &Grad,
) -> KernelResult<(TensorFact, &'c [f32])> {
    let (xf, dy) = c.dy_and_input(of)?;
    check_products(c, of, &xf, g)?;
    Ok((xf, dy))
}

/// Checks that a dW node produces the forward op's trainable parameters' facts.
pub(crate) fn check_products(c: &Call, of: &Op, x: &TensorFact, g: &Grad) -> KernelResult<()> {
    let specs = of.param_specs(&[x]);
    let want: Vec<&TensorFact> = specs.iter().filter(|s| s.trainable).map(|s| &s.fact).collect();
    let got: Vec<&TensorFact> = g.produces.iter().collect();
    if want != got {
        return Err(c.shape_err(format!("produces {got:?}, the parameters are {want:?}")));
    }
    Ok(())
}

/// The matrix and batch dimensions of a `[..., R, C]` shape.
fn split_matrix(shape: &[usize]) -> (&[usize], usize, usize) {
    let r = shape.len();
    (&shape[..r - 2], shape[r - 2], shape[r - 1])
}

/// For every output batch index: `(output batch, a batch, b batch)`, in order.
fn batches(out: &[usize], a: &[usize], b: &[usize]) -> Vec<(usize, usize, usize)> {
    let (sa, sb) = (broadcast_strides(a, out), broadcast_strides(b, out));
    let mut list = Vec::with_capacity(numel(out));
    for_each_broadcast(out, &sa, &sb, |o, i, j| list.push((o, i, j)));
    list
}

/// Batched `[..., M, K] x [..., K, N]` with broadcast batch dimensions.
pub(crate) fn matmul(op: &Op, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let (a, b) = (c.input_f32(0)?, c.input_f32(1)?);
    let (ab, m, k) = split_matrix(c.inputs[0].shape());
    let (bb, _, n) = split_matrix(c.inputs[1].shape());
    let mut y = vec![0.0f32; numel(&out)];
    for (o, i, j) in batches(&out[..out.len() - 2], ab, bb) {
        let (a, b) = (&a[i * m * k..], &b[j * k * n..]);
        gemm(m, k, n, Mat::rows(a, k), Mat::rows(b, n), 0.0, &mut y[o * m * n..]);
    }
    Ok(vec![tensor(&out, y)?])
}

/// The gradient of `MatMul` with respect to input `k`: `dA = dy B^T` or `dB = A^T dy`, summed
/// over broadcast batch dimensions.
pub(crate) fn matmul_grad(of: &Op, k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let mine = c.produced(g, 0)?.clone();
    let other = c.inputs[1].fact();
    let facts = if k == 0 { [mine.clone(), other] } else { [other, mine.clone()] };
    let dy = c.check_dy(of, &facts)?;
    let w = c.input_f32(1)?;
    let (ab, m, kk) = split_matrix(&facts[0].shape);
    let (bb, _, n) = split_matrix(&facts[1].shape);
    let out = c.inputs[0].shape();
    let mut dx = vec![0.0f32; numel(&mine.shape)];
    for (o, i, j) in batches(&out[..out.len() - 2], ab, bb) {
        let dy = &dy[o * m * n..];
        if k == 0 {
            let b = &w[j * kk * n..];
            gemm(m, n, kk, Mat::rows(dy, n), Mat::t(b, n), 1.0, &mut dx[i * m * kk..]);
        } else {
            let a = &w[i * m * kk..];
            gemm(kk, m, n, Mat::t(a, kk), Mat::rows(dy, n), 1.0, &mut dx[j * kk * n..]);
        }
    }
    Ok(vec![tensor(&mine.shape, dx)?])
}
