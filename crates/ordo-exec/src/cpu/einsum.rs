//! `Einsum`: a walk over every point of the label space (each label at each of its values),
//! adding each point's product of inputs into the output, and for the gradient of input `k`
//! each point's upstream gradient times the other inputs into input `k`. Sums in f64. A
//! plain loop nest: exact for repeated labels (diagonals) and sums alike, as fast as the
//! label space is small.

use std::collections::BTreeMap;

use ordo_ir::Op;
use ordo_ir::op::{Einsum, Grad};

use super::error::KernelResult;
use super::tensor::Tensor;
use super::util::{Call, tensor};

/// Each label's stride in a tensor whose dims carry `labels` (a label that repeats, a
/// diagonal, adds its strides), in the order of `order`.
fn strides(labels: &[u32], sizes: &[usize], order: &[u32]) -> Vec<usize> {
    let mut dim = vec![0usize; labels.len()];
    let mut s = 1;
    for d in (0..labels.len()).rev() {
        dim[d] = s;
        s *= sizes[d];
    }
    order
        .iter()
        .map(|l| labels.iter().zip(&dim).filter(|(m, _)| *m == l).map(|(_, &st)| st).sum())
        .collect()
}

/// Calls `f(offsets)` at every point of the label space, with each tensor's offset there.
fn each_point(sizes: &BTreeMap<u32, usize>, tensors: &[Vec<usize>], mut f: impl FnMut(&[usize])) {
    let dims: Vec<usize> = sizes.values().copied().collect();
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut offsets = vec![0usize; tensors.len()];
    loop {
        f(&offsets);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for (o, s) in offsets.iter_mut().zip(tensors) {
                *o += s[d];
            }
            if idx[d] < dims[d] {
                break;
            }
            for (o, s) in offsets.iter_mut().zip(tensors) {
                *o -= s[d] * dims[d];
            }
            idx[d] = 0;
        }
    }
}

/// Per tensor (the inputs, then the output), its strides by label in the label space's order.
fn layout(e: &Einsum, shapes: &[&[usize]], sizes: &BTreeMap<u32, usize>) -> Vec<Vec<usize>> {
    let order: Vec<u32> = sizes.keys().copied().collect();
    let out_sizes: Vec<usize> = e.output.iter().map(|l| sizes[l]).collect();
    e.inputs
        .iter()
        .zip(shapes)
        .map(|(labels, shape)| strides(labels, shape, &order))
        .chain(std::iter::once(strides(&e.output, &out_sizes, &order)))
        .collect()
}

pub(crate) fn einsum(op: &Op, e: &Einsum, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_params(0)?;
    let out = c.infer(op, &c.input_facts())?.shape;
    let facts = c.input_facts();
    let sizes = e.sizes(&facts.iter().collect::<Vec<_>>()).map_err(|m| c.shape_err(m))?;
    let xs = (0..c.inputs.len()).map(|k| c.input_f32(k)).collect::<KernelResult<Vec<_>>>()?;
    let shapes: Vec<&[usize]> = c.inputs.iter().map(|t| t.shape()).collect();
    let tensors = layout(e, &shapes, &sizes);
    let mut y = vec![0.0f64; out.iter().product()];
    let last = xs.len();
    each_point(&sizes, &tensors, |at| {
        y[at[last]] += xs.iter().zip(at).map(|(x, &i)| f64::from(x[i])).product::<f64>();
    });
    Ok(vec![tensor(&out, y.iter().map(|&v| v as f32).collect())?])
}

/// The gradient with respect to input `k` (inputs: `dy`, then every other input in order).
pub(crate) fn einsum_grad(e: &Einsum, k: usize, g: &Grad, c: Call) -> KernelResult<Vec<Tensor>> {
    c.expect_inputs(e.inputs.len())?;
    let shape = c.produced(g, 0)?.shape.clone();
    // The forward inputs' shapes: input k's from the gradient's product, the others read.
    let mut shapes: Vec<&[usize]> = Vec::with_capacity(e.inputs.len());
    let mut others = 1..c.inputs.len();
    for j in 0..e.inputs.len() {
        shapes.push(if j == k {
            &shape
        } else {
            c.inputs[others.next().expect("counted")].shape()
        });
    }
    let facts: Vec<ordo_ir::TensorFact> =
        shapes.iter().map(|s| ordo_ir::TensorFact::f32(s.to_vec())).collect();
    let sizes = e.sizes(&facts.iter().collect::<Vec<_>>()).map_err(|m| c.shape_err(m))?;
    let out: Vec<usize> = e.output.iter().map(|l| sizes[l]).collect();
    c.expect_input_shape(0, &out)?;
    let dy = c.input_f32(0)?;
    let reads = (1..c.inputs.len()).map(|i| c.input_f32(i)).collect::<KernelResult<Vec<_>>>()?;
    let tensors = layout(e, &shapes, &sizes);
    let mut dx = vec![0.0f64; shape.iter().product()];
    let last = e.inputs.len();
    each_point(&sizes, &tensors, |at| {
        let mut v = f64::from(dy[at[last]]);
        let mut r = 0;
        for (j, &i) in at[..last].iter().enumerate() {
            if j != k {
                v *= f64::from(reads[r][i]);
                r += 1;
            }
        }
        dx[at[k]] += v;
    });
    Ok(vec![tensor(&shape, dx.iter().map(|&v| v as f32).collect())?])
}
