//! Several training steps in one problem, so that schedules which carry work from one step into
//! the next (weight gradients deferred into the next forward pass) can be simulated in their
//! steady state.

use ordo_ir::Role;
use ordo_ir::transform::step_suffix;
use ordo_problem::{Edge, PlaceProblem, Tensor};

use crate::error::SchedError;

/// `steps` copies of the training-graph problem `problem`, one after another, numbered as
/// [`ordo_ir::transform::unroll`] numbers the graph's: node `v` of step `s` is node
/// `s * n + v`, named `<name>#<s>`, and so are tensors (`<node>#<s>:<slot>`, as the runtime
/// names the outputs of node `<node>#<s>`). Parameters and optimizer state are counted once (persistent memory of steps after the first is 0). Each update of
/// step `s` gets a control edge to its layer's forward node in step `s + 1`: the next forward
/// pass reads the updated parameter (an update's layer is the first node that reads its
/// parameter, so the parameter's later readers follow). One step is the problem itself, names
/// unchanged.
///
/// # Errors
/// [`SchedError::Schedule`] for zero steps, [`SchedError::Placement`] for a problem that does
/// not unroll (a cycle).
pub fn unroll(problem: &PlaceProblem, steps: usize) -> Result<PlaceProblem, SchedError> {
    if steps == 0 {
        return Err(SchedError::Schedule("a steady state needs at least one step".into()));
    }
    if steps == 1 {
        return Ok(problem.clone());
    }
    crate::Plan::check_size(problem.len(), steps, &format!("{steps} unrolled steps"))?;
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
