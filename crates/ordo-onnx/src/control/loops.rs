//! `Loop`, `Scan` and `SequenceMap`, unrolled: one iteration's copy of the body per visit of
//! the node, its carried values bound to the previous iteration's outputs, until the trip
//! count or the condition (which must fold at import) ends the loop.

use crate::control::{
    Flow, Structured, const_bool, const_int, copy_subgraph, set_bool, set_int, unsqueeze,
};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::ops::common::resolve_axis;
use crate::proto::GraphProto;
use crate::synth;

/// Most iterations a loop may unroll to: a bound that keeps a loop whose condition never
/// turns false from running the import forever.
pub(crate) const MAX_ITERATIONS: usize = 10_000;

/// Where an unrolled loop stands between two visits.
#[derive(Clone, Debug, Default)]
pub(crate) struct LoopState {
    /// Iterations imported so far.
    pub iteration: usize,
    /// The carried values' current tensors.
    pub carried: Vec<String>,
    /// The condition's current tensor (a `Loop` with a condition).
    pub cond: Option<String>,
    /// Each scan output's (or `SequenceMap` output's) tensor from every iteration so far.
    pub parts: Vec<Vec<String>>,
}

/// The `body` attribute.
fn body<'a>(node: &Node<'a>) -> OnnxResult<&'a GraphProto> {
    node.graph("body").ok_or_else(|| node.malformed("attribute `body` is missing"))
}

/// `Loop`: `for i in 0..M while cond`, both of which must be known at import (the condition
/// after every iteration, as the body computes it).
pub(crate) fn loop_(ctx: &mut Ctx<'_>, node: &Node<'_>, index: usize) -> OnnxResult<Flow> {
    let body = body(node)?;
    let carried = node.num_inputs().saturating_sub(2);
    let scans = body.output.len().checked_sub(1 + carried).ok_or_else(|| {
        node.malformed(format!(
            "its body has {} output(s); it needs the condition and {carried} carried value(s)",
            body.output.len()
        ))
    })?;
    if body.input.len() != carried + 2 {
        return Err(node.malformed(format!(
            "its body has {} input(s); it needs the iteration number, the condition and \
             {carried} carried value(s)",
            body.input.len()
        )));
    }
    let trip = const_int(ctx, node, 0, "trip count")?;
    let has_cond = node.input(1).is_some();
    if trip.is_none() && !has_cond {
        return Err(node.malformed("it has neither a trip count nor a condition: it never ends"));
    }
    let mut state = ctx.loops.remove(&index).unwrap_or_else(|| LoopState {
        carried: (2..node.num_inputs()).map(|i| node.input(i).unwrap_or("").to_string()).collect(),
        cond: node.input(1).map(str::to_string),
        parts: vec![Vec::new(); scans],
        ..LoopState::default()
    });
    let go_on = match &state.cond {
        Some(cond) => condition(ctx, node, cond)?,
        None => true,
    };
    let within = trip.is_none_or(|m| (state.iteration as i64) < m);
    if !(go_on && within) {
        return finish(ctx, node, state, carried, &[]);
    }
    if state.iteration >= MAX_ITERATIONS {
        return Err(node.unsupported(format!(
            "it runs more than {MAX_ITERATIONS} iterations, the most ordo unrolls"
        )));
    }
    let prefix = format!("{}/{}/", node.name, state.iteration);
    let mut bound: Vec<(usize, String)> = Vec::new();
    if let Some(cond) = &state.cond {
        bound.push((1, cond.clone()));
    }
    for (j, tensor) in state.carried.iter().enumerate() {
        if tensor.is_empty() {
            return Err(node.malformed(format!("its carried value {j} has no input")));
        }
        bound.push((2 + j, tensor.clone()));
    }
    let copy = copy_subgraph(ctx, node, body, &prefix, &bound)?;
    set_int(ctx, &copy.inputs[0], state.iteration as i64);
    if state.cond.is_none() {
        set_bool(ctx, &copy.inputs[1], true);
    }
    if has_cond {
        state.cond = Some(copy.outputs[0].clone());
    }
    state.carried = copy.outputs[1..=carried].to_vec();
    for (k, part) in state.parts.iter_mut().enumerate() {
        part.push(copy.outputs[1 + carried + k].clone());
    }
    Ok(next_iteration(ctx, index, state, copy.nodes))
}

/// Keeps a loop's state for its next visit, one iteration further, after `nodes` (this
/// iteration's) are imported.
fn next_iteration(
    ctx: &mut Ctx<'_>,
    index: usize,
    mut state: LoopState,
    nodes: Vec<crate::proto::NodeProto>,
) -> Flow {
    state.iteration += 1;
    ctx.loops.insert(index, state);
    Flow::Expand { nodes, revisit: true }
}

/// The value of a loop condition, which must be known at import.
fn condition(ctx: &Ctx<'_>, node: &Node<'_>, cond: &str) -> OnnxResult<bool> {
    const_bool(ctx, node, cond)?.ok_or_else(|| {
        node.unsupported(format!(
            "its condition `{cond}` is computed at run time; ordo unrolls loops whose trip \
             count and condition are known at import"
        ))
    })
}

/// Ends a loop: the carried values become the first outputs, and each scan output the
/// iterations' parts stacked along its axis (`axes`, along 0 where not given), in reverse
/// where `reverse` says so.
fn finish(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    state: LoopState,
    carried: usize,
    scan_axes: &[(i64, bool)],
) -> OnnxResult<Flow> {
    for (j, tensor) in state.carried.iter().enumerate() {
        if let Some(out) = node.proto.output.get(j).filter(|o| !o.is_empty()) {
            ctx.alias(node, out, tensor)?;
        }
    }
    let mut nodes = Vec::new();
    for (k, mut parts) in state.parts.into_iter().enumerate() {
        let Some(out) = node.proto.output.get(carried + k).filter(|o| !o.is_empty()) else {
            continue;
        };
        let (axis, reverse) = scan_axes.get(k).copied().unwrap_or((0, false));
        if parts.is_empty() {
            return Err(node.unsupported(format!(
                "it runs no iteration, so its scan output `{out}` has no shape"
            )));
        }
        if reverse {
            parts.reverse();
        }
        let rank = ctx.get(node, &parts[0])?.shape().len();
        let axis = resolve_axis(node, axis, rank + 1)? as i64;
        let mut stacked = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let name = format!("{}/stack{k}/{i}", node.name);
            nodes.push(unsqueeze(ctx, node.opset, &name, part, axis, &name));
            stacked.push(name);
        }
        let inputs: Vec<&str> = stacked.iter().map(String::as_str).collect();
        let concat = format!("{}/concat{k}", node.name);
        nodes.push(synth::node("Concat", &concat, &inputs, out, vec![synth::int("axis", axis)]));
    }
    Ok(Flow::Expand { nodes, revisit: false })
}

/// `Scan` (opset 9 on): the body runs once per slice of the scan inputs along their axes,
/// carrying its state; its scan outputs are stacked.
pub(crate) fn scan(ctx: &mut Ctx<'_>, node: &Node<'_>, index: usize) -> OnnxResult<Flow> {
    if node.opset < 9 {
        return Err(node.unsupported(
            "`Scan` of opset 8 (with a batch axis and sequence lengths); opset 9 and later are \
             imported",
        ));
    }
    let body = body(node)?;
    let inputs = usize::try_from(node.int("num_scan_inputs", 0)?)
        .ok()
        .filter(|&m| m >= 1 && m <= node.num_inputs())
        .ok_or_else(|| node.malformed("attribute `num_scan_inputs` is out of range"))?;
    let states = node.num_inputs() - inputs;
    let outputs = body.output.len().checked_sub(states).ok_or_else(|| {
        node.malformed(format!("its body has fewer outputs than its {states} state(s)"))
    })?;
    if body.input.len() != node.num_inputs() {
        return Err(node.malformed(format!(
            "its body has {} input(s), the node {}",
            body.input.len(),
            node.num_inputs()
        )));
    }
    let list = |name: &str, n: usize| -> OnnxResult<Vec<i64>> {
        let v = node.ints(name).map_or_else(|| vec![0; n], <[i64]>::to_vec);
        if v.len() == n { Ok(v) } else { Err(node.malformed(format!("`{name}` needs {n} values"))) }
    };
    let (in_dirs, in_axes) =
        (list("scan_input_directions", inputs)?, list("scan_input_axes", inputs)?);
    let (out_dirs, out_axes) =
        (list("scan_output_directions", outputs)?, list("scan_output_axes", outputs)?);
    let mut length = None;
    let mut axes = Vec::with_capacity(inputs);
    for (j, &axis) in in_axes.iter().enumerate() {
        let name = node.required_input(states + j)?;
        let shape = ctx.get(node, name)?.shape();
        let axis = resolve_axis(node, axis, shape.len())?;
        if *length.get_or_insert(shape[axis]) != shape[axis] {
            return Err(node.shape_error(format!(
                "its scan inputs have {} and {} slices",
                length.unwrap_or(0),
                shape[axis]
            )));
        }
        axes.push(axis);
    }
    let length = length.unwrap_or(0);
    let mut state = ctx.loops.remove(&index).unwrap_or_else(|| LoopState {
        carried: (0..states).map(|i| node.input(i).unwrap_or("").to_string()).collect(),
        parts: vec![Vec::new(); outputs],
        ..LoopState::default()
    });
    if state.iteration == length {
        let scan_axes: Vec<(i64, bool)> =
            out_axes.iter().zip(&out_dirs).map(|(&a, &d)| (a, d == 1)).collect();
        return finish(ctx, node, state, states, &scan_axes);
    }
    if state.iteration >= MAX_ITERATIONS {
        return Err(node.unsupported(format!(
            "it runs {length} iterations, more than the {MAX_ITERATIONS} ordo unrolls"
        )));
    }
    let k = state.iteration;
    let prefix = format!("{}/{k}/", node.name);
    let bound: Vec<(usize, String)> = state.carried.iter().cloned().enumerate().collect();
    let copy = copy_subgraph(ctx, node, body, &prefix, &bound)?;
    let mut nodes = Vec::with_capacity(inputs + copy.nodes.len());
    for j in 0..inputs {
        let position = if in_dirs[j] == 1 { length - 1 - k } else { k };
        let at = format!("{prefix}#slice{j}");
        set_int(ctx, &at, position as i64);
        let input = node.required_input(states + j)?;
        let gather = vec![synth::int("axis", axes[j] as i64)];
        nodes.push(synth::node("Gather", &at, &[input, &at], &copy.inputs[states + j], gather));
    }
    nodes.extend(copy.nodes);
    state.carried = copy.outputs[..states].to_vec();
    for (part, out) in state.parts.iter_mut().zip(&copy.outputs[states..]) {
        part.push(out.clone());
    }
    Ok(next_iteration(ctx, index, state, nodes))
}

/// `SequenceMap`: the body runs once per element of the input sequences (the tensors among
/// its inputs are the same every time); each output is the sequence of its iterations.
pub(crate) fn sequence_map(ctx: &mut Ctx<'_>, node: &Node<'_>, index: usize) -> OnnxResult<Flow> {
    let body = body(node)?;
    if body.input.len() != node.num_inputs() || body.output.len() != node.num_outputs() {
        return Err(node.malformed("its body's inputs and outputs differ from the node's"));
    }
    let mut elements: Vec<Option<Vec<String>>> = Vec::with_capacity(node.num_inputs());
    let mut length = None;
    for i in 0..node.num_inputs() {
        let name = node.required_input(i)?;
        match ctx.structured(name) {
            Some(Structured::Sequence(items)) => {
                if *length.get_or_insert(items.len()) != items.len() {
                    return Err(node.shape_error("its input sequences differ in length"));
                }
                elements.push(Some(items.clone()));
            }
            Some(other) => {
                return Err(node.malformed(format!("its input `{name}` is {}", other.kind())));
            }
            None if i == 0 => return Err(node.malformed(format!("`{name}` is not a sequence"))),
            None => elements.push(None),
        }
    }
    let length = length.unwrap_or(0);
    let mut state = ctx.loops.remove(&index).unwrap_or_else(|| LoopState {
        parts: vec![Vec::new(); node.num_outputs()],
        ..LoopState::default()
    });
    if state.iteration == length {
        for (out, parts) in node.proto.output.iter().zip(state.parts) {
            ctx.set_structured(out, Structured::Sequence(parts));
        }
        return Ok(Flow::Done);
    }
    let k = state.iteration;
    let bound: Vec<(usize, String)> = elements
        .iter()
        .enumerate()
        .map(|(i, items)| match items {
            Some(items) => (i, items[k].clone()),
            None => (i, node.proto.input[i].clone()),
        })
        .collect();
    let copy = copy_subgraph(ctx, node, body, &format!("{}/{k}/", node.name), &bound)?;
    for (part, out) in state.parts.iter_mut().zip(&copy.outputs) {
        part.push(out.clone());
    }
    Ok(next_iteration(ctx, index, state, copy.nodes))
}
