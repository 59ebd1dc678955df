//! 2-D convolution as im2col + GEMM, with groups (depthwise included), strides, padding and
//! dilation, and its gradients (col2im for the input's).

use ordo_ir::Op;
use ordo_ir::op::{Conv2d, Grad};

use super::error::KernelResult;
use super::linear::check_products;
use super::tensor::Tensor;
use super::util::{Call, Mat, gemm, tensor};

/// The sizes of one convolution.
struct Geom {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    oh: usize,
    ow: usize,
    groups: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
}

impl Geom {
    fn new(cv: &Conv2d, x: &[usize], y: &[usize]) -> Self {
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

    /// Whether the column matrix is the input itself (1x1, stride 1, no padding).
    fn pointwise(&self) -> bool {
        self.k == [1, 1] && self.s == [1, 1] && self.p == [0, 0]
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
    let (cg, og, ckk, ohw) = (g.cg(), g.og(), g.ckk(), g.ohw());
    let mut y = vec![0.0f32; g.n * g.o * ohw];
    if cv.bias {
        let b = c.param_f32(1)?;
        for (i, plane) in y.chunks_exact_mut(ohw.max(1)).enumerate() {
            plane.fill(b[i % g.o]);
        }
    }
    let beta = if cv.bias { 1.0 } else { 0.0 };
    let mut col = vec![0.0f32; if g.pointwise() { 0 } else { ckk * ohw }];
    for n in 0..g.n {
        for gi in 0..g.groups {
            let xg = &x[(n * g.c + gi * cg) * g.h * g.w..];
            let cols: &[f32] = if g.pointwise() {
                xg
            } else {
                g.im2col(xg, &mut col);
                &col
            };
            let wg = Mat::rows(&wt[gi * og * ckk..], ckk);
            let yg = &mut y[(n * g.o + gi * og) * ohw..];
            gemm(og, ckk, ohw, wg, Mat::rows(cols, ohw), beta, yg);
        }
    }
    Ok(vec![tensor(&out.shape, y)?])
}

/// `dx = col2im(W^T dy)` per group.
pub(crate) fn grad_input(of: &Op, cv: &Conv2d, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let xf = c.produced(g, 0)?.clone();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    c.check_params(of, std::slice::from_ref(&xf))?;
    let wt = c.param_f32(0)?;
    let geo = Geom::new(cv, &xf.shape, c.inputs[0].shape());
    let (cg, og, ckk, ohw) = (geo.cg(), geo.og(), geo.ckk(), geo.ohw());
    let (chw, hw) = (geo.c * geo.h * geo.w, geo.h * geo.w);
    let mut dx = vec![0.0f32; geo.n * chw];
    let mut col = vec![0.0f32; ckk * ohw];
    for n in 0..geo.n {
        for gi in 0..geo.groups {
            let wg = Mat::t(&wt[gi * og * ckk..], ckk);
            let dyg = Mat::rows(&dy[(n * geo.o + gi * og) * ohw..], ohw);
            let dxg = &mut dx[n * chw + gi * cg * hw..];
            if geo.pointwise() {
                gemm(ckk, og, ohw, wg, dyg, 1.0, dxg);
            } else {
                gemm(ckk, og, ohw, wg, dyg, 0.0, &mut col);
                geo.col2im(&col, dxg);
            }
        }
    }
    Ok(vec![tensor(&xf.shape, dx)?])
}

/// `dW = sum over images of dy im2col(x)^T` per group, `db = sum(dy)` per channel.
pub(crate) fn grad_params(of: &Op, cv: &Conv2d, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(2)?;
    let xf = c.inputs[1].fact();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    check_products(&c, of, &xf, g)?;
    let x = c.input_f32(1)?;
    let geo = Geom::new(cv, &xf.shape, c.inputs[0].shape());
    let (cg, og, ckk, ohw) = (geo.cg(), geo.og(), geo.ckk(), geo.ohw());
    let mut dw = vec![0.0f32; geo.o * ckk];
    let mut col = vec![0.0f32; if geo.pointwise() { 0 } else { ckk * ohw }];
    for n in 0..geo.n {
        for gi in 0..geo.groups {
            let xg = &x[(n * geo.c + gi * cg) * geo.h * geo.w..];
            let cols: &[f32] = if geo.pointwise() {
                xg
            } else {
                geo.im2col(xg, &mut col);
                &col
            };
            let dyg = Mat::rows(&dy[(n * geo.o + gi * og) * ohw..], ohw);
            gemm(og, ohw, ckk, dyg, Mat::t(cols, ohw), 1.0, &mut dw[gi * og * ckk..]);
        }
    }
    let mut out = vec![tensor(&g.produces[0].shape, dw)?];
    if cv.bias {
        let mut db = vec![0.0f32; geo.o];
        for (i, plane) in dy.chunks_exact(ohw.max(1)).enumerate() {
            db[i % geo.o] += plane.iter().sum::<f32>();
        }
        out.push(tensor(&[geo.o], db)?);
    }
    Ok(out)
}
