//! The dependency graph of a plan's tasks, as a simulator or a runtime sees it.

use crate::error::SchedError;
use crate::plan::{Plan, TaskId};

/// The predecessors of every task: index `i` lists the tasks that must finish before task `i`
/// may start, namely the previous task on each of its streams and the `after` task of every
/// event it waits for. Each list is sorted by id, without repeats.
///
/// A transfer is on two streams, so it has up to two stream predecessors; it starts only when
/// it is first in both queues. Out-of-range ids (in a plan that does not validate) are
/// skipped, so this never panics; a task listed twice in a stream, or waiting for its own
/// event, shows up as a cycle. Time `O(tasks + stream entries + waits)`.
pub fn task_graph(plan: &Plan) -> Vec<Vec<TaskId>> {
    let n = plan.tasks.len();
    let known = |t: TaskId| (t.0 as usize) < n;
    let mut preds = vec![Vec::new(); n];
    for stream in &plan.streams {
        for pair in stream.tasks.windows(2) {
            if known(pair[0]) && known(pair[1]) {
                preds[pair[1].0 as usize].push(pair[0]);
            }
        }
    }
    for (i, task) in plan.tasks.iter().enumerate() {
        for wait in &task.waits {
            if let Some(event) = plan.events.get(wait.0 as usize)
                && known(event.after)
            {
                preds[i].push(event.after);
            }
        }
    }
    for list in &mut preds {
        list.sort_unstable();
        list.dedup();
    }
    preds
}

/// A topological order of the tasks of [`task_graph`]: an order in which a single thread could
/// run the whole plan. Kahn's algorithm with a FIFO queue that starts with the tasks without
/// predecessors in id order, so the order is deterministic.
///
/// # Errors
/// [`SchedError::Cycle`] with the task names of one cycle when there is none.
pub fn task_order(plan: &Plan) -> Result<Vec<TaskId>, SchedError> {
    let preds = task_graph(plan);
    let (order, stuck) = kahn(&preds);
    match stuck {
        None => Ok(order),
        Some(start) => {
            let tasks = cycle_from(&preds, &order, start)
                .into_iter()
                .map(|t| plan.tasks[t].name.clone())
                .collect();
            Err(SchedError::Cycle { tasks })
        }
    }
}

/// Kahn's algorithm over predecessor lists ([`ordo_ir::kahn_order`]): the order of the tasks
/// it could run, and a task it could not when there is a cycle.
fn kahn(preds: &[Vec<TaskId>]) -> (Vec<TaskId>, Option<usize>) {
    let mut succs = vec![Vec::new(); preds.len()];
    for (i, list) in preds.iter().enumerate() {
        for p in list {
            succs[p.0 as usize].push(i);
        }
    }
    let kahn = ordo_ir::kahn_order(preds.len(), |v| succs[v].iter().copied());
    let stuck = kahn.left_over();
    (kahn.order.into_iter().map(task_id).collect(), stuck)
}

/// One cycle through tasks that Kahn's algorithm left over, starting from `start`, in
/// dependency order and rotated to begin at its smallest id. Every left-over task has a
/// left-over predecessor, so walking predecessors from `start` must close a loop within
/// `preds.len()` steps.
fn cycle_from(preds: &[Vec<TaskId>], ran: &[TaskId], start: usize) -> Vec<usize> {
    let mut done = vec![false; preds.len()];
    for t in ran {
        done[t.0 as usize] = true;
    }
    let mut seen_at: Vec<Option<usize>> = vec![None; preds.len()];
    let mut path = Vec::new();
    let mut at = start;
    while seen_at[at].is_none() {
        seen_at[at] = Some(path.len());
        path.push(at);
        match preds[at].iter().map(|p| p.0 as usize).find(|&p| !done[p]) {
            Some(p) => at = p,
            None => return path, // unreachable for Kahn's leftovers; never loop or panic
        }
    }
    let mut cycle = path.split_off(seen_at[at].unwrap_or(0));
    cycle.reverse();
    if let Some(min) = (0..cycle.len()).min_by_key(|&i| cycle[i]) {
        cycle.rotate_left(min);
    }
    cycle
}

fn task_id(i: usize) -> TaskId {
    TaskId(i as u32)
}
