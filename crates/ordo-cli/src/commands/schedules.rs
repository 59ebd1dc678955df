//! `ordo compare MODEL --train --schedules`: one-device training schedules side by side, in
//! their steady state.

use anyhow::Context;
use ordo::SimOptions;
use serde_json::json;

use crate::format::{Table, bytes};
use crate::placing::Loaded;

/// Most values of k (layers deferred) the search simulates.
const MAX_TRIES: usize = 64;
/// Most single-layer flips the layer-by-layer refinement simulates.
const MAX_FLIPS: usize = 256;

/// One compared schedule.
struct Row {
    name: &'static str,
    step_us: f64,
    deferred: Vec<String>,
    peak_bytes: u64,
}

/// Simulates `inorder`, `ooo` (no deferral), `ooo` with the first k layers deferred (k chosen
/// by simulation) and `ooo` with that deferral refined layer by layer, on device 0 of the loaded
/// training graph, and prints steady-state step time, speedup over
/// `inorder`, the deferred layers and peak memory, as a table or as JSON.
pub fn run(loaded: &Loaded, concurrent_kernels: bool, as_json: bool) -> anyhow::Result<()> {
    let problem = loaded.place_problem();
    let options = SimOptions { concurrent_kernels, ..SimOptions::default() };
    let schedules = crate::progress::with_spinner("searching the deferral", |_| {
        ordo::one_device_schedules(&loaded.problem, &options, MAX_TRIES, MAX_FLIPS)
    })
    .with_context(|| format!("simulating the schedules of `{}`", loaded.label))?;
    let ordo::OneDeviceSchedules { inorder, deferred: choice, refined } = schedules;
    let row = |name, steady: ordo::Steady, deferred: &[usize]| Row {
        name,
        step_us: steady.step_time_us,
        deferred: deferred.iter().map(|&v| problem.names[v].clone()).collect(),
        peak_bytes: steady.peak_memory_bytes,
    };
    let rows = [
        row("inorder", inorder, &[]),
        row("ooo", choice.tried[0].1, &[]),
        row("ooo-deferred", choice.steady, &choice.deferred),
        row("ooo-per-layer", refined.steady, &refined.deferred),
    ];
    let inorder = inorder.step_time_us;
    let speedup = |step: f64| if step > 0.0 { inorder / step } else { 1.0 };
    if as_json {
        let schedules: Vec<_> = rows
            .iter()
            .map(|row| {
                json!({
                    "schedule": row.name,
                    "step_time_us": row.step_us,
                    "speedup": speedup(row.step_us),
                    "deferred_layers": row.deferred,
                    "peak_memory_bytes": row.peak_bytes,
                })
            })
            .collect();
        let tried: Vec<_> = choice
            .tried
            .iter()
            .map(|(k, s)| {
                json!({
                    "k": k,
                    "step_time_us": s.step_time_us,
                    "peak_memory_bytes": s.peak_memory_bytes,
                })
            })
            .collect();
        let out = json!({
            "target": loaded.label,
            "concurrent_kernels": concurrent_kernels,
            "schedules": schedules,
            "deferral_search": tried,
        });
        println!("{out:#}");
        return Ok(());
    }
    println!("{} ({} nodes) on one device, steady state", loaded.label, problem.len());
    if !concurrent_kernels {
        println!("one kernel at a time (--concurrent-kernels lets streams share the device)");
    }
    let mut table = Table::new(&["schedule", "step ms", "speedup", "deferred", "peak memory"]);
    for row in &rows {
        let deferred = match row.deferred.as_slice() {
            [] => "-".to_string(),
            [one] => one.clone(),
            [first, ..] => format!("{} layers from {first}", row.deferred.len()),
        };
        table.row(vec![
            row.name.to_string(),
            format!("{:.2}", row.step_us / 1e3),
            format!("{:.3}x", speedup(row.step_us)),
            deferred,
            bytes(row.peak_bytes),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
