//! Embeddings and LSTM layers, with their gradients.
//!
//! An LSTM direction runs PyTorch's cell from a zero state: gates
//! `z = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh`, split as input, forget, cell, output
//! (`i, f, g, o = sigmoid, sigmoid, tanh, sigmoid`), `c_t = f c_{t-1} + i g`,
//! `h_t = o tanh(c_t)`. The reverse direction runs from `T - 1` down to 0. Gradients recompute
//! the forward pass (gates and cell states) from the input and the weights, then run
//! backpropagation through time.

use ordo_ir::op::{Embedding, Grad, Lstm};
use ordo_ir::{Op, TensorFact};

use super::error::{KernelError, KernelResult};
use super::linear::{check_products, param_grad_inputs};
use super::tensor::Tensor;
use super::util::{Call, Mat, gemm, tensor};

/// Checks that every id indexes a row of a table of `rows` rows.
fn check_ids(c: &Call, ids: &[i64], rows: usize) -> KernelResult<()> {
    match ids.iter().find(|&&id| id < 0 || id as u64 >= rows as u64) {
        Some(id) => Err(c.value_err(format!("id {id} is outside the table of {rows} rows"))),
        None => Ok(()),
    }
}

pub(crate) fn embedding(op: &Op, e: &Embedding, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    let out = c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let (ids, table) = (c.input_i64(0)?, c.param_f32(0)?);
    check_ids(&c, ids, e.num_embeddings)?;
    let mut y = Vec::with_capacity(ids.len() * e.dim);
    for &id in ids {
        y.extend_from_slice(&table[id as usize * e.dim..(id as usize + 1) * e.dim]);
    }
    Ok(vec![tensor(&out.shape, y)?])
}

/// `dW[id] += dy[row]` for every looked-up row, in order.
pub(crate) fn embedding_grad(
    of: &Op,
    e: &Embedding,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (_, dy) = param_grad_inputs(&c, of, g)?;
    let ids = c.input_i64(1)?;
    check_ids(&c, ids, e.num_embeddings)?;
    let mut dw = vec![0.0f32; e.num_embeddings * e.dim];
    for (r, &id) in ids.iter().enumerate() {
        let row = &mut dw[id as usize * e.dim..(id as usize + 1) * e.dim];
        row.iter_mut().zip(&dy[r * e.dim..]).for_each(|(w, d)| *w += d);
    }
    Ok(vec![tensor(&[e.num_embeddings, e.dim], dw)?])
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The sizes of one LSTM layer and one direction's weights.
struct Dir<'a> {
    t: usize,
    b: usize,
    i: usize,
    h: usize,
    reverse: bool,
    w_ih: &'a [f32],
    w_hh: &'a [f32],
    b_ih: &'a [f32],
    b_hh: &'a [f32],
}

/// One direction's forward pass: hidden states `[T, B, H]`, activated gates `[T, B, 4H]`
/// and cell states `[T, B, H]`, indexed by time.
struct Trace {
    hs: Vec<f32>,
    gates: Vec<f32>,
    cs: Vec<f32>,
}

impl Dir<'_> {
    /// Time index of processing step `s`.
    fn time(&self, s: usize) -> usize {
        if self.reverse { self.t - 1 - s } else { s }
    }

    fn forward(&self, x: &[f32]) -> Trace {
        let (t, b, h, g4) = (self.t, self.b, self.h, 4 * self.h);
        let mut gates = vec![0.0f32; t * b * g4];
        for row in gates.chunks_exact_mut(g4.max(1)) {
            for (j, z) in row.iter_mut().enumerate() {
                *z = self.b_ih[j] + self.b_hh[j];
            }
        }
        gemm(t * b, self.i, g4, Mat::rows(x, self.i), Mat::t(self.w_ih, self.i), 1.0, &mut gates);
        let (mut hs, mut cs) = (vec![0.0f32; t * b * h], vec![0.0f32; t * b * h]);
        for s in 0..t {
            let now = self.time(s);
            let (bh, bg) = (now * b * h, now * b * g4);
            if s > 0 {
                let prev = self.time(s - 1) * b * h;
                let h_prev = Mat::rows(&hs[prev..prev + b * h], h);
                gemm(b, h, g4, h_prev, Mat::t(self.w_hh, h), 1.0, &mut gates[bg..]);
            }
            for bi in 0..b {
                for j in 0..h {
                    let z = &mut gates[bg + bi * g4..bg + (bi + 1) * g4];
                    let (i, f) = (sigmoid(z[j]), sigmoid(z[h + j]));
                    let (g, o) = (z[2 * h + j].tanh(), sigmoid(z[3 * h + j]));
                    (z[j], z[h + j], z[2 * h + j], z[3 * h + j]) = (i, f, g, o);
                    let c_prev =
                        if s > 0 { cs[self.time(s - 1) * b * h + bi * h + j] } else { 0.0 };
                    let cell = f * c_prev + i * g;
                    cs[bh + bi * h + j] = cell;
                    hs[bh + bi * h + j] = o * cell.tanh();
                }
            }
        }
        Trace { hs, gates, cs }
    }

    /// Backpropagation through time of `dy` (`[T, B, H]`, this direction's half): adds the
    /// input gradient into `dx` and, when `grads` is given, returns
    /// `[dW_ih, dW_hh, db_ih, db_hh]`.
    fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32], grads: bool) -> Vec<Vec<f32>> {
        let (t, b, h, g4) = (self.t, self.b, self.h, 4 * self.h);
        let tr = self.forward(x);
        let mut dgates = vec![0.0f32; t * b * g4];
        let (mut dh_next, mut dc_next) = (vec![0.0f32; b * h], vec![0.0f32; b * h]);
        let mut dw_hh = vec![0.0f32; if grads { g4 * h } else { 0 }];
        for s in (0..t).rev() {
            let now = self.time(s);
            let prev = (s > 0).then(|| self.time(s - 1) * b * h);
            let (bh, bg) = (now * b * h, now * b * g4);
            for bi in 0..b {
                for j in 0..h {
                    let k = bi * h + j;
                    let z = &tr.gates[bg + bi * g4..bg + (bi + 1) * g4];
                    let (i, f, g, o) = (z[j], z[h + j], z[2 * h + j], z[3 * h + j]);
                    let tc = tr.cs[bh + k].tanh();
                    let c_prev = prev.map_or(0.0, |p| tr.cs[p + k]);
                    let dh = dy[bh + k] + dh_next[k];
                    let dc = dh * o * (1.0 - tc * tc) + dc_next[k];
                    let dz = &mut dgates[bg + bi * g4..bg + (bi + 1) * g4];
                    dz[j] = dc * g * i * (1.0 - i);
                    dz[h + j] = dc * c_prev * f * (1.0 - f);
                    dz[2 * h + j] = dc * i * (1.0 - g * g);
                    dz[3 * h + j] = dh * tc * o * (1.0 - o);
                    dc_next[k] = dc * f;
                }
            }
            let dz = Mat::rows(&dgates[bg..bg + b * g4], g4);
            gemm(b, g4, h, dz, Mat::rows(self.w_hh, h), 0.0, &mut dh_next);
            if let (true, Some(p)) = (grads, prev) {
                let dzt = Mat::t(&dgates[bg..bg + b * g4], g4);
                gemm(g4, b, h, dzt, Mat::rows(&tr.hs[p..p + b * h], h), 1.0, &mut dw_hh);
            }
        }
        gemm(t * b, g4, self.i, Mat::rows(&dgates, g4), Mat::rows(self.w_ih, self.i), 1.0, dx);
        if !grads {
            return Vec::new();
        }
        let mut dw_ih = vec![0.0f32; g4 * self.i];
        gemm(g4, t * b, self.i, Mat::t(&dgates, g4), Mat::rows(x, self.i), 0.0, &mut dw_ih);
        let mut db = vec![0.0f32; g4];
        for row in dgates.chunks_exact(g4.max(1)) {
            db.iter_mut().zip(row).for_each(|(d, z)| *d += z);
        }
        vec![dw_ih, dw_hh, db.clone(), db]
    }
}

/// The directions of a layer over input fact `x`, from the checked parameters.
fn directions<'a>(l: &Lstm, x: &TensorFact, c: &'a Call) -> KernelResult<Vec<Dir<'a>>> {
    (0..l.directions())
        .map(|d| {
            Ok(Dir {
                t: x.shape[0],
                b: x.shape[1],
                i: x.shape[2],
                h: l.hidden,
                reverse: d == 1,
                w_ih: c.param_f32(4 * d)?,
                w_hh: c.param_f32(4 * d + 1)?,
                b_ih: c.param_f32(4 * d + 2)?,
                b_hh: c.param_f32(4 * d + 3)?,
            })
        })
        .collect()
}

pub(crate) fn lstm(op: &Op, l: &Lstm, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    let out = c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let x = c.input_f32(0)?;
    let (h, width) = (l.hidden, l.directions() * l.hidden);
    let mut y = vec![0.0f32; out.shape.iter().product()];
    for (d, dir) in directions(l, &facts[0], &c)?.iter().enumerate() {
        let hs = dir.forward(x).hs;
        for (r, row) in hs.chunks_exact(h.max(1)).enumerate() {
            y[r * width + d * h..r * width + (d + 1) * h].copy_from_slice(row);
        }
    }
    Ok(vec![tensor(&out.shape, y)?])
}

/// Input (`params == false`) or parameter gradient of an LSTM layer. Reads `[dy, x, y]` and
/// the forward weights (which the IR's parameter-gradient node does not list: the caller
/// passes the forward node's parameters).
pub(crate) fn lstm_grad(
    of: &Op,
    l: &Lstm,
    g: &Grad,
    params: bool,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(3)?;
    let xf = c.inputs[1].fact();
    let dy = c.check_dy(of, std::slice::from_ref(&xf))?;
    if params {
        check_products(&c, of, &xf, g)?;
    } else if c.produced(g, 0)? != &xf {
        return Err(c.shape_err(format!("produces {:?}, the input is {xf}", g.produces)));
    }
    c.expect_input_shape(2, c.inputs[0].shape())?;
    if c.params.is_empty() {
        return Err(KernelError::Context {
            op: c.label.clone(),
            message: "needs the forward LSTM's weights as parameters".into(),
        });
    }
    c.check_params(of, std::slice::from_ref(&xf))?;
    let x = c.input_f32(1)?;
    let (h, width) = (l.hidden, l.directions() * l.hidden);
    let mut dx = vec![0.0f32; x.len()];
    let mut grads = Vec::new();
    for (d, dir) in directions(l, &xf, &c)?.iter().enumerate() {
        let half: Vec<f32> = dy
            .chunks_exact(width.max(1))
            .flat_map(|row| row[d * h..(d + 1) * h].iter().copied())
            .collect();
        grads.extend(dir.backward(x, &half, &mut dx, params));
    }
    if !params {
        return Ok(vec![tensor(&xf.shape, dx)?]);
    }
    let refs: Vec<&TensorFact> = vec![&xf];
    let specs = of.param_specs(&refs);
    specs.iter().zip(grads).map(|(s, gr)| tensor(&s.fact.shape, gr)).collect()
}
