//! What a training run keeps between steps (parameters, optimizer state, the step count) and
//! what it is fed (synthetic inputs).

use std::collections::HashMap;
use std::sync::Arc;

use ordo_ir::transform::Provenance;
use ordo_ir::{DType, Graph, Op, ParamInit};

use crate::cpu::Tensor;
use crate::error::ExecError;
use crate::program::Program;

/// The tensors fed to a graph's `Input` nodes, by node name.
pub type Feeds = HashMap<String, Tensor>;

/// Parameters, optimizer state and step count of a run.
#[derive(Clone, Debug)]
pub struct TrainState {
    /// The value of every parameter of the graph, by [`ordo_ir::ParamId`] index.
    pub params: Vec<Arc<Tensor>>,
    /// Every node's optimizer state (empty but for updates), by node index.
    pub slots: Vec<Vec<Tensor>>,
    /// Steps run so far; the next step is `step + 1`.
    pub step: u64,
}

impl TrainState {
    /// Fresh state for `program` with parameters from [`initial_params`].
    ///
    /// # Errors
    /// [`ExecError::Config`] for a parameter the CPU kernels cannot hold.
    pub fn new(program: &Program, seed: u64) -> Result<Self, ExecError> {
        let params = initial_params(program.graph(), seed)?.into_iter().map(Arc::new).collect();
        let slots = program.initial_state().map_err(|e| ExecError::Config(e.to_string()))?;
        Ok(Self { params, slots, step: 0 })
    }
}

/// Deterministic initial values for every parameter of `graph`, in the spirit of PyTorch's
/// defaults: a tensor of rank 2 or more uniform in `±1/sqrt(fan_in)` (fan_in = the product of
/// all but the first dimension); a norm's scale and a running variance 1; biases (a `bias` in
/// the last component of the name), shifts and running means 0; any other vector (GNMT's
/// attention vector and scalar, whose norm must not be 0) uniform in `±1/sqrt(length)`.
///
/// # Errors
/// [`ExecError::Config`] for a parameter the CPU kernels cannot hold.
pub fn initial_params(graph: &Graph, seed: u64) -> Result<Vec<Tensor>, ExecError> {
    let mut norm_scales = vec![false; graph.params.len()];
    for node in &graph.nodes {
        if matches!(node.op, Op::BatchNorm(_) | Op::LayerNorm(_))
            && let Some(p) = node.params.first()
        {
            norm_scales[p.index()] = true;
        }
    }
    let fail = |e: crate::cpu::KernelError| ExecError::Config(e.to_string());
    graph
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let shape = &p.fact.shape;
            if let Some(values) = given_init(p) {
                return Tensor::from_f32(shape, values).map_err(fail);
            }
            let last = p.name.rsplit('.').next().unwrap_or("");
            let weight_vector = shape.len() == 1
                && !norm_scales[i]
                && !last.contains("bias")
                && !last.starts_with("running_");
            if shape.len() >= 2 || weight_vector {
                let fan_in: usize =
                    if weight_vector { shape[0] } else { shape[1..].iter().product() };
                let bound = 1.0 / (fan_in.max(1) as f32).sqrt();
                let t = Tensor::random(&p.fact, seed.wrapping_add(i as u64)).map_err(fail)?;
                let values = t.as_f32().map(|v| v.iter().map(|x| x * bound).collect());
                return match values {
                    Some(v) => Tensor::from_f32(shape, v).map_err(fail),
                    None => Ok(t),
                };
            }
            let one = norm_scales[i] || p.name.ends_with("running_var");
            let t = Tensor::zeros(&p.fact).map_err(fail)?;
            match (one, t.as_f32()) {
                (true, Some(v)) => Tensor::from_f32(shape, vec![1.0; v.len()]).map_err(fail),
                _ => Ok(t),
            }
        })
        .collect()
}

/// The values of a parameter whose graph says how to make them ([`ParamInit`]), `None` for
/// [`ParamInit::ByShape`] (or a rotary table not shaped `[1, seq, 1, head_dim]`).
fn given_init(p: &ordo_ir::Param) -> Option<Vec<f32>> {
    let n = p.fact.numel() as usize;
    match p.init {
        ParamInit::ByShape => None,
        ParamInit::Constant(value) => Some(vec![value as f32; n]),
        ParamInit::Rotary { base, sine } => {
            let [1, seq, 1, dim] = p.fact.shape[..] else { return None };
            let half = (dim / 2).max(1);
            let mut values = Vec::with_capacity(n);
            for t in 0..seq {
                for j in 0..dim {
                    let inv_freq = base.powf(-2.0 * (j % half) as f64 / dim as f64);
                    let angle = t as f64 * inv_freq;
                    values.push(if sine { angle.sin() } else { angle.cos() } as f32);
                }
            }
            Some(values)
        }
    }
}

/// The feeds of `copy`, a graph transformed from `source` ([`ordo_ir::transform`]) with
/// `provenance`: every copy of an input node is fed what `feeds` gives the node it copies
/// (joined by the provenance, not by the copy's name). Copies of nodes that `feeds` does not
/// name get nothing.
pub fn copied_feeds(source: &Graph, copy: &Graph, provenance: &Provenance, feeds: &Feeds) -> Feeds {
    copy.nodes
        .iter()
        .zip(&provenance.origin)
        .filter_map(|(node, origin)| {
            let fed = feeds.get(&source.node(*origin).name)?;
            Some((node.name.clone(), fed.clone()))
        })
        .collect()
}

/// Deterministic synthetic inputs for every `Input` node of `graph`: floats uniform in
/// `[-1, 1)`; integers uniform below the bound their readers allow (an embedding's rows, a
/// loss's classes; 2 otherwise).
///
/// # Errors
/// [`ExecError::Feed`] for an input the CPU kernels cannot hold.
pub fn synthetic_feeds(graph: &Graph, seed: u64) -> Result<Feeds, ExecError> {
    let mut bound: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    for node in &graph.nodes {
        for (k, input) in node.inputs.iter().enumerate() {
            let limit = match (&node.op, k) {
                (Op::Embedding(e), 0) => Some(e.num_embeddings),
                (Op::CrossEntropyLoss, 1) => {
                    graph.fact(node.inputs[0]).and_then(|logits| logits.shape.last().copied())
                }
                _ => None,
            };
            if let Some(limit) = limit {
                let b = &mut bound[input.node.index()];
                *b = Some(b.map_or(limit, |old| old.min(limit)));
            }
        }
    }
    graph
        .input_nodes()
        .map(|node| {
            let fact = &node.outputs[0];
            let seed = seed.wrapping_mul(0x9e37_79b9).wrapping_add(u64::from(node.id.0));
            // Floats of any type (held in f32) uniform in [-1, 1), bools at random, integers
            // ids below the bound their readers set (2 by default: in every integer type).
            let t = match crate::cpu::held_as(fact.dtype) {
                DType::F32 | DType::Bool => Tensor::random(fact, seed),
                _ => Tensor::random_ids(&fact.shape, bound[node.id.index()].unwrap_or(2), seed),
            };
            t.map(|t| (node.name.clone(), t))
                .map_err(|e| ExecError::Feed { name: node.name.clone(), message: e.to_string() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_ir::{Param, TensorFact};

    fn param(shape: &[usize], init: ParamInit) -> Param {
        Param { name: "p".into(), fact: TensorFact::f32(shape), trainable: false, init }
    }

    #[test]
    fn rotary_tables_are_hugging_faces_and_constants_fill() {
        // Position 3, head width 4: angles 3 * 100^(-2i/4) for i = 0, 1, repeated.
        let cos = given_init(&param(&[1, 4, 1, 4], ParamInit::Rotary { base: 100.0, sine: false }));
        let cos = cos.unwrap();
        let at = |t: usize, j: usize| cos[t * 4 + j];
        assert_eq!(at(0, 0), 1.0);
        assert!((at(3, 0) - 3f32.cos()).abs() < 1e-6 && at(3, 2) == at(3, 0));
        assert!((at(3, 1) - 0.3f32.cos()).abs() < 1e-6 && at(3, 3) == at(3, 1));
        let sin = given_init(&param(&[1, 4, 1, 4], ParamInit::Rotary { base: 100.0, sine: true }));
        assert!((sin.unwrap()[3 * 4 + 1] - 0.3f32.sin()).abs() < 1e-6);
        assert_eq!(given_init(&param(&[2], ParamInit::Constant(1.0))), Some(vec![1.0, 1.0]));
        assert_eq!(given_init(&param(&[2], ParamInit::ByShape)), None);
        assert_eq!(given_init(&param(&[4, 4], ParamInit::Rotary { base: 1.0, sine: true })), None);
    }
}
