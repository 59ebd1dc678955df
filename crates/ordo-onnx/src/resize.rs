//! Importing a model at another batch size or sequence length than the file declares.
//!
//! The data inputs get the new sizes and the import runs as usual, so that shape subgraphs
//! (`Shape`, `Gather`, `Concat` feeding `Reshape`) recompute with them. A file may also write
//! its size into a constant (a `Reshape` to a literal `[32, -1]`), which would give a graph
//! that imports but mixes samples. So the model is imported twice, at the file's sizes and at
//! the new ones, and every ONNX node's outputs must be the same shapes with the sizes scaled:
//! each dimension either unchanged or `k * old` becoming `k * new`. A `Reshape` or `Expand`
//! whose target is the same constant at both sizes and holds the file's size where its input's
//! size changed is refused too, naming the node and the constant (an import that fails at the
//! new size names such nodes as the likely cause).

use std::collections::BTreeSet;

use ordo_ir::TensorFact;

use crate::error::{OnnxError, OnnxResult};
use crate::import::{NodeTrace, import_traced, is_token_input};
use crate::{Import, ImportOptions};

/// Imports with `options.batch` and `options.seq_len`, checking that the file does not fix
/// them (see the module documentation).
pub(crate) fn import_resized(
    bytes: &prost::bytes::Bytes,
    name: Option<&str>,
    options: &ImportOptions,
) -> OnnxResult<Import> {
    let own = ImportOptions { batch: None, seq_len: None, ..options.clone() };
    let mut base_nodes = Vec::new();
    let base = import_traced(bytes, name, &own, &mut base_nodes)?;
    let inputs: Vec<&TensorFact> =
        base.graph.input_nodes().filter_map(|n| n.outputs.first()).collect();
    let mut scales: Vec<(usize, usize)> = Vec::new();
    let mut size = Vec::new();
    if let Some(batch) = options.batch {
        let old = file_size(&inputs, batch, "batch", |f| f.shape.first().copied())?;
        scales.push((old, batch));
        size.push(format!("batch {batch} (the file has {old})"));
    }
    if let Some(seq) = options.seq_len {
        let old =
            file_size(&inputs, seq, "sequence length", |f| is_token_input(f).then(|| f.shape[1]))?;
        scales.push((old, seq));
        size.push(format!("sequence length {seq} (the file has {old})"));
    }
    if scales.iter().all(|(old, new)| old == new) {
        return Ok(base);
    }
    if let [(b0, b), (s0, s)] = scales[..]
        && let (Some(old), Some(new)) = (b0.checked_mul(s0), b.checked_mul(s))
    {
        scales.push((old, new));
    }
    let size = size.join(" and ");
    let fail = |message: String| OnnxError::Resize { size: size.clone(), message };
    let mut nodes = Vec::new();
    let resized = import_traced(bytes, name, options, &mut nodes).map_err(|e| {
        let hint = suspects(&base_nodes, &nodes, &scales);
        fail(format!(
            "{e}; the model imports at the file's own size, so it fixes that size somewhere{hint}"
        ))
    })?;
    let hint = suspects(&base_nodes, &nodes, &scales);
    for (a, b) in base_nodes.iter().zip(&nodes) {
        check_literal(a, b, &scales).map_err(&fail)?;
        check_trips(a, b, &scales).map_err(&fail)?;
        for (k, (o0, o1)) in a.outputs.iter().zip(&b.outputs).enumerate() {
            let (Some(o0), Some(o1)) = (o0, o1) else { continue };
            if !scaled(o0, o1, &scales) {
                return Err(fail(format!(
                    "output {k} of node `{}` is {o0:?} at the file's size and {o1:?} at the new \
                     one, which is not the same shape with the size changed: the model fixes \
                     its size somewhere{hint}",
                    a.name
                )));
            }
        }
    }
    Ok(resized)
}

/// The size the file gives every data input that has one (`dim`), which must be one value.
fn file_size(
    inputs: &[&TensorFact],
    new: usize,
    what: &str,
    dim: impl Fn(&TensorFact) -> Option<usize>,
) -> OnnxResult<usize> {
    let olds: BTreeSet<usize> = inputs.iter().filter_map(|f| dim(f)).collect();
    let fail = |message: String| OnnxError::Resize { size: format!("{what} {new}"), message };
    if new == 0 {
        return Err(fail(format!("the {what} must be at least 1")));
    }
    match olds.len() {
        0 if what == "batch" => {
            Err(fail("the model has no data input with a batch dimension".into()))
        }
        0 => Err(fail(
            "the model has no token input (integers of rank 2 or more, [batch, sequence, ...])"
                .into(),
        )),
        1 => Ok(olds.into_iter().next().expect("one")),
        _ => Err(fail(format!("the data inputs disagree on the {what}: {olds:?}"))),
    }
}

/// Whether `new` is `old` with every dimension unchanged or scaled by one of `scales`.
fn scaled(old: &[usize], new: &[usize], scales: &[(usize, usize)]) -> bool {
    old.len() == new.len()
        && old.iter().zip(new).all(|(&d0, &d1)| {
            d0 == d1
                || scales.iter().any(|&(s0, s1)| {
                    s0 != 0 && d0 % s0 == 0 && (d0 / s0).checked_mul(s1) == Some(d1)
                })
        })
}

/// A `Reshape` or `Expand` whose target is the same constant at both sizes and holds an old
/// size at a position where its input's size changed (the batch written into the target).
fn check_literal(a: &NodeTrace, b: &NodeTrace, scales: &[(usize, usize)]) -> Result<(), String> {
    let (Some((tensor, value)), Some((_, value1)), Some(in0), Some(in1)) =
        (&a.target, &b.target, &a.input, &b.input)
    else {
        return Ok(());
    };
    if value != value1 {
        return Ok(());
    }
    for &(s0, s1) in scales.iter().filter(|(s0, s1)| s0 != s1) {
        let kept = (0..in0.len().min(in1.len()))
            .any(|p| in0[p] == s0 && in1[p] == s1 && value.get(p) == Some(&(s0 as i64)));
        if kept {
            return Err(format!(
                "node `{}` reshapes its input ({in0:?} at the file's size, {in1:?} at the new \
                 one) to `{tensor}` = {value:?} at both, a constant that holds the file's size \
                 {s0}; export the model with that shape computed from the input (x.size(0)) or \
                 at the size you want",
                a.name
            ));
        }
    }
    Ok(())
}

/// A `Loop` whose constant trip count is the file's batch (or sequence length) at both sizes:
/// the exporter wrote the number of items of a loop over them as a literal.
fn check_trips(a: &NodeTrace, b: &NodeTrace, scales: &[(usize, usize)]) -> Result<(), String> {
    let (Some((tensor, trips)), Some((_, trips1))) = (&a.trips, &b.trips) else { return Ok(()) };
    if trips != trips1 {
        return Ok(());
    }
    match scales.iter().find(|&&(s0, s1)| s0 != s1 && *trips == s0 as i64) {
        Some(&(s0, _)) => Err(format!(
            "loop `{}` runs `{tensor}` = {trips} iterations at both sizes, a constant that is \
             the file's size {s0}: a loop over the batch or sequence was exported with its \
             count written out; export it with the count computed from the input (dynamic axes, \
             x.size(0)) or at the size you want (or, if the loop is not over them, at another \
             size)",
            a.name
        )),
        None => Ok(()),
    }
}

/// The nodes [`check_literal`] refuses, as a hint for an error.
fn suspects(base: &[NodeTrace], resized: &[NodeTrace], scales: &[(usize, usize)]) -> String {
    let found: Vec<String> = base
        .iter()
        .zip(resized)
        .filter_map(|(a, b)| check_literal(a, b, scales).err())
        .take(3)
        .collect();
    match found.as_slice() {
        [] => String::new(),
        [first, ..] => format!(
            " ({} such node(s); the first: {first})",
            base.iter().zip(resized).filter(|(a, b)| check_literal(a, b, scales).is_err()).count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn shapes_scale_by_the_batch_the_sequence_or_both() {
        let scales = [(4, 2), (6, 3), (24, 6)];
        assert!(scaled(&[4, 6, 8], &[2, 3, 8], &scales));
        assert!(scaled(&[24, 8], &[6, 8], &scales), "flattened batch * sequence");
        assert!(scaled(&[8, 32], &[8, 16], &scales), "k * batch");
        assert!(!scaled(&[4, 6], &[4, 6, 1], &scales), "rank changed");
        assert!(!scaled(&[4, 8], &[2, 7], &scales), "a dimension that is not scaled");
        assert!(!scaled(&[5], &[3], &scales), "not a multiple of a size");
        assert!(!scaled(&[0, 5], &[1, 5], &[(0, 1)]), "a file's size of 0 scales nothing");
    }
}
