//! Sequence and optional ops on values known at import: a sequence is the list of its
//! elements' tensor names, an optional the name of what it holds. Positions must be constants;
//! splitting and concatenating emit ordinary `Slice`, `Squeeze`, `Unsqueeze` and `Concat`
//! mappings.

use crate::control::{Flow, Structured, axes_node, const_int, set_bool, set_int, unsqueeze};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::ops::common::resolve_axis;
use crate::synth;
use crate::tensor::ConstTensor;
use crate::value::Value;

/// Maps a sequence or optional op, or an `Identity` of one.
pub(crate) fn map(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Flow> {
    let out = node.proto.output.first().map(String::as_str).unwrap_or("");
    match node.op_type() {
        "SplitToSequence" => return split_to_sequence(ctx, node, out),
        "ConcatFromSequence" => return concat_from_sequence(ctx, node, out),
        _ => {}
    }
    done(match node.op_type() {
        "Identity" => ctx.alias(node, out, node.required_input(0)?),
        "SequenceEmpty" => {
            ctx.set_structured(out, Structured::Sequence(Vec::new()));
            Ok(())
        }
        "SequenceConstruct" => {
            let mut items = Vec::with_capacity(node.num_inputs());
            for i in 0..node.num_inputs() {
                items.push(tensor_input(ctx, node, i)?);
            }
            ctx.set_structured(out, Structured::Sequence(items));
            Ok(())
        }
        "SequenceInsert" => {
            let mut items = sequence(ctx, node, 0)?;
            let tensor = tensor_input(ctx, node, 1)?;
            let n = items.len();
            let at = position(node, const_int(ctx, node, 2, "position")?, n as i64, n, n + 1)?;
            items.insert(at, tensor);
            ctx.set_structured(out, Structured::Sequence(items));
            Ok(())
        }
        "SequenceErase" => {
            let mut items = sequence(ctx, node, 0)?;
            let n = items.len();
            let at = position(node, const_int(ctx, node, 1, "position")?, -1, n, n)?;
            items.remove(at);
            ctx.set_structured(out, Structured::Sequence(items));
            Ok(())
        }
        "SequenceAt" => {
            let items = sequence(ctx, node, 0)?;
            let n = items.len();
            let pos = const_int(ctx, node, 1, "position")?
                .ok_or_else(|| node.malformed("input 1 (the position) is missing"))?;
            let at = position(node, Some(pos), 0, n, n)?;
            ctx.alias(node, out, &items[at])
        }
        "SequenceLength" => {
            let n = sequence(ctx, node, 0)?.len();
            set_int(ctx, out, n as i64);
            Ok(())
        }
        "Optional" => {
            let held = match node.input(0) {
                Some(name) => {
                    ctx.get_any(node, name)?;
                    Some(name.to_string())
                }
                None => None,
            };
            ctx.set_structured(out, Structured::Optional(held));
            Ok(())
        }
        "OptionalHasElement" => {
            let has = match node.input(0) {
                None => false,
                Some(name) => match ctx.structured(name) {
                    Some(Structured::Optional(held)) => held.is_some(),
                    _ => {
                        ctx.get_any(node, name)?;
                        true
                    }
                },
            };
            set_bool(ctx, out, has);
            Ok(())
        }
        "OptionalGetElement" => {
            let name = node.required_input(0)?;
            match ctx.structured(name).cloned() {
                Some(Structured::Optional(Some(held))) => ctx.alias(node, out, &held),
                Some(Structured::Optional(None)) => {
                    Err(node.malformed(format!("`{name}` is an empty optional")))
                }
                _ => ctx.alias(node, out, name),
            }
        }
        other => Err(node.unsupported(format!("no mapping for `{other}`"))),
    })
}

/// A mapping that set its outputs itself.
fn done(result: OnnxResult<()>) -> OnnxResult<Flow> {
    result.map(|()| Flow::Done)
}

/// The elements of sequence input `i`.
fn sequence(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<Vec<String>> {
    let name = node.required_input(i)?;
    match ctx.structured(name) {
        Some(Structured::Sequence(items)) => Ok(items.clone()),
        Some(other) => Err(node.malformed(format!("input `{name}` is {}", other.kind()))),
        None => {
            ctx.get(node, name)?;
            Err(node.malformed(format!("input `{name}` is a tensor, not a sequence")))
        }
    }
}

/// The name of tensor input `i`, which must have a value.
fn tensor_input(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> OnnxResult<String> {
    let name = node.required_input(i)?;
    ctx.get(node, name)?;
    Ok(name.to_string())
}

/// A position in a sequence of `n` elements: `given` (or `default`), negative counting from
/// the end, which must be below `limit` (`n` to read or erase, `n + 1` to insert).
fn position(
    node: &Node<'_>,
    given: Option<i64>,
    default: i64,
    n: usize,
    limit: usize,
) -> OnnxResult<usize> {
    let p = given.unwrap_or(default);
    let at = if p < 0 { p + n as i64 } else { p };
    usize::try_from(at).ok().filter(|&a| a < limit).ok_or_else(|| {
        node.malformed(format!("position {p} is out of range for a sequence of {n} element(s)"))
    })
}

/// `SplitToSequence`: slices along `axis` (of one element each, squeezed unless `keepdims`,
/// when no split is given; of the given size, or sizes), as `Slice` and `Squeeze` nodes.
fn split_to_sequence(ctx: &mut Ctx<'_>, node: &Node<'_>, out: &str) -> OnnxResult<Flow> {
    let shape = ctx.get(node, node.required_input(0)?)?.shape();
    let axis = resolve_axis(node, node.int("axis", 0)?, shape.len())?;
    let dim = shape[axis];
    let (sizes, squeeze) = match node.input(1) {
        None => (vec![1; dim], node.int("keepdims", 1)? == 0),
        Some(_) => {
            let split = ctx.const_input(node, 1, "the split")?;
            let values = split.to_i64s().ok_or_else(|| {
                node.unsupported("the split (input 1): too many values to read at import")
            })?;
            let sizes = if let (&[chunk], true) = (&values[..], split.shape.is_empty()) {
                let chunk = usize::try_from(chunk)
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| node.malformed(format!("split size {chunk} is not positive")))?;
                (0..dim).step_by(chunk).map(|s| chunk.min(dim - s)).collect()
            } else {
                let sizes: Option<Vec<usize>> =
                    values.iter().map(|&v| usize::try_from(v).ok()).collect();
                match sizes {
                    Some(s) if s.iter().sum::<usize>() == dim => s,
                    _ => {
                        return Err(node.malformed(format!(
                            "split sizes {values:?} do not add up to dimension {axis}'s {dim}"
                        )));
                    }
                }
            };
            (sizes, false)
        }
    };
    let input = node.required_input(0)?;
    let axes = format!("{}/axes", node.name);
    ctx.set(&axes, Value::constant(ConstTensor::ints(vec![axis as i64])));
    let mut nodes = Vec::with_capacity(sizes.len() * 2);
    let mut items = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for (k, &size) in sizes.iter().enumerate() {
        let name = format!("{}/{k}", node.name);
        let (starts, ends) = (format!("{name}.start"), format!("{name}.end"));
        ctx.set(&starts, Value::constant(ConstTensor::ints(vec![start as i64])));
        ctx.set(&ends, Value::constant(ConstTensor::ints(vec![(start + size) as i64])));
        if squeeze {
            let sliced = format!("{name}.slice");
            let slice = [input, &starts, &ends, &axes];
            nodes.push(synth::node("Slice", &sliced, &slice, &sliced, vec![]));
            let squeeze = (sliced.as_str(), axis as i64);
            nodes.push(axes_node(ctx, node.opset, "Squeeze", &name, squeeze, &name));
        } else {
            let slice = [input, &starts, &ends, &axes];
            nodes.push(synth::node("Slice", &name, &slice, &name, vec![]));
        }
        items.push(name);
        start += size;
    }
    ctx.set_structured(out, Structured::Sequence(items));
    Ok(Flow::Expand { nodes, revisit: false })
}

/// `ConcatFromSequence`: the elements concatenated along `axis`, or stacked along a new one
/// (`new_axis`).
fn concat_from_sequence(ctx: &mut Ctx<'_>, node: &Node<'_>, out: &str) -> OnnxResult<Flow> {
    let items = sequence(ctx, node, 0)?;
    let Some(first) = items.first() else {
        return Err(node.malformed("its sequence is empty: the result has no shape"));
    };
    let rank = ctx.get(node, first)?.shape().len();
    let new_axis = node.int("new_axis", 0)? == 1;
    let axis = resolve_axis(node, node.int("axis", 0)?, rank + usize::from(new_axis))? as i64;
    let mut nodes = Vec::with_capacity(items.len() + 1);
    let mut parts = items.clone();
    if new_axis {
        for (k, item) in items.iter().enumerate() {
            let name = format!("{}/{k}", node.name);
            nodes.push(unsqueeze(ctx, node.opset, &name, item, axis, &name));
            parts[k] = name;
        }
    }
    let inputs: Vec<&str> = parts.iter().map(String::as_str).collect();
    nodes.push(synth::node("Concat", &node.name, &inputs, out, vec![synth::int("axis", axis)]));
    Ok(Flow::Expand { nodes, revisit: false })
}
