//! Mixed precision: a graph's weights and activations in 16-bit floats.

use crate::error::{IrError, IrResult};
use crate::fact::{DType, TensorFact};
use crate::graph::Graph;
use crate::op::Op;

/// `graph` with every fp32 tensor in `dtype` (bf16 or fp16): parameters, inputs, every node's
/// outputs and the gradients a backward node produces, as mixed-precision training keeps
/// them. Integer tensors (token ids, labels) keep their types. Nodes, names and shapes do not
/// change, so the result is numbered as `graph` is. What stays in fp32 (the optimizer's
/// master weights and states) is the cost model's to charge.
///
/// # Errors
/// [`IrError::Transform`] for a `dtype` that is not a 16-bit float.
pub fn in_precision(graph: &Graph, dtype: DType) -> IrResult<Graph> {
    if !dtype.is_half_float() {
        return Err(IrError::Transform {
            model: graph.name.clone(),
            message: format!("mixed precision is bf16 or fp16, not {dtype:?}"),
        });
    }
    let convert = |fact: &mut TensorFact| {
        if fact.dtype == DType::F32 {
            fact.dtype = dtype;
        }
    };
    let mut out = graph.clone();
    for param in &mut out.params {
        convert(&mut param.fact);
    }
    for node in &mut out.nodes {
        node.outputs.iter_mut().for_each(convert);
        if let Op::Grad(grad) = &mut node.op {
            grad.produces.iter_mut().for_each(convert);
        }
    }
    Ok(out)
}
