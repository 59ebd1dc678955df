//! Stable identifiers for nodes, wires and parameters.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Index of a node in [`crate::Graph::nodes`]. Ids are dense, start at 0 and never change once a
/// node is added.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index into [`crate::Graph::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// One output port of a node: a wire with one producer and any number of consumers.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OutletId {
    /// The producing node.
    pub node: NodeId,
    /// The output port of that node.
    pub slot: u32,
}

impl OutletId {
    /// The outlet `slot` of `node`.
    pub fn new(node: NodeId, slot: u32) -> Self {
        Self { node, slot }
    }
}

impl fmt::Display for OutletId {
    /// `output 0 of node #3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "output {} of node {}", self.slot, self.node)
    }
}

impl fmt::Debug for OutletId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}>", self.node.0, self.slot)
    }
}

/// Index of a parameter in [`crate::Graph::params`]. A parameter may be read by several nodes
/// (tied weights).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ParamId(pub u32);

impl ParamId {
    /// The id as an index into [`crate::Graph::params`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for ParamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{}", self.0)
    }
}
