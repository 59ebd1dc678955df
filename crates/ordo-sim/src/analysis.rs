//! What the report derives from the simulated timeline: utilisation, lower bound, critical
//! path.

use std::collections::BTreeMap;
use std::collections::VecDeque;

use ordo_sched::Plan;

use crate::index::{Csr, Index, Need};
use crate::{BusyFraction, LinkBusy, Report, TaskTiming};

pub(crate) fn report(
    plan: &Plan,
    ix: &Index,
    start: &[f64],
    finish: &[f64],
    pred: &[Option<u32>],
    peak_memory_bytes: Vec<u64>,
    memory_timeline: Vec<Vec<(f64, u64)>>,
) -> Report {
    let step_time_us = finish.iter().copied().fold(0.0, f64::max);
    let tasks = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(t, task)| TaskTiming {
            name: task.name.clone(),
            start_us: start[t],
            finish_us: finish[t],
        })
        .collect();
    Report {
        step_time_us,
        lower_bound_us: lower_bound(plan),
        peak_memory_bytes,
        busy_fraction: busy(plan, ix, start, finish, step_time_us),
        tasks,
        memory_timeline,
        critical_path: critical_path(plan, finish, pred),
    }
}

/// `max(longest chain of durations along stream order and events, compute work / devices)`,
/// where compute work is `duration * occupancy` summed over compute tasks: the device time
/// they use, which no device can deliver faster than one unit per unit of time however its
/// kernels overlap. Tasks on a cycle are left out of the chain.
pub(crate) fn lower_bound(plan: &Plan) -> f64 {
    let n = plan.tasks.len();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for stream in &plan.streams {
        edges.extend(stream.tasks.windows(2).map(|w| (w[0].0, w[1].0)));
    }
    for (t, task) in plan.tasks.iter().enumerate() {
        for e in &task.waits {
            if let Some(event) = plan.events.get(e.0 as usize) {
                edges.push((event.after.0, t as u32));
            }
        }
    }
    edges.retain(|&(a, b)| (a as usize) < n && (b as usize) < n);
    let mut indegree = vec![0u32; n];
    for &(_, b) in &edges {
        indegree[b as usize] += 1;
    }
    let succ = Csr::from_pairs(n, &edges);
    let duration = |t: usize| plan.tasks[t].duration_us as f64;
    let mut earliest = vec![0.0f64; n];
    let mut queue: VecDeque<usize> = (0..n).filter(|&t| indegree[t] == 0).collect();
    let mut chain = 0.0f64;
    while let Some(t) = queue.pop_front() {
        let end = earliest[t] + duration(t);
        chain = chain.max(end);
        for &s in succ.get(t) {
            let s = s as usize;
            earliest[s] = earliest[s].max(end);
            indegree[s] -= 1;
            if indegree[s] == 0 {
                queue.push_back(s);
            }
        }
    }
    let work: f64 = plan
        .tasks
        .iter()
        .filter(|t| matches!(t.kind, ordo_sched::TaskKind::Compute { .. }))
        .map(|t| t.duration_us as f64 * t.occupancy)
        .sum();
    chain.max(work / plan.devices.max(1) as f64)
}

/// Length of the union of intervals.
fn covered(mut spans: Vec<(f64, f64)>) -> f64 {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (s, e) in spans {
        match current {
            Some((cs, ce)) if s <= ce => current = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                current = Some((s, e));
            }
            None => current = Some((s, e)),
        }
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

fn busy(plan: &Plan, ix: &Index, start: &[f64], finish: &[f64], step: f64) -> BusyFraction {
    let mut devices: Vec<Vec<(f64, f64)>> = vec![Vec::new(); plan.devices];
    let mut links: BTreeMap<(usize, usize), Vec<(f64, f64)>> = BTreeMap::new();
    let mut collectives = Vec::new();
    for (t, need) in ix.need.iter().enumerate() {
        let span = (start[t], finish[t]);
        match *need {
            Need::Compute(d) => devices[d].push(span),
            Need::Transfer { from, to } => links.entry((from, to)).or_default().push(span),
            Need::Collective => collectives.push(span),
        }
    }
    let fraction = |spans| if step > 0.0 { covered(spans) / step } else { 0.0 };
    BusyFraction {
        devices: devices.into_iter().map(fraction).collect(),
        links: links
            .into_iter()
            .map(|((from, to), spans)| LinkBusy { from, to, fraction: fraction(spans) })
            .collect(),
        collectives: fraction(collectives),
    }
}

/// From the last task to finish (the lowest id among ties) back through the recorded
/// predecessors.
fn critical_path(plan: &Plan, finish: &[f64], pred: &[Option<u32>]) -> Vec<String> {
    let Some(last) = (0..finish.len()).reduce(|a, b| if finish[b] > finish[a] { b } else { a })
    else {
        return Vec::new();
    };
    let mut path = vec![last];
    let mut t = last;
    // A predecessor's first `duration` ends before its successor's last `duration` begins (a
    // Baechi-TF transfer's predecessor can be one whose send, not whole transfer, held the
    // channel), so the walk cannot revisit a task that takes time; the bound is a guard.
    while let Some(p) = pred[t]
        && path.len() <= finish.len()
    {
        t = p as usize;
        path.push(t);
    }
    path.iter().rev().map(|&t| plan.tasks[t].name.clone()).collect()
}
