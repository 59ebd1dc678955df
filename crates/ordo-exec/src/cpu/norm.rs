//! Batch and layer normalisation and their gradients. Statistics are accumulated in f64, in a
//! fixed order; variances are biased (divided by the count), as PyTorch normalises.

use ordo_ir::op::{BatchNorm, Grad, LayerNorm};
use ordo_ir::{Op, TensorFact};

use super::error::KernelResult;
use super::linear::param_grad_inputs;
use super::tensor::Tensor;
use super::util::{Call, numel, tensor};

/// `(groups, count)` statistics layout: for batch norm, channel `ch` of `[N, C, S]` is the
/// elements `(n * C + ch) * S + s`; `for_each` visits a channel's elements in order.
struct Channels {
    n: usize,
    c: usize,
    s: usize,
}

impl Channels {
    fn of(shape: &[usize]) -> Self {
        Self { n: shape[0], c: shape[1], s: numel(&shape[2..]) }
    }

    fn for_each(&self, ch: usize, mut f: impl FnMut(usize)) {
        for n in 0..self.n {
            let base = (n * self.c + ch) * self.s;
            (base..base + self.s).for_each(&mut f);
        }
    }

    fn count(&self) -> f64 {
        (self.n * self.s) as f64
    }

    /// Per channel: batch mean and `1 / sqrt(var + eps)`.
    fn stats(&self, x: &[f32], eps: f64) -> Vec<(f64, f64)> {
        (0..self.c)
            .map(|ch| {
                let mut sum = 0.0;
                self.for_each(ch, |i| sum += f64::from(x[i]));
                let mean = sum / self.count();
                let mut sq = 0.0;
                self.for_each(ch, |i| sq += (f64::from(x[i]) - mean).powi(2));
                (mean, 1.0 / (sq / self.count() + eps).sqrt())
            })
            .collect()
    }
}

pub(crate) fn batch_norm(op: &Op, bn: &BatchNorm, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let x = c.input_f32(0)?;
    let (w, b) = (c.param_f32(0)?, c.param_f32(1)?);
    let ch = Channels::of(&facts[0].shape);
    let stats = if c.ctx.training {
        ch.stats(x, bn.eps)
    } else {
        let (rm, rv) = (c.param_f32(2)?, c.param_f32(3)?);
        rm.iter()
            .zip(rv)
            .map(|(&m, &v)| (f64::from(m), 1.0 / (f64::from(v) + bn.eps).sqrt()))
            .collect()
    };
    let mut y = vec![0.0f32; x.len()];
    for (k, &(mean, inv)) in stats.iter().enumerate() {
        let (scale, shift) = (inv * f64::from(w[k]), f64::from(b[k]));
        ch.for_each(k, |i| y[i] = ((f64::from(x[i]) - mean) * scale + shift) as f32);
    }
    Ok(vec![tensor(&facts[0].shape, y)?])
}

/// With batch statistics: `dx = inv / M * (M dxh - sum(dxh) - xh sum(dxh xh))`, `dxh = dy w`.
pub(crate) fn batch_norm_grad_input(
    of: &Op,
    bn: &BatchNorm,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (xf, dy) = input_grad_inputs(&c, of, g)?;
    let (x, w) = (c.input_f32(1)?, c.param_f32(0)?);
    let ch = Channels::of(&xf.shape);
    let mut dx = vec![0.0f32; x.len()];
    for (k, (mean, inv)) in ch.stats(x, bn.eps).into_iter().enumerate() {
        let (mut sum, mut dot) = (0.0, 0.0);
        ch.for_each(k, |i| {
            let d = f64::from(dy[i]) * f64::from(w[k]);
            sum += d;
            dot += d * (f64::from(x[i]) - mean) * inv;
        });
        let m = ch.count();
        ch.for_each(k, |i| {
            let (d, xh) = (f64::from(dy[i]) * f64::from(w[k]), (f64::from(x[i]) - mean) * inv);
            dx[i] = (inv / m * (m * d - sum - xh * dot)) as f32;
        });
    }
    Ok(vec![tensor(&xf.shape, dx)?])
}

/// `dw = sum(dy * xhat)`, `db = sum(dy)` per channel, with batch statistics.
pub(crate) fn batch_norm_grad_params(
    of: &Op,
    bn: &BatchNorm,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (xf, dy) = param_grad_inputs(&c, of, g)?;
    let x = c.input_f32(1)?;
    let ch = Channels::of(&xf.shape);
    let (mut dw, mut db) = (vec![0.0f32; ch.c], vec![0.0f32; ch.c]);
    for (k, (mean, inv)) in ch.stats(x, bn.eps).into_iter().enumerate() {
        let (mut sw, mut sb) = (0.0, 0.0);
        ch.for_each(k, |i| {
            sw += f64::from(dy[i]) * (f64::from(x[i]) - mean) * inv;
            sb += f64::from(dy[i]);
        });
        (dw[k], db[k]) = (sw as f32, sb as f32);
    }
    Ok(vec![tensor(&[ch.c], dw)?, tensor(&[ch.c], db)?])
}

/// Per row of width `d`: mean and `1 / sqrt(var + eps)`.
fn row_stats(row: &[f32], eps: f64) -> (f64, f64) {
    let d = row.len() as f64;
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d;
    let var = row.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / d;
    (mean, 1.0 / (var + eps).sqrt())
}

pub(crate) fn layer_norm(op: &Op, ln: &LayerNorm, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(1)?;
    let facts = c.input_facts();
    c.infer(op, &facts)?;
    c.check_params(op, &facts)?;
    let x = c.input_f32(0)?;
    let d = numel(&ln.normalized_shape);
    let affine = if ln.affine { Some((c.param_f32(0)?, c.param_f32(1)?)) } else { None };
    let mut y = vec![0.0f32; x.len()];
    for (row, out) in x.chunks_exact(d.max(1)).zip(y.chunks_exact_mut(d.max(1))) {
        let (mean, inv) = row_stats(row, ln.eps);
        for (j, (o, &v)) in out.iter_mut().zip(row).enumerate() {
            let xh = (f64::from(v) - mean) * inv;
            *o = match affine {
                Some((w, b)) => (xh * f64::from(w[j]) + f64::from(b[j])) as f32,
                None => xh as f32,
            };
        }
    }
    Ok(vec![tensor(&facts[0].shape, y)?])
}

/// Per row: `dx = inv / D * (D dxh - sum(dxh) - xh sum(dxh xh))`, `dxh = dy w`.
pub(crate) fn layer_norm_grad_input(
    of: &Op,
    ln: &LayerNorm,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (xf, dy) = input_grad_inputs(&c, of, g)?;
    let x = c.input_f32(1)?;
    let d = numel(&ln.normalized_shape);
    let w = if ln.affine { Some(c.param_f32(0)?) } else { None };
    let mut dx = vec![0.0f32; x.len()];
    let rows = x.chunks_exact(d.max(1)).zip(dy.chunks_exact(d.max(1)));
    for ((row, dyr), out) in rows.zip(dx.chunks_exact_mut(d.max(1))) {
        let (mean, inv) = row_stats(row, ln.eps);
        let dxh = |j: usize| f64::from(dyr[j]) * w.map_or(1.0, |w| f64::from(w[j]));
        let (mut sum, mut dot) = (0.0, 0.0);
        for (j, &v) in row.iter().enumerate() {
            sum += dxh(j);
            dot += dxh(j) * (f64::from(v) - mean) * inv;
        }
        let n = d as f64;
        for (j, o) in out.iter_mut().enumerate() {
            let xh = (f64::from(row[j]) - mean) * inv;
            *o = (inv / n * (n * dxh(j) - sum - xh * dot)) as f32;
        }
    }
    Ok(vec![tensor(&xf.shape, dx)?])
}

/// `dw = sum over rows of dy * xhat`, `db = sum over rows of dy`.
pub(crate) fn layer_norm_grad_params(
    of: &Op,
    ln: &LayerNorm,
    g: &Grad,
    c: Call,
) -> KernelResult<Vec<Tensor>> {
    let (_, dy) = param_grad_inputs(&c, of, g)?;
    if !ln.affine {
        return Ok(Vec::new());
    }
    let x = c.input_f32(1)?;
    let d = numel(&ln.normalized_shape);
    let (mut dw, mut db) = (vec![0.0f64; d], vec![0.0f64; d]);
    for (row, dyr) in x.chunks_exact(d.max(1)).zip(dy.chunks_exact(d.max(1))) {
        let (mean, inv) = row_stats(row, ln.eps);
        for j in 0..row.len() {
            dw[j] += f64::from(dyr[j]) * (f64::from(row[j]) - mean) * inv;
            db[j] += f64::from(dyr[j]);
        }
    }
    let shape = &ln.normalized_shape;
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    Ok(vec![tensor(shape, f32s(dw))?, tensor(shape, f32s(db))?])
}

/// The inputs of a normalisation's input gradient (`dy`, `x`), checked
/// ([`Call::dy_and_input`]), its parameters checked, and its one product checked to be shaped
/// like `x`: `x`'s fact and `dy`.
fn input_grad_inputs<'c>(c: &'c Call, of: &Op, g: &Grad) -> KernelResult<(TensorFact, &'c [f32])> {
    let (xf, dy) = c.dy_and_input(of)?;
    c.check_params(of, std::slice::from_ref(&xf))?;
    if c.produced(g, 0)? != &xf {
        return Err(c.shape_err(format!("produces {:?}, the input is {xf}", g.produces)));
    }
    Ok((xf, dy))
}
