//! Operators the IR has no counterpart for, imported for planning: ONNX's shape inference
//! gives each output's shape and type, a generic estimate its FLOPs, and each output becomes an
//! [`Opaque`] node reading the operator's inputs. `inspect`, `place`, `plan` and `simulate` work
//! on the model; `run` names these operators as lacking a kernel.
//!
//! The mappings of the IR's own ops fall back to this one where the IR cannot express a use
//! (a division by a run-time tensor, a square root of one, a `Gather` that is not an
//! embedding), as long as they emitted nothing yet.
//!
//! An operator whose output size depends on the data (`NonZero`, `Unique`, `Compress` of a
//! run-time condition, `NonMaxSuppression`) has no static shape: it is planned at the largest
//! size it can have (every nonzero, every element unique, every box kept), and named in the
//! import report ([`crate::ImportReport::bounded`]). String operators are planned with string
//! tensors of 8-byte handles (`strings`). Control flow, sequences and optionals are resolved
//! before they reach this module ([`crate::control`]).

mod conv;
mod evaluate;
mod own;
mod rules;
mod strings;

use ordo_ir::TensorFact;
use ordo_ir::op::Opaque;

pub(crate) use own::dtype_attr;

use super::common::Outputs;
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::tensor::ConstTensor;
use crate::value::Value;

/// One input of a generic operator: its fact and, for a constant, its value (the sizes that
/// shape inference reads: pads, repeats, axes, K...).
pub(crate) struct In {
    pub fact: TensorFact,
    pub value: Option<ConstTensor>,
}

/// A dimension of a data-dependent output that nothing bounds: the size the file declares
/// replaces it, or the import fails.
const UNBOUNDED: usize = usize::MAX;

/// Whether the operator has a shape rule here.
pub(crate) fn has_rule(op_type: &str) -> bool {
    rules::family(op_type).is_some()
}

/// The facts (and constant values) of `node`'s inputs, `None` for an absent one.
fn inputs_of(ctx: &Ctx<'_>, node: &Node<'_>) -> OnnxResult<Vec<Option<In>>> {
    let mut ins: Vec<Option<In>> = Vec::with_capacity(node.num_inputs());
    for i in 0..node.num_inputs() {
        ins.push(match node.input(i) {
            None => None,
            Some(_) => {
                let value = ctx.input(node, i)?;
                let fact = ctx.fact_of(node, &value)?;
                Some(In { fact, value: value.as_const().cloned() })
            }
        });
    }
    Ok(ins)
}

/// The outputs' facts by the operator's shape rule, for a mapping written as IR ops that
/// shares the rule (and its checks of the attributes) with the plannable import.
pub(crate) fn inferred(ctx: &Ctx<'_>, node: &Node<'_>) -> OnnxResult<Vec<TensorFact>> {
    let outputs = rules::infer(node, &inputs_of(ctx, node)?)?;
    check_shapes(node, &outputs)?;
    Ok(outputs)
}

/// Checks inferred outputs against the importer's limits on shapes.
fn check_shapes(node: &Node<'_>, outputs: &[TensorFact]) -> OnnxResult<()> {
    for fact in outputs {
        crate::tensor::check_shape(&fact.shape).map_err(|m| node.shape_error(m))?;
    }
    Ok(())
}

/// Imports `node` as one opaque op per output.
pub(crate) fn generic(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let ins = inputs_of(ctx, node)?;
    if let Some(folded) = evaluate::fold_constants(node, &ins)? {
        return Ok(vec![Some(Value::constant(folded))]);
    }
    let mut outputs = rules::infer(node, &ins)?;
    // The outputs the node declares and names, of those the operator defines.
    let declared = node.num_outputs();
    let live: Vec<usize> =
        (0..declared.min(outputs.len())).filter(|&k| node.output_named(k)).collect();
    if own::bounded(node, &ins) {
        if sized_by_file(ctx, node, &live, &mut outputs) {
            ctx.sized_by_file.push(node.name.clone());
        } else if outputs.iter().any(|f| f.shape.contains(&UNBOUNDED)) {
            return Err(node.unsupported(
                "its output's size depends on the data, nothing bounds it, and the file \
                 declares none: ordo plans static shapes",
            ));
        } else {
            ctx.bounded.push(node.name.clone());
        }
    }
    check_shapes(node, &outputs)?;
    let flops = rules::flops(node, &ins, &outputs);
    // The tensors the op reads at run time; integer constants (axes, pads, sizes: what its
    // shape follows from) stay constants, for other nodes to fold too.
    let present: Vec<usize> = (0..ins.len())
        .filter(|&i| ins[i].as_ref().is_some_and(|x| x.value.as_ref().is_none_or(|c| !c.is_int())))
        .collect();
    let mut wires = Vec::with_capacity(present.len());
    for &i in &present {
        wires.push(ctx.wire(node, i)?);
    }
    let mut values = Vec::with_capacity(declared);
    for (k, output) in outputs.iter().enumerate().take(declared) {
        if !live.contains(&k) {
            values.push(None);
            continue;
        }
        let (op_type, name) = match live.len() {
            1 => (node.op_type().to_string(), node.name.clone()),
            _ => (format!("{}:{k}", node.op_type()), format!("{}:{k}", node.name)),
        };
        let op = ordo_ir::Op::Opaque(Opaque {
            op_type,
            output: output.clone(),
            inputs: wires.len(),
            flops: flops / live.len() as u64,
        });
        values.push(Some(ctx.emit_value(&name, op, &wires)?));
    }
    // Outputs the node declares beyond those the operator defines have no value.
    values.resize(declared, None);
    Ok(values)
}

/// The largest `outputs` of a data-dependent node replaced by the facts the file declares for
/// its `live` ones, when it declares every one, of the same type and rank and no larger;
/// whether it did.
fn sized_by_file(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    live: &[usize],
    outputs: &mut [TensorFact],
) -> bool {
    let declared: Vec<Option<&TensorFact>> = live
        .iter()
        .map(|&k| {
            let d = ctx.declared.get(node.proto.output[k].as_str())?;
            let most = &outputs[k];
            let fits = d.dtype == most.dtype
                && d.rank() == most.rank()
                && d.shape.iter().zip(&most.shape).all(|(a, b)| a <= b);
            fits.then_some(d)
        })
        .collect();
    if live.is_empty() || declared.iter().any(Option::is_none) {
        return false;
    }
    for (&k, d) in live.iter().zip(declared) {
        outputs[k] = d.expect("checked").clone();
    }
    true
}

/// The fact of input `i`, or an error naming it as missing.
pub(crate) fn fact_at<'a>(
    node: &Node<'_>,
    ins: &'a [Option<In>],
    i: usize,
) -> OnnxResult<&'a TensorFact> {
    ins.get(i)
        .and_then(Option::as_ref)
        .map(|x| &x.fact)
        .ok_or_else(|| node.malformed(format!("input {i} is missing")))
}

/// The value of input `i` when it is a constant.
pub(crate) fn const_of(ins: &[Option<In>], i: usize) -> Option<&ConstTensor> {
    ins.get(i).and_then(Option::as_ref).and_then(|x| x.value.as_ref())
}
