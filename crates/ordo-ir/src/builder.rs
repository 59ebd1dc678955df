//! Building graphs in code: shape inference runs as each node is added, so a mistake is
//! reported at the node that makes it.

use std::collections::HashMap;

use crate::error::{IrError, IrResult};
use crate::fact::TensorFact;
use crate::graph::{Graph, Node, Param, ParamInit};
use crate::ids::{NodeId, OutletId, ParamId};
use crate::op::Op;
use crate::validate::check_node_params;

/// Builds a [`Graph`] node by node. Parameters are created automatically, named
/// `<node name>.<suffix>` as in a PyTorch state dict, unless given explicitly for tied weights.
#[derive(Debug)]
pub struct GraphBuilder {
    graph: Graph,
    node_names: HashMap<String, NodeId>,
    param_names: HashMap<String, ParamId>,
}

impl GraphBuilder {
    /// An empty graph called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            graph: Graph {
                name: name.into(),
                nodes: Vec::new(),
                params: Vec::new(),
                outputs: Vec::new(),
            },
            node_names: HashMap::new(),
            param_names: HashMap::new(),
        }
    }

    /// Adds a graph input.
    pub fn input(&mut self, name: &str, fact: TensorFact) -> IrResult<OutletId> {
        let id = self.push(Node::new(name, Op::Input, Vec::new(), Vec::new(), vec![fact]))?;
        Ok(OutletId::new(id, 0))
    }

    /// Adds a `Parameter` node that owns a new trainable parameter called `name`.
    pub fn parameter(&mut self, name: &str, fact: TensorFact) -> IrResult<OutletId> {
        self.source_param(name, fact, true)
    }

    /// Adds a `Parameter` node that owns a new non-trainable buffer called `name` (a constant
    /// such as a positional encoding or an attention mask).
    pub fn buffer(&mut self, name: &str, fact: TensorFact) -> IrResult<OutletId> {
        self.source_param(name, fact, false)
    }

    fn source_param(
        &mut self,
        name: &str,
        fact: TensorFact,
        trainable: bool,
    ) -> IrResult<OutletId> {
        if self.node_names.contains_key(name) {
            return Err(IrError::DuplicateName { kind: "node", name: name.to_string() });
        }
        let param = self.new_param(name, fact.clone(), trainable)?;
        let id = self.push(Node::new(name, Op::Parameter, Vec::new(), vec![param], vec![fact]))?;
        Ok(OutletId::new(id, 0))
    }

    /// Adds a node with new parameters as its op requires, and returns all its outputs.
    ///
    /// # Errors
    /// [`IrError::Shape`] when the op rejects its inputs, [`IrError::DuplicateName`] for a name
    /// in use, [`IrError::DanglingInput`] for an input from elsewhere.
    pub fn add_node(&mut self, name: &str, op: Op, inputs: &[OutletId]) -> IrResult<Vec<OutletId>> {
        let (outputs, specs) = self.infer(name, &op, inputs)?;
        if self.node_names.contains_key(name) {
            return Err(IrError::DuplicateName { kind: "node", name: name.to_string() });
        }
        let params = specs
            .into_iter()
            .map(|s| self.new_param(&format!("{name}.{}", s.suffix), s.fact, s.trainable))
            .collect::<IrResult<Vec<_>>>()?;
        let id = self.push(Node::new(name, op, inputs.to_vec(), params, outputs))?;
        Ok(self.outlets(id))
    }

    /// Adds a node with one output and returns it.
    pub fn op(&mut self, name: &str, op: Op, inputs: &[OutletId]) -> IrResult<OutletId> {
        Ok(self.add_node(name, op, inputs)?[0])
    }

    /// Adds a single-output node that reads existing parameters (tied weights) instead of
    /// creating new ones. The parameters must match what the op requires.
    pub fn op_with_params(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[OutletId],
        params: &[ParamId],
    ) -> IrResult<OutletId> {
        let (outputs, _) = self.infer(name, &op, inputs)?;
        let node = Node::new(name, op, inputs.to_vec(), params.to_vec(), outputs);
        check_node_params(&self.graph, &node)?;
        let id = self.push(node)?;
        Ok(OutletId::new(id, 0))
    }

    /// Marks a wire as a graph output.
    pub fn output(&mut self, outlet: OutletId) {
        self.graph.outputs.push(outlet);
    }

    /// Fact of an existing wire. Panics on an outlet from another builder.
    pub fn fact(&self, outlet: OutletId) -> &TensorFact {
        self.graph.fact(outlet).expect("outlet of this builder")
    }

    /// Parameters of an existing node. Panics on an id from another builder.
    pub fn params_of(&self, node: NodeId) -> &[ParamId] {
        &self.graph.nodes[node.index()].params
    }

    /// The graph built so far, for inspection.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Finishes the graph. With no explicit outputs, the outputs are the wires nobody reads.
    pub fn finish(mut self) -> Graph {
        if self.graph.outputs.is_empty() {
            let consumers = self.graph.consumers();
            self.graph.outputs = self
                .graph
                .nodes
                .iter()
                .filter(|n| consumers[n.id.index()].is_empty() && n.op != Op::Parameter)
                .flat_map(|n| (0..n.outputs.len() as u32).map(|s| OutletId::new(n.id, s)))
                .collect();
        }
        self.graph
    }

    fn infer(
        &self,
        name: &str,
        op: &Op,
        inputs: &[OutletId],
    ) -> IrResult<(Vec<TensorFact>, Vec<crate::op::ParamSpec>)> {
        let facts = inputs
            .iter()
            .map(|&o| {
                self.graph
                    .fact(o)
                    .ok_or(IrError::DanglingInput { node: name.to_string(), input: o })
            })
            .collect::<IrResult<Vec<_>>>()?;
        let outputs = op.infer(&facts).map_err(|message| IrError::Shape {
            node: name.to_string(),
            op: op.name(),
            message,
        })?;
        Ok((outputs, op.param_specs(&facts)))
    }

    /// How parameter `param` is initialised when no file gives its value.
    ///
    /// # Panics
    /// For a parameter this builder did not make.
    pub fn set_init(&mut self, param: ParamId, init: ParamInit) {
        self.graph.params[param.index()].init = init;
    }

    fn new_param(&mut self, name: &str, fact: TensorFact, trainable: bool) -> IrResult<ParamId> {
        if self.param_names.contains_key(name) {
            return Err(IrError::DuplicateName { kind: "parameter", name: name.to_string() });
        }
        let id = ParamId(self.graph.params.len() as u32);
        self.graph.params.push(Param {
            name: name.to_string(),
            fact,
            trainable,
            init: ParamInit::ByShape,
        });
        self.param_names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Adds `node` under its name, which no node may have already.
    fn push(&mut self, node: Node) -> IrResult<NodeId> {
        if self.node_names.contains_key(&node.name) {
            return Err(IrError::DuplicateName { kind: "node", name: node.name });
        }
        let name = node.name.clone();
        let id = self.graph.add_node(node);
        self.node_names.insert(name, id);
        Ok(id)
    }

    fn outlets(&self, id: NodeId) -> Vec<OutletId> {
        (0..self.graph.nodes[id.index()].outputs.len() as u32)
            .map(|s| OutletId::new(id, s))
            .collect()
    }
}
