//! The training graph: a forward graph, its backward pass with separate dX and dW nodes, and
//! one optimizer step per parameter.
//!
//! [`training_graph`] differentiates a forward graph from a scalar loss, in reverse topological
//! order, as reverse-mode autodiff does:
//!
//! * a seed `Fill(1)` shaped like the loss (role [`Role::Dx`]) starts the backward pass;
//! * for each forward node on a path from a trainable parameter to the loss, the gradient
//!   contributions to its output are summed (`Add` nodes, role `Dx`), then
//!   * one **dX** node (`Grad`, [`Wrt::Input`], role `Dx`) per input that needs a gradient (a
//!     floating-point input computed from a parameter), named `<node>.dx` (`<node>.dx<k>` when
//!     several inputs need one), and
//!   * one **dW** node (`Grad`, [`Wrt::Params`], role `Dw`) if the node has trainable
//!     parameters, named `<node>.dw`, with one output per trainable parameter;
//! * each trainable parameter's gradients are summed (tied weights), and an `Update` node
//!   (role [`Role::Update`]) named `<parameter>.update` outputs its next value.
//!
//! Every backward and update node records its forward node in [`Node::layer`]. What each
//! gradient reads is in `rules.rs`: activations are inputs of the backward nodes that need them,
//! so a buffer's lifetime (from its forward producer to its last backward reader) follows from
//! the graph. The graph's outputs are the loss and the updated parameters.

mod rules;

use std::collections::HashMap;

use crate::error::{IrError, IrResult};
use crate::fact::TensorFact;
use crate::graph::{Graph, Node, Role};
use crate::ids::{NodeId, OutletId, ParamId};
use crate::op::{Grad, Op, Optimizer, Update, Wrt};
use crate::validate::validate;

use rules::Forward;

/// The training graph of `forward` for the scalar `loss` with `optimizer` (see the
/// [module documentation](self)). Node ids of `forward` are kept.
///
/// # Errors
/// [`IrError::Training`] when the loss is not a floating-point scalar output of the graph, the
/// graph has no trainable parameter, or no trainable parameter reaches the loss; the errors of
/// [`validate`] for a malformed forward graph.
pub fn training_graph(forward: &Graph, loss: OutletId, optimizer: Optimizer) -> IrResult<Graph> {
    validate(forward)?;
    let fail = |message: String| Err(IrError::Training { model: forward.name.clone(), message });
    let Some(loss_fact) = forward.fact(loss) else {
        return fail(format!("the loss ({loss}) is not an output of the graph"));
    };
    let loss_name = &forward.node(loss.node).name;
    if !loss_fact.dtype.is_float() || loss_fact.numel() != 1 {
        return fail(format!("the loss `{loss_name}` must be a float scalar, it is {loss_fact}"));
    }
    if !forward.params.iter().any(|p| p.trainable) {
        return fail("the model has no trainable parameters".into());
    }
    let order = forward.topo_order()?;
    let needs = needs_gradient(forward, &order, loss.node);
    let reached = forward
        .nodes
        .iter()
        .any(|n| needs[n.id.index()] && n.params.iter().any(|&p| forward.param(p).trainable));
    if !reached {
        return fail(format!("the loss `{loss_name}` does not depend on any trainable parameter"));
    }

    let mut b = Backward {
        graph: forward.clone(),
        grads: HashMap::new(),
        param_grads: vec![Vec::new(); forward.params.len()],
    };
    b.graph.outputs = vec![loss];
    let seed_name = format!("{loss_name}.grad");
    let seed = b.push(
        &seed_name,
        Op::Fill { value: 1.0 },
        vec![],
        vec![],
        loss_fact,
        (Role::Dx, loss.node),
    );
    b.grads.insert(loss, vec![seed]);
    for &v in order.iter().rev() {
        if needs[v.index()] {
            b.differentiate(forward, v, &needs)?;
        }
    }
    b.update_params(forward, optimizer);
    validate(&b.graph)?;
    Ok(b.graph)
}

/// Whether each node's output needs a gradient: it depends on a trainable parameter and the
/// loss depends on it.
fn needs_gradient(graph: &Graph, order: &[NodeId], loss: NodeId) -> Vec<bool> {
    let n = graph.nodes.len();
    let mut from_param = vec![false; n];
    for &v in order {
        let node = graph.node(v);
        from_param[v.index()] = node.params.iter().any(|&p| graph.param(p).trainable)
            || node.inputs.iter().any(|i| from_param[i.node.index()]);
    }
    let mut to_loss = vec![false; n];
    to_loss[loss.index()] = true;
    for &v in order.iter().rev() {
        if to_loss[v.index()] {
            for input in &graph.node(v).inputs {
                to_loss[input.node.index()] = true;
            }
        }
    }
    (0..n).map(|v| from_param[v] && to_loss[v]).collect()
}

/// The graph being extended, and the gradient contributions found so far.
struct Backward {
    graph: Graph,
    /// Per forward outlet: the gradients flowing into it.
    grads: HashMap<OutletId, Vec<OutletId>>,
    /// Per parameter: its gradients (several for tied weights).
    param_grads: Vec<Vec<OutletId>>,
}

impl Backward {
    /// Appends a one-output node with its role and the forward node (layer) it belongs to.
    fn push(
        &mut self,
        name: &str,
        op: Op,
        inputs: Vec<OutletId>,
        params: Vec<ParamId>,
        output: &TensorFact,
        owner: (Role, NodeId),
    ) -> OutletId {
        let node = Node::new(name, op, inputs, params, vec![output.clone()]);
        OutletId::new(self.graph.add_node(node.of_layer(owner.0, owner.1)), 0)
    }

    /// The sum of `parts` (one `Add` per extra part), named after `name`.
    fn sum(&mut self, name: &str, parts: &[OutletId], layer: NodeId, role: Role) -> OutletId {
        let mut total = parts[0];
        for (i, &part) in parts.iter().enumerate().skip(1) {
            let fact = self.graph.fact(total).expect("gradient outlet").clone();
            let sum_name = if parts.len() == 2 { name.to_string() } else { format!("{name}{i}") };
            total = self.push(&sum_name, Op::Add, vec![total, part], vec![], &fact, (role, layer));
        }
        total
    }

    /// Adds the dX and dW nodes of forward node `v`.
    fn differentiate(&mut self, forward: &Graph, v: NodeId, needs: &[bool]) -> IrResult<()> {
        let node = forward.node(v);
        let output = OutletId::new(v, 0);
        let Some(parts) = self.grads.remove(&output) else { return Ok(()) };
        let dy = self.sum(&format!("{}.grad_sum", node.name), &parts, v, Role::Dx);
        let inputs = forward.input_facts(node).expect("validated");
        let f = Forward {
            op: &node.op,
            inputs: &inputs,
            output: &node.outputs[0],
            flops: node.op.flops(&inputs, &node.outputs),
        };
        let wanting: Vec<usize> = (0..node.inputs.len())
            .filter(|&k| needs[node.inputs[k].node.index()] && inputs[k].dtype.is_float())
            .collect();
        for &k in &wanting {
            let Some(rule) = rules::input_gradient(&f, k) else {
                return Err(not_differentiable(forward, node, &format!("input {k}")));
            };
            let name = if wanting.len() == 1 {
                format!("{}.dx", node.name)
            } else {
                format!("{}.dx{k}", node.name)
            };
            let grad = Grad {
                of: Box::new(node.op.clone()),
                wrt: Wrt::Input(k),
                saved: rule.saved.clone(),
                produces: vec![inputs[k].clone()],
                flops: rule.flops,
            };
            let reads = self.reads(node, dy, &rule.saved);
            let params = if rule.reads_params { node.params.clone() } else { Vec::new() };
            let dx = self.push(&name, Op::Grad(grad), reads, params, inputs[k], (Role::Dx, v));
            self.grads.entry(node.inputs[k]).or_default().push(dx);
        }
        // The dW kernel computes the gradient of every parameter its op can learn (its specs'
        // trainable ones, e.g. not batch norm's running statistics); of those, a parameter
        // frozen in this graph gets its gradient computed and dropped.
        let specs = node.op.param_specs(&inputs);
        let learnable: Vec<ParamId> = if specs.len() == node.params.len() {
            node.params.iter().zip(&specs).filter(|(_, s)| s.trainable).map(|(&p, _)| p).collect()
        } else {
            node.params.iter().copied().filter(|&p| forward.param(p).trainable).collect()
        };
        if !learnable.iter().any(|&p| forward.param(p).trainable) {
            return Ok(());
        }
        let Some(rule) = rules::param_gradient(&f) else {
            return Err(not_differentiable(forward, node, "its parameters"));
        };
        let produces: Vec<TensorFact> =
            learnable.iter().map(|&p| forward.param(p).fact.clone()).collect();
        let grad = Grad {
            of: Box::new(node.op.clone()),
            wrt: Wrt::Params,
            saved: rule.saved.clone(),
            produces: produces.clone(),
            flops: rule.flops,
        };
        let reads = self.reads(node, dy, &rule.saved);
        let dw_node =
            Node::new(format!("{}.dw", node.name), Op::Grad(grad), reads, vec![], produces);
        let dw = self.graph.add_node(dw_node.of_layer(Role::Dw, v));
        for (slot, &p) in learnable.iter().enumerate() {
            if forward.param(p).trainable {
                self.param_grads[p.index()].push(OutletId::new(dw, slot as u32));
            }
        }
        Ok(())
    }

    /// The inputs of a gradient of `node`: the upstream gradient, then the saved tensors.
    fn reads(&self, node: &Node, dy: OutletId, saved: &[crate::op::Saved]) -> Vec<OutletId> {
        let mut reads = vec![dy];
        reads.extend(saved.iter().map(|s| match *s {
            crate::op::Saved::Input(k) => node.inputs[k],
            crate::op::Saved::Output => OutletId::new(node.id, 0),
        }));
        reads
    }

    /// Sums each trainable parameter's gradients and adds its update.
    fn update_params(&mut self, forward: &Graph, optimizer: Optimizer) {
        let first_user = first_users(forward);
        for (p, param) in forward.params.iter().enumerate() {
            let parts = std::mem::take(&mut self.param_grads[p]);
            if parts.is_empty() {
                continue;
            }
            let layer = first_user[p].expect("a parameter with gradients has a user");
            let grad = self.sum(&format!("{}.grad_sum", param.name), &parts, layer, Role::Dw);
            let op = Op::Update(Update { optimizer });
            let name = format!("{}.update", param.name);
            let (id, fact) = (ParamId(p as u32), &param.fact);
            let updated = self.push(&name, op, vec![grad], vec![id], fact, (Role::Update, layer));
            self.graph.outputs.push(updated);
        }
    }
}

/// Per parameter, the first node (in id order) that reads it.
fn first_users(graph: &Graph) -> Vec<Option<NodeId>> {
    let mut first = vec![None; graph.params.len()];
    for node in &graph.nodes {
        for &p in &node.params {
            first[p.index()].get_or_insert(node.id);
        }
    }
    first
}

fn not_differentiable(graph: &Graph, node: &Node, what: &str) -> IrError {
    IrError::Training {
        model: graph.name.clone(),
        message: format!(
            "node `{}` ({}) has no gradient with respect to {what}",
            node.name,
            node.op.name()
        ),
    }
}

/// Checks the gradients of a training graph against the forward graph: every dX node produces
/// its forward input's fact, every dW node its forward node's trainable parameters' facts,
/// every gradient reads an upstream gradient shaped like its forward node's output and the
/// forward node's parameters if any, and every update reads a gradient shaped like its
/// parameter. Returns the number of gradient nodes checked.
///
/// # Errors
/// [`IrError::Training`] naming the first node that disagrees.
pub fn check_gradients(graph: &Graph) -> IrResult<usize> {
    let fail = |node: &Node, message: String| {
        Err(IrError::Training {
            model: graph.name.clone(),
            message: format!("`{}`: {message}", node.name),
        })
    };
    let mut checked = 0;
    for node in &graph.nodes {
        let Op::Grad(grad) = &node.op else {
            if let Op::Update(_) = node.op {
                let param = &graph.param(node.params[0]).fact;
                if graph.fact(node.inputs[0]) != Some(param) {
                    return fail(
                        node,
                        format!("updates a {param} parameter with a differently shaped gradient"),
                    );
                }
            }
            continue;
        };
        let Some(layer) = node.layer.map(|l| graph.node(l)) else {
            return fail(node, "a gradient without its forward node".into());
        };
        if graph.fact(node.inputs[0]) != Some(&layer.outputs[0]) {
            return fail(
                node,
                format!("its upstream gradient is not shaped like `{}`'s output", layer.name),
            );
        }
        let expected: Vec<TensorFact> = match grad.wrt {
            Wrt::Input(k) => vec![graph.fact(layer.inputs[k]).expect("validated").clone()],
            Wrt::Params => layer
                .params
                .iter()
                .map(|&p| graph.param(p))
                .filter(|p| p.trainable)
                .map(|p| p.fact.clone())
                .collect(),
        };
        if node.outputs != expected {
            return fail(
                node,
                format!("produces {:?}, the forward tensors are {expected:?}", node.outputs),
            );
        }
        if !node.params.is_empty() && node.params != layer.params {
            return fail(node, format!("reads parameters other than `{}`'s", layer.name));
        }
        checked += 1;
    }
    Ok(checked)
}
