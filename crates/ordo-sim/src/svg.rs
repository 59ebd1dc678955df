//! SVG charts, written as text: a Gantt chart of the streams and memory over time.

use std::fmt::Write;

use ordo_sched::{Plan, StreamKind};

use crate::Report;
use crate::trace::stream_label;

const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;
/// Room above the rows for the title and the legend.
const TOP: f64 = 48.0;
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

/// The colour of each kind of stream, and the legend's name for it.
const KINDS: [(&str, &str); 4] = [
    ("#4e79a7", "compute"),
    ("#59a14f", "sub-stream compute (deferred dW)"),
    ("#f28e2b", "transfer (tx and rx)"),
    ("#b07aa1", "collective (all-reduce)"),
];

fn color(kind: StreamKind) -> &'static str {
    match kind {
        StreamKind::Compute => KINDS[0].0,
        StreamKind::SubCompute => KINDS[1].0,
        StreamKind::Tx { .. } | StreamKind::Rx { .. } => KINDS[2].0,
        StreamKind::Collective => KINDS[3].0,
    }
}

/// A Gantt chart: `title` with the step time and its lower bound above a legend of the kinds
/// of stream the plan has, then one row per stream, grouped by device, a `<rect>` per task on
/// each of its streams (a transfer appears on its tx and its rx row) with the task's name and
/// times in a `<title>` tooltip (shown on hover) and its index in `data-task`.
pub fn gantt_svg(plan: &Plan, report: &Report, title: &str) -> String {
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
    let bound = if report.lower_bound_us > 0.0 {
        format!(", lower bound {:.3} ms", report.lower_bound_us / 1000.0)
    } else {
        String::new()
    };
    let _ = write!(
        svg,
        r#"<text x="4" y="16" font-size="13" font-weight="bold">{}: step {:.3} ms{bound}</text>"#,
        escape(title),
        step / 1000.0
    );
    let mut legend_x = LEFT;
    for (fill, name) in KINDS {
        if !plan.streams.iter().any(|stream| color(stream.kind) == fill) {
            continue;
        }
        let _ = write!(
            svg,
            r#"<rect x="{legend_x:.2}" y="26" width="12" height="10" fill="{fill}"/><text x="{:.2}" y="35">{name}</text>"#,
            legend_x + 16.0
        );
        legend_x += 16.0 + 6.5 * name.len() as f64 + 18.0;
    }
    let _ = write!(
        svg,
        r##"<text x="{legend_x:.2}" y="35" fill="#666">(hover a task for its name)</text>"##
    );
    svg.push_str(&labels);
    time_axis(&mut svg, step, TOP, bottom, x);
    for (t, task) in plan.tasks.iter().enumerate() {
        let Some(timing) = report.tasks.get(t) else { continue };
        for s in &task.streams {
            let Some(stream) = plan.streams.get(s.0 as usize) else { continue };
            let color = color(stream.kind);
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
/// 1 GiB peak on), with the device's memory `limit` as a dashed line (in the title instead
/// when it is more than twice the peak, which would flatten the line; `None` or `u64::MAX`:
/// unlimited). `None` if the report has no such device.
pub fn memory_svg(report: &Report, device: usize, limit: Option<u64>) -> Option<String> {
    let timeline = report.memory_timeline.get(device)?;
    let peak = report.peak_memory_bytes.get(device).copied().unwrap_or(0);
    let limit = limit.filter(|&l| l != u64::MAX);
    let drawn_limit = limit.filter(|&l| (l as f64) <= 2.0 * peak.max(1) as f64);
    let scale_to = drawn_limit.map_or(peak, |l| l.max(peak));
    let (unit, name) =
        if peak >= 1 << 30 { ((1u64 << 30) as f64, "GiB") } else { ((1u64 << 20) as f64, "MiB") };
    let (left, top, plot_w, plot_h) = (80.0, 30.0, 700.0, 260.0);
    let bottom = top + plot_h;
    let step = report.step_time_us;
    let top_value = (scale_to as f64 / unit).max(f64::MIN_POSITIVE);
    let tick = tick_step(top_value, 5.0);
    let y_max = ((top_value / tick).ceil() * tick).max(tick);
    let x = |us: f64| left + if step > 0.0 { us / step * plot_w } else { 0.0 };
    let y = |bytes: u64| bottom - bytes as f64 / unit / y_max * plot_h;
    let (width, height) = (left + plot_w + 20.0, bottom + 50.0);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let limit_text = match limit {
        Some(l) if l >= 1 << 30 => format!(", limit {:.3} GiB", l as f64 / (1u64 << 30) as f64),
        Some(l) => format!(", limit {:.3} MiB", l as f64 / (1u64 << 20) as f64),
        None => ", no memory limit".to_string(),
    };
    let _ = write!(
        svg,
        r#"<text x="{left}" y="18" font-weight="bold">device {device}: peak {:.3} {name}{limit_text}</text>"#,
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
    if let Some(l) = drawn_limit {
        let py = y(l);
        let _ = write!(
            svg,
            r##"<line x1="{left}" y1="{py:.2}" x2="{:.2}" y2="{py:.2}" stroke="black" stroke-dasharray="6 4"/><text x="{:.2}" y="{:.2}" text-anchor="end">memory limit</text>"##,
            left + plot_w,
            left + plot_w - 4.0,
            py - 4.0
        );
    }
    let _ = write!(
        svg,
        r#"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    svg.push_str("</svg>\n");
    Some(svg)
}

/// One bar group of [`compare_svg`]: an alternative, its step time and its peak memory (the
/// largest device's), or why it has none.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareBar {
    /// The alternative's name, e.g. `m-etf`.
    pub name: String,
    /// Its step time in µs and largest peak memory in bytes, or why it has none.
    pub result: Result<(f64, u64), String>,
}

/// A self-contained SVG comparing alternatives: `title`, then two bar charts side by side, step
/// time (with `lower_bound_us` as a dashed line when positive) and peak memory (with
/// `memory_limit` as a dashed line when finite), one bar per alternative with its value
/// printed beside it and in a hover `<title>`; an alternative without a result shows its
/// reason instead of bars.
pub fn compare_svg(
    title: &str,
    bars: &[CompareBar],
    lower_bound_us: f64,
    memory_limit: Option<u64>,
) -> String {
    let (label_w, panel_w, gap, row, top) = (140.0, 330.0, 40.0, 22.0, 60.0);
    let height = top + row * bars.len() as f64 + 40.0;
    let width = label_w + 2.0 * panel_w + gap + 90.0;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="4" y="16" font-size="13" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let ok: Vec<(f64, u64)> = bars.iter().filter_map(|b| b.result.as_ref().ok().copied()).collect();
    let limit = memory_limit.filter(|&l| l != u64::MAX);
    let max_ms = ok.iter().map(|r| r.0 / 1000.0).fold(lower_bound_us / 1000.0, f64::max);
    let max_bytes = ok.iter().map(|r| r.1).max().unwrap_or(0).max(limit.unwrap_or(0)).max(1) as f64;
    let (unit, unit_name) = if max_bytes >= (1u64 << 30) as f64 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    };
    let panels = [
        (label_w, "step time (ms)", max_ms.max(f64::MIN_POSITIVE), "#4e79a7"),
        (label_w + panel_w + gap, "peak memory, largest device", max_bytes, "#e15759"),
    ];
    for (x0, name, _, _) in panels {
        let _ = write!(
            svg,
            r#"<text x="{x0:.2}" y="{:.2}" font-weight="bold">{name}</text>"#,
            top - 12.0
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let y = top + row * i as f64;
        let _ = write!(
            svg,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y + 14.0,
            escape(&bar.name)
        );
        match &bar.result {
            Ok((step_us, peak)) => {
                let values = [
                    (step_us / 1000.0, format!("{:.2} ms", step_us / 1000.0)),
                    (*peak as f64, format!("{:.2} {unit_name}", *peak as f64 / unit)),
                ];
                for ((x0, _, max, color), (value, text)) in panels.iter().zip(values) {
                    let w = (value / max * panel_w).clamp(0.5, panel_w);
                    let _ = write!(
                        svg,
                        r#"<rect x="{x0:.2}" y="{:.2}" width="{w:.2}" height="{:.2}" fill="{color}"><title>{}: {text}</title></rect><text x="{:.2}" y="{:.2}">{text}</text>"#,
                        y + 3.0,
                        row - 6.0,
                        escape(&bar.name),
                        x0 + w + 4.0,
                        y + 14.0
                    );
                }
            }
            Err(reason) => {
                let mut shown: String = reason.chars().take(90).collect();
                if reason.chars().count() > 90 {
                    shown.push('…');
                }
                let _ = write!(
                    svg,
                    r##"<text x="{label_w:.2}" y="{:.2}" fill="#888">no result: {}<title>{}</title></text>"##,
                    y + 14.0,
                    escape(&shown),
                    escape(reason)
                );
            }
        }
    }
    let bottom = top + row * bars.len() as f64;
    let marks = [
        (panels[0], (lower_bound_us > 0.0).then_some(lower_bound_us / 1000.0), "lower bound"),
        (panels[1], limit.map(|l| l as f64), "memory limit"),
    ];
    for ((x0, _, max, _), value, name) in marks {
        let Some(value) = value else { continue };
        let px = x0 + (value / max * panel_w).min(panel_w);
        let _ = write!(
            svg,
            r##"<line x1="{px:.2}" y1="{:.2}" x2="{px:.2}" y2="{bottom:.2}" stroke="black" stroke-dasharray="5 3"/><text x="{px:.2}" y="{:.2}" text-anchor="middle">{name}</text>"##,
            top - 4.0,
            bottom + 14.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}
