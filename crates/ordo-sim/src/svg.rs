//! SVG charts, written as text: a Gantt chart of the streams and memory over time.

use std::fmt::Write;

use ordo_sched::{Plan, StreamKind};

use crate::Report;
use crate::trace::stream_label;

const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const ROW: f64 = 18.0;
const PLOT_WIDTH: f64 = 1000.0;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML cannot hold control characters, not even as references: shown as text.
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            _ => out.push(c),
        }
    }
    out
}

/// A round tick spacing (1, 2 or 5 times a power of ten) giving about `ticks` ticks over
/// `range`.
fn tick_step(range: f64, ticks: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / ticks;
    let power = 10f64.powf(raw.log10().floor());
    let scaled = raw / power;
    power
        * if scaled <= 1.0 {
            1.0
        } else if scaled <= 2.0 {
            2.0
        } else if scaled <= 5.0 {
            5.0
        } else {
            10.0
        }
}

fn format_tick(value: f64) -> String {
    let s = format!("{value:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Vertical grid lines and labels of a time axis in ms from `y0` to `y1`; `x` maps µs to px.
fn time_axis(svg: &mut String, step_us: f64, y0: f64, y1: f64, x: impl Fn(f64) -> f64) {
    let ms = step_us / 1000.0;
    let tick = tick_step(ms, 10.0);
    let mut k = 0.0;
    while k * tick <= ms * (1.0 + 1e-9) && k <= 100.0 {
        let px = x(k * tick * 1000.0);
        let _ = write!(
            svg,
            r##"<line x1="{px:.2}" y1="{y0:.2}" x2="{px:.2}" y2="{y1:.2}" stroke="#ddd"/><text x="{px:.2}" y="{:.2}" text-anchor="middle">{}</text>"##,
            y1 + 14.0,
            format_tick(k * tick)
        );
        k += 1.0;
    }
    let _ = write!(
        svg,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">time (ms)</text>"#,
        x(step_us / 2.0),
        y1 + 30.0
    );
}

/// A Gantt chart: one row per stream, grouped by device, a `<rect>` per task on each of its
/// streams (a transfer appears on its tx and its rx row) with the task's name and times in a
/// `<title>` tooltip and its index in `data-task`.
pub fn gantt_svg(plan: &Plan, report: &Report) -> String {
    let mut order: Vec<usize> = (0..plan.streams.len()).collect();
    order.sort_by_key(|&s| (plan.streams[s].device, s));
    let mut row_y = vec![0.0; plan.streams.len()];
    let mut y = TOP;
    let mut labels = String::new();
    let mut previous_device = None;
    for &s in &order {
        let device = plan.streams[s].device;
        if previous_device != Some(device) {
            y += ROW * 0.5;
            let _ = write!(
                labels,
                r#"<text x="4" y="{:.2}" font-weight="bold">device {device}</text>"#,
                y + 12.0
            );
            y += ROW;
            previous_device = Some(device);
        }
        row_y[s] = y;
        let _ = write!(
            labels,
            r#"<text x="16" y="{:.2}">{}</text>"#,
            y + 13.0,
            escape(&stream_label(plan.streams[s].kind))
        );
        y += ROW;
    }
    let bottom = y + 4.0;
    let height = bottom + 40.0;
    let width = LEFT + PLOT_WIDTH + RIGHT;
    let step = report.step_time_us;
    let x = |us: f64| LEFT + if step > 0.0 { us / step * PLOT_WIDTH } else { 0.0 };
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    svg.push_str(&labels);
    time_axis(&mut svg, step, TOP, bottom, x);
    for (t, task) in plan.tasks.iter().enumerate() {
        let Some(timing) = report.tasks.get(t) else { continue };
        for s in &task.streams {
            let Some(stream) = plan.streams.get(s.0 as usize) else { continue };
            let color = match stream.kind {
                StreamKind::Compute => "#4e79a7",
                StreamKind::SubCompute => "#59a14f",
                StreamKind::Tx { .. } | StreamKind::Rx { .. } => "#f28e2b",
                StreamKind::Collective => "#b07aa1",
            };
            let x0 = x(timing.start_us);
            let w = (x(timing.finish_us) - x0).max(0.5);
            let _ = write!(
                svg,
                r#"<rect x="{x0:.2}" y="{:.2}" width="{w:.2}" height="{:.2}" fill="{color}" stroke="white" stroke-width="0.3" data-task="{t}"><title>{} ({:.3}–{:.3} ms)</title></rect>"#,
                row_y[s.0 as usize] + 2.0,
                ROW - 4.0,
                escape(&task.name),
                timing.start_us / 1000.0,
                timing.finish_us / 1000.0
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Memory over time on `device` as a step line, time in ms and bytes in MiB (GiB from a
/// 1 GiB peak on). `None` if the report has no such device.
pub fn memory_svg(report: &Report, device: usize) -> Option<String> {
    let timeline = report.memory_timeline.get(device)?;
    let peak = report.peak_memory_bytes.get(device).copied().unwrap_or(0);
    let (unit, name) =
        if peak >= 1 << 30 { ((1u64 << 30) as f64, "GiB") } else { ((1u64 << 20) as f64, "MiB") };
    let (left, top, plot_w, plot_h) = (80.0, 30.0, 700.0, 260.0);
    let bottom = top + plot_h;
    let step = report.step_time_us;
    let top_value = (peak as f64 / unit).max(f64::MIN_POSITIVE);
    let tick = tick_step(top_value, 5.0);
    let y_max = ((top_value / tick).ceil() * tick).max(tick);
    let x = |us: f64| left + if step > 0.0 { us / step * plot_w } else { 0.0 };
    let y = |bytes: u64| bottom - bytes as f64 / unit / y_max * plot_h;
    let (width, height) = (left + plot_w + 20.0, bottom + 50.0);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="{left}" y="18" font-weight="bold">device {device}: peak {:.3} {name}</text>"#,
        peak as f64 / unit
    );
    time_axis(&mut svg, step, top, bottom, x);
    let mut k = 0.0;
    while k * tick <= y_max * (1.0 + 1e-9) && k <= 100.0 {
        let py = bottom - k * tick / y_max * plot_h;
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{py:.2}" x2="{:.2}" y2="{py:.2}" stroke="#ddd"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 6.0,
            py + 4.0,
            format_tick(k * tick)
        );
        k += 1.0;
    }
    let _ = write!(
        svg,
        r#"<text transform="translate(16 {:.2}) rotate(-90)" text-anchor="middle">memory ({name})</text>"#,
        top + plot_h / 2.0
    );
    let mut path = String::new();
    for (i, &(t, bytes)) in timeline.iter().enumerate() {
        if i == 0 {
            let _ = write!(path, "M{:.2} {:.2}", x(t), y(bytes));
        } else {
            let _ = write!(path, " H{:.2} V{:.2}", x(t), y(bytes));
        }
    }
    let _ = write!(svg, r##"<path d="{path}" fill="none" stroke="#e15759" stroke-width="1.5"/>"##);
    let _ = write!(
        svg,
        r#"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    svg.push_str("</svg>\n");
    Some(svg)
}
