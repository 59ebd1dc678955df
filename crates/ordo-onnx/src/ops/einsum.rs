//! `Einsum` of run-time float tensors: its equation resolved into the IR's labels (letters,
//! and `...` expanded into labels of their own, aligned from the right). Broadcasting a
//! label of size 1 against a larger one imports for planning only (the generic rule).

use std::collections::BTreeMap;

use ordo_ir::Op;
use ordo_ir::op::Einsum;

use super::common::{Outputs, one};
use crate::ctx::Ctx;
use crate::error::OnnxResult;
use crate::node::Node;
use crate::value::Value;

/// The labels of `term` for a tensor of `rank`: letters by their code, `...` as labels
/// counted from 1000 upwards from the right (shared by every term).
fn labels(node: &Node<'_>, term: &str, rank: usize) -> OnnxResult<Vec<u32>> {
    let letters: Vec<char> = term.replace("...", "").chars().collect();
    if letters.iter().any(|c| !c.is_ascii_alphabetic()) {
        return Err(node.malformed(format!("subscripts `{term}`: labels are letters and `...`")));
    }
    let Some(extra) = rank.checked_sub(letters.len()) else {
        return Err(node.malformed(format!("term `{term}` for a tensor of rank {rank}")));
    };
    if extra > 0 && !term.contains("...") {
        return Err(node.malformed(format!("term `{term}` for a tensor of rank {rank}")));
    }
    let start = term.find("...").map_or(letters.len(), |p| term[..p].chars().count());
    let mut out: Vec<u32> = letters[..start].iter().map(|&c| c as u32).collect();
    out.extend((0..extra).map(|i| 1000 + (extra - 1 - i) as u32));
    out.extend(letters[start..].iter().map(|&c| c as u32));
    Ok(out)
}

pub(crate) fn einsum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> OnnxResult<Outputs> {
    let values =
        (0..node.num_inputs()).map(|i| ctx.input(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    if values.iter().all(|v| matches!(v, Value::Const(_))) {
        return Err(node.unsupported("constants only"));
    }
    let facts = values.iter().map(|v| ctx.fact_of(node, v)).collect::<OnnxResult<Vec<_>>>()?;
    let equation: String =
        node.string("equation", "")?.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != facts.len() {
        return Err(node.malformed(format!(
            "`{equation}` has {} terms for {} inputs",
            terms.len(),
            facts.len()
        )));
    }
    let inputs = terms
        .iter()
        .zip(&facts)
        .map(|(t, f)| labels(node, t, f.rank()))
        .collect::<OnnxResult<Vec<_>>>()?;
    // Sizes must agree exactly (no size-1 broadcasting in the IR's Einsum).
    let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
    for (ls, f) in inputs.iter().zip(&facts) {
        for (&l, &n) in ls.iter().zip(&f.shape) {
            if *sizes.entry(l).or_insert(n) != n {
                return Err(node.unsupported("a subscript broadcast from size 1"));
            }
        }
    }
    let ellipsis: Vec<u32> = (1000..)
        .take_while(|l| sizes.contains_key(l))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let output = match rhs {
        Some(r) => {
            let rank = r.replace("...", "").chars().count()
                + if r.contains("...") { ellipsis.len() } else { 0 };
            labels(node, r, rank)?
        }
        None => {
            // Implicit: `...` first, then the letters that appear once, alphabetically.
            let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
            inputs
                .iter()
                .flatten()
                .filter(|&&l| l < 1000)
                .for_each(|&l| *counts.entry(l).or_default() += 1);
            ellipsis
                .iter()
                .copied()
                .chain(counts.into_iter().filter(|(_, n)| *n == 1).map(|(l, _)| l))
                .collect()
        }
    };
    let wires = (0..values.len()).map(|i| ctx.wire(node, i)).collect::<OnnxResult<Vec<_>>>()?;
    one(ctx.emit_value(&node.name, Op::Einsum(Einsum { inputs, output }), &wires)?)
}
