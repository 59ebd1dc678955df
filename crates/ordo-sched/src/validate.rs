//! Checking a plan against the rules of [`crate::plan`].

use std::collections::{HashMap, HashSet};

use crate::error::SchedError;
use crate::graph::task_order;
use crate::plan::{BufferId, Plan, StreamId, StreamKind, TaskId, TaskKind};

/// Checks that `plan` keeps every rule of [`crate::plan`], in this order: the format tag and
/// `persistent_bytes`; streams (device and peer in range, at most one tx and one rx stream per
/// device pair, known tasks, no task twice); events (known task); tasks (known streams and
/// events, an occupancy in `(0, 1]`, a compute task on exactly one compute or sub-compute
/// stream, a transfer between two distinct devices reading a buffer on the sender, on the
/// sender's `Tx { peer: to }` stream then the receiver's `Rx { peer: from }` stream, an
/// all-reduce on the collective streams of at least two distinct devices in device order with
/// as many buffers on each, and streams and tasks naming each other);
/// buffers (device in range, known producer and readers on the buffer's device, every transfer
/// listed as a reader of the buffer it sends, every all-reduce a reader of the buffers it
/// reduces and the producer of none); no dependency cycle through stream order and events,
/// which would deadlock a run; and last, dataflow: every reader of a buffer is ordered after
/// its producer by stream order and events, so that no task can read a buffer before it is
/// written.
///
/// Never panics, and runs in time linear in the size of the plan (up to the readers of the
/// buffers that transfers send, times the number of such transfers).
///
/// # Errors
/// The first broken rule, naming the task, stream, event or buffer; for a cycle,
/// [`SchedError::Cycle`] with the names of the tasks on it.
pub fn validate(plan: &Plan) -> Result<(), SchedError> {
    if plan.format != Plan::FORMAT {
        return Err(SchedError::Format { found: plan.format.clone(), expected: Plan::FORMAT });
    }
    if plan.persistent_bytes.len() != plan.devices {
        return Err(SchedError::PersistentBytes {
            len: plan.persistent_bytes.len(),
            devices: plan.devices,
        });
    }
    let links = check_streams(plan)?;
    check_events(plan)?;
    check_tasks(plan, &links)?;
    check_buffers(plan)?;
    let order = task_order(plan)?;
    check_dataflow(plan, &order)
}

/// Every reader of a buffer runs after its producer: the producer is among the reader's
/// transitive predecessors. Checked first by what plans use (the reader waits for the
/// producer's event, follows it on a stream, or waits for a later task of one of the
/// producer's streams), then by a search back from the reader that never goes below the
/// producer's position in `order`.
fn check_dataflow(plan: &Plan, order: &[TaskId]) -> Result<(), SchedError> {
    let n = plan.tasks.len();
    let preds = crate::graph::task_graph(plan);
    let mut rank = vec![0usize; n];
    for (r, t) in order.iter().enumerate() {
        rank[t.0 as usize] = r;
    }
    // Per task: (stream, position in it) for each stream it is on.
    let mut places: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (s, stream) in plan.streams.iter().enumerate() {
        for (i, t) in stream.tasks.iter().enumerate() {
            places[t.0 as usize].push((s, i));
        }
    }
    // `q` is `p` or after it on a stream they share.
    let at_or_after = |q: usize, p: usize| {
        q == p
            || places[q].iter().any(|&(s, i)| places[p].iter().any(|&(sp, ip)| sp == s && ip <= i))
    };
    let mut seen = vec![usize::MAX; n];
    let mut stack = Vec::new();
    let mut search = 0usize;
    for buffer in &plan.buffers {
        let p = buffer.producer.0 as usize;
        for &reader in &buffer.readers {
            let r = reader.0 as usize;
            if r == p || at_or_after(r, p) || preds[r].iter().any(|q| at_or_after(q.0 as usize, p))
            {
                continue;
            }
            search += 1;
            let mut found = false;
            stack.clear();
            stack.push(r);
            'search: while let Some(t) = stack.pop() {
                for q in &preds[t] {
                    let q = q.0 as usize;
                    if at_or_after(q, p) {
                        found = true;
                        break 'search;
                    }
                    if rank[q] > rank[p] && seen[q] != search {
                        seen[q] = search;
                        stack.push(q);
                    }
                }
            }
            if !found {
                return Err(SchedError::Buffer {
                    buffer: buffer.name.clone(),
                    device: buffer.device,
                    problem: format!(
                        "its reader `{}` may run before its producer `{}` writes it: no stream \
                         order or event puts the reader after the producer",
                        plan.tasks[r].name, plan.tasks[p].name
                    ),
                });
            }
        }
    }
    Ok(())
}

/// `stream 3 (device 0 tx->1)`, or `stream 3` for an unknown id.
pub(crate) fn stream_label(plan: &Plan, id: StreamId) -> String {
    let Some(stream) = plan.streams.get(id.0 as usize) else {
        return format!("stream {}", id.0);
    };
    let kind = match stream.kind {
        StreamKind::Compute => "compute".to_string(),
        StreamKind::SubCompute => "sub-compute".to_string(),
        StreamKind::Tx { peer } => format!("tx->{peer}"),
        StreamKind::Rx { peer } => format!("rx<-{peer}"),
        StreamKind::Collective => "collective".to_string(),
    };
    format!("stream {} (device {} {kind})", id.0, stream.device)
}

fn task_label(plan: &Plan, id: TaskId) -> String {
    plan.tasks.get(id.0 as usize).map_or_else(|| format!("task {}", id.0), |t| t.name.clone())
}

fn unknown(owner: String, kind: &'static str, id: u32, count: usize) -> SchedError {
    SchedError::UnknownId { owner, kind, id, count }
}

/// Checks the streams and returns the tx, rx and collective stream of each (device, kind).
fn check_streams(plan: &Plan) -> Result<HashMap<(usize, StreamKind), StreamId>, SchedError> {
    let fail = |s: usize, problem: String| SchedError::Stream {
        stream: stream_label(plan, StreamId(s as u32)),
        problem,
    };
    let mut links = HashMap::new();
    // Per task, 1 + the last stream that listed it, to find a task listed twice in one stream.
    let mut last_listed = vec![0usize; plan.tasks.len()];
    for (s, stream) in plan.streams.iter().enumerate() {
        if stream.device >= plan.devices {
            let problem = format!("the plan has only {} devices", plan.devices);
            return Err(fail(s, problem));
        }
        if let StreamKind::Tx { peer } | StreamKind::Rx { peer } = stream.kind
            && (peer >= plan.devices || peer == stream.device)
        {
            let problem = format!("peer {peer} must be another of the {} devices", plan.devices);
            return Err(fail(s, problem));
        }
        if !matches!(stream.kind, StreamKind::Compute | StreamKind::SubCompute)
            && let Some(first) = links.insert((stream.device, stream.kind), StreamId(s as u32))
        {
            let problem = format!("duplicates {}", stream_label(plan, first));
            return Err(fail(s, problem));
        }
        for &t in &stream.tasks {
            let Some(listed) = last_listed.get_mut(t.0 as usize) else {
                let owner = stream_label(plan, StreamId(s as u32));
                return Err(unknown(owner, "task", t.0, plan.tasks.len()));
            };
            if *listed == s + 1 {
                return Err(SchedError::Membership {
                    task: task_label(plan, t),
                    stream: stream_label(plan, StreamId(s as u32)),
                    problem: "the stream lists the task twice".into(),
                });
            }
            *listed = s + 1;
        }
    }
    Ok(links)
}

fn check_events(plan: &Plan) -> Result<(), SchedError> {
    for (e, event) in plan.events.iter().enumerate() {
        if event.after.0 as usize >= plan.tasks.len() {
            return Err(unknown(format!("event {e}"), "task", event.after.0, plan.tasks.len()));
        }
    }
    Ok(())
}

fn check_tasks(
    plan: &Plan,
    links: &HashMap<(usize, StreamKind), StreamId>,
) -> Result<(), SchedError> {
    let mut listed: HashSet<(u32, u32)> = HashSet::new();
    for (s, stream) in plan.streams.iter().enumerate() {
        for &t in &stream.tasks {
            listed.insert((t.0, s as u32));
        }
    }
    for (t, task) in plan.tasks.iter().enumerate() {
        let owner = || format!("task `{}`", task.name);
        for s in &task.streams {
            if s.0 as usize >= plan.streams.len() {
                return Err(unknown(owner(), "stream", s.0, plan.streams.len()));
            }
        }
        for w in &task.waits {
            if w.0 as usize >= plan.events.len() {
                return Err(unknown(owner(), "event", w.0, plan.events.len()));
            }
        }
        if !(task.occupancy > 0.0 && task.occupancy <= 1.0) {
            return Err(SchedError::Occupancy {
                task: task.name.clone(),
                occupancy: task.occupancy,
            });
        }
        match &task.kind {
            TaskKind::Compute { .. } => check_compute(plan, t)?,
            TaskKind::Transfer { .. } => check_transfer(plan, t, links)?,
            TaskKind::AllReduce { .. } => check_all_reduce(plan, t)?,
        }
        for &s in &task.streams {
            if !listed.contains(&(t as u32, s.0)) {
                return Err(SchedError::Membership {
                    task: task.name.clone(),
                    stream: stream_label(plan, s),
                    problem: "the task names the stream, which does not list it".into(),
                });
            }
        }
    }
    for (s, stream) in plan.streams.iter().enumerate() {
        for &t in &stream.tasks {
            if !plan.tasks[t.0 as usize].streams.contains(&StreamId(s as u32)) {
                return Err(SchedError::Membership {
                    task: task_label(plan, t),
                    stream: stream_label(plan, StreamId(s as u32)),
                    problem: "the stream lists the task, which does not name it".into(),
                });
            }
        }
    }
    Ok(())
}

fn check_compute(plan: &Plan, t: usize) -> Result<(), SchedError> {
    let task = &plan.tasks[t];
    let fail = |problem: String| SchedError::Compute { task: task.name.clone(), problem };
    match task.streams[..] {
        [s] => match plan.streams[s.0 as usize].kind {
            StreamKind::Compute | StreamKind::SubCompute => Ok(()),
            _ => {
                Err(fail(format!("is on {}, which is not a compute stream", stream_label(plan, s))))
            }
        },
        _ => Err(fail(format!(
            "is on {} streams; it must be on exactly one compute stream of its device",
            task.streams.len()
        ))),
    }
}

fn check_transfer(
    plan: &Plan,
    t: usize,
    links: &HashMap<(usize, StreamKind), StreamId>,
) -> Result<(), SchedError> {
    let task = &plan.tasks[t];
    let TaskKind::Transfer { buffer, from, to } = task.kind else {
        return Ok(());
    };
    let fail = |problem: String| SchedError::Transfer { task: task.name.clone(), problem };
    if from >= plan.devices || to >= plan.devices || from == to {
        return Err(fail(format!(
            "goes from device {from} to device {to}; both must be distinct devices of the {}",
            plan.devices
        )));
    }
    let Some(source) = plan.buffers.get(buffer.0 as usize) else {
        let owner = format!("transfer `{}`", task.name);
        return Err(unknown(owner, "buffer", buffer.0, plan.buffers.len()));
    };
    if source.device != from {
        return Err(fail(format!(
            "sends buffer `{}` of device {} from device {from}",
            source.name, source.device
        )));
    }
    let expected = [(from, StreamKind::Tx { peer: to }), (to, StreamKind::Rx { peer: from })];
    for (i, (device, kind)) in expected.into_iter().enumerate() {
        let want = match kind {
            StreamKind::Tx { .. } => format!("the tx->{to} stream of device {from}"),
            _ => format!("the rx<-{from} stream of device {to}"),
        };
        let Some(&stream) = links.get(&(device, kind)) else {
            return Err(fail(format!("needs {want}, but the plan has none")));
        };
        match task.streams.get(i) {
            Some(&s) if s == stream => {}
            Some(&s) => {
                let place = if i == 0 { "first" } else { "second" };
                let got = stream_label(plan, s);
                return Err(fail(format!("its {place} stream must be {want}, not {got}")));
            }
            None => return Err(fail(format!("is not on {want}"))),
        }
    }
    if task.streams.len() != 2 {
        let problem = format!("is on {} streams; a transfer is on exactly two", task.streams.len());
        return Err(fail(problem));
    }
    Ok(())
}

fn check_all_reduce(plan: &Plan, t: usize) -> Result<(), SchedError> {
    let task = &plan.tasks[t];
    let TaskKind::AllReduce { buffers, replicas } = &task.kind else {
        return Ok(());
    };
    let fail = |problem: String| SchedError::AllReduce { task: task.name.clone(), problem };
    let mut devices = Vec::with_capacity(task.streams.len());
    for &s in &task.streams {
        let stream = &plan.streams[s.0 as usize];
        if stream.kind != StreamKind::Collective {
            let problem =
                format!("is on {}, which is not a collective stream", stream_label(plan, s));
            return Err(fail(problem));
        }
        devices.push(stream.device);
    }
    // One device may stand for a group of replicas (a plan simulated by symmetry).
    let stands_for_group = devices.len() == 1 && replicas.is_some_and(|r| r >= 2);
    if replicas.is_some() && !stands_for_group {
        return Err(fail(format!(
            "stands for {} replicas on devices {devices:?}; one device stands for at least two",
            replicas.unwrap_or(0)
        )));
    }
    if (devices.len() < 2 && !stands_for_group) || devices.windows(2).any(|w| w[0] >= w[1]) {
        return Err(fail(format!(
            "joins devices {devices:?}; an all-reduce joins at least two distinct devices, in \
             ascending order"
        )));
    }
    if buffers.is_empty() || buffers.len() % devices.len() != 0 {
        return Err(fail(format!(
            "reduces {} buffers over {} devices; each device needs as many, at least one",
            buffers.len(),
            devices.len()
        )));
    }
    let per_device = buffers.len() / devices.len();
    for (k, &b) in buffers.iter().enumerate() {
        let Some(buffer) = plan.buffers.get(b.0 as usize) else {
            let owner = format!("all-reduce `{}`", task.name);
            return Err(unknown(owner, "buffer", b.0, plan.buffers.len()));
        };
        let device = devices[k / per_device];
        if buffer.device != device {
            return Err(fail(format!(
                "its buffer {k} (`{}`) is on device {}, not on device {device}",
                buffer.name, buffer.device
            )));
        }
        let first = &plan.buffers[buffers[k % per_device].0 as usize];
        if buffer.bytes != first.bytes {
            return Err(fail(format!(
                "reduces `{}` ({} bytes) on device {device} with `{}` ({} bytes) on device {}",
                buffer.name, buffer.bytes, first.name, first.bytes, devices[0]
            )));
        }
    }
    Ok(())
}

/// Whether task `t`, which passed [`check_tasks`], writes (`writes`) or reads a buffer on
/// `device`: a compute task on its stream's device, a transfer writing on its receiver and
/// reading on its sender, an all-reduce reading (and rewriting in place) on each of its devices
/// and producing no buffer.
fn touches(plan: &Plan, t: TaskId, device: usize, writes: bool) -> bool {
    let task = &plan.tasks[t.0 as usize];
    match task.kind {
        TaskKind::Compute { .. } => plan.streams[task.streams[0].0 as usize].device == device,
        TaskKind::Transfer { to, .. } if writes => to == device,
        TaskKind::Transfer { from, .. } => from == device,
        TaskKind::AllReduce { .. } if writes => false,
        TaskKind::AllReduce { .. } => {
            task.streams.iter().any(|s| plan.streams[s.0 as usize].device == device)
        }
    }
}

fn check_buffers(plan: &Plan) -> Result<(), SchedError> {
    for (b, buffer) in plan.buffers.iter().enumerate() {
        let fail = |problem: String| SchedError::Buffer {
            buffer: buffer.name.clone(),
            device: buffer.device,
            problem,
        };
        if buffer.device >= plan.devices {
            return Err(fail(format!("the plan has only {} devices", plan.devices)));
        }
        let owner = || format!("buffer `{}` on device {}", buffer.name, buffer.device);
        for &t in std::iter::once(&buffer.producer).chain(&buffer.readers) {
            if t.0 as usize >= plan.tasks.len() {
                return Err(unknown(owner(), "task", t.0, plan.tasks.len()));
            }
        }
        if !touches(plan, buffer.producer, buffer.device, true) {
            let name = task_label(plan, buffer.producer);
            let producer = &plan.tasks[buffer.producer.0 as usize];
            return Err(fail(match producer.kind {
                TaskKind::Compute { .. } => {
                    let device = plan.streams[producer.streams[0].0 as usize].device;
                    format!("its producer `{name}` writes on device {device}")
                }
                TaskKind::Transfer { to, .. } => {
                    format!("its producer `{name}` writes on device {to}")
                }
                TaskKind::AllReduce { .. } => format!(
                    "its producer `{name}` is an all-reduce, which rewrites buffers in place"
                ),
            }));
        }
        for &t in &buffer.readers {
            let reads_other = match &plan.tasks[t.0 as usize].kind {
                TaskKind::Transfer { buffer: sent, .. } => sent.0 as usize != b,
                TaskKind::AllReduce { buffers, .. } => !buffers.contains(&BufferId(b as u32)),
                TaskKind::Compute { .. } => false,
            };
            if !touches(plan, t, buffer.device, false) || reads_other {
                let name = task_label(plan, t);
                return Err(fail(format!("its reader `{name}` does not read it")));
            }
        }
    }
    for (t, task) in plan.tasks.iter().enumerate() {
        let (read, kind) = match &task.kind {
            TaskKind::Transfer { buffer, .. } => (std::slice::from_ref(buffer), "transfer"),
            TaskKind::AllReduce { buffers, .. } => (buffers.as_slice(), "all-reduce"),
            TaskKind::Compute { .. } => continue,
        };
        for &b in read {
            let source = &plan.buffers[b.0 as usize];
            if !source.readers.contains(&TaskId(t as u32)) {
                return Err(SchedError::Buffer {
                    buffer: source.name.clone(),
                    device: source.device,
                    problem: format!(
                        "{kind} `{}` {} it but is not among its readers",
                        task.name,
                        if kind == "transfer" { "sends" } else { "reduces" }
                    ),
                });
            }
        }
    }
    Ok(())
}
