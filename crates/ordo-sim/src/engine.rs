//! The event loop.
//!
//! Time advances from one happening (a task's end, or the next end on a device whose kernels
//! run at once) to the next, taken from a binary heap. All happenings at one instant are
//! handled first, in the order (time, task ends before device ticks, task or device id); then
//! the tasks they made ready are admitted in task-id order, and then waiting tasks start where
//! their resource is free. A resource freed at an instant goes to the waiting task that became
//! ready first, the lowest task id among those ready at the same time.
//!
//! With [`SimOptions::concurrent_kernels`], a device's kernels share it by occupancy: a kernel
//! keeps [`Task::occupancy`](ordo_sched::Task::occupancy) of the device busy, and while kernels
//! of total occupancy `load` run, each works through its standalone `duration_us` at rate
//! `1 / max(1, load)`. Kernels that fit in the device side by side (total at most 1) run at full
//! speed; beyond that all slow down alike, as under processor sharing. The rate changes only
//! when a kernel starts or ends, so between those happenings every kernel's remaining work falls
//! linearly and the next end is known exactly.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use ordo_sched::Plan;

use crate::analysis;
use crate::booking::{Booked, Channels};
use crate::index::{Index, Need};
use crate::memory::Memory;
use crate::{Channel, Report, SimError, SimOptions};

/// A time with a total order, for heap and set keys.
#[derive(Clone, Copy, Debug)]
struct Time(f64);

impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    Finish(u32),
    /// A transfer's send starts (Baechi-TF channels, where it is booked ahead of time).
    /// Handled after the task ends of the same instant.
    Start(u32),
    /// The next end among a device's concurrent kernels, valid while `version` is the device's
    /// current one.
    Tick {
        device: u32,
        version: u64,
    },
}

/// A waiting task's claim on a resource: when it became ready, then its id.
type Key = (Time, u32);

/// A device whose kernels run at once, sharing it by occupancy.
#[derive(Default)]
struct Shared {
    /// Running kernels: id, remaining work in µs at full speed, occupancy.
    running: Vec<(u32, f64, f64)>,
    since: f64,
    version: u64,
}

impl Shared {
    /// How fast each running kernel works through its duration: `1 / max(1, load)`, where
    /// `load` is the sum of the running kernels' occupancies.
    fn rate(&self) -> f64 {
        let load: f64 = self.running.iter().map(|r| r.2).sum();
        1.0 / load.max(1.0)
    }
}

/// An exclusive resource: a device (one kernel at a time) or a port (a channel or a receiver).
#[derive(Default)]
struct Slot {
    busy: bool,
    waiting: BTreeSet<Key>,
    /// When it was last freed, and by which task.
    freed_by: Option<(Time, u32)>,
    dirty: bool,
}

/// Runs `plan` and reports step time, utilisation, memory and the critical path.
///
/// A task starts when it is first in all of its streams, every event it waits for has been
/// recorded, and its resource is free (see [`SimOptions`] and [`Channel`]). Tasks run for their
/// `duration_us` unless concurrent kernels together occupy more than their device (see the
/// module documentation).
///
/// Ties are broken deterministically: everything that happens at one instant is handled first
/// (task ends in task-id order, so frees come before the allocations of tasks starting then);
/// a free resource goes to the waiting task that became ready first, and among tasks ready at
/// the same instant to the lowest task id.
///
/// Returns [`SimError::Deadlock`] when tasks are
/// left and none can start, and [`SimError::InvalidPlan`] when the plan refers to things that
/// do not exist.
pub fn simulate(plan: &Plan, options: &SimOptions) -> Result<Report, SimError> {
    let mut index = Index::build(plan)?;
    if options.channel == Channel::Host {
        index.run_transfers_on_senders();
    }
    let mut sim = Sim::new(plan, &index, *options);
    sim.run()?;
    Ok(sim.report())
}

struct Sim<'a> {
    plan: &'a Plan,
    ix: &'a Index,
    opts: SimOptions,
    now: f64,
    heap: BinaryHeap<Reverse<(Time, What)>>,
    /// Per stream: position of its first unfinished task.
    head: Vec<usize>,
    /// Per task: in how many of its streams it is first.
    at_head: Vec<u32>,
    waits_left: Vec<u32>,
    ready: Vec<bool>,
    started: Vec<bool>,
    ready_at: Vec<f64>,
    /// The task whose end made it ready.
    ready_by: Vec<Option<u32>>,
    start: Vec<f64>,
    finish: Vec<f64>,
    /// The task whose end determined its start.
    pred: Vec<Option<u32>>,
    done: usize,
    newly_ready: Vec<u32>,
    devices: Vec<Slot>,
    shared: Vec<Shared>,
    ports: Vec<Slot>,
    dirty_devices: Vec<usize>,
    dirty_ports: Vec<usize>,
    /// Baechi-TF's booked channels, which replace `ports` under that model.
    channels: Option<Channels>,
    booked: Vec<Booked>,
    memory: Memory,
}

impl<'a> Sim<'a> {
    fn new(plan: &'a Plan, ix: &'a Index, opts: SimOptions) -> Self {
        let n = plan.tasks.len();
        let slots = |count: usize| (0..count).map(|_| Slot::default()).collect::<Vec<_>>();
        Sim {
            plan,
            ix,
            opts,
            now: 0.0,
            heap: BinaryHeap::new(),
            head: vec![0; plan.streams.len()],
            at_head: vec![0; n],
            waits_left: plan.tasks.iter().map(|t| t.waits.len() as u32).collect(),
            ready: vec![false; n],
            started: vec![false; n],
            ready_at: vec![0.0; n],
            ready_by: vec![None; n],
            start: vec![0.0; n],
            finish: vec![0.0; n],
            pred: vec![None; n],
            done: 0,
            newly_ready: Vec::new(),
            devices: slots(plan.devices),
            shared: (0..plan.devices).map(|_| Shared::default()).collect(),
            ports: slots(plan.devices),
            dirty_devices: Vec::new(),
            dirty_ports: Vec::new(),
            channels: (opts.channel == Channel::BaechiTf).then(|| {
                let transfers: Vec<(u32, usize, usize)> = (0..n)
                    .filter_map(|t| match ix.need[t] {
                        Need::Transfer { from, to } => Some((t as u32, from, to)),
                        Need::Compute(_) | Need::Collective => None,
                    })
                    .collect();
                Channels::new(plan.devices, n, &transfers)
            }),
            booked: Vec::new(),
            memory: Memory::new(plan, &ix.holders),
        }
    }

    fn run(&mut self) -> Result<(), SimError> {
        for stream in &self.plan.streams {
            if let Some(&t) = stream.tasks.first() {
                self.at_head[t.0 as usize] += 1;
            }
        }
        for t in 0..self.plan.tasks.len() {
            self.make_ready(t as u32, None);
        }
        self.admit();
        self.dispatch();
        while let Some(Reverse((time, what))) = self.heap.pop() {
            self.now = time.0;
            self.happen(what);
            while let Some(&Reverse((next, what))) = self.heap.peek()
                && next == time
            {
                self.heap.pop();
                self.happen(what);
            }
            self.admit();
            self.dispatch();
        }
        if self.done < self.plan.tasks.len() {
            let stuck = (0..self.plan.tasks.len())
                .filter(|&t| !self.started[t] && self.at_head[t] > 0)
                .map(|t| self.plan.tasks[t].name.clone())
                .collect();
            return Err(SimError::Deadlock {
                stuck,
                unfinished: self.plan.tasks.len() - self.done,
            });
        }
        Ok(())
    }

    fn make_ready(&mut self, t: u32, by: Option<u32>) {
        let i = t as usize;
        if !self.ready[i]
            && self.waits_left[i] == 0
            && self.at_head[i] as usize == self.plan.tasks[i].streams.len()
        {
            self.ready[i] = true;
            self.ready_at[i] = self.now;
            self.ready_by[i] = by;
            self.newly_ready.push(t);
        }
    }

    fn happen(&mut self, what: What) {
        match what {
            What::Finish(t) => self.complete(t),
            What::Start(t) => {
                if !self.started[t as usize] {
                    self.begin(t);
                }
            }
            What::Tick { device, version } => {
                if self.shared[device as usize].version == version {
                    self.shared_tick(device as usize);
                }
            }
        }
    }

    /// The ports a transfer holds under the current channel model (none under Baechi-TF,
    /// whose channels are booked instead).
    fn ports_of(&self, from: usize, to: usize) -> ([usize; 2], usize) {
        match self.opts.channel {
            Channel::Duplex => ([to, to], 1),
            // Host transfers hold their sender as kernels (`Index::run_transfers_on_senders`).
            Channel::BaechiTf | Channel::BaechiPytorch | Channel::Host => ([from, to], 0),
        }
    }

    /// Books the Baechi-TF channel parts that became bookable, starting at `device`'s channel,
    /// and schedules the starts and ends they decide.
    fn book(&mut self, device: usize) {
        let Some(channels) = self.channels.as_mut() else { return };
        let (ready, ready_at, plan) = (&self.ready, &self.ready_at, self.plan);
        let mut booked = std::mem::take(&mut self.booked);
        channels.book(
            device,
            |t| ready[t as usize].then(|| ready_at[t as usize]),
            |t| plan.tasks[t as usize].duration_us as f64,
            &mut booked,
        );
        for &event in &booked {
            match event {
                Booked::Send { task, at, waited_for } => {
                    self.pred[task as usize] = waited_for.or(self.ready_by[task as usize]);
                    if at <= self.now {
                        self.begin(task);
                    } else {
                        self.heap.push(Reverse((Time(at), What::Start(task))));
                    }
                }
                Booked::Receive { task, at, waited_for } => {
                    if waited_for.is_some() {
                        self.pred[task as usize] = waited_for;
                    }
                    self.heap.push(Reverse((Time(at), What::Finish(task))));
                }
            }
        }
        booked.clear();
        self.booked = booked;
    }

    fn complete(&mut self, t: u32) {
        let i = t as usize;
        if !self.started[i] {
            // A zero-length Baechi-TF transfer whose end is handled before its start.
            self.begin(t);
        }
        self.finish[i] = self.now;
        self.done += 1;
        match self.ix.need[i] {
            Need::Compute(d) if !self.opts.concurrent_kernels => {
                free_slot(&mut self.devices[d], &mut self.dirty_devices, d, self.now, t);
            }
            Need::Compute(_) | Need::Collective => {}
            Need::Transfer { from, to } => {
                let (ports, count) = self.ports_of(from, to);
                for &p in &ports[..count] {
                    free_slot(&mut self.ports[p], &mut self.dirty_ports, p, self.now, t);
                }
            }
        }
        if let Need::Compute(d) = self.ix.need[i] {
            self.memory.workspace(d, self.plan.tasks[i].workspace_bytes, false, self.now);
        }
        for &b in self.ix.holds.get(i) {
            self.memory.release(self.plan, b, self.now);
        }
        if !self.is_booked(i) {
            self.leave_streams(t);
        }
        for &e in self.ix.events_after.get(i) {
            for &w in self.ix.waiters.get(e as usize) {
                self.waits_left[w as usize] -= 1;
                self.make_ready(w, Some(t));
            }
        }
    }

    /// Whether task `i` is a transfer on Baechi-TF's booked channels.
    fn is_booked(&self, i: usize) -> bool {
        self.channels.is_some() && matches!(self.ix.need[i], Need::Transfer { .. })
    }

    /// Makes the next task of each of `t`'s streams first in it.
    fn leave_streams(&mut self, t: u32) {
        for s in &self.plan.tasks[t as usize].streams {
            let s = s.0 as usize;
            self.head[s] += 1;
            if let Some(&next) = self.plan.streams[s].tasks.get(self.head[s]) {
                self.at_head[next.0 as usize] += 1;
                self.make_ready(next.0, Some(t));
            }
        }
    }

    /// Queues the tasks made ready at this instant, or starts those that need no exclusive
    /// resource.
    fn admit(&mut self) {
        // Starting a booked transfer can make the next one on its link ready at once.
        while !self.newly_ready.is_empty() {
            let mut ready = std::mem::take(&mut self.newly_ready);
            ready.sort_unstable();
            for &t in &ready {
                self.admit_one(t);
            }
            if self.newly_ready.is_empty() {
                ready.clear();
                self.newly_ready = ready;
            }
        }
    }

    fn admit_one(&mut self, t: u32) {
        let key = (Time(self.now), t);
        match self.ix.need[t as usize] {
            Need::Compute(_) if self.opts.concurrent_kernels => self.begin(t),
            Need::Collective => self.begin(t),
            Need::Compute(d) => {
                self.devices[d].waiting.insert(key);
                mark(&mut self.devices[d], &mut self.dirty_devices, d);
            }
            Need::Transfer { from, .. } if self.channels.is_some() => self.book(from),
            Need::Transfer { from, to } => {
                let (ports, count) = self.ports_of(from, to);
                if count == 0 {
                    self.begin(t);
                }
                for &p in &ports[..count] {
                    self.ports[p].waiting.insert(key);
                    mark(&mut self.ports[p], &mut self.dirty_ports, p);
                }
            }
        }
    }

    /// Hands the resources freed or wanted at this instant to waiting tasks.
    fn dispatch(&mut self) {
        for d in std::mem::take(&mut self.dirty_devices) {
            self.devices[d].dirty = false;
            if !self.devices[d].busy
                && let Some((_, t)) = self.devices[d].waiting.pop_first()
            {
                self.begin(t);
            }
        }
        // A transfer waits in the queue of every port it needs; it can only have become
        // startable if one of those ports is dirty.
        let mut candidates: Vec<Key> = Vec::new();
        for p in std::mem::take(&mut self.dirty_ports) {
            self.ports[p].dirty = false;
            candidates.extend(self.ports[p].waiting.iter().copied());
        }
        candidates.sort_unstable();
        candidates.dedup();
        for key in candidates {
            let Need::Transfer { from, to } = self.ix.need[key.1 as usize] else { continue };
            let (ports, count) = self.ports_of(from, to);
            let ports = &ports[..count];
            if ports.iter().all(|&p| !self.ports[p].busy && self.ports[p].waiting.contains(&key)) {
                for &p in ports {
                    self.ports[p].waiting.remove(&key);
                }
                self.begin(key.1);
            }
        }
    }

    fn begin(&mut self, t: u32) {
        let i = t as usize;
        self.started[i] = true;
        self.start[i] = self.now;
        let end = Time(self.now + self.plan.tasks[i].duration_us as f64);
        let mut holder = None;
        match self.ix.need[i] {
            Need::Compute(d) if self.opts.concurrent_kernels => {
                self.shared_advance(d);
                let task = &self.plan.tasks[i];
                self.shared[d].running.push((t, task.duration_us as f64, task.occupancy));
                self.shared_reschedule(d);
            }
            Need::Compute(d) => {
                self.devices[d].busy = true;
                holder = self.devices[d].freed_by;
                self.heap.push(Reverse((end, What::Finish(t))));
            }
            Need::Collective => self.heap.push(Reverse((end, What::Finish(t)))),
            // Its end and predecessor were decided when its channels were booked.
            Need::Transfer { .. } if self.channels.is_some() => {}
            Need::Transfer { from, to } => {
                let (ports, count) = self.ports_of(from, to);
                for &p in &ports[..count] {
                    self.ports[p].busy = true;
                    holder = holder.max(self.ports[p].freed_by);
                }
                self.heap.push(Reverse((end, What::Finish(t))));
            }
        }
        if self.is_booked(i) {
            // The channels keep the link's order; the next transfer on the link may be booked
            // behind this one at once.
            self.leave_streams(t);
        } else {
            // A task that waited for its resource was started by the end of the resource's
            // previous holder; otherwise by the end that made it ready.
            self.pred[i] = match holder {
                Some((_, by)) if self.now > self.ready_at[i] => Some(by),
                _ => self.ready_by[i],
            };
        }
        if let Need::Compute(d) = self.ix.need[i] {
            self.memory.workspace(d, self.plan.tasks[i].workspace_bytes, true, self.now);
        }
        for &b in self.ix.produces.get(i) {
            self.memory.allocate(self.plan, b, self.now);
        }
    }

    fn shared_advance(&mut self, d: usize) {
        let dev = &mut self.shared[d];
        if !dev.running.is_empty() {
            let work = (self.now - dev.since) * dev.rate();
            for r in &mut dev.running {
                r.1 -= work;
            }
        }
        dev.since = self.now;
    }

    fn shared_reschedule(&mut self, d: usize) {
        let dev = &mut self.shared[d];
        dev.version += 1;
        let rate = dev.rate();
        if let Some(min) = dev.running.iter().map(|r| r.1).min_by(f64::total_cmp) {
            let at = self.now + min.max(0.0) / rate;
            let what = What::Tick { device: d as u32, version: dev.version };
            self.heap.push(Reverse((Time(at), what)));
        }
    }

    fn shared_tick(&mut self, d: usize) {
        self.shared_advance(d);
        let dev = &mut self.shared[d];
        let Some(min) = dev.running.iter().map(|r| r.1).min_by(f64::total_cmp) else { return };
        // Rounding can leave kernels that end now a hair above zero.
        let limit = min.max(0.0) + 1e-9 * (1.0 + self.now.abs());
        let mut ended: Vec<u32> =
            dev.running.iter().filter(|r| r.1 <= limit).map(|r| r.0).collect();
        dev.running.retain(|r| r.1 > limit);
        ended.sort_unstable();
        self.shared_reschedule(d);
        for t in ended {
            self.complete(t);
        }
    }

    fn report(self) -> Report {
        let step = self.finish.iter().copied().fold(0.0, f64::max);
        let (peak, timeline) = self.memory.finish(self.plan, step);
        analysis::report(self.plan, self.ix, &self.start, &self.finish, &self.pred, peak, timeline)
    }
}

fn mark(slot: &mut Slot, dirty: &mut Vec<usize>, id: usize) {
    if !slot.dirty {
        slot.dirty = true;
        dirty.push(id);
    }
}

fn free_slot(slot: &mut Slot, dirty: &mut Vec<usize>, id: usize, now: f64, by: u32) {
    slot.busy = false;
    slot.freed_by = Some((Time(now), by));
    mark(slot, dirty, id);
}
