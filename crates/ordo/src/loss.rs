//! Losses: finding the one a forward graph ends in, or adding one to a forward graph that
//! ends at its predictions (an ONNX export of the forward pass).

use ordo_ir::{DType, Graph, Node, Op, OutletId, TensorFact};

use crate::error::{Error, Result, usage};
use crate::parameter::{Parameter, ParameterError, refuse};

/// A loss to add to a forward graph that ends at its predictions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Mean cross-entropy of the graph's one output (logits, classes last) against an `i64`
    /// input `labels` shaped like the logits without their last dimension.
    CrossEntropy,
}

impl std::str::FromStr for Loss {
    type Err = Error;

    /// `cross-entropy`.
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "cross-entropy" => Ok(Loss::CrossEntropy),
            other => refuse!(Parameter::Loss => other, ": expected cross-entropy"),
        }
    }
}

/// The forward graph to train and its loss: the node named `loss` (zoo models), else the
/// graph's one output when it is a float scalar (an export that ends in its loss), else the
/// loss `add` asks for, added over the graph's one output.
pub fn with_loss(forward: &Graph, add: Option<Loss>) -> Result<(Graph, OutletId)> {
    let named = forward.find("loss").map(|n| OutletId::new(n.id, 0));
    let scalar_output = match forward.outputs.as_slice() {
        [o] if forward.fact(*o).is_some_and(|f| f.rank() == 0 && f.dtype.is_float()) => Some(*o),
        _ => None,
    };
    match (add, named.or(scalar_output)) {
        (None, Some(loss)) => Ok((forward.clone(), loss)),
        (Some(_), Some(_)) => {
            let text = format!("model `{}` already ends in a loss; drop ", forward.name);
            let error = ParameterError::about(Parameter::Loss, text).then(Parameter::Loss);
            Err(Error::Parameter(error.text(" to train from it")))
        }
        (Some(Loss::CrossEntropy), None) => add_cross_entropy(forward),
        (None, None) => {
            let outputs: Vec<String> = forward
                .outputs
                .iter()
                .map(|o| {
                    format!(
                        "`{}` {}",
                        forward.node(o.node).name,
                        forward.fact(*o).map_or_else(String::new, ToString::to_string)
                    )
                })
                .collect();
            let text = format!(
                "model `{}` has no loss to train from: no node is named `loss` and its output(s) \
                 {} are not one float scalar; pass `",
                forward.name,
                outputs.join(", ")
            );
            let error = ParameterError::about(Parameter::Loss, text);
            Err(Error::Parameter(error.valued_then(Parameter::Loss, "cross-entropy").text(
                "` to add a cross-entropy over its output with an int64 `labels` input, or \
                 export the model with its loss",
            )))
        }
    }
}

/// Adds `labels` (an `Input`) and `loss` (`CrossEntropyLoss` of the one output against the
/// labels); the loss becomes the graph's only output.
fn add_cross_entropy(forward: &Graph) -> Result<(Graph, OutletId)> {
    let [logits] = forward.outputs.as_slice() else {
        refuse!(
            Parameter::Loss => "cross-entropy",
            format!(
                " needs a model with one output; `{}` has {}",
                forward.name,
                forward.outputs.len()
            )
        );
    };
    let Some(fact) = forward.fact(*logits).cloned() else {
        usage!("the output {logits:?} of `{}` is not in the graph", forward.name);
    };
    if fact.rank() < 2 || !fact.dtype.is_float() {
        refuse!(
            Parameter::Loss => "cross-entropy",
            format!(
                " needs float logits of rank 2 or more (classes last); the output of `{}` is \
                 {fact}",
                forward.name
            )
        );
    }
    let mut graph = forward.clone();
    let labels_fact = TensorFact::new(DType::I64, fact.shape[..fact.rank() - 1].to_vec());
    let labels = push(&mut graph, "labels", Op::Input, Vec::new(), labels_fact);
    let loss = push(
        &mut graph,
        "loss",
        Op::CrossEntropyLoss,
        vec![*logits, labels],
        TensorFact::new(DType::F32, Vec::new()),
    );
    graph.outputs = vec![loss];
    ordo_ir::validate(&graph)?;
    Ok((graph, loss))
}

fn push(graph: &mut Graph, name: &str, op: Op, inputs: Vec<OutletId>, out: TensorFact) -> OutletId {
    let unique = ordo_ir::unique_name(name, |taken| graph.find(taken).is_some());
    OutletId::new(graph.add_node(Node::new(unique, op, inputs, Vec::new(), vec![out])), 0)
}
