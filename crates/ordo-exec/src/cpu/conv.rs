//! 2-D convolution as im2col + GEMM, with groups (depthwise included), strides, padding and
//! dilation, and its gradients (col2im for the input's).

use ordo_ir::Op;
use ordo_ir::op::{Conv2d, Grad};

use super::error::KernelResult;
use super::linear::param_grad_inputs;
use super::tensor::Tensor;
use super::util::{Call, Mat, gemm, tensor};

/// The sizes of one convolution.
pub(super) struct Geom {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    pub(super) o: usize,
    oh: usize,
    ow: usize,
    groups: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
}

impl Geom {
    pub(super) fn new(cv: &Conv2d, x: &[usize], y: &[usize]) -> Self {
        Self {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o: cv.out_channels,
            oh: y[2],
            ow: y[3],
            groups: cv.groups,
            k: cv.kernel,
            s: cv.stride,
            p: cv.padding,
            d: cv.dilation,
        }
    }

    /// Input channels per group.
    fn cg(&self) -> usize {
        self.c / self.groups
    }

    /// Output channels per group.
    fn og(&self) -> usize {
        self.o / self.groups
    }

    /// Rows of the column matrix: `cg * kh * kw`.
    fn ckk(&self) -> usize {
        self.cg() * self.k[0] * self.k[1]
    }

    /// Output pixels per channel.
    fn ohw(&self) -> usize {
        self.oh * self.ow
    }

    /// Whether the column matrix is the input itself (1x1, stride 1, no padding, and the
    /// output the input's size: a transposed convolution's output padding makes it larger).
    fn pointwise(&self) -> bool {
        self.k == [1, 1]
            && self.s == [1, 1]
            && self.p == [0, 0]
            && [self.h, self.w] == [self.oh, self.ow]
    }

    /// Input coordinate of output coordinate `out` and kernel offset `k` along `dim`, `None`
    /// in the padding.
    fn src(&self, dim: usize, out: usize, k: usize) -> Option<usize> {
        let pos = (out * self.s[dim] + k * self.d[dim]).checked_sub(self.p[dim])?;
        (pos < [self.h, self.w][dim]).then_some(pos)
    }

    /// Calls `f(column index, input index)` for every non-padding entry of the column matrix
    /// of one group of one image (`cg x h x w` input).
    fn for_each_tap(&self, mut f: impl FnMut(usize, usize)) {
        let (ohw, [kh, kw]) = (self.ohw(), self.k);
        for ci in 0..self.cg() {
            for ki in 0..kh {
                for kj in 0..kw {
                    let row = ((ci * kh + ki) * kw + kj) * ohw;
                    for oy in 0..self.oh {
                        let Some(iy) = self.src(0, oy, ki) else { continue };
                        for ox in 0..self.ow {
                            if let Some(ix) = self.src(1, ox, kj) {
                                f(row + oy * self.ow + ox, (ci * self.h + iy) * self.w + ix);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fills `col` (`ckk x ohw`) from one group of one image.
    fn im2col(&self, x: &[f32], col: &mut [f32]) {
        col.fill(0.0);
        self.for_each_tap(|ci, xi| col[ci] = x[xi]);
    }

    /// Adds `col` back into one group of one image's gradient.
    fn col2im(&self, col: &[f32], dx: &mut [f32]) {
        self.for_each_tap(|ci, xi| dx[xi] += col[ci]);
    }
}

pub(crate) fn forward(op: &Op, cv: &Conv2d, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    let out = c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let (x, wt) = (c.input_f32(0)?, c.param_f32(0)?);
    let g = Geom::new(cv, &facts[0].shape, &out.shape);
    let bias = if cv.bias { Some(c.param_f32(1)?) } else { None };
    Ok(vec![tensor(&out.shape, g.forward(x, wt, bias))?])
}

/// `dx = col2im(W^T dy)` per group.
pub(crate) fn grad_input(of: &Op, cv: &Conv2d, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?.clone();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    c.check_params(of, std::slice::from_ref(&xf))?;
    let geo = Geom::new(cv, &xf.shape, c.inputs[0].shape());
    Ok(vec![tensor(&xf.shape, geo.input_grad(dy, c.param_f32(0)?))?])
}

/// `dW = sum over images of dy im2col(x)^T` per group, `db = sum(dy)` per channel.
pub(crate) fn grad_params(of: &Op, cv: &Conv2d, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    let (xf, dy) = param_grad_inputs(&c, of, g)?;
    let geo = Geom::new(cv, &xf.shape, c.inputs[0].shape());
    let mut out = vec![tensor(&g.produces[0].shape, geo.weight_grad(c.input_f32(1)?, dy))?];
    if cv.bias {
        out.push(tensor(&[geo.o], geo.bias_grad(dy))?);
    }
    Ok(out)
}

impl Geom {
    /// `y = W im2col(x) (+ b)` per group: the convolution of `x` (`n x c x h x w`).
    pub(super) fn forward(&self, x: &[f32], wt: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
        let (og, ckk, ohw) = (self.og(), self.ckk(), self.ohw());
        let mut y = vec![0.0f32; self.n * self.o * ohw];
        if let Some(b) = bias {
            for (i, plane) in y.chunks_exact_mut(ohw.max(1)).enumerate() {
                plane.fill(b[i % self.o]);
            }
        }
        let beta = if bias.is_some() { 1.0 } else { 0.0 };
        self.for_each_columns(x, |n, gi, cols| {
            let wg = Mat::rows(&wt[gi * og * ckk..], ckk);
            let yg = &mut y[(n * self.o + gi * og) * ohw..];
            gemm(og, ckk, ohw, wg, Mat::rows(cols, ohw), beta, yg);
        });
        y
    }

    /// `f(n, g, cols)` for every image `n` and group `g`, in order: `cols` the group's input
    /// as im2col's columns (`ckk x ohw`; the input itself for a pointwise convolution).
    fn for_each_columns(&self, x: &[f32], mut f: impl FnMut(usize, usize, &[f32])) {
        let (cg, ckk, ohw) = (self.cg(), self.ckk(), self.ohw());
        let mut col = vec![0.0f32; if self.pointwise() { 0 } else { ckk * ohw }];
        for n in 0..self.n {
            for gi in 0..self.groups {
                let xg = &x[(n * self.c + gi * cg) * self.h * self.w..];
                let cols: &[f32] = if self.pointwise() {
                    xg
                } else {
                    self.im2col(xg, &mut col);
                    &col
                };
                f(n, gi, cols);
            }
        }
    }

    /// `dx = col2im(W^T dy)` per group: the gradient with respect to the input.
    pub(super) fn input_grad(&self, dy: &[f32], wt: &[f32]) -> Vec<f32> {
        let (cg, og, ckk, ohw) = (self.cg(), self.og(), self.ckk(), self.ohw());
        let (chw, hw) = (self.c * self.h * self.w, self.h * self.w);
        let mut dx = vec![0.0f32; self.n * chw];
        let mut col = vec![0.0f32; ckk * ohw];
        for n in 0..self.n {
            for gi in 0..self.groups {
                let wg = Mat::t(&wt[gi * og * ckk..], ckk);
                let dyg = Mat::rows(&dy[(n * self.o + gi * og) * ohw..], ohw);
                let dxg = &mut dx[n * chw + gi * cg * hw..];
                if self.pointwise() {
                    gemm(ckk, og, ohw, wg, dyg, 1.0, dxg);
                } else {
                    gemm(ckk, og, ohw, wg, dyg, 0.0, &mut col);
                    self.col2im(&col, dxg);
                }
            }
        }
        dx
    }

    /// `dW = sum over images of dy im2col(x)^T` per group.
    pub(super) fn weight_grad(&self, x: &[f32], dy: &[f32]) -> Vec<f32> {
        let (og, ckk, ohw) = (self.og(), self.ckk(), self.ohw());
        let mut dw = vec![0.0f32; self.o * ckk];
        self.for_each_columns(x, |n, gi, cols| {
            let dyg = Mat::rows(&dy[(n * self.o + gi * og) * ohw..], ohw);
            gemm(og, ohw, ckk, dyg, Mat::t(cols, ohw), 1.0, &mut dw[gi * og * ckk..]);
        });
        dw
    }

    /// `db = sum(dy)` per output channel.
    pub(super) fn bias_grad(&self, dy: &[f32]) -> Vec<f32> {
        channel_sums(dy, self.o, self.ohw())
    }
}

/// The sums of an `[N, C, plane]` tensor's values per channel: a bias's gradient.
pub(super) fn channel_sums(dy: &[f32], channels: usize, plane: usize) -> Vec<f32> {
    let mut sums = vec![0.0f32; channels];
    for (i, values) in dy.chunks_exact(plane.max(1)).enumerate() {
        sums[i % channels] += values.iter().sum::<f32>();
    }
    sums
}
