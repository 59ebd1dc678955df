//! The order the importer maps nodes in, and the checks before it: node names, every op
//! known (those of subgraphs too), Kahn's topological order (a control node after the
//! producers of the outer tensors its subgraphs read), and the order of the nodes control
//! flow adds.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::control;
use crate::ctx::node_reads;
use crate::error::{OnnxError, OnnxResult, UnsupportedNode};
use crate::node::Node;
use crate::ops;
use crate::proto::{GraphProto, NodeProto};

/// Node names, generated as `<op type>_<index>` for unnamed nodes.
pub(crate) fn node_names(graph: &GraphProto) -> Vec<String> {
    graph
        .node
        .iter()
        .enumerate()
        .map(|(i, n)| match n.name() {
            "" => format!("{}_{i}", n.op_type()),
            name => name.to_string(),
        })
        .collect()
}

/// Fails with every node whose op has no mapping, those of subgraphs included (named by the
/// node holding them: `loop/body/add`).
pub(crate) fn check_ops(graph: &GraphProto, names: &[String]) -> OnnxResult<()> {
    let mut unsupported = Vec::new();
    unsupported_ops(graph, names, "", &mut unsupported);
    if unsupported.is_empty() { Ok(()) } else { Err(OnnxError::UnsupportedOps(unsupported)) }
}

fn unsupported_ops(
    graph: &GraphProto,
    names: &[String],
    prefix: &str,
    out: &mut Vec<UnsupportedNode>,
) {
    for (n, name) in graph.node.iter().zip(names) {
        let known = matches!(n.domain(), "" | "ai.onnx")
            && (ops::mapper(n.op_type()).is_some() || control::OPS.contains(&n.op_type()));
        if !known {
            out.push(UnsupportedNode {
                node: format!("{prefix}{name}"),
                op_type: match n.domain() {
                    "" | "ai.onnx" => n.op_type().to_string(),
                    d => format!("{d}.{}", n.op_type()),
                },
            });
        }
        for a in &n.attribute {
            for g in a.g.iter().chain(&a.graphs) {
                let inner = format!("{prefix}{name}/{}/", a.name());
                unsupported_ops(g, &node_names(g), &inner, out);
            }
        }
    }
}

/// Nodes added by control flow, in topological order among themselves (they read outer
/// tensors that all have values already).
pub(crate) fn sort_added(nodes: Vec<NodeProto>, control: &Node<'_>) -> OnnxResult<Vec<NodeProto>> {
    let names: Vec<String> = nodes.iter().map(|n| n.name().to_string()).collect();
    let order = kahn(&nodes, &names, |_| true).map_err(|e| match e {
        OnnxError::Cycle { node } => {
            control.malformed(format!("its subgraph has a cycle at `{node}`"))
        }
        e => e,
    })?;
    let mut slots: Vec<Option<NodeProto>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// Kahn's order of the nodes, smallest file index first (a file in topological order keeps its
/// order). Every input must come from a node, a graph input or an initializer.
pub(crate) fn topo_order(graph: &GraphProto, names: &[String]) -> OnnxResult<Vec<usize>> {
    let sources: HashSet<&str> = graph
        .input
        .iter()
        .map(|i| i.name())
        .chain(graph.initializer.iter().map(|t| t.name()))
        .collect();
    for (i, n) in graph.node.iter().enumerate() {
        if let Some(out) = n.output.iter().find(|o| sources.contains(o.as_str())) {
            return Err(OnnxError::DuplicateTensor {
                tensor: out.clone(),
                first: "a graph input".to_string(),
                second: names[i].clone(),
            });
        }
    }
    kahn(&graph.node, names, |t| sources.contains(t))
}

/// Kahn's order of `nodes`, smallest index first; a tensor no node produces must be a
/// `source`. A control node depends on the producers of the outer tensors its subgraphs read.
fn kahn(
    nodes: &[NodeProto],
    names: &[String],
    source: impl Fn(&str) -> bool,
) -> OnnxResult<Vec<usize>> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if let Some(first) = producer.insert(out, i).map(|j| names[j].clone()) {
                return Err(OnnxError::DuplicateTensor {
                    tensor: out.clone(),
                    first,
                    second: names[i].clone(),
                });
            }
        }
    }
    let n = nodes.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for input in node_reads(node) {
            match producer.get(input.as_str()) {
                Some(&p) => {
                    preds[i].push(p);
                    succs[p].push(i);
                }
                None if source(&input) => {}
                None => {
                    return Err(OnnxError::UnknownTensor { node: names[i].clone(), tensor: input });
                }
            }
        }
    }
    let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &s in &succs[i] {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(Reverse(s));
            }
        }
    }
    if order.len() < n {
        // Walk back through unfinished predecessors until a node repeats: it is on a cycle.
        let mut current = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
        let mut seen = vec![false; n];
        while !seen[current] {
            seen[current] = true;
            match preds[current].iter().find(|&&p| indegree[p] > 0) {
                Some(&p) => current = p,
                None => break,
            }
        }
        return Err(OnnxError::Cycle { node: names[current].clone() });
    }
    Ok(order)
}
