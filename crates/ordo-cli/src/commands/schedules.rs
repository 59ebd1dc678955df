//! `ordo compare MODEL --train --schedules`: one-device training schedules side by side.

use anyhow::Context;
use ordo_sched::OneDeviceSchedule;
use ordo_sim::SimOptions;
use serde_json::json;

use crate::format::{Table, bytes};
use crate::placing::Loaded;

/// The schedules compared, the baseline first.
const SCHEDULES: [OneDeviceSchedule; 2] = [OneDeviceSchedule::InOrder, OneDeviceSchedule::Ooo];

/// Simulates every one-device schedule of the loaded training graph on its device 0 and prints
/// step time, speedup over `inorder` and peak memory, as a table or as JSON.
pub fn run(loaded: &Loaded, concurrent_kernels: bool, as_json: bool) -> anyhow::Result<()> {
    let options = SimOptions { concurrent_kernels, ..SimOptions::default() };
    let mut reports = Vec::new();
    for schedule in SCHEDULES {
        let plan = ordo_sched::one_device_plan(&loaded.problem, schedule)
            .with_context(|| format!("scheduling `{}` {}", loaded.label, schedule.name()))?;
        let report = ordo_sim::simulate(&plan, &options)
            .with_context(|| format!("simulating `{}` {}", loaded.label, schedule.name()))?;
        reports.push((schedule, report));
    }
    let baseline = reports[0].1.step_time_us;
    let speedup = |step: f64| if step > 0.0 { baseline / step } else { 1.0 };
    if as_json {
        let rows: Vec<_> = reports
            .iter()
            .map(|(schedule, report)| {
                json!({
                    "schedule": schedule.name(),
                    "step_time_us": report.step_time_us,
                    "speedup": speedup(report.step_time_us),
                    "lower_bound_us": report.lower_bound_us,
                    "peak_memory_bytes": report.peak_memory_bytes,
                })
            })
            .collect();
        let out = json!({
            "target": loaded.label,
            "concurrent_kernels": concurrent_kernels,
            "schedules": rows,
        });
        println!("{out:#}");
        return Ok(());
    }
    println!("{} ({} nodes) on one device", loaded.label, loaded.problem.len());
    if !concurrent_kernels {
        println!("one kernel at a time (--concurrent-kernels lets streams share the device)");
    }
    let mut table =
        Table::new(&["schedule", "step ms", "speedup", "lower bound ms", "peak memory"]);
    for (schedule, report) in &reports {
        table.row(vec![
            schedule.name().to_string(),
            format!("{:.2}", report.step_time_us / 1e3),
            format!("{:.3}x", speedup(report.step_time_us)),
            format!("{:.2}", report.lower_bound_us / 1e3),
            bytes(report.peak_memory_bytes.first().copied().unwrap_or(0)),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}
