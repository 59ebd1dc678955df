//! All-reduces added to a plan: parameter gradients cut into buckets, each bucket one task on
//! the collective stream of every device it joins, after the gradients' producers and before
//! their other readers. Data parallelism over one device's step ([`crate::data_parallel_plan`])
//! and over a pipeline's stages ([`crate::replicated_pipeline_plan`]) both build on it.

use std::collections::HashMap;

use ordo_problem::PlaceProblem;

use crate::plan::{
    BufferId, Event, EventId, Plan, Stream, StreamId, StreamKind, Task, TaskId, TaskKind,
};

/// A parameter gradient of a plan's problem: its tensor, producing node and step, its size,
/// and whether it is deferred work (reverse first-k).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gradient {
    pub(crate) tensor: usize,
    pub(crate) producer: usize,
    pub(crate) step: usize,
    pub(crate) late: bool,
    pub(crate) bytes: u64,
}

/// The gradients the updates of `problem` read, keyed by `key(producer)` (the order a
/// schedule produces them in), tensors of one node in tensor order; each once.
pub(crate) fn gradients_by<K: Ord + Copy>(
    problem: &PlaceProblem,
    key: impl Fn(usize) -> K,
    gradient: impl Fn(usize) -> Gradient,
) -> Vec<Gradient> {
    let mut keyed = Vec::new();
    for u in (0..problem.len()).filter(|&u| problem.roles[u] == ordo_ir::Role::Update) {
        for &e in &problem.in_edges[u] {
            for &x in &problem.edges[e].tensors {
                keyed.push((key(problem.tensors[x].producer), x));
            }
        }
    }
    keyed.sort_unstable();
    keyed.dedup();
    keyed.into_iter().map(|(_, x)| gradient(x)).collect()
}

/// `gradients` cut into buckets of at least `bucket_bytes` (0: one each), never mixing steps
/// or deferred with other gradients.
pub(crate) fn buckets(gradients: &[Gradient], bucket_bytes: u64) -> Vec<Vec<Gradient>> {
    let mut out: Vec<Vec<Gradient>> = Vec::new();
    let mut filled = 0u64;
    for &g in gradients {
        let joins = out.last().is_some_and(|last| {
            let head = last[0];
            head.step == g.step && head.late == g.late && filled < bucket_bytes
        });
        if !joins {
            out.push(Vec::new());
            filled = 0;
        }
        filled += g.bytes;
        out.last_mut().expect("pushed above").push(g);
    }
    out
}

/// `all-reduce:<first tensor>` (`+<n>` more).
pub(crate) fn bucket_name(problem: &PlaceProblem, bucket: &[Gradient]) -> String {
    let first = &problem.tensors[bucket[0].tensor].name;
    match bucket.len() {
        1 => format!("all-reduce:{first}"),
        more => format!("all-reduce:{first}+{}", more - 1),
    }
}

/// Adds all-reduce tasks to a plan, reusing the event after a task where there is one.
pub(crate) struct AllReduces<'p> {
    plan: &'p mut Plan,
    event_after: HashMap<TaskId, EventId>,
}

/// One all-reduce to add.
pub(crate) struct AllReduce {
    pub(crate) name: String,
    /// The collective stream of each device it joins.
    pub(crate) streams: Vec<StreamId>,
    /// For each of those devices in order, its buffers (one per gradient, in one order).
    pub(crate) buffers: Vec<BufferId>,
    /// The tasks that write the buffers.
    pub(crate) producers: Vec<TaskId>,
    pub(crate) duration_us: u64,
    /// How many replicas it joins when one device stands for them (simulated by symmetry).
    pub(crate) replicas: Option<usize>,
}

impl<'p> AllReduces<'p> {
    pub(crate) fn new(plan: &'p mut Plan) -> Self {
        let event_after =
            plan.events.iter().enumerate().map(|(e, ev)| (ev.after, EventId(e as u32))).collect();
        Self { plan, event_after }
    }

    /// A new collective stream on `device`.
    pub(crate) fn stream(&mut self, device: usize) -> StreamId {
        let kind = StreamKind::Collective;
        self.plan.streams.push(Stream { device, kind, tasks: Vec::new() });
        StreamId(self.plan.streams.len() as u32 - 1)
    }

    fn event(&mut self, after: TaskId) -> EventId {
        let plan = &mut *self.plan;
        *self.event_after.entry(after).or_insert_with(|| {
            plan.events.push(Event { after });
            EventId(plan.events.len() as u32 - 1)
        })
    }

    /// Adds `reduce` at the end of its streams: it waits for the producers, reads the buffers
    /// (in place), and every other reader of them waits for it.
    pub(crate) fn push(&mut self, reduce: AllReduce) {
        let id = TaskId(self.plan.tasks.len() as u32);
        let mut waits: Vec<EventId> = reduce.producers.iter().map(|&p| self.event(p)).collect();
        waits.sort_unstable();
        waits.dedup();
        let done = self.event(id);
        for &b in &reduce.buffers {
            let buffer = &mut self.plan.buffers[b.0 as usize];
            for &reader in &buffer.readers {
                let waiting = &mut self.plan.tasks[reader.0 as usize].waits;
                if !waiting.contains(&done) {
                    waiting.push(done);
                }
            }
            buffer.readers.push(id);
            buffer.readers.sort_unstable();
        }
        for &s in &reduce.streams {
            self.plan.streams[s.0 as usize].tasks.push(id);
        }
        self.plan.tasks.push(Task {
            name: reduce.name,
            kind: TaskKind::AllReduce { buffers: reduce.buffers, replicas: reduce.replicas },
            streams: reduce.streams,
            waits,
            duration_us: reduce.duration_us,
            workspace_bytes: 0,
            occupancy: 1.0,
        });
    }
}
