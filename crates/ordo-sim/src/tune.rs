//! Schedules chosen by the simulator: which layers' weight gradients to defer into the next
//! step's forward pass.

use ordo_problem::PlaceProblem;
use ordo_sched::{
    DataParallel, OneDeviceSchedule, Plan, SchedError, data_parallel_replica_plan, deferral,
    layers_with_weights, steady_plan,
};

use crate::{SimError, SimOptions, simulate};

/// A one-device schedule in its steady state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Steady {
    /// What one more step adds: `makespan(3 steps) - makespan(2 steps)`, so that work carried
    /// from a step into the next is counted once and overlaps as it would in a long run, in µs.
    pub step_time_us: f64,
    /// Peak memory of device 0 over three steps (what a step carries into the next included).
    pub peak_memory_bytes: u64,
}

/// Simulates `schedule` with `deferred` layers ([`steady_plan`]) in its steady state.
///
/// # Errors
/// [`SimError::InvalidPlan`] with the scheduler's message when the plan cannot be built; the
/// simulator's errors.
pub fn steady_state(
    problem: &PlaceProblem,
    schedule: OneDeviceSchedule,
    deferred: &[bool],
    options: &SimOptions,
) -> Result<Steady, SimError> {
    steady_of(|steps| steady_plan(problem, schedule, deferred, steps), options)
}

/// Simulates the data-parallel schedule `config` in its steady state, by symmetry: one replica
/// with the collectives' durations of all ([`data_parallel_replica_plan`]), so that time and
/// memory do not grow with the replicas; the peak memory is each replica's.
///
/// # Errors
/// As [`steady_state`].
pub fn data_parallel_steady(
    problem: &PlaceProblem,
    config: &DataParallel,
    options: &SimOptions,
) -> Result<Steady, SimError> {
    steady_of(|steps| data_parallel_replica_plan(problem, config, steps), options)
}

/// The steady state of the plans `plan(steps)`: `makespan(3) - makespan(2)`.
fn steady_of(
    plan: impl Fn(usize) -> Result<Plan, SchedError>,
    options: &SimOptions,
) -> Result<Steady, SimError> {
    let run = |steps: usize| {
        let plan = plan(steps).map_err(|e| SimError::InvalidPlan(e.to_string()))?;
        simulate(&plan, options)
    };
    let (two, three) = (run(2)?, run(3)?);
    Ok(Steady {
        step_time_us: three.step_time_us - two.step_time_us,
        peak_memory_bytes: three.peak_memory_bytes.first().copied().unwrap_or(0),
    })
}

/// The deferral a schedule chose (one-device out-of-order backprop, or data-parallel reverse
/// first-k), and what the others would have cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Deferral {
    /// Forward layers (node indices) whose weight-gradient work is deferred, in forward order.
    pub deferred: Vec<usize>,
    /// The steady state with that deferral.
    pub steady: Steady,
    /// The steady state for every `k` tried (the first `k` layers deferred).
    pub tried: Vec<(usize, Steady)>,
}

/// Out-of-order backprop on one device with the deferral chosen by simulation: for each `k`
/// tried, the weight-gradient work of the first `k` layers (in forward order) runs in the next
/// step's forward pass (reverse first-k on one device). The fastest steady state whose peak
/// fits device 0's memory wins, the smallest `k` among equals. At most `max_tries` values of
/// `k`, evenly spaced from 0 to all layers, are simulated.
///
/// # Errors
/// [`SimError::InvalidPlan`] when even `k = 0` does not fit in memory; those of
/// [`steady_state`].
pub fn choose_deferral(
    problem: &PlaceProblem,
    options: &SimOptions,
    max_tries: usize,
) -> Result<Deferral, SimError> {
    let layers = layers_with_weights(problem);
    search_k(problem, max_tries, |k| {
        steady_state(problem, OneDeviceSchedule::Ooo, &deferral(problem, &layers[..k]), options)
    })
}

/// Reverse first-k for data-parallel training with `k` chosen by simulation: for each `k`
/// tried, [`data_parallel_steady`] with `config` and `first_k = k`; the fastest steady state
/// whose peak fits device 0's memory wins, the smallest `k` among equals. At most `max_tries`
/// values of `k`, evenly spaced from 0 to all layers with weights, are simulated.
///
/// # Errors
/// [`SimError::InvalidPlan`] when even `k = 0` does not fit in memory; those of
/// [`data_parallel_steady`].
pub fn choose_first_k(
    problem: &PlaceProblem,
    config: &DataParallel,
    options: &SimOptions,
    max_tries: usize,
) -> Result<Deferral, SimError> {
    search_k(problem, max_tries, |k| {
        data_parallel_steady(problem, &DataParallel { first_k: k, ..*config }, options)
    })
}

/// Evaluates up to `max_tries` values of `k` evenly spaced over `0..=layers with weights` and
/// returns the fastest that fits device 0's memory (smallest `k` among equals), with all
/// tried.
fn search_k(
    problem: &PlaceProblem,
    max_tries: usize,
    mut steady: impl FnMut(usize) -> Result<Steady, SimError>,
) -> Result<Deferral, SimError> {
    let layers = layers_with_weights(problem);
    let count = layers.len();
    let tries = max_tries.clamp(1, count + 1);
    let mut ks: Vec<usize> = (0..tries).map(|i| i * count / (tries - 1).max(1)).collect();
    ks.dedup();
    let limit = problem.devices.memory.first().copied().unwrap_or(0);
    let mut tried = Vec::with_capacity(ks.len());
    for &k in &ks {
        tried.push((k, steady(k)?));
    }
    let &(k, best) = tried
        .iter()
        .filter(|(_, s)| s.peak_memory_bytes <= limit)
        .min_by(|a, b| a.1.step_time_us.total_cmp(&b.1.step_time_us).then(a.0.cmp(&b.0)))
        .ok_or_else(|| {
            SimError::InvalidPlan(format!(
                "no schedule fits in device 0's {limit} bytes: even without deferral the \
                 steady state needs {}",
                tried[0].1.peak_memory_bytes
            ))
        })?;
    Ok(Deferral { deferred: layers[..k].to_vec(), steady: best, tried })
}

/// Refines a one-device deferral layer by layer (the original's per-layer "BWD"/"FWD" map,
/// searched instead of written by hand): starting from `start` (e.g. [`choose_deferral`]'s),
/// each layer with weights in forward order has its deferral flipped, and the flip is kept
/// when the steady state gets faster and still fits device 0's memory. Stops after
/// `max_evaluations` simulations of a flip. The result is never slower than `start`.
///
/// # Errors
/// Those of [`steady_state`].
pub fn refine_deferral(
    problem: &PlaceProblem,
    start: &Deferral,
    options: &SimOptions,
    max_evaluations: usize,
) -> Result<Deferral, SimError> {
    let limit = problem.devices.memory.first().copied().unwrap_or(0);
    let mut deferred = deferral(problem, &start.deferred);
    let mut best = start.steady;
    for &layer in layers_with_weights(problem).iter().take(max_evaluations) {
        deferred[layer] = !deferred[layer];
        let steady = steady_state(problem, OneDeviceSchedule::Ooo, &deferred, options)?;
        if steady.step_time_us < best.step_time_us && steady.peak_memory_bytes <= limit {
            best = steady;
        } else {
            deferred[layer] = !deferred[layer];
        }
    }
    let chosen = (0..problem.len()).filter(|&v| deferred[v]).collect();
    Ok(Deferral { deferred: chosen, steady: best, tried: start.tried.clone() })
}
