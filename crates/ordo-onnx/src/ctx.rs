//! The import context: the IR graph under construction, the value of every ONNX tensor seen so
//! far, and the helpers the op mappings use to emit IR nodes.

use std::collections::{HashMap, HashSet};

use ordo_ir::{Graph, Node as IrNode, Op, OutletId, Param, ParamId, TensorFact};

use crate::control::{LoopState, Structured};
use crate::error::{OnnxError, OnnxResult};
use crate::node::Node;
use crate::proto::NodeProto;
use crate::tensor::{ConstTensor, check_shape};
use crate::tensor_io::ParamSource;
use crate::value::{Base, Value, View};

/// State shared by all op mappings during one import.
pub(crate) struct Ctx<'a> {
    /// The graph being built.
    pub graph: Graph,
    /// All ONNX nodes, in file order.
    pub onnx_nodes: &'a [NodeProto],
    /// For every tensor, the indices of the ONNX nodes that read it (once per read).
    pub readers: HashMap<String, Vec<usize>>,
    /// Tensors that are graph outputs.
    pub graph_outputs: HashSet<String>,
    /// ONNX nodes already handled by a fusion with an earlier node.
    pub skip: HashSet<usize>,
    /// Whether the data inputs were given other sizes than the file's.
    pub resized: bool,
    /// Value of every tensor produced so far.
    values: HashMap<String, Value>,
    /// Tensors that exist in the file but have no value in the IR, with the reason.
    unavailable: HashMap<String, String>,
    /// Facts of the parameters (graph inputs and initializers taken as parameters).
    param_facts: HashMap<String, TensorFact>,
    /// IR parameters created so far, by name.
    param_ids: HashMap<String, ParamId>,
    /// `Parameter` nodes created so far, by parameter name.
    param_nodes: HashMap<String, OutletId>,
    /// Node names in use.
    names: HashSet<String>,
    /// Where each IR parameter's value comes from, in the graph's order.
    pub sources: Vec<ParamSource>,
    /// Sources of declared parameters that are not ONNX tensors of their own.
    derived: HashMap<String, ParamSource>,
    /// Parameters imported as non-trainable ([`crate::ImportOptions::frozen`]).
    pub frozen: std::collections::BTreeSet<String>,
    /// ONNX nodes whose output size depends on the data, planned at its largest.
    pub bounded: Vec<String>,
    /// The facts the file declares for tensors (value infos, graph outputs; none when the
    /// import resizes the model): a data-dependent size is planned at the declared one.
    pub declared: HashMap<String, TensorFact>,
    /// ONNX nodes whose output size depends on the data, planned at the size the file declares.
    pub sized_by_file: Vec<String>,
    /// Nodes added by inlining control flow, indexed after [`Ctx::onnx_nodes`].
    inlined: Vec<std::rc::Rc<NodeProto>>,
    /// Sequences and optionals, by tensor name.
    structured: HashMap<String, Structured>,
    /// Loops being unrolled, by node index.
    pub loops: HashMap<usize, LoopState>,
    /// `If`s computing both branches, by node index: each output's tensors in either branch.
    pub if_joins: HashMap<usize, Vec<(String, String)>>,
    /// `If`s whose condition is known only at run time, planned with both branches computed.
    pub both_branches: Vec<String>,
}

impl<'a> Ctx<'a> {
    /// An empty context for a graph called `name`.
    pub fn new(name: &str, onnx_nodes: &'a [NodeProto]) -> Self {
        let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, n) in onnx_nodes.iter().enumerate() {
            for input in node_reads(n) {
                readers.entry(input).or_default().push(i);
            }
        }
        Self {
            graph: Graph {
                name: name.to_string(),
                nodes: Vec::new(),
                params: Vec::new(),
                outputs: Vec::new(),
            },
            onnx_nodes,
            readers,
            graph_outputs: HashSet::new(),
            skip: HashSet::new(),
            resized: false,
            values: HashMap::new(),
            unavailable: HashMap::new(),
            param_facts: HashMap::new(),
            param_ids: HashMap::new(),
            param_nodes: HashMap::new(),
            names: HashSet::new(),
            sources: Vec::new(),
            derived: HashMap::new(),
            frozen: Default::default(),
            bounded: Vec::new(),
            declared: HashMap::new(),
            sized_by_file: Vec::new(),
            inlined: Vec::new(),
            structured: HashMap::new(),
            loops: HashMap::new(),
            if_joins: HashMap::new(),
            both_branches: Vec::new(),
        }
    }

    /// ONNX node `index`: one of the file's, or one added by [`Ctx::add_nodes`].
    pub fn onnx_node(&self, index: usize) -> &NodeProto {
        match index.checked_sub(self.onnx_nodes.len()) {
            None => &self.onnx_nodes[index],
            Some(i) => &self.inlined[i],
        }
    }

    /// An added node, shared (to map it while the context changes).
    pub fn inlined_node(&self, index: usize) -> std::rc::Rc<NodeProto> {
        std::rc::Rc::clone(&self.inlined[index - self.onnx_nodes.len()])
    }

    /// How many nodes [`Ctx::add_nodes`] added so far.
    pub fn added_nodes(&self) -> usize {
        self.inlined.len()
    }

    /// Adds nodes to the import (copies of a subgraph, the nodes joining them); returns
    /// their indices.
    pub fn add_nodes(&mut self, nodes: Vec<NodeProto>) -> std::ops::Range<usize> {
        let start = self.onnx_nodes.len() + self.inlined.len();
        for (k, n) in nodes.into_iter().enumerate() {
            for input in node_reads(&n) {
                self.readers.entry(input).or_default().push(start + k);
            }
            self.inlined.push(std::rc::Rc::new(n));
        }
        start..self.onnx_nodes.len() + self.inlined.len()
    }

    /// The sequence or optional a tensor name holds, if it holds one.
    pub fn structured(&self, tensor: &str) -> Option<&Structured> {
        self.structured.get(tensor)
    }

    /// Sets a tensor name to a sequence or optional.
    pub fn set_structured(&mut self, tensor: &str, value: Structured) {
        self.structured.insert(tensor.to_string(), value);
    }

    /// Gives `dst` the value of `src` (a tensor, sequence or optional). A view with pending
    /// steps is emitted first, so that both names read one wire.
    pub fn alias(&mut self, node: &Node<'_>, dst: &str, src: &str) -> OnnxResult<()> {
        if let Some(s) = self.structured.get(src).cloned() {
            self.structured.insert(dst.to_string(), s);
            return Ok(());
        }
        let value = match self.get(node, src)? {
            Value::View(v) if !v.steps.is_empty() => {
                let out = self.materialize(node, src)?;
                self.wire_value(out)
            }
            value => value.clone(),
        };
        self.values.insert(dst.to_string(), value);
        Ok(())
    }

    /// Checks that `tensor` has a value: a tensor, sequence or optional.
    pub fn get_any(&self, node: &Node<'_>, tensor: &str) -> OnnxResult<()> {
        if self.structured.contains_key(tensor) { Ok(()) } else { self.get(node, tensor).map(drop) }
    }

    /// Number of reads of a tensor by nodes and graph outputs.
    pub fn uses(&self, tensor: &str) -> usize {
        self.readers.get(tensor).map_or(0, Vec::len)
            + usize::from(self.graph_outputs.contains(tensor))
    }

    /// Declares a parameter that nodes may read.
    pub fn declare_param(&mut self, name: &str, fact: TensorFact) {
        self.param_facts.insert(name.to_string(), fact.clone());
        self.values
            .insert(name.to_string(), Value::View(View::new(Base::Param(name.into()), fact)));
    }

    /// Declares a parameter cut from another one, with where its value comes from.
    pub fn declare_derived_param(&mut self, name: &str, fact: TensorFact, source: ParamSource) {
        self.derived.insert(name.to_string(), source);
        self.declare_param(name, fact);
    }

    /// Sets the value of a tensor.
    pub fn set(&mut self, tensor: &str, value: Value) {
        self.values.insert(tensor.to_string(), value);
    }

    /// Records that a tensor has no value in the IR, and why.
    pub fn set_unavailable(&mut self, tensor: &str, reason: String) {
        self.unavailable.insert(tensor.to_string(), reason);
    }

    /// The value of a tensor read by `node`.
    pub fn get(&self, node: &Node<'_>, tensor: &str) -> OnnxResult<&Value> {
        if let Some(reason) = self.unavailable.get(tensor) {
            return Err(node.unsupported(format!("reads `{tensor}`, {reason}")));
        }
        if let Some(s) = self.structured.get(tensor) {
            return Err(node
                .unsupported(format!("reads `{tensor}`, {}, where it needs a tensor", s.kind())));
        }
        self.values.get(tensor).ok_or_else(|| OnnxError::UnknownTensor {
            node: node.name.clone(),
            tensor: tensor.to_string(),
        })
    }

    /// The value of a tensor, if it has one yet.
    pub fn peek(&self, tensor: &str) -> Option<&Value> {
        self.values.get(tensor)
    }

    /// The value of input `i` of `node`, which must be present.
    pub fn input(&self, node: &Node<'_>, i: usize) -> OnnxResult<Value> {
        let name = node.required_input(i)?;
        self.get(node, name).cloned()
    }

    /// The constant value of input `i`, or an error saying it must be constant.
    pub fn const_input(&self, node: &Node<'_>, i: usize, what: &str) -> OnnxResult<ConstTensor> {
        match self.input(node, i)? {
            Value::Const(c) => Ok((*c).clone()),
            _ => Err(node.unsupported(format!("{what} (input {i}) must be a constant"))),
        }
    }

    /// The integers of constant input `i` (floats truncated), or an error saying it must be
    /// constant, or that it is too large a splat to spell out.
    pub fn const_ints(&self, node: &Node<'_>, i: usize, what: &str) -> OnnxResult<Vec<i64>> {
        self.const_input(node, i, what)?.to_i64s().ok_or_else(|| {
            node.unsupported(format!("{what} (input {i}): too many values to read at import"))
        })
    }

    /// The fact of a value that is not a constant of a type the IR lacks.
    pub fn fact_of(&self, node: &Node<'_>, value: &Value) -> OnnxResult<TensorFact> {
        match value {
            Value::View(v) => Ok(v.fact().clone()),
            Value::ParamSet { fact, .. } => Ok(fact.clone()),
            Value::Const(c) => c.fact().ok_or_else(|| {
                node.unsupported(format!(
                    "a constant of type {} cannot be a tensor of the graph",
                    crate::tensor::elem_name(c.elem)
                ))
            }),
        }
    }

    /// The wire of input `i`, emitting whatever it still needs (deferred steps, a parameter or
    /// constant node).
    pub fn wire(&mut self, node: &Node<'_>, i: usize) -> OnnxResult<OutletId> {
        let name = node.required_input(i)?;
        self.materialize(node, name)
    }

    /// The wire of a tensor, emitting whatever it still needs; later reads get the same wire.
    pub fn materialize(&mut self, node: &Node<'_>, tensor: &str) -> OnnxResult<OutletId> {
        let value = self.get(node, tensor)?.clone();
        let outlet = self.realize(node, tensor, value)?;
        let fact = self.graph.fact(outlet).cloned().expect("emitted");
        self.values.insert(tensor.to_string(), Value::wire(outlet, fact));
        Ok(outlet)
    }

    /// The wire of a value: emits its deferred steps, a `Parameter` node for a parameter, a
    /// buffer called `name` for a constant.
    pub fn realize(&mut self, node: &Node<'_>, name: &str, value: Value) -> OnnxResult<OutletId> {
        match value {
            Value::View(view) => {
                let mut out = match &view.base {
                    Base::Wire(o) => *o,
                    Base::Param(p) => self.param_node(p)?,
                };
                for step in &view.steps {
                    out = self.emit(&step.name, step.step.op(), &[out], Vec::new())?[0];
                }
                Ok(out)
            }
            Value::Const(c) => self.buffer(node, name, &c),
            Value::ParamSet { .. } => Err(node.unsupported(format!(
                "`{name}` combines several parameters and is used as a value"
            ))),
        }
    }

    /// The view of input `i` to extend with one more deferred step. A wire read by several
    /// nodes is emitted first, so that its steps are not emitted twice.
    pub fn view_input(&mut self, node: &Node<'_>, i: usize) -> OnnxResult<View> {
        let name = node.required_input(i)?;
        match self.get(node, name)?.clone() {
            Value::View(v) if matches!(v.base, Base::Param(_)) || self.uses(name) <= 1 => Ok(v),
            _ => {
                let out = self.materialize(node, name)?;
                let fact = self.graph.fact(out).cloned().expect("materialized");
                Ok(View::new(Base::Wire(out), fact))
            }
        }
    }

    /// The IR parameter of an ONNX parameter, created on first use.
    pub fn param_id(&mut self, name: &str, trainable: bool) -> Option<ParamId> {
        if let Some(&id) = self.param_ids.get(name) {
            return Some(id);
        }
        let fact = self.param_facts.get(name)?.clone();
        let source =
            self.derived.get(name).cloned().unwrap_or_else(|| ParamSource::Tensor(name.into()));
        // A parameter derived from a frozen tensor (a reshaped or cut view) is frozen too.
        let frozen = |t: &str| self.frozen.contains(t);
        let trainable = trainable && !frozen(name) && !source.tensor().is_some_and(frozen);
        Some(self.new_param(name, fact, trainable, source))
    }

    /// The fact of an ONNX parameter.
    pub fn param_fact(&self, name: &str) -> Option<&TensorFact> {
        self.param_facts.get(name)
    }

    /// A new IR parameter (a unique name is derived from `name` when it is taken).
    pub fn new_param(
        &mut self,
        name: &str,
        fact: TensorFact,
        trainable: bool,
        source: ParamSource,
    ) -> ParamId {
        let mut unique = name.to_string();
        let mut k = 1;
        while self.param_ids.contains_key(&unique) {
            unique = format!("{name}_{k}");
            k += 1;
        }
        let id = ParamId(self.graph.params.len() as u32);
        self.graph.params.push(Param {
            name: unique.clone(),
            fact,
            trainable,
            init: Default::default(),
        });
        self.sources.push(source);
        self.param_ids.insert(unique, id);
        id
    }

    /// The `Parameter` node that reads an ONNX parameter as a value.
    fn param_node(&mut self, name: &str) -> OnnxResult<OutletId> {
        if let Some(&o) = self.param_nodes.get(name) {
            return Ok(o);
        }
        let fact = self.param_facts.get(name).cloned().expect("declared parameter");
        let id = self.param_id(name, fact.dtype.is_float()).expect("declared parameter");
        let out = self.push(name, Op::Parameter, Vec::new(), vec![id], vec![fact]);
        self.param_nodes.insert(name.to_string(), out);
        Ok(out)
    }

    /// A `Parameter` node holding a constant as a non-trainable buffer named `tensor`.
    pub fn buffer(
        &mut self,
        node: &Node<'_>,
        tensor: &str,
        c: &ConstTensor,
    ) -> OnnxResult<OutletId> {
        let fact = c.fact().ok_or_else(|| {
            node.unsupported(format!(
                "constant `{tensor}` of type {} cannot be a tensor of the graph",
                crate::tensor::elem_name(c.elem)
            ))
        })?;
        // The constant's values are kept with the graph (for the runtime): a splat of a huge
        // shape would be materialised here, so its size is checked first.
        if c.numel() > crate::tensor::MAX_CONSTANT {
            return Err(node.malformed(format!(
                "constant `{tensor}` of shape {:?} has {} elements; ordo keeps constants of at \
                 most {} elements",
                c.shape,
                c.numel(),
                crate::tensor::MAX_CONSTANT
            )));
        }
        let source = ParamSource::Constant(crate::tensor_io::value_of(tensor, c));
        let id = self.new_param(tensor, fact.clone(), false, source);
        Ok(self.push(tensor, Op::Parameter, Vec::new(), vec![id], vec![fact]))
    }

    /// Emits a node whose parameters are the given ONNX parameters, checked against the
    /// shapes the op requires (trainability comes from the op).
    pub fn emit_with_params(
        &mut self,
        node: &Node<'_>,
        op: Op,
        inputs: &[OutletId],
        params: &[String],
    ) -> OnnxResult<Vec<OutletId>> {
        let facts = self.input_facts(inputs);
        let facts: Vec<&TensorFact> = facts.iter().collect();
        let specs = match op.infer(&facts) {
            Ok(_) => op.param_specs(&facts),
            Err(message) => return Err(shape_error(&node.name, &op, message)),
        };
        if specs.len() != params.len() {
            return Err(node.shape_error(format!(
                "{} needs {} parameter(s), the node gives {}",
                op.name(),
                specs.len(),
                params.len()
            )));
        }
        let mut ids = Vec::with_capacity(params.len());
        for (spec, name) in specs.iter().zip(params) {
            let found = self.param_facts.get(name);
            if found != Some(&spec.fact) {
                let found =
                    found.map_or_else(|| "not a parameter".to_string(), ToString::to_string);
                return Err(node.shape_error(format!(
                    "parameter `{name}` is {found}, {} needs {} for its {}",
                    op.name(),
                    spec.fact,
                    spec.suffix
                )));
            }
            ids.push(self.param_id(name, spec.trainable).expect("declared parameter"));
        }
        self.emit(&node.name, op, inputs, ids)
    }

    /// Emits a node, running the IR's shape inference.
    pub fn emit(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[OutletId],
        params: Vec<ParamId>,
    ) -> OnnxResult<Vec<OutletId>> {
        let facts = self.input_facts(inputs);
        let facts: Vec<&TensorFact> = facts.iter().collect();
        let outputs = op.infer(&facts).map_err(|m| shape_error(name, &op, m))?;
        for f in &outputs {
            check_shape(&f.shape).map_err(|m| shape_error(name, &op, m))?;
        }
        let n = outputs.len() as u32;
        let first = self.push(name, op, inputs.to_vec(), params, outputs);
        Ok((0..n).map(|s| OutletId::new(first.node, s)).collect())
    }

    /// Emits a node with one output and returns it with its fact as a value.
    pub fn emit_value(&mut self, name: &str, op: Op, inputs: &[OutletId]) -> OnnxResult<Value> {
        let out = self.emit(name, op, inputs, Vec::new())?[0];
        let fact = self.graph.fact(out).cloned().expect("emitted");
        Ok(Value::wire(out, fact))
    }

    /// Emits a node with one output and no parameters, named `<ONNX node>.<part>` (one of
    /// the IR nodes an ONNX node maps to), and returns its wire.
    pub fn emit_part(
        &mut self,
        node: &Node<'_>,
        part: &str,
        op: Op,
        inputs: &[OutletId],
    ) -> OnnxResult<OutletId> {
        Ok(self.emit(&format!("{}.{part}", node.name), op, inputs, Vec::new())?[0])
    }

    /// An emitted wire as a value, with its fact.
    pub fn wire_value(&self, w: OutletId) -> Value {
        Value::wire(w, self.graph.fact(w).cloned().expect("emitted"))
    }

    fn input_facts(&self, inputs: &[OutletId]) -> Vec<TensorFact> {
        inputs.iter().map(|&o| self.graph.fact(o).cloned().expect("outlet of this graph")).collect()
    }

    /// Adds a node under a unique name derived from `name`; returns its first outlet.
    pub fn push(
        &mut self,
        name: &str,
        op: Op,
        inputs: Vec<OutletId>,
        params: Vec<ParamId>,
        outputs: Vec<TensorFact>,
    ) -> OutletId {
        let unique = ordo_ir::unique_name(name, |taken| self.names.contains(taken));
        self.names.insert(unique.clone());
        let id = self.graph.add_node(IrNode::new(unique, op, inputs, params, outputs));
        OutletId::new(id, 0)
    }
}

fn shape_error(name: &str, op: &Op, message: String) -> OnnxError {
    OnnxError::Shape { node: name.to_string(), op: op.name().to_string(), message }
}

/// The tensors a node reads: its inputs, and for a control node the outer tensors its
/// subgraphs read.
pub(crate) fn node_reads(node: &NodeProto) -> Vec<String> {
    let mut reads: Vec<String> = node.input.iter().filter(|s| !s.is_empty()).cloned().collect();
    reads.extend(crate::control::inline::captures(node));
    reads
}
