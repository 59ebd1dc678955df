//! Copies of a subgraph's nodes under fresh names: what inlining an `If` branch or one
//! iteration of a `Loop` or `Scan` adds to the graph being imported.
//!
//! A subgraph reads the tensors of the scopes around it by name ("captures"), and ONNX names are
//! single-assignment across all scopes. A copy renames every name the subgraph defines (its
//! inputs, initializers and node outputs, nested subgraphs' included) by a prefix unique to the
//! copy, and leaves the captured names alone, so the copied nodes read the outer tensors
//! directly. Inputs the caller binds to outer tensors are renamed to those tensors instead.

use std::collections::{HashMap, HashSet};

use crate::proto::{GraphProto, NodeProto, TensorProto};

/// The names read inside a node's subgraphs that none of them defines: the outer tensors the
/// node needs besides its inputs.
pub(crate) fn captures(node: &NodeProto) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for g in subgraphs(node) {
        for name in graph_captures(g) {
            if seen.insert(name.clone()) {
                out.push(name);
            }
        }
    }
    out
}

/// The subgraphs a node holds as attributes (an `If`'s branches, a `Loop`'s body).
pub(crate) fn subgraphs(node: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    node.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs))
}

/// The names a graph reads from its enclosing scopes, in order of first read.
fn graph_captures(graph: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> = graph.input.iter().map(|i| i.name()).collect();
    defined.extend(graph.initializer.iter().map(|t| t.name()));
    for n in &graph.node {
        defined.extend(n.output.iter().map(String::as_str));
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut read = |name: String| {
        if !name.is_empty() && !defined.contains(name.as_str()) && seen.insert(name.clone()) {
            out.push(name);
        }
    };
    for n in &graph.node {
        n.input.iter().cloned().for_each(&mut read);
        captures(n).into_iter().for_each(&mut read);
    }
    graph.output.iter().map(|o| o.name().to_string()).for_each(read);
    out
}

/// One copy of a subgraph.
pub(crate) struct Instance {
    /// Its nodes, renamed, in the file's order.
    pub nodes: Vec<NodeProto>,
    /// The names of its inputs in the copy (an input bound by the caller: the outer tensor).
    pub inputs: Vec<String>,
    /// The names of its outputs in the copy.
    pub outputs: Vec<String>,
    /// Its initializers, renamed.
    pub initializers: Vec<TensorProto>,
}

/// Copies `graph` with every name it defines prefixed by `prefix`, except the inputs in
/// `bound` (input name to outer tensor), which become the outer tensors.
pub(crate) fn instantiate(
    graph: &GraphProto,
    prefix: &str,
    bound: &HashMap<String, String>,
) -> Instance {
    let mut names = HashMap::new();
    defined_names(graph, &mut |name| {
        if !name.is_empty() {
            names.insert(name.to_string(), format!("{prefix}{name}"));
        }
    });
    names.extend(bound.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut copy = graph.clone();
    rename_graph(&mut copy, Some(prefix), &names);
    Instance {
        inputs: copy.input.iter().map(|i| i.name().to_string()).collect(),
        outputs: copy.output.iter().map(|o| o.name().to_string()).collect(),
        initializers: copy.initializer,
        nodes: copy.node,
    }
}

/// Calls `f` with every name a graph and its nested subgraphs define.
fn defined_names(graph: &GraphProto, f: &mut impl FnMut(&str)) {
    graph.input.iter().for_each(|i| f(i.name()));
    graph.initializer.iter().for_each(|t| f(t.name()));
    for n in &graph.node {
        n.output.iter().for_each(|o| f(o));
        for g in subgraphs(n) {
            defined_names(g, f);
        }
    }
}

/// Renames, in place, every name of `graph` found in `names`, and prefixes its own node names
/// with `prefix` where given (a nameless node is named after its op type and index, as the
/// importer names it). Nested subgraphs' nodes keep their names: their copies are prefixed by
/// the name of the node holding them, which is unique already.
fn rename_graph(graph: &mut GraphProto, prefix: Option<&str>, names: &HashMap<String, String>) {
    let rename = |s: &mut String| {
        if let Some(new) = names.get(s.as_str()) {
            s.clone_from(new);
        }
    };
    graph.input.iter_mut().for_each(|i| rename(i.name.get_or_insert_default()));
    graph.output.iter_mut().for_each(|o| rename(o.name.get_or_insert_default()));
    graph.value_info.iter_mut().for_each(|v| rename(v.name.get_or_insert_default()));
    graph.initializer.iter_mut().for_each(|t| rename(t.name.get_or_insert_default()));
    for (i, n) in graph.node.iter_mut().enumerate() {
        if let Some(prefix) = prefix {
            let name = match n.name() {
                "" => format!("{prefix}{}_{i}", n.op_type()),
                name => format!("{prefix}{name}"),
            };
            n.name = Some(name);
        }
        n.input.iter_mut().for_each(rename);
        n.output.iter_mut().for_each(rename);
        for a in &mut n.attribute {
            for g in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                rename_graph(g, None, names);
            }
        }
    }
}
