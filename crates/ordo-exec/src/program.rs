//! A graph made ready to run: for every node, what its kernel reads and how it is called.
//!
//! [`Program`] is the one place that knows the CPU kernels' argument conventions for a node of
//! a graph (which parameters a gradient reads, the forward facts `Concat`'s gradient needs,
//! the seed a `Dropout` and its gradient share, the optimizer state of an update). The
//! sequential reference ([`crate::sequential`]), the engine and the profiler all call nodes
//! through it, so that they compute bitwise the same thing.

use std::collections::HashMap;

use ordo_ir::op::Wrt;
use ordo_ir::transform::{Provenance, Transformed};
use ordo_ir::{Graph, NodeId, Op, OutletId, ParamId, TensorFact};

use crate::cpu::{self, Hyper, KernelContext, KernelResult, Tensor, init_state, node_seed};
use crate::error::ExecError;

/// How one node is called.
#[derive(Clone, Debug)]
pub struct NodeCall {
    /// The wires it reads, in order.
    pub inputs: Vec<OutletId>,
    /// The parameters its kernel reads, in order. For an `Lstm`'s parameter gradient these are
    /// the forward node's weights, which the IR's dW node does not list.
    pub params: Vec<ParamId>,
    /// The facts of the wires it reads, in order (their declared element types).
    pub input_facts: Vec<TensorFact>,
    /// For a gradient, the facts of its forward node's inputs.
    pub forward_inputs: Vec<TensorFact>,
    /// The node whose id seeds its random numbers: its forward layer, or itself.
    pub seed_node: NodeId,
    /// For an optimizer update, the parameter whose next value it outputs.
    pub updates: Option<ParamId>,
    /// How many of `inputs`, at their end, are partial sums that the node adds its outputs to
    /// (one per output, in output order): a micro-batch's weight gradient accumulated into
    /// the previous micro-batch's (`param.grad += ...`). They are not the kernel's arguments.
    pub accumulated: usize,
    /// In a graph unrolled over several steps, the step this node runs in (0 otherwise): it
    /// runs at step `run step + step_offset` and reads the parameters as the updates of the
    /// steps before it left them.
    pub step_offset: u64,
    /// For an update of an unrolled step `s > 0`: the same update of step `s - 1`, whose
    /// optimizer state it advances.
    pub previous_update: Option<NodeId>,
    /// The node whose slot of the training state holds this node's optimizer state between
    /// runs: itself, or its copy in step 0 of an unrolled graph.
    pub slot_home: NodeId,
}

/// Settings shared by every node of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSettings {
    /// Base seed of dropout masks.
    pub seed: u64,
    /// Optimizer hyper-parameters.
    pub hyper: Hyper,
    /// Training mode (batch statistics, active dropout).
    pub training: bool,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self { seed: 0, hyper: Hyper::default(), training: true }
    }
}

/// A graph with the call of each of its nodes.
#[derive(Clone, Debug)]
pub struct Program {
    graph: Graph,
    /// Where each node of `graph` comes from, when it is a copy made by a step-structure pass.
    provenance: Provenance,
    calls: Vec<NodeCall>,
    /// Training steps one run of the graph makes (1, or the steps of an unrolled graph).
    steps: u64,
    /// Per parameter: whether some node updates it.
    updated: Vec<bool>,
}

impl Program {
    /// Prepares `graph` (which should have passed [`ordo_ir::validate`]).
    ///
    /// # Errors
    /// [`ExecError::Unsupported`] listing every node whose op has no CPU kernel.
    pub fn new(graph: Graph) -> Result<Self, ExecError> {
        let none = vec![0; graph.nodes.len()];
        Self::with_accumulation(graph, &none)
    }

    /// Prepares a micro-batched graph ([`ordo_ir::transform::micro_batch`]), whose node `i`
    /// adds its outputs to its last `accumulated[i]` inputs (see [`NodeCall::accumulated`]).
    /// Each copy draws its random numbers as a node of its own.
    ///
    /// # Errors
    /// [`ExecError::Unsupported`] listing every node whose op has no CPU kernel;
    /// [`ExecError::Mismatch`] when `accumulated` does not have one entry per node, or a node
    /// would accumulate more inputs than it has or than it has outputs.
    pub fn micro_batched(micro_batched: Transformed) -> Result<Self, ExecError> {
        let Transformed { graph, provenance, accumulated } = micro_batched;
        let mut program = Self::with_accumulation(graph, &accumulated)?;
        program.provenance = provenance;
        Ok(program)
    }

    fn with_accumulation(graph: Graph, accumulated: &[usize]) -> Result<Self, ExecError> {
        if accumulated.len() != graph.nodes.len() {
            return Err(ExecError::Mismatch(format!(
                "{} accumulation counts for {} nodes",
                accumulated.len(),
                graph.nodes.len()
            )));
        }
        if let Some(node) = graph.nodes.iter().find(|n| {
            let k = accumulated[n.id.index()];
            k > 0 && (k != n.outputs.len() || k > n.inputs.len())
        }) {
            return Err(ExecError::Mismatch(format!(
                "`{}` would accumulate {} partial sums into its {} outputs from {} inputs",
                node.name,
                accumulated[node.id.index()],
                node.outputs.len(),
                node.inputs.len()
            )));
        }
        if let Some(message) = missing_kernels(&graph) {
            return Err(ExecError::Unsupported(message));
        }
        let calls = graph
            .nodes
            .iter()
            .map(|node| {
                let layer = node.layer.map(|l| graph.node(l));
                let params = match (&node.op, layer) {
                    (Op::Grad(g), Some(l))
                        if g.wrt == Wrt::Params && matches!(*g.of, Op::Lstm(_)) =>
                    {
                        l.params.clone()
                    }
                    _ => node.params.clone(),
                };
                let forward_inputs = match (&node.op, layer) {
                    (Op::Grad(_), Some(l)) => {
                        l.inputs.iter().filter_map(|&o| graph.fact(o)).cloned().collect()
                    }
                    _ => Vec::new(),
                };
                let updates = match node.op {
                    Op::Update(_) => node.params.first().copied(),
                    _ => None,
                };
                NodeCall {
                    inputs: node.inputs.clone(),
                    input_facts: node
                        .inputs
                        .iter()
                        .filter_map(|&o| graph.fact(o))
                        .cloned()
                        .collect(),
                    params,
                    forward_inputs,
                    seed_node: node.layer.unwrap_or(node.id),
                    updates,
                    accumulated: accumulated[node.id.index()],
                    step_offset: 0,
                    previous_update: None,
                    slot_home: node.id,
                }
            })
            .collect::<Vec<NodeCall>>();
        let mut updated = vec![false; graph.params.len()];
        for p in calls.iter().filter_map(|c| c.updates) {
            updated[p.index()] = true;
        }
        let provenance = Provenance::identity(graph.nodes.len());
        Ok(Self { graph, provenance, calls, steps: 1, updated })
    }

    /// Prepares a training step unrolled over several steps ([`ordo_ir::transform::unroll`]).
    /// A node of step `s` runs at step `s` after the run's first, with the random numbers of the
    /// node it copies at that step, and reads the parameters and optimizer state step
    /// `s - 1`'s updates left: one run of the program is as many training steps, bitwise as
    /// running the step's graph that many times.
    ///
    /// # Errors
    /// [`ExecError::Mismatch`] for a provenance that does not describe the graph (another
    /// node count, or an update of step `s > 0` without its copy in step `s - 1`); those of
    /// [`Program::new`].
    pub fn unrolled(unrolled: Transformed) -> Result<Self, ExecError> {
        let Transformed { graph, provenance, .. } = unrolled;
        if provenance.len() != graph.nodes.len() {
            return Err(ExecError::Mismatch(format!(
                "a provenance of {} nodes for a graph of {}",
                provenance.len(),
                graph.nodes.len()
            )));
        }
        let copy: HashMap<(u32, NodeId), NodeId> = (0..provenance.len())
            .map(|i| ((provenance.step[i], provenance.origin[i]), NodeId(i as u32)))
            .collect();
        let mut program = Self::new(graph)?;
        program.provenance = provenance;
        let provenance = &program.provenance;
        for (i, call) in program.calls.iter_mut().enumerate() {
            let step = provenance.step[i];
            // Random numbers as the node copied draws them (its layer and itself are in the
            // same step).
            call.seed_node = provenance.origin[call.seed_node.index()];
            call.step_offset = u64::from(step);
            call.slot_home = provenance.origin[i];
            if call.updates.is_some() && step > 0 {
                let previous = copy.get(&(step - 1, provenance.origin[i])).ok_or_else(|| {
                    ExecError::Mismatch(format!(
                        "update `{}` of step {step} has no copy in step {}",
                        program.graph.nodes[i].name,
                        step - 1
                    ))
                })?;
                call.previous_update = Some(*previous);
            }
        }
        program.steps = provenance.steps() as u64;
        Ok(program)
    }

    /// Training steps one run of the program makes: 1, or the steps of an unrolled graph.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Whether some node of the graph updates parameter `p` (one that none updates keeps its
    /// value through the steps of an unrolled graph).
    pub fn is_updated(&self, p: ParamId) -> bool {
        self.updated[p.index()]
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Where each node of the graph comes from: the node of the graph it was copied from, its
    /// micro-batch and step ([`Provenance::identity`] for a graph that is no copy).
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// How node `id` is called.
    pub fn call(&self, id: NodeId) -> &NodeCall {
        &self.calls[id.index()]
    }

    /// The fresh optimizer state of every node (empty but for updates).
    ///
    /// # Errors
    /// A [`cpu::KernelError`] from [`init_state`].
    pub fn initial_state(&self) -> KernelResult<Vec<Vec<Tensor>>> {
        self.graph
            .nodes
            .iter()
            .map(|node| match (&node.op, self.calls[node.id.index()].updates) {
                (Op::Update(u), Some(p)) => init_state(u.optimizer, &self.graph.param(p).fact),
                _ => Ok(Vec::new()),
            })
            .collect()
    }

    /// Runs node `id` on `inputs` (its wires' values in order; for an `Input`, the fed
    /// tensor) and `params` (the values of [`NodeCall::params`] in order), at `step` (from 1).
    ///
    /// # Errors
    /// The kernel's [`cpu::KernelError`].
    pub fn run_node(
        &self,
        id: NodeId,
        inputs: &[&Tensor],
        params: &[&Tensor],
        state: &mut [Tensor],
        step: u64,
        settings: &RunSettings,
    ) -> KernelResult<Vec<Tensor>> {
        let node = self.graph.node(id);
        let call = &self.calls[id.index()];
        let step = step + call.step_offset;
        let ctx = KernelContext {
            outputs: &node.outputs,
            inputs: &call.input_facts,
            forward_inputs: &call.forward_inputs,
            step,
            seed: node_seed(settings.seed, call.seed_node.0, step),
            training: settings.training,
            hyper: settings.hyper,
        };
        let Some(arguments) = inputs.len().checked_sub(call.accumulated) else {
            return Err(cpu::KernelError::Count {
                op: cpu::op_label(&node.op),
                what: "input(s) with partial sums",
                expected: call.accumulated,
                got: inputs.len(),
            });
        };
        let (arguments, partial) = inputs.split_at(arguments);
        let mut outputs = cpu::run(&node.op, arguments, params, state, &ctx)?;
        for (output, partial) in outputs.iter_mut().zip(partial) {
            cpu::accumulate(partial, output)?;
        }
        Ok(outputs)
    }
}

/// Scales the seed of `graph`'s backward pass (the `Fill` of role dX that starts it) by
/// `factor`. Data-parallel training over `n` replicas uses `1 / n`, as ParallelExecutor's
/// `ScaleLossGradOpHandle` does, so that the all-reduced gradients are those of the mean loss
/// over the whole batch.
pub fn scale_backward_seed(graph: &mut Graph, factor: f64) {
    for node in &mut graph.nodes {
        if let (Op::Fill { value }, ordo_ir::Role::Dx, true) =
            (&mut node.op, node.role, node.inputs.is_empty())
        {
            *value *= factor;
        }
    }
}

/// Every op without a CPU kernel, each named once with the nodes that use it: the operators
/// imported for planning only first (by their framework's name, gradients counted with their
/// op), then any other op the kernels lack or would read u64 inputs of as signed. `None` when
/// all can run.
pub fn missing_kernels(graph: &Graph) -> Option<String> {
    use ordo_ir::DType::U64;
    use std::collections::BTreeMap;
    let mut planning: BTreeMap<String, (Vec<&str>, bool)> = BTreeMap::new();
    let mut other: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for n in &graph.nodes {
        let opaque = match &n.op {
            Op::Opaque(o) => Some((o, false)),
            Op::Grad(g) => match &*g.of {
                Op::Opaque(o) => Some((o, true)),
                _ => None,
            },
            _ => None,
        };
        if let Some((o, gradient)) = opaque {
            // One op of several outputs imports as `TopK:0`, `TopK:1`: one operator.
            let op = o.op_type.split(':').next().unwrap_or(&o.op_type).to_string();
            let entry = planning.entry(op).or_default();
            if gradient {
                entry.1 = true;
            } else {
                entry.0.push(&n.name);
            }
            continue;
        }
        if let Err(e) = cpu::supports(&n.op) {
            other.entry(e.to_string()).or_default().push(&n.name);
        }
        if let Op::BitCast { to } = n.op {
            let from = n.inputs.first().and_then(|&o| graph.fact(o)).map_or(to, |f| f.dtype);
            if let Some(t) = [from, to].into_iter().find(|&t| !cpu::bits_held(t)) {
                other.entry(format!("bit casts of {t}")).or_default().push(&n.name);
            }
        }
        // Strings are computed as ids where the result on the ids is the ids of the result
        // (equality, data movement, from graph inputs); any other op of strings is planned only.
        let string = |f: &ordo_ir::TensorFact| f.dtype == ordo_ir::DType::String;
        let in_facts = n.inputs.iter().filter_map(|&o| graph.fact(o));
        if in_facts.chain(&n.outputs).any(string) && !cpu::reads_strings(&n.op) {
            other.entry("string tensors".to_string()).or_default().push(&n.name);
            continue;
        }
        let reads_u64 = n.inputs.iter().any(|&o| graph.fact(o).is_some_and(|f| f.dtype == U64));
        if reads_u64 && !cpu::reads_u64(&n.op) {
            other.entry(format!("u64 inputs of {}", n.op.label())).or_default().push(&n.name);
        }
    }
    let named = |nodes: &[&str]| {
        let shown: Vec<String> = nodes.iter().take(3).map(|n| format!("`{n}`")).collect();
        match nodes.len() {
            0..=3 => shown.join(", "),
            n => format!("{} and {} more", shown.join(", "), n - 3),
        }
    };
    let mut parts = Vec::new();
    if !planning.is_empty() {
        let ops: Vec<String> = planning
            .iter()
            .map(|(op, (nodes, gradient))| {
                let grad = if *gradient { "; and its gradient" } else { "" };
                format!("{op} ({}{grad})", named(nodes))
            })
            .collect();
        parts.push(format!(
            "no CPU kernel for {} operator(s) imported for planning only: {}",
            planning.len(),
            ops.join(", ")
        ));
    }
    parts.extend(
        other.iter().map(|(why, nodes)| format!("no CPU kernel: {why} ({})", named(nodes))),
    );
    (!parts.is_empty()).then(|| parts.join("; "))
}
