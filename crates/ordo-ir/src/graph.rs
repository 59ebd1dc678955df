//! The graph container: nodes in an arena, wires as [`OutletId`]s, parameters in a side table.

use serde::{Deserialize, Serialize};

use crate::error::{IrError, IrResult};
use crate::fact::TensorFact;
use crate::ids::{NodeId, OutletId, ParamId};
use crate::op::Op;

/// A learned tensor (or a buffer such as BatchNorm's running statistics).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// Unique name, as in the reference framework's state dict (`layer1.0.conv1.weight`).
    pub name: String,
    /// Shape and dtype.
    pub fact: TensorFact,
    /// `false` for buffers: no gradient, not counted as a parameter.
    pub trainable: bool,
    /// How a runtime initialises it when no file gives its value.
    #[serde(default, skip_serializing_if = "ParamInit::is_by_shape")]
    pub init: ParamInit,
}

/// How a runtime initialises a parameter that no file gives a value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamInit {
    /// The runtime's rule for its shape and use: weights random, scaled by their fan-in;
    /// biases 0; normalisation scales and running variances 1.
    #[default]
    ByShape,
    /// Every element `value` (an RMSNorm's scale 1, its epsilon).
    Constant(f64),
    /// Rotary positions' `cos` (`sine` false) or `sin` table, shaped `[1, seq, 1, head_dim]`:
    /// position `t`, element `j` is the function of `t / base^(2 (j mod head_dim/2) / head_dim)`
    /// (Hugging Face's `rotate_half` layout).
    Rotary {
        /// The angles' base (10000 for LLaMA).
        base: f64,
        /// Whether this is the `sin` table.
        sine: bool,
    },
}

impl ParamInit {
    /// Whether this is the default, [`ParamInit::ByShape`].
    pub fn is_by_shape(&self) -> bool {
        *self == ParamInit::ByShape
    }
}

/// What part of a training step a node belongs to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The forward pass (every node of a forward-only graph).
    #[default]
    Forward,
    /// A gradient with respect to activations (on the backward critical path), including the
    /// sums of gradient contributions and the backward seed.
    Dx,
    /// A gradient with respect to parameters (needed only by the update).
    Dw,
    /// An optimizer step.
    Update,
    /// Communication between devices (all-reduce, send, receive).
    Comm,
}

/// One operation applied to its inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Position of the node in [`Graph::nodes`].
    pub id: NodeId,
    /// Unique name, following the reference module path (`layer1.0.conv1`).
    pub name: String,
    /// What the node computes.
    pub op: Op,
    /// The wires it reads, in the op's argument order.
    pub inputs: Vec<OutletId>,
    /// The parameters it reads, in the op's [`crate::op::ParamSpec`] order.
    pub params: Vec<ParamId>,
    /// Facts of its outputs, one per output port.
    pub outputs: Vec<TensorFact>,
    /// Its part of the training step.
    #[serde(default)]
    pub role: Role,
    /// For a backward or update node, the forward node (layer) it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<NodeId>,
}

impl Node {
    /// A forward node named `name` that applies `op` to `inputs` and `params` and has
    /// `outputs`; its id is set when it is added ([`Graph::add_node`]).
    pub fn new(
        name: impl Into<String>,
        op: Op,
        inputs: Vec<OutletId>,
        params: Vec<ParamId>,
        outputs: Vec<TensorFact>,
    ) -> Self {
        let (id, name, role, layer) = (NodeId(0), name.into(), Role::Forward, None);
        Self { id, name, op, inputs, params, outputs, role, layer }
    }

    /// This node as the `role` part of forward node `layer`'s training step.
    pub fn of_layer(self, role: Role, layer: NodeId) -> Self {
        Self { role, layer: Some(layer), ..self }
    }
}

/// `name`, or else the first of `name_1`, `name_2`, ... that `taken` does not hold.
pub fn unique_name(name: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut unique = name.to_string();
    let mut k = 1;
    while taken(&unique) {
        unique = format!("{name}_{k}");
        k += 1;
    }
    unique
}

/// A dataflow graph. Plain data: every pass is a function from one `Graph` to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Model name.
    pub name: String,
    /// All nodes; `nodes[i].id == NodeId(i)`.
    pub nodes: Vec<Node>,
    /// All parameters and buffers.
    pub params: Vec<Param>,
    /// The wires the caller wants (model outputs, the loss).
    pub outputs: Vec<OutletId>,
}

impl Graph {
    /// Appends `node` as the graph's last node, its id set to its position, and returns the
    /// id. It checks nothing: names, inputs and facts are the caller's ([`crate::validate`]).
    pub fn add_node(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node { id, ..node });
        id
    }

    /// The node with the given id. Panics on an id from another graph.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The parameter with the given id. Panics on an id from another graph.
    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id.index()]
    }

    /// Fact of a wire, `None` when the outlet does not exist.
    pub fn fact(&self, outlet: OutletId) -> Option<&TensorFact> {
        self.nodes.get(outlet.node.index())?.outputs.get(outlet.slot as usize)
    }

    /// Facts of a node's inputs, `None` when one of them does not exist.
    pub fn input_facts(&self, node: &Node) -> Option<Vec<&TensorFact>> {
        node.inputs.iter().map(|&o| self.fact(o)).collect()
    }

    /// The node of the given name, by linear search.
    pub fn find(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The `Input` nodes, in id order.
    pub fn input_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.op == Op::Input)
    }

    /// For every node, the distinct nodes that read one of its outputs, in id order.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes.len()];
        for node in &self.nodes {
            for input in &node.inputs {
                if let Some(list) = out.get_mut(input.node.index())
                    && list.last() != Some(&node.id)
                {
                    list.push(node.id);
                }
            }
        }
        out
    }

    /// Kahn's topological order, ties broken by id, so a graph built in order comes back
    /// unchanged. O(V + E).
    ///
    /// # Errors
    /// [`IrError::DanglingInput`] for an input that names a missing node, [`IrError::Cycle`]
    /// naming a node on a cycle.
    pub fn topo_order(&self) -> IrResult<Vec<NodeId>> {
        let n = self.nodes.len();
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for node in &self.nodes {
            for input in &node.inputs {
                let Some(list) = readers.get_mut(input.node.index()) else {
                    return Err(IrError::DanglingInput { node: node.name.clone(), input: *input });
                };
                list.push(node.id.index());
            }
        }
        let kahn = crate::order::kahn_order(n, |v| readers[v].iter().copied());
        if let Some(stuck) = kahn.left_over() {
            return Err(IrError::Cycle { node: cycle_member(self, &kahn.waiting, stuck) });
        }
        let order = kahn.order.into_iter().map(|v| NodeId(v as u32)).collect();
        Ok(order)
    }
}

/// Walks backwards from a node left over by Kahn's algorithm until a node repeats: that node
/// lies on a cycle (a leftover node always has a leftover predecessor).
fn cycle_member(graph: &Graph, indegree: &[usize], start: usize) -> String {
    let mut seen = vec![false; graph.nodes.len()];
    let mut current = start;
    while !seen[current] {
        seen[current] = true;
        current = graph.nodes[current]
            .inputs
            .iter()
            .map(|o| o.node.index())
            .find(|&p| indegree[p] > 0)
            .expect("a node on or behind a cycle has a predecessor on or behind it");
    }
    graph.nodes[current].name.clone()
}
