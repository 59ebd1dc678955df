//! The units a pipeline allocates to stages: a model's repeated blocks, found by name.

use std::collections::HashMap;

use ordo_problem::PlaceProblem;

use crate::error::SchedError;

/// A training graph cut into the units a pipeline allocates (see [`pipeline_units`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineUnits {
    /// Each unit's name: its block's name prefix (`encoder.layer.3`), or a node's name when
    /// the model has no numbered blocks.
    pub names: Vec<String>,
    /// Each node's unit.
    pub unit_of: Vec<usize>,
}

impl PipelineUnits {
    /// Number of units.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none (a problem without nodes).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Per unit, the summed weights of its nodes (forward, backward and update work of one
    /// micro-batch), in µs.
    pub fn costs(&self, problem: &PlaceProblem) -> Vec<u64> {
        let mut cost = vec![0u64; self.len()];
        for (v, &u) in self.unit_of.iter().enumerate() {
            cost[u] = cost[u].saturating_add(problem.weights[v]);
        }
        cost
    }
}

/// The block a node's name belongs to: the name up to and including its first purely numeric
/// component, components separated by `.` or `/` (`encoder.layer.3.output.dense` ->
/// `encoder.layer.3`, `layer2.1.conv1` -> `layer2.1`, `h.11.mlp` -> `h.11`).
pub fn block_of(name: &str) -> Option<&str> {
    let mut start = 0;
    for (i, c) in name.char_indices().chain(std::iter::once((name.len(), '.'))) {
        if c == '.' || c == '/' {
            let part = &name[start..i];
            if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                return Some(&name[..i]);
            }
            start = i + 1;
        }
    }
    None
}

/// The order in which nodes were built when it is topological (a training graph's), else
/// Baechi's topological order: position of each node.
pub(crate) fn build_rank(problem: &PlaceProblem) -> Vec<usize> {
    let forward = problem.edges.iter().all(|e| e.source < e.target);
    if forward { (0..problem.len()).collect() } else { problem.topo_rank.clone() }
}

/// The units of a training-graph problem, the model's repeated blocks:
///
/// * forward nodes, in build order, go to their [block](block_of) (`encoder.layer.{i}` for
///   BERT, `h.{i}` for GPT-2, `layer{k}.{j}` for ResNet), units numbered in order of first
///   appearance; a forward node without a block joins the unit of the latest block seen, or
///   the first unit before any block (so embeddings join the first block, and a pooler, a
///   head and the loss the last one);
/// * a forward node never goes to an earlier unit than a forward node it reads, so that
///   forward data only flows to the same or later units (a stage never waits for a later one);
/// * without any numbered block, each forward node is a unit of its own;
/// * backward and update nodes go to their forward node's unit ([`PlaceProblem::layer_of`]);
///   one without a layer goes to the last unit.
///
/// Empty units are dropped and the rest renumbered in order.
pub fn pipeline_units(problem: &PlaceProblem) -> PipelineUnits {
    let rank = build_rank(problem);
    let mut order: Vec<usize> = (0..problem.len()).collect();
    order.sort_by_key(|&v| rank[v]);
    let forward: Vec<usize> =
        order.into_iter().filter(|&v| problem.roles[v] == ordo_ir::Role::Forward).collect();
    let has_blocks = forward.iter().any(|&v| block_of(&problem.names[v]).is_some());
    let mut keys: HashMap<&str, usize> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut unit_of: Vec<Option<usize>> = vec![None; problem.len()];
    let mut latest = 0;
    for (i, &v) in forward.iter().enumerate() {
        let name = problem.names[v].as_str();
        let own = if has_blocks {
            block_of(name).map(|block| {
                *keys.entry(block).or_insert_with(|| {
                    names.push(block.to_string());
                    names.len() - 1
                })
            })
        } else {
            names.push(name.to_string());
            Some(i)
        };
        let inputs = problem.in_edges[v].iter().filter_map(|&e| unit_of[problem.edges[e].source]);
        let unit = inputs.fold(own.unwrap_or(latest), usize::max);
        unit_of[v] = Some(unit);
        latest = latest.max(unit);
    }
    let last = names.len().saturating_sub(1);
    for v in 0..problem.len() {
        if unit_of[v].is_none() {
            unit_of[v] = Some(problem.layer_of[v].and_then(|l| unit_of[l]).unwrap_or(last));
        }
    }
    // Drop empty units.
    let mut used = vec![false; names.len().max(1)];
    for u in unit_of.iter().flatten() {
        used[*u] = true;
    }
    let mut renumber = vec![0; used.len()];
    let mut kept = Vec::new();
    for (u, &is_used) in used.iter().enumerate() {
        renumber[u] = kept.len();
        if is_used {
            kept.push(names.get(u).cloned().unwrap_or_default());
        }
    }
    let unit_of = unit_of.into_iter().map(|u| renumber[u.unwrap_or(0)]).collect();
    PipelineUnits { names: kept, unit_of }
}

/// Checks that `units` units can fill `stages` stages.
///
/// # Errors
/// [`SchedError::Pipeline`] for zero stages or fewer units than stages.
pub(crate) fn check_unit_count(units: usize, stages: usize) -> Result<(), SchedError> {
    if stages == 0 {
        return Err(SchedError::Pipeline("zero stages".into()));
    }
    if units < stages {
        return Err(SchedError::Pipeline(format!(
            "{stages} stages but the model has only {units} units (repeated blocks) to give them"
        )));
    }
    Ok(())
}

/// Splits units with costs `cost` into `stages` contiguous, non-empty runs that minimise the
/// cost of the most expensive run (exact, by dynamic programming): the first unit of each
/// stage, then `cost.len()`.
///
/// # Errors
/// [`SchedError::Pipeline`] when there are fewer units than stages or no stage.
pub fn balanced_split(cost: &[u64], stages: usize) -> Result<Vec<usize>, SchedError> {
    let units = cost.len();
    check_unit_count(units, stages)?;
    let mut prefix = vec![0u64; units + 1];
    for (i, &c) in cost.iter().enumerate() {
        prefix[i + 1] = prefix[i].saturating_add(c);
    }
    // best[k][i]: the cheapest most expensive run when the first i units make k runs.
    let mut best = vec![vec![u64::MAX; units + 1]; stages + 1];
    let mut cut = vec![vec![0usize; units + 1]; stages + 1];
    best[0][0] = 0;
    for k in 1..=stages {
        for i in k..=units {
            for j in (k - 1)..i {
                if best[k - 1][j] == u64::MAX {
                    continue;
                }
                let worst = best[k - 1][j].max(prefix[i] - prefix[j]);
                if worst < best[k][i] {
                    best[k][i] = worst;
                    cut[k][i] = j;
                }
            }
        }
    }
    let mut bounds = vec![units];
    let mut i = units;
    for k in (1..=stages).rev() {
        i = cut[k][i];
        bounds.push(i);
    }
    bounds.reverse();
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_ends_at_the_first_numeric_component() {
        assert_eq!(block_of("encoder.layer.3.output.dense"), Some("encoder.layer.3"));
        assert_eq!(block_of("layer2.1.conv1"), Some("layer2.1"));
        assert_eq!(block_of("h.11"), Some("h.11"));
        assert_eq!(block_of("decoder/0/attn"), Some("decoder/0"));
        assert_eq!(block_of("layer2.conv1"), None);
        assert_eq!(block_of("embeddings.LayerNorm"), None);
        assert_eq!(block_of(""), None);
    }

    #[test]
    fn balanced_split_minimises_the_most_expensive_stage() {
        assert_eq!(balanced_split(&[5, 1, 1, 1, 1, 1], 2).unwrap(), [0, 1, 6]);
        assert_eq!(balanced_split(&[1, 1, 1, 1], 4).unwrap(), [0, 1, 2, 3, 4]);
        assert_eq!(balanced_split(&[2, 2, 2, 2, 9], 2).unwrap(), [0, 4, 5]);
        assert_eq!(balanced_split(&[3], 1).unwrap(), [0, 1]);
        let err = balanced_split(&[1, 1], 3).unwrap_err().to_string();
        assert!(err.contains("3 stages but the model has only 2 units"), "{err}");
        assert!(balanced_split(&[1], 0).is_err());
    }
}
