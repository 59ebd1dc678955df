//! The import driver: decoding, the opset, which graph inputs are parameters, the node-by-node
//! mapping (in the order of [`crate::order`], control flow expanded as it is met), and the
//! final checks.

use prost::bytes::Bytes;
use std::collections::{HashSet, VecDeque};

use ordo_ir::{Op, TensorFact};
use prost::Message;

use crate::control::{self, Flow};
use crate::ctx::Ctx;
use crate::error::{OnnxError, OnnxResult};
use crate::node::Node;
use crate::ops;
use crate::order::{check_ops, node_names, sort_added, topo_order};
use crate::proto::{GraphProto, ModelProto, NodeProto};
use crate::tensor::{
    check_data_length, code, declared_fact, fact_of_type, ir_dtype, parse_tensor, tensor_fact,
};
use crate::value::Value;
use crate::{Import, ImportOptions, ImportReport};

/// Opsets of the default domain the importer knows. Opsets 24 and 25 changed the supported ops
/// only by adding element types (4- and 2-bit integers and floats); 26 added `BitCast` and
/// `CumProd`, 27 `CausalConvWithState`, `LinearAttention` and `Range`'s `stash_type` (the
/// precision an f16 or bf16 range is computed in).
pub const OPSETS: std::ops::RangeInclusive<i64> = 7..=27;

/// Decodes and imports a model.
pub(crate) fn import(
    bytes: &Bytes,
    name: Option<&str>,
    options: &ImportOptions,
) -> OnnxResult<Import> {
    import_traced(bytes, name, options, &mut Vec::new())
}

/// The shapes one ONNX node read and produced in an import.
#[derive(Default)]
pub(crate) struct NodeTrace {
    /// Its name.
    pub name: String,
    /// The shape of its first input.
    pub input: Option<Vec<usize>>,
    /// The shape of each output (`None` when it has no value, or the node was fused).
    pub outputs: Vec<Option<Vec<usize>>>,
    /// For a `Reshape` or `Expand`, its target shape tensor's name and value.
    pub target: Option<(String, Vec<i64>)>,
    /// For a `Loop` with a trip count known at import, the count's tensor and value.
    pub trips: Option<(String, i64)>,
}

/// Imports a model, recording in `traces` the shapes every ONNX node read and produced (up to
/// the node that failed, if one did).
pub(crate) fn import_traced(
    bytes: &Bytes,
    name: Option<&str>,
    options: &ImportOptions,
    traces: &mut Vec<NodeTrace>,
) -> OnnxResult<Import> {
    // Decoding from `Bytes` shares the weights' raw data with the buffer instead of copying.
    let model = ModelProto::decode(bytes.clone()).map_err(|e| OnnxError::Decode(e.to_string()))?;
    let graph = model.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    if graph.node.is_empty() && graph.output.is_empty() {
        return Err(OnnxError::NoGraph);
    }
    let opset = default_opset(&model)?;
    let names = node_names(graph);
    check_ops(graph, &names)?;
    let order = topo_order(graph, &names)?;
    let name = name.map(str::to_string).unwrap_or_else(|| match graph.name() {
        "" => "onnx".to_string(),
        n => n.to_string(),
    });
    let mut ctx = Ctx::new(&name, &graph.node);
    ctx.graph_outputs = graph.output.iter().map(|o| o.name().to_string()).collect();
    ctx.resized = options.batch.is_some() || options.seq_len.is_some();
    if !ctx.resized {
        let infos = graph.value_info.iter().chain(&graph.output);
        ctx.declared = infos
            .filter_map(|i| Some((i.name().to_string(), declared_fact(i.r#type.as_ref())?)))
            .collect();
    }
    let data_inputs = declare_inputs(&mut ctx, graph, options)?;
    ctx.frozen = frozen_params(&ctx, graph, options)?;
    let mut folded = 0;
    let mut planned_only = Vec::new();
    // One trace per node, the added ones' too: it holds the node's name.
    *traces = names.into_iter().map(|name| NodeTrace { name, ..NodeTrace::default() }).collect();
    // The nodes still to map, in order: the file's, with the nodes that control flow expands
    // to put in front as it is met.
    let mut queue: VecDeque<usize> = order.into();
    while let Some(index) = queue.pop_front() {
        if ctx.skip.contains(&index) {
            continue;
        }
        let added;
        let proto = match graph.node.get(index) {
            Some(proto) => proto,
            None => {
                added = ctx.inlined_node(index);
                &*added
            }
        };
        let node = Node { proto, name: traces[index].name.clone(), opset };
        if control::claims(&ctx, proto) {
            if proto.op_type() == "Loop"
                && let Some(t) = node.input(0)
                && let Some(m) = ctx.peek(t).and_then(Value::as_const).and_then(|c| c.to_i64s())
                && let [m] = m[..]
            {
                traces[index].trips = Some((t.to_string(), m));
            }
            if let Flow::Expand { nodes, revisit } = control::map(&mut ctx, &node, index)? {
                let sorted = sort_added(nodes, &node)?;
                if ctx.added_nodes() + sorted.len() > control::MAX_ADDED_NODES {
                    return Err(node.unsupported(format!(
                        "the control flow expands to more than {} nodes, the most ordo unrolls",
                        control::MAX_ADDED_NODES
                    )));
                }
                let named = sorted.iter().map(|n| n.name().to_string());
                traces.extend(named.map(|name| NodeTrace { name, ..NodeTrace::default() }));
                let added = ctx.add_nodes(sorted);
                if revisit {
                    queue.push_front(index);
                }
                added.rev().for_each(|i| queue.push_front(i));
            }
            continue;
        }
        let mapper = ops::mapper(proto.op_type()).expect("checked by check_ops");
        let trace = &mut traces[index];
        trace.input = node.input(0).and_then(|t| ctx.peek(t)).map(Value::shape);
        if matches!(proto.op_type(), "Reshape" | "Expand")
            && let Some(t) = node.input(1)
            && let Some(v) = ctx.peek(t).and_then(Value::as_const).and_then(|c| c.to_i64s())
        {
            trace.target = Some((t.to_string(), v));
        }
        let before = ctx.graph.nodes.len();
        let outputs = match mapper(&mut ctx, &node) {
            // A use the IR's op cannot express, before anything was emitted: an opaque op.
            Err(OnnxError::Unsupported { node: name, op_type, message })
                if ctx.graph.nodes.len() == before && ops::generic::has_rule(proto.op_type()) =>
            {
                let outputs = ops::generic::generic(&mut ctx, &node)?;
                // Of constants it folds: nothing is left to run.
                if ctx.graph.nodes.len() > before {
                    planned_only.push((name, op_type, message));
                }
                outputs
            }
            result => result?,
        };
        if ctx.graph.nodes.len() == before {
            folded += 1;
        }
        for (k, tensor) in proto.output.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
            match outputs.get(k).cloned().flatten() {
                Some(value) => ctx.set(tensor, value),
                None => ctx.set_unavailable(
                    tensor,
                    format!("output {k} of `{}`, which is not imported", node.name),
                ),
            }
        }
        traces[index].outputs =
            proto.output.iter().map(|t| ctx.peek(t).map(Value::shape)).collect();
    }
    let fused = ctx.skip.len();
    finish_outputs(&mut ctx, graph, opset)?;
    let sources = std::mem::take(&mut ctx.sources);
    let bounded = std::mem::take(&mut ctx.bounded);
    // A node planned at its largest size is reported as such (why it has no kernel).
    planned_only.retain(|(node, _, _)| !bounded.contains(node));
    let sized_by_file = std::mem::take(&mut ctx.sized_by_file);
    let both_branches = std::mem::take(&mut ctx.both_branches);
    let f64_tensors = f64_tensors(&ctx.graph);
    let graph_out = ctx.graph;
    ordo_ir::validate(&graph_out)?;
    let (mut params, mut buffers) = (0, 0);
    for p in &graph_out.params {
        if p.trainable {
            params += p.fact.numel();
        } else {
            buffers += p.fact.numel();
        }
    }
    let report = ImportReport {
        producer: format!("{} {}", model.producer_name(), model.producer_version())
            .trim()
            .to_string(),
        opset,
        onnx_nodes: graph.node.len(),
        ir_nodes: graph_out.nodes.len(),
        folded,
        fused,
        params,
        buffers,
        data_inputs,
        bounded,
        sized_by_file,
        both_branches,
        planned_only,
        f64_tensors,
    };
    Ok(Import { graph: graph_out, report, sources })
}

/// The names of the graph's f64 tensors: its f64 parameters, then the nodes with an f64
/// output, at most [`MAX_NAMED`] of them (the rest counted as `... and N more`).
fn f64_tensors(graph: &ordo_ir::Graph) -> Vec<String> {
    const MAX_NAMED: usize = 5;
    let f64 = |f: &TensorFact| f.dtype == ordo_ir::DType::F64;
    let mut names: Vec<String> =
        graph.params.iter().filter(|p| f64(&p.fact)).map(|p| p.name.clone()).collect();
    names.extend(
        graph
            .nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Parameter) && n.outputs.iter().any(f64))
            .map(|n| n.name.clone()),
    );
    if names.len() > MAX_NAMED {
        let more = names.len() - MAX_NAMED;
        names.truncate(MAX_NAMED);
        names.push(format!("... and {more} more"));
    }
    names
}

/// The version of the default operator set, which must be within [`OPSETS`] (or older, with
/// operators unchanged since: [`crate::legacy`]).
fn default_opset(model: &ModelProto) -> OnnxResult<i64> {
    let version = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .ok_or_else(|| OnnxError::Opset("the model imports no default-domain opset".into()))?;
    // Older opsets: imported as opset 7 when their operators mean the same there.
    if (1..*OPSETS.start()).contains(&version)
        && let Some(graph) = model.graph.as_ref()
    {
        return crate::legacy::as_oldest_known(graph, version);
    }
    if !OPSETS.contains(&version) {
        return Err(OnnxError::Opset(format!(
            "default-domain opset {version} (known: {} to {})",
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    Ok(version)
}

/// The names of [`ImportOptions::frozen`], each of which must be a float initializer (a
/// parameter); an unknown name is an error with the closest initializer name.
fn frozen_params(
    ctx: &Ctx<'_>,
    graph: &GraphProto,
    options: &ImportOptions,
) -> OnnxResult<std::collections::BTreeSet<String>> {
    for name in &options.frozen {
        if ctx.param_fact(name).is_none() {
            let close = graph
                .initializer
                .iter()
                .map(|t| t.name())
                .filter(|n| ctx.param_fact(n).is_some())
                .min_by_key(|n| strsim::levenshtein(n, name));
            let hint = close.map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default();
            return Err(OnnxError::UnknownFrozen { name: name.clone(), hint });
        }
    }
    Ok(options.frozen.clone())
}

/// Declares graph inputs and initializers: data inputs become `Input` nodes, the rest
/// parameters or constants. Returns the names of the data inputs.
fn declare_inputs(
    ctx: &mut Ctx<'_>,
    graph: &GraphProto,
    options: &ImportOptions,
) -> OnnxResult<Vec<String>> {
    let initializers: HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    for t in &graph.initializer {
        let bad = |m: String| OnnxError::MissingShape { tensor: t.name().to_string(), message: m };
        let (elem, shape) = tensor_fact(t).map_err(bad)?;
        let small_int = !crate::tensor::is_float_code(elem);
        if elem == code::STRING {
            // No constant form: a buffer of the graph (not trainable), planned by its handles.
            check_data_length(t).map_err(bad)?;
            ctx.declare_param(t.name(), TensorFact::new(ordo_ir::DType::String, shape));
        } else if small_int || shape.is_empty() {
            ctx.set(t.name(), Value::constant(parse_tensor(t).map_err(bad)?));
        } else {
            let dtype = ir_dtype(elem)
                .ok_or_else(|| bad(format!("element type {elem} is not supported")))?;
            check_data_length(t).map_err(bad)?;
            ctx.declare_param(t.name(), TensorFact::new(dtype, shape));
        }
    }
    let inputs: Vec<_> = graph.input.iter().filter(|i| !initializers.contains(i.name())).collect();
    let data: Vec<String> = match &options.data_inputs {
        Some(names) => names.clone(),
        None => {
            // Exporters that write parameters as graph inputs list the model's own inputs
            // first: the inputs before the first one that feeds a weight slot are data.
            let weights: HashSet<&str> = graph
                .node
                .iter()
                .flat_map(|n| ops::weight_slots(n.op_type()).iter().filter_map(|&s| n.input.get(s)))
                .map(String::as_str)
                .collect();
            let first =
                inputs.iter().position(|i| weights.contains(i.name())).unwrap_or(inputs.len());
            inputs[..first].iter().map(|i| i.name().to_string()).collect()
        }
    };
    for input in inputs {
        if let Some(c) = options.constant_inputs.get(input.name()) {
            // Of the input's declared element type where it has one of the same kind.
            use crate::proto::type_proto;
            use crate::tensor::{ConstData, is_float_code};
            let declared = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(t)) if ir_dtype(t.elem_type()).is_some() => {
                    Some(t.elem_type())
                }
                _ => None,
            };
            let (elem, data) = match (&c.floats, declared) {
                (Some(v), Some(e)) if is_float_code(e) => (e, ConstData::Float(v.clone())),
                (Some(v), _) => (code::FLOAT, ConstData::Float(v.clone())),
                (None, Some(e)) if !is_float_code(e) => (e, ConstData::Int(c.values.clone())),
                (None, _) => (code::INT64, ConstData::Int(c.values.clone())),
            };
            let value = crate::tensor::ConstTensor { elem, shape: c.shape.clone(), data };
            ctx.set(input.name(), Value::constant(value));
            continue;
        }
        let mut fact = fact_of_type(input.name(), input.r#type.as_ref())?;
        if data.iter().any(|d| d == input.name()) || !fact.dtype.is_float() {
            resize_input(&mut fact, options);
            let out = ctx.push(input.name(), Op::Input, Vec::new(), Vec::new(), vec![fact.clone()]);
            ctx.set(input.name(), Value::wire(out, fact));
        } else {
            ctx.declare_param(input.name(), fact);
        }
    }
    let names = ctx.graph.input_nodes().map(|n| n.name.clone()).collect();
    Ok(names)
}

/// Gives a data input the batch (dim 0) and, for a token input (integers, rank 2 or more), the
/// sequence length (dim 1) that the options ask for.
fn resize_input(fact: &mut TensorFact, options: &ImportOptions) {
    if let (Some(batch), Some(d)) = (options.batch, fact.shape.first_mut()) {
        *d = batch;
    }
    if let Some(seq) = options.seq_len
        && is_token_input(fact)
    {
        fact.shape[1] = seq;
    }
}

/// Whether a data input holds tokens: integers of rank 2 or more (batch, sequence, ...).
pub(crate) fn is_token_input(fact: &TensorFact) -> bool {
    !fact.dtype.is_float() && fact.rank() >= 2
}

/// Marks the graph outputs and checks the shapes the file declares.
fn finish_outputs(ctx: &mut Ctx<'_>, graph: &GraphProto, opset: i64) -> OnnxResult<()> {
    let proto = NodeProto { name: Some("graph output".into()), ..NodeProto::default() };
    let node = Node { proto: &proto, name: "graph output".into(), opset };
    // At other sizes than the file's, the declared shapes are checked by comparing with an
    // import at the file's sizes.
    let resized = ctx.resized;
    let declared = |ty| if resized { None } else { declared_fact(ty) };
    for info in &graph.value_info {
        if let (Some(declared), Some(Value::View(v))) =
            (declared(info.r#type.as_ref()), ctx.peek(info.name()))
        {
            check_declared(info.name(), &declared, v.fact())?;
        }
    }
    for output in &graph.output {
        if let Some(s) = ctx.structured(output.name()) {
            return Err(OnnxError::MissingShape {
                tensor: output.name().to_string(),
                message: format!(
                    "is {}: ordo's graphs give tensors (a graph output must be one)",
                    s.kind()
                ),
            });
        }
        let outlet = ctx.materialize(&node, output.name())?;
        let fact = ctx.graph.fact(outlet).cloned().expect("materialized");
        if let Some(declared) = declared(output.r#type.as_ref()) {
            check_declared(output.name(), &declared, &fact)?;
        }
        ctx.graph.outputs.push(outlet);
    }
    Ok(())
}

fn check_declared(tensor: &str, declared: &TensorFact, inferred: &TensorFact) -> OnnxResult<()> {
    if declared == inferred {
        return Ok(());
    }
    Err(OnnxError::DeclaredShape {
        tensor: tensor.to_string(),
        declared: declared.to_string(),
        inferred: inferred.to_string(),
    })
}
