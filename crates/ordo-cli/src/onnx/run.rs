//! A small sequential interpreter: runs an imported forward graph node by node in topological
//! order on the CPU kernels (`ordo_exec::cpu::run`), in inference mode (batch norm with its
//! running statistics, dropout as the identity), as ONNX's reference does.

use std::collections::HashMap;

use anyhow::{Context, bail};
use ordo_exec::cpu::{self, KernelContext, Tensor};
use ordo_ir::{Graph, Op};
use ordo_onnx::{TensorValue, Values};

/// A kernel tensor from an ONNX tensor value.
pub fn tensor(value: &TensorValue) -> anyhow::Result<Tensor> {
    let t = match &value.values {
        Values::F32(v) => Tensor::from_f32(&value.shape, v.clone()),
        Values::I64(v) => Tensor::from_i64(&value.shape, v.clone()),
    };
    t.with_context(|| format!("tensor `{}`", value.name))
}

/// Runs `graph` on `feeds` (one per `Input` node, by node name) with `params` (one per
/// `graph.params`); returns the values of `graph.outputs`.
pub fn forward(
    graph: &Graph,
    feeds: &HashMap<String, Tensor>,
    params: &[Tensor],
) -> anyhow::Result<Vec<Tensor>> {
    if params.len() != graph.params.len() {
        bail!("{} parameter values for {} parameters", params.len(), graph.params.len());
    }
    let order = graph.topo_order()?;
    let mut values: Vec<Vec<Tensor>> = vec![Vec::new(); graph.nodes.len()];
    for id in order {
        let node = graph.node(id);
        let mut inputs: Vec<&Tensor> = Vec::with_capacity(node.inputs.len());
        for outlet in &node.inputs {
            let t = values[outlet.node.0 as usize]
                .get(outlet.slot as usize)
                .with_context(|| format!("node `{}` reads a value not computed", node.name))?;
            inputs.push(t);
        }
        if node.op == Op::Input {
            let fed = feeds
                .get(&node.name)
                .with_context(|| format!("no value given for input `{}`", node.name))?;
            inputs.push(fed);
        }
        let node_params: Vec<&Tensor> = node.params.iter().map(|p| &params[p.0 as usize]).collect();
        let ctx = KernelContext {
            outputs: &node.outputs,
            training: false,
            seed: cpu::node_seed(0, id.0, 1),
            ..KernelContext::default()
        };
        let out = cpu::run(&node.op, &inputs, &node_params, &mut [], &ctx)
            .with_context(|| format!("running node `{}`", node.name))?;
        values[id.0 as usize] = out;
    }
    graph
        .outputs
        .iter()
        .map(|o| {
            values[o.node.0 as usize]
                .get(o.slot as usize)
                .cloned()
                .with_context(|| format!("output of `{}` not computed", graph.node(o.node).name))
        })
        .collect()
}

/// Elements of a kernel tensor as `f64`, for comparisons.
pub fn as_f64(t: &Tensor) -> Vec<f64> {
    match t.data() {
        cpu::Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        cpu::Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// Elements of an ONNX tensor value as `f64`.
pub fn value_f64(v: &TensorValue) -> Vec<f64> {
    match &v.values {
        Values::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        Values::I64(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// How two tensors differ beyond `|got - want| <= atol + rtol * |want|` (NaN matches NaN,
/// infinities must be equal), or `None` when they agree.
pub fn mismatch(
    got: &[f64],
    got_shape: &[usize],
    want: &TensorValue,
    rtol: f64,
    atol: f64,
) -> Option<String> {
    if got_shape != want.shape.as_slice() {
        return Some(format!("shape {got_shape:?}, expected {:?}", want.shape));
    }
    let want_v = value_f64(want);
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&g, &w)) in got.iter().zip(&want_v).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g.is_finite() && w.is_finite() && (g - w).abs() <= atol + rtol * w.abs());
        if !ok {
            bad += 1;
            let err = if (g - w).is_nan() { f64::INFINITY } else { (g - w).abs() };
            if worst.is_none_or(|(_, e)| err > e) {
                worst = Some((i, err));
            }
        }
    }
    worst.map(|(i, _)| {
        format!(
            "{bad} of {} elements differ (e.g. element {i}: {}, expected {})",
            want_v.len(),
            got[i],
            want_v[i]
        )
    })
}
