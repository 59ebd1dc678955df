//! Whole-graph checks for graphs that did not come from the builder (files, passes).

use std::collections::HashSet;

use crate::error::{IrError, IrResult};
use crate::graph::{Graph, Node};
use crate::op::Op;

/// Checks that a graph is well formed: ids match positions, names are unique, every input,
/// parameter and output exists, there is no cycle, and every stored fact equals what shape
/// inference computes. O(V + E).
///
/// # Errors
/// The first problem found, naming the node.
pub fn validate(graph: &Graph) -> IrResult<()> {
    let mut names = HashSet::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        if node.id.index() != index {
            return Err(IrError::BadId { index, id: node.id });
        }
        if !names.insert(node.name.as_str()) {
            return Err(IrError::DuplicateName { kind: "node", name: node.name.clone() });
        }
        for &input in &node.inputs {
            if graph.fact(input).is_none() {
                return Err(IrError::DanglingInput { node: node.name.clone(), input });
            }
        }
    }
    let mut param_names = HashSet::new();
    for param in &graph.params {
        if !param_names.insert(param.name.as_str()) {
            return Err(IrError::DuplicateName { kind: "parameter", name: param.name.clone() });
        }
    }
    for &output in &graph.outputs {
        if graph.fact(output).is_none() {
            return Err(IrError::DanglingOutput { output });
        }
    }
    for id in graph.topo_order()? {
        check_node(graph, graph.node(id))?;
    }
    Ok(())
}

/// Re-runs inference for one node whose inputs exist and compares with what it stores.
fn check_node(graph: &Graph, node: &Node) -> IrResult<()> {
    let shape_error =
        |message: String| IrError::Shape { node: node.name.clone(), op: node.op.name(), message };
    let inferred = match node.op {
        Op::Input | Op::Parameter | Op::Fill { .. } => {
            if !node.inputs.is_empty() || node.outputs.len() != 1 {
                return Err(shape_error("a source node has no inputs and one output".into()));
            }
            node.outputs.clone()
        }
        _ => {
            let facts = graph.input_facts(node).expect("inputs checked before");
            node.op.infer(&facts).map_err(shape_error)?
        }
    };
    if inferred.len() != node.outputs.len() {
        return Err(shape_error(format!(
            "stores {} outputs, inference gives {}",
            node.outputs.len(),
            inferred.len()
        )));
    }
    for (slot, (stored, inferred)) in node.outputs.iter().zip(&inferred).enumerate() {
        if stored != inferred {
            return Err(IrError::FactMismatch {
                node: node.name.clone(),
                slot: slot as u32,
                stored: stored.to_string(),
                inferred: inferred.to_string(),
            });
        }
    }
    check_node_params(graph, node)
}

/// Checks that a node's parameters exist and have the shapes its op requires.
pub(crate) fn check_node_params(graph: &Graph, node: &Node) -> IrResult<()> {
    for &param in &node.params {
        if param.index() >= graph.params.len() {
            return Err(IrError::DanglingParam { node: node.name.clone(), param });
        }
    }
    let found: Vec<_> = node.params.iter().map(|&p| &graph.param(p).fact).collect();
    let expected: Vec<_> = match node.op {
        Op::Input | Op::Fill { .. } => Vec::new(),
        Op::Parameter | Op::Update(_) => node.outputs.iter().collect(),
        // A gradient reads its forward op's parameters, checked against the forward node by
        // `training::check_gradients`.
        Op::Grad(_) => return Ok(()),
        _ => {
            let facts = graph.input_facts(node).expect("inputs checked before");
            let specs = node.op.param_specs(&facts);
            return compare_params(node, specs.iter().map(|s| &s.fact).collect(), found);
        }
    };
    compare_params(node, expected, found)
}

fn compare_params(
    node: &Node,
    expected: Vec<&crate::TensorFact>,
    found: Vec<&crate::TensorFact>,
) -> IrResult<()> {
    if expected == found {
        return Ok(());
    }
    Err(IrError::Shape {
        node: node.name.clone(),
        op: node.op.name(),
        message: format!("parameters {found:?} do not match the required {expected:?}"),
    })
}
