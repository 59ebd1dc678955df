//! Checks the ids of a plan and builds the adjacency the engine walks, so that the engine can
//! index without bounds failures.

use ordo_sched::{Plan, TaskKind};

use crate::SimError;

/// A compressed list of lists: `items[start[k]..start[k + 1]]` belong to key `k`.
pub(crate) struct Csr {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Csr {
    pub(crate) fn from_pairs(keys: usize, pairs: &[(u32, u32)]) -> Self {
        let mut start = vec![0u32; keys + 1];
        for &(k, _) in pairs {
            start[k as usize + 1] += 1;
        }
        for k in 0..keys {
            start[k + 1] += start[k];
        }
        let mut fill = start.clone();
        let mut items = vec![0u32; pairs.len()];
        for &(k, v) in pairs {
            items[fill[k as usize] as usize] = v;
            fill[k as usize] += 1;
        }
        Csr { start, items }
    }

    pub(crate) fn get(&self, key: usize) -> &[u32] {
        &self.items[self.start[key] as usize..self.start[key + 1] as usize]
    }
}

/// The resource a task needs besides its streams and events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// A kernel on this device.
    Compute(usize),
    /// A transfer between two devices.
    Transfer { from: usize, to: usize },
    /// A collective across devices: its streams alone order it.
    Collective,
}

impl Index {
    /// For [`Channel::Host`](crate::Channel::Host): every transfer holds its sending device
    /// as a kernel does.
    pub(crate) fn run_transfers_on_senders(&mut self) {
        for need in &mut self.need {
            if let Need::Transfer { from, .. } = *need {
                *need = Need::Compute(from);
            }
        }
    }
}

/// The plan's relations, checked.
pub(crate) struct Index {
    /// Per task: what it needs.
    pub need: Vec<Need>,
    /// Per event: the tasks waiting for it (once per wait).
    pub waiters: Csr,
    /// Per task: the events recorded after it.
    pub events_after: Csr,
    /// Per task: the buffers it writes (allocated when it starts).
    pub produces: Csr,
    /// Per task: the buffers whose lifetime it holds (producer and distinct readers).
    pub holds: Csr,
    /// Per buffer: how many distinct tasks hold it.
    pub holders: Vec<u32>,
}

fn invalid(msg: String) -> SimError {
    SimError::InvalidPlan(msg)
}

impl Index {
    pub(crate) fn build(plan: &Plan) -> Result<Self, SimError> {
        let n = plan.tasks.len();
        if [n, plan.events.len(), plan.buffers.len()].iter().any(|&len| len >= u32::MAX as usize) {
            return Err(invalid("too many tasks, events or buffers".into()));
        }
        if plan.persistent_bytes.len() != plan.devices {
            return Err(invalid(format!(
                "{} devices but {} persistent_bytes entries",
                plan.devices,
                plan.persistent_bytes.len()
            )));
        }
        // Every task must be on exactly the streams whose queues hold it, once in each.
        let mut seen: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (s, stream) in plan.streams.iter().enumerate() {
            if stream.device >= plan.devices {
                return Err(invalid(format!("stream {s} is on device {}", stream.device)));
            }
            for &t in &stream.tasks {
                let Some(list) = seen.get_mut(t.0 as usize) else {
                    return Err(invalid(format!("stream {s} holds unknown task {}", t.0)));
                };
                list.push(s as u32);
            }
        }
        let mut need = Vec::with_capacity(n);
        for (t, task) in plan.tasks.iter().enumerate() {
            let mut listed: Vec<u32> = task.streams.iter().map(|s| s.0).collect();
            listed.sort_unstable();
            let mut found = std::mem::take(&mut seen[t]);
            found.sort_unstable();
            if listed.is_empty() || listed != found || listed.windows(2).any(|w| w[0] == w[1]) {
                return Err(invalid(format!(
                    "task {t} ({}) lists streams {listed:?} but is queued on {found:?}",
                    task.name
                )));
            }
            if !(task.occupancy > 0.0 && task.occupancy <= 1.0) {
                return Err(invalid(format!(
                    "task {t} ({}) has occupancy {}; it must be more than 0 and at most 1",
                    task.name, task.occupancy
                )));
            }
            need.push(match task.kind {
                TaskKind::Compute { .. } => {
                    let device = plan.streams[listed[0] as usize].device;
                    if listed.iter().any(|&s| plan.streams[s as usize].device != device) {
                        return Err(invalid(format!("compute task {t} is on several devices")));
                    }
                    Need::Compute(device)
                }
                TaskKind::Transfer { from, to, buffer } => {
                    if from >= plan.devices || to >= plan.devices || from == to {
                        return Err(invalid(format!(
                            "transfer {t} ({}) from device {from} to device {to}",
                            task.name
                        )));
                    }
                    if buffer.0 as usize >= plan.buffers.len() {
                        return Err(invalid(format!("transfer {t} reads unknown buffer")));
                    }
                    Need::Transfer { from, to }
                }
                TaskKind::AllReduce { ref buffers, .. } => {
                    if let Some(b) = buffers.iter().find(|b| b.0 as usize >= plan.buffers.len()) {
                        return Err(invalid(format!(
                            "all-reduce {t} reads unknown buffer {}",
                            b.0
                        )));
                    }
                    Need::Collective
                }
            });
        }
        let mut waits = Vec::new();
        for (t, task) in plan.tasks.iter().enumerate() {
            for e in &task.waits {
                if e.0 as usize >= plan.events.len() {
                    return Err(invalid(format!("task {t} waits for unknown event {}", e.0)));
                }
                waits.push((e.0, t as u32));
            }
        }
        let mut after = Vec::with_capacity(plan.events.len());
        for (e, event) in plan.events.iter().enumerate() {
            if event.after.0 as usize >= n {
                return Err(invalid(format!("event {e} after unknown task {}", event.after.0)));
            }
            after.push((event.after.0, e as u32));
        }
        let mut produces = Vec::with_capacity(plan.buffers.len());
        let mut holds = Vec::new();
        let mut holders = Vec::with_capacity(plan.buffers.len());
        for (b, buffer) in plan.buffers.iter().enumerate() {
            if buffer.device >= plan.devices {
                return Err(invalid(format!("buffer {b} is on device {}", buffer.device)));
            }
            let mut tasks: Vec<u32> = Vec::with_capacity(buffer.readers.len() + 1);
            tasks.push(buffer.producer.0);
            tasks.extend(buffer.readers.iter().map(|r| r.0));
            if let Some(&bad) = tasks.iter().find(|&&t| t as usize >= n) {
                return Err(invalid(format!("buffer {b} refers to unknown task {bad}")));
            }
            tasks.sort_unstable();
            tasks.dedup();
            produces.push((buffer.producer.0, b as u32));
            holders.push(tasks.len() as u32);
            holds.extend(tasks.into_iter().map(|t| (t, b as u32)));
        }
        Ok(Index {
            need,
            waiters: Csr::from_pairs(plan.events.len(), &waits),
            events_after: Csr::from_pairs(n, &after),
            produces: Csr::from_pairs(n, &produces),
            holds: Csr::from_pairs(n, &holds),
            holders,
        })
    }
}
