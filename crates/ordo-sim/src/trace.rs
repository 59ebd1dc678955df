//! Chrome Trace Event JSON, loadable by Perfetto and chrome://tracing.

use ordo_sched::{Plan, StreamKind, TaskKind};
use serde_json::{Value, json};

use crate::Report;

/// A stream's label in pictures: `compute`, `sub-compute`, `tx to 1`, `rx from 0`.
pub(crate) fn stream_label(kind: StreamKind) -> String {
    match kind {
        StreamKind::Compute => "compute".into(),
        StreamKind::SubCompute => "sub-compute".into(),
        StreamKind::Tx { peer } => format!("tx to {peer}"),
        StreamKind::Rx { peer } => format!("rx from {peer}"),
        StreamKind::Collective => "collective".into(),
    }
}

/// The simulated step as a Chrome trace: one process per device (pid = device), one thread
/// per stream (tid = stream index), timestamps in µs.
///
/// Each task is one complete (`"X"`) event on its first stream; a transfer's is on the
/// sender's tx stream, and it is also drawn on the receiver's rx stream as a begin/end
/// (`"B"`/`"E"`) pair, joined to the send by a flow arrow (`"s"` then `"f"`, id = task index).
/// An all-reduce is one complete event on the collective stream of each of its devices.
/// Tasks or streams the report or plan lacks are left out.
pub fn chrome_trace(plan: &Plan, report: &Report) -> Value {
    let mut events = Vec::new();
    for d in 0..plan.devices {
        events.push(json!({"name": "process_name", "ph": "M", "pid": d, "tid": 0,
            "args": {"name": format!("device {d}")}}));
        events.push(json!({"name": "process_sort_index", "ph": "M", "pid": d, "tid": 0,
            "args": {"sort_index": d}}));
    }
    for (s, stream) in plan.streams.iter().enumerate() {
        events.push(json!({"name": "thread_name", "ph": "M", "pid": stream.device, "tid": s,
            "args": {"name": stream_label(stream.kind)}}));
        events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": stream.device,
            "tid": s, "args": {"sort_index": s}}));
    }
    let place = |s: Option<&ordo_sched::StreamId>| {
        s.and_then(|s| plan.streams.get(s.0 as usize).map(|st| (st.device, s.0)))
    };
    for (t, task) in plan.tasks.iter().enumerate() {
        let (Some(timing), Some((pid, tid))) = (report.tasks.get(t), place(task.streams.first()))
        else {
            continue;
        };
        let (ts, dur) = (timing.start_us, timing.finish_us - timing.start_us);
        let cat = match task.kind {
            TaskKind::Compute { .. } => "compute",
            TaskKind::Transfer { .. } => "transfer",
            TaskKind::AllReduce { .. } => "all-reduce",
        };
        events.push(json!({"name": task.name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": ts, "dur": dur, "args": {"task": t}}));
        if let TaskKind::AllReduce { .. } = task.kind {
            for (pid, tid) in task.streams.iter().skip(1).filter_map(|s| place(Some(s))) {
                events.push(json!({"name": task.name, "cat": cat, "ph": "X", "pid": pid,
                    "tid": tid, "ts": ts, "dur": dur, "args": {"task": t}}));
            }
        }
        if let (TaskKind::Transfer { .. }, Some((rpid, rtid))) =
            (&task.kind, place(task.streams.get(1)))
        {
            let end = timing.finish_us;
            events.push(json!({"name": task.name, "cat": cat, "ph": "B", "pid": rpid,
                "tid": rtid, "ts": ts, "args": {"task": t}}));
            events.push(json!({"name": task.name, "cat": cat, "ph": "E", "pid": rpid,
                "tid": rtid, "ts": end}));
            events.push(json!({"name": task.name, "cat": cat, "ph": "s", "id": t, "pid": pid,
                "tid": tid, "ts": ts}));
            events.push(json!({"name": task.name, "cat": cat, "ph": "f", "bp": "e", "id": t,
                "pid": rpid, "tid": rtid, "ts": ts}));
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

/// [`chrome_trace`] as a JSON string.
pub fn chrome_trace_json(plan: &Plan, report: &Report) -> String {
    chrome_trace(plan, report).to_string()
}
