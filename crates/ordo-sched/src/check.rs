//! Checking a plan against the graph it claims to run.

use std::collections::HashMap;

use ordo_problem::PlaceProblem;

use crate::error::SchedError;
use crate::plan::{Plan, TaskKind};

/// Checks that `plan` runs `problem`'s graph on at most its devices: every compute task names a
/// node of the graph, and every node has exactly one compute task. (Whether the plan itself is
/// well formed is [`crate::validate`]'s job.) Time `O(tasks + nodes)`.
///
/// # Errors
/// [`SchedError::Mismatch`] naming the first unknown node (with its task), the first node run
/// twice, or the first node the plan leaves out (and how many), or a plan with more devices
/// than the problem.
pub fn check_against(plan: &Plan, problem: &PlaceProblem) -> Result<(), SchedError> {
    let mismatch = |message: String| Err(SchedError::Mismatch(message));
    let devices = problem.devices.count();
    if plan.devices > devices {
        return mismatch(format!(
            "the plan uses {} devices, the graph has {devices}",
            plan.devices
        ));
    }
    let index: HashMap<&str, usize> =
        problem.names.iter().enumerate().map(|(v, name)| (name.as_str(), v)).collect();
    let mut run_by: Vec<Option<&str>> = vec![None; problem.len()];
    for task in &plan.tasks {
        let TaskKind::Compute { node, .. } = &task.kind else { continue };
        let Some(&v) = index.get(node.as_str()) else {
            return mismatch(format!(
                "task `{}` runs node `{node}`, which is not in the graph",
                task.name
            ));
        };
        if let Some(other) = run_by[v] {
            return mismatch(format!(
                "node `{node}` is run by tasks `{other}` and `{}`",
                task.name
            ));
        }
        run_by[v] = Some(&task.name);
    }
    let missing: Vec<usize> = (0..problem.len()).filter(|&v| run_by[v].is_none()).collect();
    if let Some(&first) = missing.first() {
        return mismatch(format!(
            "{} of the graph's {} nodes have no task, the first `{}`",
            missing.len(),
            problem.len(),
            problem.names[first]
        ));
    }
    Ok(())
}
