//! Several training steps in one problem, so that schedules which carry work from one step into
//! the next (weight gradients deferred into the next forward pass) can be simulated in their
//! steady state.

use ordo_ir::{Graph, Node, NodeId, OutletId, Role};
use ordo_problem::{Edge, PlaceProblem, Tensor};

use crate::error::SchedError;

/// `steps` copies of the training-graph problem `problem`, one after another: node `v` of step
/// `s` is node `s * n + v`, named `<name>#<s>`, and so are tensors (`<node>#<s>:<slot>`, as the
/// runtime names the outputs of node `<node>#<s>`). Parameters and optimizer
/// state are counted once (persistent memory of steps after the first is 0). Each update of
/// step `s` gets a control edge to its layer's forward node in step `s + 1`: the next forward
/// pass reads the updated parameter (an update's layer is the first node that reads its
/// parameter, so the parameter's later readers follow). One step is the problem itself, names
/// unchanged.
///
/// # Errors
/// [`SchedError::Schedule`] for zero steps, [`SchedError::Placement`] for a problem that does not unroll (a cycle).
pub fn unroll(problem: &PlaceProblem, steps: usize) -> Result<PlaceProblem, SchedError> {
    if steps == 0 {
        return Err(SchedError::Schedule("a steady state needs at least one step".into()));
    }
    if steps == 1 {
        return Ok(problem.clone());
    }
    let (n, t, g) = (problem.len(), problem.tensors.len(), problem.groups.len());
    let mut out = problem.clone();
    out.names.clear();
    out.tensors.clear();
    out.edges.clear();
    out.group_of.clear();
    out.groups.clear();
    for s in 0..steps {
        out.names.extend(problem.names.iter().map(|name| format!("{name}{}", step_suffix(s))));
        out.tensors.extend(problem.tensors.iter().map(|x| Tensor {
            name: step_tensor_name(&x.name, &problem.names[x.producer], s),
            producer: s * n + x.producer,
            ..x.clone()
        }));
        out.edges.extend(problem.edges.iter().map(|e| Edge {
            source: s * n + e.source,
            target: s * n + e.target,
            comm_us: e.comm_us,
            tensors: e.tensors.iter().map(|&x| s * t + x).collect(),
        }));
        out.group_of.extend(problem.group_of.iter().map(|&k| s * g + k));
        out.groups.extend(problem.groups.iter().map(|m| m.iter().map(|&v| s * n + v).collect()));
        if s > 0 {
            out.weights.extend_from_slice(&problem.weights);
            out.occupancy.extend_from_slice(&problem.occupancy);
            out.roles.extend_from_slice(&problem.roles);
            out.layer_of.extend(problem.layer_of.iter().map(|l| l.map(|l| s * n + l)));
            out.memory.extend(problem.memory.iter().map(|m| {
                let mut m = *m;
                m.persistent = 0;
                m
            }));
        }
    }
    for s in 1..steps {
        for v in 0..n {
            if let (Role::Update, Some(layer)) = (problem.roles[v], problem.layer_of[v]) {
                let (source, target) = ((s - 1) * n + v, s * n + layer);
                out.edges.push(Edge { source, target, comm_us: 0, tensors: Vec::new() });
            }
        }
    }
    out.out_edges = vec![Vec::new(); steps * n];
    out.in_edges = vec![Vec::new(); steps * n];
    for (k, e) in out.edges.iter().enumerate() {
        out.out_edges[e.source].push(k);
        out.in_edges[e.target].push(k);
    }
    out.set_topo_order()?;
    Ok(out)
}

/// What the copy of a node (or tensor) for step `s` of an unrolled problem adds to its name:
/// `#<s>`.
pub fn step_suffix(s: usize) -> String {
    format!("#{s}")
}

/// The name of tensor `name` of `producer` in step `s`: see [`copy_tensor_name`].
fn step_tensor_name(name: &str, producer: &str, s: usize) -> String {
    copy_tensor_name(name, producer, &step_suffix(s))
}

/// The name of tensor `name` of node `producer` in the copy of the graph whose node names end
/// in `suffix` (`#<s>` for a step, `/mb<m>` for a micro-batch): the copied producer's name
/// followed by the rest of the tensor's (`<node>:<slot>` becomes `<node><suffix>:<slot>`, as
/// the runtime names the outputs of the copied node), or `<name><suffix>` for a name that does
/// not start with its producer's.
pub(crate) fn copy_tensor_name(name: &str, producer: &str, suffix: &str) -> String {
    match name.strip_prefix(producer) {
        Some(rest) => format!("{producer}{suffix}{rest}"),
        None => format!("{name}{suffix}"),
    }
}

/// The executable graph of [`unroll`]`(problem, steps)` for the problem costed from `graph`:
/// node `s * n + v` is node `v` in step `s`, named as in the unrolled problem, its inputs
/// wired within its step and its layer in its step. Parameters are the graph's: the runtime
/// gives the nodes of step `s` the parameters as step `s - 1`'s updates left them. Outputs:
/// each of the graph's outputs once per step (step 0 first), so a training graph's first
/// `steps` outputs are the steps' losses.
///
/// # Errors
/// [`SchedError::Schedule`] for zero steps.
pub fn unroll_graph(graph: &Graph, steps: usize) -> Result<Graph, SchedError> {
    if steps == 0 {
        return Err(SchedError::Schedule("a steady state needs at least one step".into()));
    }
    if steps == 1 {
        return Ok(graph.clone());
    }
    let n = graph.nodes.len();
    let shift = |id: NodeId, s: usize| NodeId((s * n + id.index()) as u32);
    let mut nodes = Vec::with_capacity(steps * n);
    for s in 0..steps {
        nodes.extend(graph.nodes.iter().map(|node| Node {
            id: shift(node.id, s),
            name: format!("{}{}", node.name, step_suffix(s)),
            inputs: node.inputs.iter().map(|o| OutletId::new(shift(o.node, s), o.slot)).collect(),
            layer: node.layer.map(|l| shift(l, s)),
            ..node.clone()
        }));
    }
    let outputs = graph
        .outputs
        .iter()
        .flat_map(|o| (0..steps).map(move |s| OutletId::new(shift(o.node, s), o.slot)))
        .collect();
    Ok(Graph { name: graph.name.clone(), nodes, params: graph.params.clone(), outputs })
}
