//! Control flow, sequences and optionals, resolved at import: ordo plans static graphs, so an
//! `If` whose condition folds becomes the branch it takes, a `Loop` or `Scan` whose trip count
//! is known becomes its iterations one after another, and a sequence or optional becomes the
//! list of tensors it holds (by name). An `If` whose condition is only known at run time is
//! planned with both branches computed and each output chosen by a `Where`.
//!
//! Expanding a node adds ONNX nodes to the import ([`Flow::Expand`]): copies of a subgraph
//! ([`inline`]) and the small nodes that join them (`Gather` of one scan slice, `Unsqueeze` and
//! `Concat` of the scan outputs), all mapped by the ordinary op mappings, so constants keep
//! folding through them. A loop is expanded one iteration per visit, so its condition can be
//! read after each iteration has been imported.

pub(crate) mod inline;
mod loops;
mod sequence;

use std::collections::HashMap;

use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::proto::{GraphProto, NodeProto};
use crate::synth;
use crate::tensor::{ConstTensor, code, parse_tensor};
use crate::value::Value;

pub(crate) use loops::LoopState;

/// A tensor name's value when it is not a tensor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Structured {
    /// A sequence: its elements' tensor names, in order.
    Sequence(Vec<String>),
    /// An optional: the name of what it holds, if anything.
    Optional(Option<String>),
}

impl Structured {
    /// "a sequence" or "an optional", for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Structured::Sequence(_) => "a sequence",
            Structured::Optional(_) => "an optional",
        }
    }
}

/// What mapping a control node did.
pub(crate) enum Flow {
    /// Its outputs are set.
    Done,
    /// These nodes are to be imported next (in order), then the node itself again when
    /// `revisit` (the next iteration of a loop, or the join of an `If`'s branches).
    Expand {
        /// The nodes.
        nodes: Vec<NodeProto>,
        /// Whether to map the control node again after them.
        revisit: bool,
    },
}

/// Most nodes control flow may add to one import: nested or long loops over large bodies
/// would otherwise grow the graph without bound.
pub(crate) const MAX_ADDED_NODES: usize = 100_000;

/// Op types mapped here.
pub(crate) const OPS: &[&str] = &[
    "If",
    "Loop",
    "Scan",
    "SequenceMap",
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceAt",
    "SequenceErase",
    "SequenceLength",
    "SplitToSequence",
    "ConcatFromSequence",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
];

/// Whether a node is mapped here: a control, sequence or optional op, or an `Identity` of a
/// sequence or optional.
pub(crate) fn claims(ctx: &Ctx<'_>, node: &NodeProto) -> bool {
    OPS.contains(&node.op_type())
        || (node.op_type() == "Identity"
            && node.input.first().is_some_and(|i| ctx.structured(i).is_some()))
}

/// Maps a node that [`claims`] accepted; `index` is its index in the import, which a loop
/// uses to keep its state between visits.
pub(crate) fn map(ctx: &mut Ctx<'_>, node: &Node<'_>, index: usize) -> OnnxResult<Flow> {
    match node.op_type() {
        "If" => if_(ctx, node, index),
        "Loop" => loops::loop_(ctx, node, index),
        "Scan" => loops::scan(ctx, node, index),
        "SequenceMap" => loops::sequence_map(ctx, node, index),
        _ => sequence::map(ctx, node),
    }
}

/// `If`. A condition known at import takes its branch; one known only at run time computes
/// both branches and selects each output with a `Where` (the plan counts both; the import
/// report names the node).
fn if_(ctx: &mut Ctx<'_>, node: &Node<'_>, index: usize) -> OnnxResult<Flow> {
    let cond = node.required_input(0)?;
    if let Some(joins) = ctx.if_joins.remove(&index) {
        return join_branches(ctx, node, cond, joins);
    }
    let branch = |name: &str| {
        node.graph(name).ok_or_else(|| node.malformed(format!("attribute `{name}` is missing")))
    };
    let (then_branch, else_branch) = (branch("then_branch")?, branch("else_branch")?);
    for g in [then_branch, else_branch] {
        if g.output.len() != node.num_outputs() {
            return Err(node.malformed(format!(
                "its branch `{}` has {} output(s), the node {}",
                g.name(),
                g.output.len(),
                node.num_outputs()
            )));
        }
    }
    if let Some(taken) = const_bool(ctx, node, cond)? {
        let (graph, label) = if taken { (then_branch, "then") } else { (else_branch, "else") };
        let copy = copy_subgraph(ctx, node, graph, &format!("{}/{label}/", node.name), &[])?;
        let mut nodes = copy.nodes;
        for (k, out) in node.proto.output.iter().enumerate().filter(|(_, o)| !o.is_empty()) {
            let name = format!("{}/out{k}", node.name);
            nodes.push(synth::node("Identity", &name, &[&copy.outputs[k]], out, vec![]));
        }
        return Ok(Flow::Expand { nodes, revisit: false });
    }
    let then_copy = copy_subgraph(ctx, node, then_branch, &format!("{}/then/", node.name), &[])?;
    let else_copy = copy_subgraph(ctx, node, else_branch, &format!("{}/else/", node.name), &[])?;
    let joins = then_copy.outputs.into_iter().zip(else_copy.outputs).collect();
    ctx.if_joins.insert(index, joins);
    let mut nodes = then_copy.nodes;
    nodes.extend(else_copy.nodes);
    Ok(Flow::Expand { nodes, revisit: true })
}

/// The join of an `If` whose condition is known only at run time, after both branches were
/// imported: each output is `Where(cond, then, else)`, which needs the branches to agree on
/// its shape and type.
fn join_branches(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    cond: &str,
    joins: Vec<(String, String)>,
) -> OnnxResult<Flow> {
    let mut nodes = Vec::new();
    for (k, (t, e)) in joins.iter().enumerate() {
        let Some(out) = node.proto.output.get(k).filter(|o| !o.is_empty()) else { continue };
        for name in [t, e] {
            if let Some(s) = ctx.structured(name) {
                return Err(node.unsupported(format!(
                    "its output {k} is {} chosen at run time (its condition `{cond}` is not \
                     known at import)",
                    s.kind()
                )));
            }
        }
        let facts = (ctx.fact_of(node, ctx.get(node, t)?)?, ctx.fact_of(node, ctx.get(node, e)?)?);
        if facts.0 != facts.1 {
            return Err(node.unsupported(format!(
                "its condition `{cond}` is known only at run time, and its branches give output \
                 {k} as {} and {}: ordo plans one shape per tensor",
                facts.0, facts.1
            )));
        }
        let name = format!("{}/select{k}", node.name);
        nodes.push(synth::node("Where", &name, &[cond, t, e], out, vec![]));
    }
    ctx.both_branches.push(node.name.clone());
    Ok(Flow::Expand { nodes, revisit: false })
}

/// Copies a subgraph for one use under `prefix`, its inputs bound to `bound` in order (fewer
/// than its inputs: the rest are set by the caller under their new names), and sets its
/// initializers as constants.
pub(crate) fn copy_subgraph(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    graph: &GraphProto,
    prefix: &str,
    bound: &[(usize, String)],
) -> OnnxResult<inline::Instance> {
    let bound: HashMap<String, String> = bound
        .iter()
        .map(|(i, outer)| (graph.input[*i].name().to_string(), outer.clone()))
        .collect();
    let copy = inline::instantiate(graph, prefix, &bound);
    for t in &copy.initializers {
        let c = parse_tensor(t).map_err(|m| {
            node.malformed(format!("initializer `{}` of its subgraph: {m}", t.name()))
        })?;
        ctx.set(t.name(), Value::constant(c));
    }
    Ok(copy)
}

/// An `Unsqueeze` of `input` at `axis` (see [`axes_node`]).
pub(crate) fn unsqueeze(
    ctx: &mut Ctx<'_>,
    opset: i64,
    name: &str,
    input: &str,
    axis: i64,
    output: &str,
) -> NodeProto {
    axes_node(ctx, opset, "Unsqueeze", name, (input, axis), output)
}

/// An `Unsqueeze` or `Squeeze` of one axis, written for the opset: the axes an attribute
/// before opset 13, a constant input (`<name>.axes`) from 13 on.
pub(crate) fn axes_node(
    ctx: &mut Ctx<'_>,
    opset: i64,
    op_type: &str,
    name: &str,
    (input, axis): (&str, i64),
    output: &str,
) -> NodeProto {
    if opset >= 13 {
        let axes = format!("{name}.axes");
        ctx.set(&axes, Value::constant(ConstTensor::ints(vec![axis])));
        return synth::node(op_type, name, &[input, &axes], output, vec![]);
    }
    synth::node(op_type, name, &[input], output, vec![synth::ints("axes", vec![axis])])
}

/// Sets `name` to a constant `int64` scalar.
pub(crate) fn set_int(ctx: &mut Ctx<'_>, name: &str, value: i64) {
    ctx.set(name, Value::constant(ConstTensor::int_scalar(code::INT64, value)));
}

/// Sets `name` to a constant `bool` scalar.
pub(crate) fn set_bool(ctx: &mut Ctx<'_>, name: &str, value: bool) {
    ctx.set(name, Value::constant(ConstTensor::int_scalar(code::BOOL, value.into())));
}

/// The value of the one-element condition `name`, `None` when it is computed at run time.
pub(crate) fn const_bool(ctx: &Ctx<'_>, node: &Node<'_>, name: &str) -> OnnxResult<Option<bool>> {
    let Some(c) = ctx.get(node, name)?.as_const() else { return Ok(None) };
    match c.scalar() {
        Some(v) => Ok(Some(v != 0.0)),
        None => Err(node
            .malformed(format!("its condition `{name}` has shape {:?}, not one element", c.shape))),
    }
}

/// A constant integer scalar input (a position, a trip count), `None` when the input is
/// absent; an error when it is not known at import.
pub(crate) fn const_int(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    i: usize,
    what: &str,
) -> OnnxResult<Option<i64>> {
    let Some(name) = node.input(i) else { return Ok(None) };
    match ctx.get(node, name)?.as_const().map(|c| (c.scalar(), c)) {
        Some((Some(v), c)) if c.is_int() => Ok(Some(v as i64)),
        Some(_) => Err(node.malformed(format!("its {what} `{name}` is not one integer"))),
        None => Err(node.unsupported(format!(
            "its {what} `{name}` is computed at run time; ordo needs it known at import"
        ))),
    }
}
