//! Devices that share one host: CPU devices (threads of one machine) slow each other down.
//!
//! Two kernels running at once on one machine each run slower than alone: they share caches
//! and memory bandwidth, and on a virtual machine two cores can be the two hyper-threads of one
//! physical core. The profiler measures the factor for a model (a step of two copies at once
//! over a step alone). [`simulate_on_host`] charges it for the time a task overlaps work of
//! another device: it simulates the plan, stretches each task by `1 + (slowdown - 1) x` the
//! share of its time that another device was busy, and simulates again (one correction: the
//! stretched schedule overlaps a little differently, which a second pass would chase).

use ordo_sched::{Plan, TaskKind};

use crate::{Report, SimError, SimOptions, simulate};

/// Simulates `plan` as [`simulate`] does, with work on different devices slowed by
/// `slowdown` (at least 1) while it overlaps: simulated once, each kernel or copy stretched by
/// `1 + (slowdown - 1) x` the share of its time that another device was busy, simulated again.
/// One device, or a slowdown that is not a finite number above 1, changes nothing.
///
/// # Errors
/// The simulator's.
pub fn simulate_on_host(
    plan: &Plan,
    options: &SimOptions,
    slowdown: f64,
) -> Result<Report, SimError> {
    let report = simulate(plan, options)?;
    if plan.devices < 2 || !slowdown.is_finite() || slowdown <= 1.0 {
        return Ok(report);
    }
    let shares = overlap_shares(plan, &report);
    let mut stretched = plan.clone();
    for (task, share) in stretched.tasks.iter_mut().zip(shares) {
        let factor = 1.0 + (slowdown - 1.0) * share;
        task.duration_us = (task.duration_us as f64 * factor).round() as u64;
    }
    simulate(&stretched, options)
}

/// Whether a task is work that holds its host: a kernel or a copy (a collective waits more
/// than it computes).
fn is_work(kind: &TaskKind) -> bool {
    matches!(kind, TaskKind::Compute { .. } | TaskKind::Transfer { .. })
}

/// Per task, the share of its simulated time during which another device did work (0 for
/// tasks that are not work, or take no time).
fn overlap_shares(plan: &Plan, report: &Report) -> Vec<f64> {
    let device_of = |t: usize| {
        plan.tasks[t].streams.first().and_then(|s| plan.streams.get(s.0 as usize)).map(|s| s.device)
    };
    // Each device's work as intervals, sorted.
    let mut busy: Vec<Vec<(f64, f64)>> = vec![Vec::new(); plan.devices];
    for (t, task) in plan.tasks.iter().enumerate() {
        if let (true, Some(d), Some(timing)) =
            (is_work(&task.kind), device_of(t), report.tasks.get(t))
            && d < plan.devices
            && timing.finish_us > timing.start_us
        {
            busy[d].push((timing.start_us, timing.finish_us));
        }
    }
    // For each device, the union of every other device's intervals.
    let others: Vec<Vec<(f64, f64)>> = (0..plan.devices)
        .map(|d| {
            let mut all: Vec<(f64, f64)> = busy
                .iter()
                .enumerate()
                .filter(|&(e, _)| e != d)
                .flat_map(|(_, b)| b.clone())
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut merged: Vec<(f64, f64)> = Vec::with_capacity(all.len());
            for (start, finish) in all {
                match merged.last_mut() {
                    Some(last) if start <= last.1 => last.1 = last.1.max(finish),
                    _ => merged.push((start, finish)),
                }
            }
            merged
        })
        .collect();
    (0..plan.tasks.len())
        .map(|t| {
            let (Some(d), Some(timing)) = (device_of(t), report.tasks.get(t)) else { return 0.0 };
            let (start, finish) = (timing.start_us, timing.finish_us);
            if !is_work(&plan.tasks[t].kind) || d >= plan.devices || finish <= start {
                return 0.0;
            }
            let union = &others[d];
            let first = union.partition_point(|&(_, end)| end <= start);
            let covered: f64 = union[first..]
                .iter()
                .take_while(|&&(begin, _)| begin < finish)
                .map(|&(begin, end)| end.min(finish) - begin.max(start))
                .filter(|&length| length > 0.0)
                .sum();
            (covered / (finish - start)).clamp(0.0, 1.0)
        })
        .collect()
}
