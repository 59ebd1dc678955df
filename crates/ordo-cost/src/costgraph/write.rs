//! Writing: NetworkX node-link JSON with edges under `"links"`.

use std::path::Path;

use ordo_ir::Role;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::error::CostGraphError;
use super::fields::role_name;
use super::{ColocationGroup, CostGraph, CostLink, CostNode, TensorRef};

/// The graph as compact JSON: `directed`, `multigraph`, `graph`, `nodes`, `links`, then any
/// kept top-level keys. Attributes keep their documented order; kept unknown attributes follow.
/// A node's `occupancy` is written only when it is not 1, its `role` only when it is not
/// forward and its `layer` only when it has one.
pub fn to_json_string(graph: &CostGraph) -> String {
    serde_json::to_string(graph).expect("a cost graph has string keys only")
}

/// Writes the graph to `path` as [`to_json_string`] formats it.
///
/// # Errors
/// [`crate::FileError::Write`] when the file cannot be created or written.
pub fn write_costgraph(graph: &CostGraph, path: impl AsRef<Path>) -> Result<(), CostGraphError> {
    let path = path.as_ref();
    let fail = |source: std::io::Error| crate::FileError::Write {
        origin: path.display().to_string(),
        source,
    };
    Ok(crate::write_atomically(path, |out| Ok(serde_json::to_writer(out, graph)?)).map_err(fail)?)
}

/// Writes kept attributes, skipping any that would repeat a key already written.
fn write_extra<M: SerializeMap>(
    map: &mut M,
    extra: &Map<String, Value>,
    known: &[&str],
) -> Result<(), M::Error> {
    for (key, value) in extra {
        if !known.contains(&key.as_str()) {
            map.serialize_entry(key, value)?;
        }
    }
    Ok(())
}

impl Serialize for CostGraph {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("directed", &true)?;
        map.serialize_entry("multigraph", &false)?;
        map.serialize_entry("graph", &self.graph)?;
        map.serialize_entry("nodes", &self.nodes)?;
        map.serialize_entry("links", &self.links)?;
        let known = ["directed", "multigraph", "graph", "nodes", "links", "edges"];
        write_extra(&mut map, &self.extra, &known)?;
        map.end()
    }
}

impl Serialize for CostNode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("name", &self.name)?;
        if let Some(op_type) = &self.op_type {
            map.serialize_entry("op_type", op_type)?;
        }
        map.serialize_entry("weight", &self.weight)?;
        map.serialize_entry("temporary_memory", &self.temporary_memory)?;
        map.serialize_entry("persistent_memory", &self.persistent_memory)?;
        map.serialize_entry("output_memory", &self.output_memory)?;
        match &self.colocation_group {
            ColocationGroup::Implicit => {}
            ColocationGroup::Name(name) => map.serialize_entry("colocation_group", name)?,
            ColocationGroup::List(names) => map.serialize_entry("colocation_group", names)?,
        }
        if let Some(flops) = self.flops {
            map.serialize_entry("flops", &flops)?;
        }
        if self.occupancy != 1.0 {
            map.serialize_entry("occupancy", &self.occupancy)?;
        }
        if self.role != Role::Forward {
            map.serialize_entry("role", role_name(self.role))?;
        }
        if let Some(layer) = self.layer {
            map.serialize_entry("layer", &layer)?;
        }
        let known = [
            "id",
            "name",
            "op_type",
            "weight",
            "temporary_memory",
            "persistent_memory",
            "output_memory",
            "colocation_group",
            "flops",
            "occupancy",
            "role",
            "layer",
        ];
        write_extra(&mut map, &self.extra, &known)?;
        map.end()
    }
}

impl Serialize for CostLink {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("source", &self.source)?;
        map.serialize_entry("target", &self.target)?;
        map.serialize_entry("weight", &self.weight)?;
        map.serialize_entry("tensor", &self.tensor)?;
        write_extra(&mut map, &self.extra, &["source", "target", "weight", "tensor"])?;
        map.end()
    }
}

impl Serialize for TensorRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("num_bytes", &self.num_bytes)?;
        map.serialize_entry("weight", &self.weight)?;
        write_extra(&mut map, &self.extra, &["name", "num_bytes", "weight"])?;
        map.end()
    }
}
