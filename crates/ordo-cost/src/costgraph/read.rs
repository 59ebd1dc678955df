//! Reading: JSON text -> checked [`CostGraph`], in one pass over the text.

use std::path::Path;

use serde_json::{Map, Value};

use super::error::{CostGraphError, EdgeLabel, NodeLabel};
use super::fields::RawDoc;
use super::raw::{Collected, Failure, Lite, Parsed, describe_value};
use super::validate::{self, NodeIndex};
use super::{CostGraph, CostNode};

/// Reads and checks a cost-graph file. Errors name the file as `path` shows it.
///
/// # Errors
/// [`crate::FileError::Read`] when the file cannot be read; otherwise as [`parse_costgraph`].
pub fn read_costgraph(path: impl AsRef<Path>) -> Result<CostGraph, CostGraphError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|source| crate::FileError::Read { origin: origin.clone(), source })?;
    parse_bytes(&bytes, &origin)
}

/// Parses and checks cost-graph JSON. `origin` (usually the file name) starts every message.
///
/// Edges may be under `"links"` or `"edges"`, not both. Checked: JSON syntax; every required
/// attribute present (`id`, `name`, `weight`, `temporary_memory`, `persistent_memory`,
/// `output_memory` on nodes; `source`, `target`, `weight`, `tensor` on links; `name`,
/// `num_bytes`, `weight` on tensors) with the right JSON type; no negative or fractional
/// numbers; the optional `occupancy` a number in `(0, 1]`, `role` one of `"forward"`, `"dx"`,
/// `"dw"`, `"update"`, `"comm"` and `layer` a node id; `directed` not false and `multigraph`
/// not true; then everything [`CostGraph::validate`] checks. `null` counts as absent for the
/// optional `op_type`, `flops`, `occupancy`, `role`, `layer` and `colocation_group`.
/// Attributes the format does not define are kept. Never panics.
///
/// # Errors
/// The first problem found, naming the node or link and the attribute.
pub fn parse_costgraph(text: &str, origin: &str) -> Result<CostGraph, CostGraphError> {
    parse_bytes(text.as_bytes(), origin)
}

fn parse_bytes(bytes: &[u8], origin: &str) -> Result<CostGraph, CostGraphError> {
    match serde_json::from_slice::<Parsed<RawDoc>>(bytes) {
        Ok(Parsed::Object(doc)) => convert(doc, origin),
        Ok(Parsed::Other(found)) => {
            let found = found.describe();
            Err(CostGraphError::NotAnObject { origin: origin.to_string(), found })
        }
        Err(e) => Err(CostGraphError::Json {
            origin: origin.to_string(),
            message: e.to_string(),
            line: e.line(),
            column: e.column(),
        }),
    }
}

fn convert(doc: RawDoc, origin: &str) -> Result<CostGraph, CostGraphError> {
    let top = |attribute: &str, problem: String| CostGraphError::Top {
        origin: origin.to_string(),
        attribute: attribute.to_string(),
        problem,
    };
    match doc.directed {
        None | Some(Lite::Bool(true)) => {}
        Some(Lite::Bool(false)) => {
            return Err(top("directed", "is false; a cost graph is a directed graph".into()));
        }
        Some(other) => {
            return Err(top("directed", format!("must be true, found {}", other.describe())));
        }
    }
    match doc.multigraph {
        None | Some(Lite::Bool(false)) => {}
        Some(Lite::Bool(true)) => {
            let problem = "is true; a cost graph has at most one link per pair of nodes";
            return Err(top("multigraph", problem.into()));
        }
        Some(other) => {
            return Err(top("multigraph", format!("must be false, found {}", other.describe())));
        }
    }
    let graph = match doc.graph {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => {
            let problem = format!("must be an object, found {}", describe_value(&other));
            return Err(top("graph", problem));
        }
    };
    let nodes = match doc.nodes {
        None => return Err(top("nodes", "is missing".into())),
        Some(Collected::Items(nodes)) => nodes,
        Some(Collected::Failed(position, Failure::Item(e))) => {
            return Err(CostGraphError::Node {
                origin: origin.to_string(),
                node: NodeLabel { position, id: e.id, name: e.name },
                attribute: e.attribute.to_string(),
                problem: e.problem,
            });
        }
        Some(Collected::Failed(position, Failure::NotObject(found))) => {
            let problem = format!("has {} at position {position}, not an object", found.describe());
            return Err(top("nodes", problem));
        }
        Some(Collected::Other(found)) => {
            return Err(top("nodes", format!("must be a list, found {}", found.describe())));
        }
    };
    let (key, links) = match (doc.links, doc.edges) {
        (Some(_), Some(_)) => {
            return Err(top("edges", "appears together with \"links\"; give only one".into()));
        }
        (None, None) => {
            let problem = "is missing (a cost graph lists its edges under \"links\" or \"edges\")";
            return Err(top("links", problem.into()));
        }
        (Some(links), None) => ("links", links),
        (None, Some(edges)) => ("edges", edges),
    };
    let index = validate::index_nodes(&nodes, origin)?;
    let links = match links {
        Collected::Items(links) => links,
        Collected::Failed(position, Failure::Item(e)) => {
            return Err(CostGraphError::Edge {
                origin: origin.to_string(),
                edge: Box::new(EdgeLabel {
                    position,
                    source: e.source,
                    source_name: name_of(&nodes, &index, e.source),
                    target: e.target,
                    target_name: name_of(&nodes, &index, e.target),
                }),
                attribute: e.attribute,
                problem: e.problem,
            });
        }
        Collected::Failed(position, Failure::NotObject(found)) => {
            let problem = format!("has {} at position {position}, not an object", found.describe());
            return Err(top(key, problem));
        }
        Collected::Other(found) => {
            return Err(top(key, format!("must be a list, found {}", found.describe())));
        }
    };
    let graph = CostGraph { graph, nodes, links, extra: doc.extra };
    validate::validate_indexed(&graph, &index, origin)?;
    Ok(graph)
}

fn name_of(nodes: &[CostNode], index: &NodeIndex, id: Option<u64>) -> Option<String> {
    id.and_then(|id| index.get(id)).map(|i| nodes[i].name.clone())
}
