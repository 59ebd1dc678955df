//! What the kernels share: the call's arguments with checked accessors, broadcasting, GEMM.

use ordo_ir::op::Grad;
use ordo_ir::{DType, Op, TensorFact};

use super::KernelContext;
use super::error::{KernelError, KernelResult};
use super::tensor::Tensor;

/// The arguments of one kernel call, and the op's label for errors.
pub(crate) struct Call<'a> {
    pub label: String,
    pub inputs: &'a [&'a Tensor],
    pub params: &'a [&'a Tensor],
    pub state: &'a mut [Tensor],
    pub ctx: &'a KernelContext<'a>,
}

impl Call<'_> {
    /// An error of kind `Shape` for this op.
    pub fn shape_err(&self, message: impl Into<String>) -> KernelError {
        KernelError::Shape { op: self.label.clone(), message: message.into() }
    }

    /// An error of kind `Value` for this op.
    pub fn value_err(&self, message: impl Into<String>) -> KernelError {
        KernelError::Value { op: self.label.clone(), message: message.into() }
    }

    fn count(&self, what: &'static str, expected: usize, got: usize) -> KernelResult<()> {
        if expected == got {
            Ok(())
        } else {
            Err(KernelError::Count { op: self.label.clone(), what, expected, got })
        }
    }

    /// Checks the number of inputs.
    pub fn expect_inputs(&self, n: usize) -> KernelResult<()> {
        self.count("input(s)", n, self.inputs.len())
    }

    /// Checks the number of parameters.
    pub fn expect_params(&self, n: usize) -> KernelResult<()> {
        self.count("parameter(s)", n, self.params.len())
    }

    /// Checks the number of state slots.
    pub fn expect_state(&self, n: usize) -> KernelResult<()> {
        self.count("state slot(s)", n, self.state.len())
    }

    fn dtype_err(&self, what: String, expected: DType, got: DType) -> KernelError {
        KernelError::DType { op: self.label.clone(), what, expected, got }
    }

    /// The `f32` data of input `i`.
    pub fn input_f32(&self, i: usize) -> KernelResult<&[f32]> {
        let t = self.inputs[i];
        t.as_f32().ok_or_else(|| self.dtype_err(format!("input {i}"), DType::F32, t.dtype()))
    }

    /// The integer data of input `i`.
    pub fn input_i64(&self, i: usize) -> KernelResult<&[i64]> {
        let t = self.inputs[i];
        t.as_i64().ok_or_else(|| self.dtype_err(format!("input {i}"), DType::I64, t.dtype()))
    }

    /// The `f32` data of parameter `i`.
    pub fn param_f32(&self, i: usize) -> KernelResult<&[f32]> {
        let t = self.params[i];
        t.as_f32().ok_or_else(|| self.dtype_err(format!("parameter {i}"), DType::F32, t.dtype()))
    }

    /// The facts of the inputs.
    pub fn input_facts(&self) -> Vec<TensorFact> {
        self.inputs.iter().map(|t| t.fact()).collect()
    }

    /// Runs the IR's shape inference of a forward op on `facts` (the kernels' shape check) and
    /// returns its first output fact.
    pub fn infer(&self, op: &Op, facts: &[TensorFact]) -> KernelResult<TensorFact> {
        let refs: Vec<&TensorFact> = facts.iter().collect();
        let out = op.infer(&refs).map_err(|m| self.shape_err(m))?;
        out.into_iter().next().ok_or_else(|| self.shape_err("shape inference gave no output"))
    }

    /// Checks the parameters against the forward op's parameter shapes for input `facts`
    /// (all of them, buffers included).
    pub fn check_params(&self, op: &Op, facts: &[TensorFact]) -> KernelResult<()> {
        let refs: Vec<&TensorFact> = facts.iter().collect();
        let specs = op.param_specs(&refs);
        self.expect_params(specs.len())?;
        for (i, (spec, p)) in specs.iter().zip(self.params).enumerate() {
            if p.shape() != spec.fact.shape.as_slice() {
                return Err(self.shape_err(format!(
                    "parameter {i} (`{}`) must have shape {:?}, got {:?}",
                    spec.suffix,
                    spec.fact.shape,
                    p.shape()
                )));
            }
            self.param_f32(i)?;
        }
        Ok(())
    }

    /// Checks that the upstream gradient (input 0) is an `f32` tensor shaped like the forward
    /// output for forward input `facts`, and returns its data.
    pub fn check_dy(&self, of: &Op, facts: &[TensorFact]) -> KernelResult<&[f32]> {
        let out = self.infer(of, facts)?;
        if self.inputs[0].shape() != out.shape.as_slice() {
            return Err(self.shape_err(format!(
                "the upstream gradient has shape {:?}, the forward output {:?}",
                self.inputs[0].shape(),
                out.shape
            )));
        }
        self.input_f32(0)
    }

    /// The inputs of a gradient that reads the upstream gradient (input 0) and its forward
    /// node's input (input 1): checks there are exactly these two and that the upstream
    /// gradient fits the forward output for that input; returns the forward input's fact and
    /// the upstream gradient's data.
    pub fn dy_and_input(&self, of: &Op) -> KernelResult<(TensorFact, &[f32])> {
        self.expect_inputs(2)?;
        let xf = self.inputs[1].fact();
        let dy = self.check_dy(of, std::slice::from_ref(&xf))?;
        Ok((xf, dy))
    }

    /// The fact of the gradient's `i`-th product (from [`Grad::produces`]).
    pub fn produced<'g>(&self, grad: &'g Grad, i: usize) -> KernelResult<&'g TensorFact> {
        grad.produces.get(i).ok_or_else(|| {
            self.shape_err(format!("the gradient lists {} products", grad.produces.len()))
        })
    }

    /// Checks that input `i` has exactly `shape`.
    pub fn expect_input_shape(&self, i: usize, shape: &[usize]) -> KernelResult<()> {
        if self.inputs[i].shape() == shape {
            Ok(())
        } else {
            Err(self.shape_err(format!(
                "input {i} has shape {:?}, expected {shape:?}",
                self.inputs[i].shape()
            )))
        }
    }
}

/// An `f32` tensor from data whose length was derived from `shape` (never fails in practice).
pub(crate) fn tensor(shape: &[usize], data: Vec<f32>) -> KernelResult<Tensor> {
    Tensor::from_f32(shape, data)
}

/// Product of dimensions.
pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

pub(crate) use ordo_ir::op::broadcast_shapes;

/// Row-major strides of `shape` aligned to the trailing dimensions of `out` (which `shape`
/// broadcasts to), with 0 for broadcast dimensions.
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; out.len()];
    let offset = out.len() - shape.len();
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        strides[offset + i] = if shape[i] == 1 { 0 } else { s };
        s *= shape[i];
    }
    strides
}

/// The output shape of `op` (a node without parameters) and the broadcast strides of its first
/// two inputs: what a binary kernel with NumPy broadcasting reads before its loop.
pub(crate) fn binary_layout(
    op: &Op,
    c: &Call,
) -> KernelResult<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let sa = broadcast_strides(c.inputs[0].shape(), &out);
    let sb = broadcast_strides(c.inputs[1].shape(), &out);
    Ok((out, sa, sb))
}

/// Calls `f(output index, offset in a, offset in b)` for every element of `out`, in order,
/// with the strides of [`broadcast_strides`].
pub(crate) fn for_each_broadcast(
    out: &[usize],
    sa: &[usize],
    sb: &[usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    let n = numel(out);
    if n == 0 {
        return;
    }
    let rank = out.len();
    let mut idx = vec![0usize; rank];
    let (mut oa, mut ob) = (0usize, 0usize);
    for o in 0..n {
        f(o, oa, ob);
        for d in (0..rank).rev() {
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < out[d] {
                break;
            }
            oa -= sa[d] * out[d];
            ob -= sb[d] * out[d];
            idx[d] = 0;
        }
    }
}

/// Sums `dy` (shaped `out`) down to `shape`, which broadcasts to `out`: the gradient of a
/// broadcast. `mul`, if given (shaped `other`, which also broadcasts to `out`), multiplies
/// each element first.
pub(crate) fn reduce_to(
    dy: &[f32],
    out: &[usize],
    shape: &[usize],
    mul: Option<(&[f32], &[usize])>,
) -> Vec<f32> {
    let mut dx = vec![0.0f32; numel(shape)];
    let sx = broadcast_strides(shape, out);
    match mul {
        None => for_each_broadcast(out, &sx, &sx, |o, i, _| dx[i] += dy[o]),
        Some((other, oshape)) => {
            let so = broadcast_strides(oshape, out);
            for_each_broadcast(out, &sx, &so, |o, i, j| dx[i] += dy[o] * other[j]);
        }
    }
    dx
}

/// A matrix operand of [`gemm`]: data, rows, columns, row stride, column stride.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> Mat<'a> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        Self { data, rs: cols, cs: 1 }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    pub fn t(data: &'a [f32], cols: usize) -> Self {
        Self { data, rs: 1, cs: cols }
    }
}

/// `C = A B + beta C` for an `m x k` matrix A, a `k x n` matrix B and a row-major `m x n`
/// matrix C, through `matrixmultiply::sgemm` (single-threaded, deterministic).
///
/// Panics when an operand's slice is too short for its shape and strides: an internal bug,
/// never bad user input (the kernels check shapes first).
pub(crate) fn gemm(m: usize, k: usize, n: usize, a: Mat, b: Mat, beta: f32, c: &mut [f32]) {
    let extent = |rows: usize, cols: usize, rs: usize, cs: usize| {
        if rows == 0 || cols == 0 { 0 } else { (rows - 1) * rs + (cols - 1) * cs + 1 }
    };
    assert!(a.data.len() >= extent(m, k, a.rs, a.cs), "gemm: A too short");
    assert!(b.data.len() >= extent(k, n, b.rs, b.cs), "gemm: B too short");
    assert!(c.len() >= extent(m, n, n, 1), "gemm: C too short");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..m * n].iter_mut().for_each(|x| *x *= beta);
        return;
    }
    // SAFETY: the asserts above show every element the strides address lies inside its slice,
    // and C does not alias A or B (it is borrowed mutably).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// The error function, to about 1.2e-7 relative accuracy (Numerical Recipes' `erfc`
/// Chebyshev fit); `std`'s is not stable yet.
pub(crate) fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
}

/// Resolves a possibly negative axis against a rank.
pub(crate) fn resolve_axis(call: &Call, axis: i64, rank: usize) -> KernelResult<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if (0..rank as i64).contains(&a) {
        Ok(a as usize)
    } else {
        Err(call.shape_err(format!("axis {axis} is out of range for rank {rank}")))
    }
}

/// `(outer, len, inner)` of a shape around `axis`.
/// Calls `f(at)` for every lane along the middle dim of `(outer, len, inner)` (a row of a
/// softmax, a running sum): `at(j)` is the flat index of the lane's `j`-th element.
pub(crate) fn for_each_lane(
    (outer, len, inner): (usize, usize, usize),
    mut f: impl FnMut(&dyn Fn(usize) -> usize),
) {
    for o in 0..outer {
        for i in 0..inner {
            f(&move |j: usize| (o * len + j) * inner + i);
        }
    }
}

pub(crate) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (numel(&shape[..axis]), shape[axis], numel(&shape[axis + 1..]))
}
