//! The state m-ETF and m-SCT share: Baechi's event-driven simulation of a placement as it is
//! built (`ETFDevice`, `ReadyOpManager`), with ordo's memory rules. The placers differ only in
//! which ready op they start next; this module knows when ops are ready, where they fit, when
//! their inputs would arrive, and what starting one does.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::PlaceError;
use crate::sim::{Links, Schedule, memory_peaks};
use ordo_problem::PlaceProblem;
use ordo_problem::Placement;

/// Marks an unplaced node.
pub(crate) const NONE: usize = usize::MAX;

/// The simulation a placer drives.
///
/// Memory follows the simulator's time-based rules ([`crate::sim`]) and is checked so that the
/// peak of the schedule built here never exceeds a device's limit, even though decisions are
/// made before the future is known:
///
/// * `reserved[d]`: resident bytes (persistent, plus retained outputs in training) of every
///   colocation group pinned to `d`, counted from time 0 as the simulator counts persistent
///   memory, and the received copies on `d` (in training they are kept for backward; in
///   forward-only mode they are freed after their last consumer, but are counted as resident
///   all the same, which is simple and safe), counted from time 0 too although they arrive
///   later;
/// * `live[d]`: outputs of started ops on `d` that are not freed yet; an output whose last
///   consumer has not started counts as live (it cannot be freed before that consumer finishes);
/// * `high[d]`: the largest `live + outputs + temporary` seen when an op started on `d`.
///
/// An op fits on `d` when `reserved + max(high, live + its outputs and temporary) <= limit`
/// (adding to `reserved` its group's resident bytes if it is the group's first op there, and
/// the tensors it would receive); a group may be pinned to `d`
/// when `reserved + its resident bytes + high <= limit`. Then `reserved + high` bounds the
/// schedule's memory on `d` at all times.
pub(crate) struct Engine<'a> {
    pub(crate) problem: &'a PlaceProblem,
    /// Number of devices.
    pub(crate) m: usize,
    /// The current event time.
    pub(crate) now: u64,
    links: Links,
    /// When each device's compute queue is next free (Baechi's `next_available_ts`).
    pub(crate) device_free: Vec<u64>,
    /// Last op started on each device, and whether its completion has been processed.
    pub(crate) last_op: Vec<Option<usize>>,
    last_done: Vec<bool>,
    /// Device of each node: chosen when its group is pinned, or given up front for a replay.
    pub(crate) device_of: Vec<usize>,
    pub(crate) scheduled: Vec<bool>,
    pub(crate) start: Vec<u64>,
    pub(crate) finish: Vec<u64>,
    /// Predecessors not yet finished.
    pending: Vec<usize>,
    pub(crate) order: Vec<Vec<usize>>,
    pub(crate) count: usize,
    /// Tensors sent to their consumer's device by the last [`Engine::start`].
    pub(crate) sent: Vec<usize>,
    memory: Memory,
}

/// [`Engine::ready_time`] split into the term that decides it: a fixed time, or a channel's
/// free time plus a fixed transfer time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    /// The ready time.
    pub(crate) ready: u64,
    /// The device whose channel decides it, if any.
    pub(crate) channel: Option<usize>,
    /// `ready` minus that channel's free time (`ready` itself without a channel).
    pub(crate) key: u64,
}

struct Memory {
    limit: Vec<u64>,
    reserved: Vec<u64>,
    live: Vec<u64>,
    high: Vec<u64>,
    /// Outputs whose last consumer has started: `(free time, device, bytes)`.
    frees: BinaryHeap<Reverse<(u64, usize, u64)>>,
    consumers_left: Vec<usize>,
    last_consumer_finish: Vec<u64>,
    /// Resident bytes of the node's group on its device (the whole group unless a given
    /// placement splits it), reserved when the first of them starts.
    part_resident: Vec<u64>,
    /// Whether the node's resident bytes are reserved.
    counted: Vec<bool>,
    /// Bytes of all the tensors on the node's in-edges: a bound on what starting it can send
    /// to a device, which spares [`Engine::fits`] the exact sum when memory is plentiful.
    input_bytes: Vec<u64>,
}

impl<'a> Engine<'a> {
    /// An engine that places as it goes (m-ETF, m-SCT): colocation groups are pinned to the
    /// device where their first op starts.
    pub(crate) fn new(problem: &'a PlaceProblem) -> Self {
        let group_resident: Vec<u64> = problem
            .groups
            .iter()
            .map(|members| {
                members
                    .iter()
                    .fold(0u64, |sum, &v| sum.saturating_add(problem.memory[v].resident_bytes()))
            })
            .collect();
        let part_resident = problem.group_of.iter().map(|&g| group_resident[g]).collect();
        Self::build(problem, vec![NONE; problem.len()], part_resident)
    }

    /// An engine for a given placement (a replay). Each device reserves the resident bytes of
    /// its share of a colocation group when the first op of that share starts.
    pub(crate) fn with_placement(problem: &'a PlaceProblem, device_of: &[usize]) -> Self {
        let mut part = std::collections::HashMap::new();
        for (v, &d) in device_of.iter().enumerate() {
            let sum: &mut u64 = part.entry((problem.group_of[v], d)).or_default();
            *sum = sum.saturating_add(problem.memory[v].resident_bytes());
        }
        let part_resident =
            (0..problem.len()).map(|v| part[&(problem.group_of[v], device_of[v])]).collect();
        Self::build(problem, device_of.to_vec(), part_resident)
    }

    fn build(problem: &'a PlaceProblem, device_of: Vec<usize>, part_resident: Vec<u64>) -> Self {
        let (n, m) = (problem.len(), problem.devices.count());
        Self {
            problem,
            m,
            now: 0,
            links: Links::new(m, problem.tensors.len()),
            device_free: vec![0; m],
            last_op: vec![None; m],
            last_done: vec![true; m],
            device_of,
            scheduled: vec![false; n],
            start: vec![0; n],
            finish: vec![0; n],
            pending: problem.in_edges.iter().map(Vec::len).collect(),
            order: vec![Vec::new(); m],
            count: 0,
            sent: Vec::new(),
            memory: Memory {
                limit: problem.devices.memory.clone(),
                reserved: vec![0; m],
                live: vec![0; m],
                high: vec![0; m],
                frees: BinaryHeap::new(),
                consumers_left: problem.out_edges.iter().map(Vec::len).collect(),
                last_consumer_finish: vec![0; n],
                part_resident,
                counted: vec![false; n],
                input_bytes: problem
                    .in_edges
                    .iter()
                    .map(|edges| {
                        let tensors = edges.iter().flat_map(|&e| &problem.edges[e].tensors);
                        tensors.fold(0u64, |sum, &t| sum.saturating_add(problem.tensors[t].bytes))
                    })
                    .collect(),
            },
        }
    }

    /// The ops with no predecessors, which are ready at time 0.
    pub(crate) fn sources(&self) -> Vec<usize> {
        (0..self.problem.len()).filter(|&v| self.problem.in_edges[v].is_empty()).collect()
    }

    /// Moves time to `t` (Baechi's `ETFDevice.advance` on every device): idle devices become
    /// free at `t`, outputs due by `t` are freed, and the ops whose last predecessor finished
    /// by `t` are returned (they become ready).
    pub(crate) fn advance(&mut self, t: u64) -> Vec<usize> {
        self.now = t;
        while let Some(&Reverse((at, d, bytes))) = self.memory.frees.peek() {
            if at > t {
                break;
            }
            self.memory.frees.pop();
            self.memory.live[d] = self.memory.live[d].saturating_sub(bytes);
        }
        let mut ready = Vec::new();
        for d in 0..self.m {
            if let Some(v) = self.last_op[d]
                && !self.last_done[d]
                && self.finish[v] <= t
            {
                self.last_done[d] = true;
                self.complete(v, &mut ready);
            }
            self.device_free[d] = self.device_free[d].max(t);
        }
        ready
    }

    fn complete(&mut self, v: usize, ready: &mut Vec<usize>) {
        for &e in &self.problem.out_edges[v] {
            let c = self.problem.edges[e].target;
            self.pending[c] -= 1;
            if self.pending[c] == 0 {
                ready.push(c);
            }
        }
    }

    /// Whether device `d` can start an op now.
    pub(crate) fn is_free(&self, d: usize) -> bool {
        self.device_free[d] <= self.now
    }

    /// Whether all of `v`'s inputs have finished.
    pub(crate) fn is_ready(&self, v: usize) -> bool {
        self.pending[v] == 0
    }

    /// Whether `v` cannot run on `d`: it is placed (pinned with its group) elsewhere, or its
    /// group's resident bytes are not reserved yet and do not fit on `d`. Once true for
    /// `(v, d)`, it stays true.
    pub(crate) fn excluded(&self, v: usize, d: usize) -> bool {
        let placed = self.device_of[v];
        if placed != NONE && placed != d {
            return true;
        }
        let mem = &self.memory;
        !mem.counted[v]
            && mem.reserved[d].saturating_add(mem.part_resident[v]).saturating_add(mem.high[d])
                > mem.limit[d]
    }

    /// Bytes `v` adds to its device's live memory while it runs.
    fn transient(&self, v: usize) -> u64 {
        let mem = &self.problem.memory[v];
        let outputs = if mem.retain_outputs { 0 } else { mem.outputs };
        mem.temporary.saturating_add(outputs)
    }

    /// Bytes of the tensors that starting `v` on `d` would send there. Time `O(in-edges + their
    /// tensors)`.
    fn incoming(&self, v: usize, d: usize) -> u64 {
        let p = self.problem;
        let mut bytes = 0u64;
        for &e in &p.in_edges[v] {
            let edge = &p.edges[e];
            if self.device_of[edge.source] == d {
                continue;
            }
            for &t in &edge.tensors {
                let tensor = &p.tensors[t];
                if self.links.arrival(t, d).is_none() {
                    bytes = bytes.saturating_add(tensor.bytes);
                }
            }
        }
        bytes
    }

    /// Whether `v` fits in `d`'s memory now (Baechi's `is_placeable`), counting the resident
    /// bytes its group would reserve if it is the group's first op there and the tensors it
    /// would receive.
    pub(crate) fn fits(&self, v: usize, d: usize) -> bool {
        let mem = &self.memory;
        let reserving = if mem.counted[v] { 0 } else { mem.part_resident[v] };
        let now = mem.live[d].saturating_add(self.transient(v));
        // What it reserves counts from time 0, so it must also fit beside the highest level
        // seen so far.
        let base = mem.reserved[d].saturating_add(reserving).saturating_add(now.max(mem.high[d]));
        // Saturating sums of non-negative terms: the bound fitting implies the exact sum fits.
        base.saturating_add(mem.input_bytes[v]) <= mem.limit[d]
            || base.saturating_add(self.incoming(v, d)) <= mem.limit[d]
    }

    /// Whether `v` may start on `d`: its group allows `d` and it fits.
    pub(crate) fn feasible(&self, v: usize, d: usize) -> bool {
        !self.excluded(v, d) && self.fits(v, d)
    }

    /// When all inputs of the ready op `v` would be on `d` if it were started now: Baechi's dry
    /// run of `ReadyOpManager.get_ready_ts`. Each in-edge is costed alone against the channels
    /// as they are: its tensors already on `d` count at their arrival, and the rest are merged
    /// into one transfer. Time `O(in-edges + their tensors)`.
    pub(crate) fn ready_time(&self, v: usize, d: usize) -> u64 {
        let p = self.problem;
        let mut ready = 0;
        for &e in &p.in_edges[v] {
            let edge = &p.edges[e];
            let (u, from) = (edge.source, self.device_of[edge.source]);
            let at = if from == d || edge.tensors.is_empty() {
                self.finish[u]
            } else {
                let (mut at, mut unsent, mut cost) = (0, false, 0u64);
                for &t in &edge.tensors {
                    match self.links.arrival(t, d) {
                        Some(arrival) => at = at.max(arrival),
                        None => {
                            unsent = true;
                            cost = cost.saturating_add(p.tensors[t].comm_us);
                        }
                    }
                }
                if unsent { at.max(self.links.dry_send(from, d, self.finish[u], cost)) } else { at }
            };
            ready = ready.max(at);
        }
        ready
    }

    /// [`Engine::ready_time`] with the term that decides it. Every in-edge's dry-run transfer
    /// ends at `max(producer finish, sender channel free, receiver channel free) + cost`, so
    /// the ready time is the largest of a fixed time, `channel_free(d) + the largest cost`, and
    /// `channel_free(s) + cost` over the edges from each sender `s`. While no tensor reaches `d`
    /// the fixed parts stay the same, and the ready time grows with the deciding channel.
    pub(crate) fn due(&self, v: usize, d: usize) -> Due {
        let p = self.problem;
        let (mut fixed, mut own, mut sender) = (0u64, None::<u64>, None::<(u64, usize, u64)>);
        for &e in &p.in_edges[v] {
            let edge = &p.edges[e];
            let (u, from) = (edge.source, self.device_of[edge.source]);
            if from == d || edge.tensors.is_empty() {
                fixed = fixed.max(self.finish[u]);
                continue;
            }
            let (mut unsent, mut cost) = (false, 0u64);
            for &t in &edge.tensors {
                match self.links.arrival(t, d) {
                    Some(arrival) => fixed = fixed.max(arrival),
                    None => {
                        unsent = true;
                        cost = cost.saturating_add(p.tensors[t].comm_us);
                    }
                }
            }
            if unsent {
                fixed = fixed.max(self.finish[u].saturating_add(cost));
                own = Some(own.map_or(cost, |w| w.max(cost)));
                let value = self.links.channel_free(from).saturating_add(cost);
                if sender.is_none_or(|(best, _, _)| value > best) {
                    sender = Some((value, from, cost));
                }
            }
        }
        let own_value = own.map(|w| self.links.channel_free(d).saturating_add(w));
        let ready = fixed.max(own_value.unwrap_or(0)).max(sender.map_or(0, |(value, _, _)| value));
        debug_assert_eq!(ready, self.ready_time(v, d));
        if fixed == ready {
            Due { ready, channel: None, key: fixed }
        } else if own_value == Some(ready) {
            Due { ready, channel: Some(d), key: own.unwrap_or(0) }
        } else {
            let (_, from, cost) = sender.expect("a sender decides");
            Due { ready, channel: Some(from), key: cost }
        }
    }

    /// When `device`'s channel is next free.
    pub(crate) fn channel_free(&self, device: usize) -> u64 {
        self.links.channel_free(device)
    }

    /// Starts the ready op `v` on the free device `d` at the current time (Baechi's
    /// `_run_schedule_step` body): pins `v`'s group to `d` and reserves its resident bytes if
    /// needed, sends the missing input tensors one by one in link order (listing them in
    /// [`Engine::sent`]), runs `v` once they are there, and does the memory bookkeeping. Returns the ops that became ready at once (only when `v` takes no time).
    pub(crate) fn start(&mut self, v: usize, d: usize) -> Vec<usize> {
        let p = self.problem;
        if !self.memory.counted[v] {
            let mem = &mut self.memory;
            mem.reserved[d] = mem.reserved[d].saturating_add(mem.part_resident[v]);
            for &member in &p.groups[p.group_of[v]] {
                if self.device_of[member] == NONE {
                    self.device_of[member] = d;
                }
                if self.device_of[member] == d {
                    mem.counted[member] = true;
                }
            }
        }
        let mut ready = 0;
        self.sent.clear();
        for &e in &p.in_edges[v] {
            let edge = &p.edges[e];
            let (u, from) = (edge.source, self.device_of[edge.source]);
            if from == d || edge.tensors.is_empty() {
                ready = ready.max(self.finish[u]);
                continue;
            }
            for &t in &edge.tensors {
                let arrival = match self.links.arrival(t, d) {
                    Some(arrival) => arrival,
                    None => {
                        self.sent.push(t);
                        self.links.send(t, from, d, self.finish[u], p.tensors[t].comm_us)
                    }
                };
                ready = ready.max(arrival);
            }
        }
        for &t in &self.sent {
            self.memory.reserved[d] = self.memory.reserved[d].saturating_add(p.tensors[t].bytes);
        }
        let start = self.now.max(self.device_free[d]).max(ready);
        let finish = start.saturating_add(p.weights[v]);
        (self.start[v], self.finish[v]) = (start, finish);
        self.device_free[d] = finish;
        self.scheduled[v] = true;
        self.count += 1;
        self.order[d].push(v);
        self.last_op[d] = Some(v);
        self.last_done[d] = false;

        let transient = self.transient(v);
        let mem = &mut self.memory;
        mem.high[d] = mem.high[d].max(mem.live[d].saturating_add(transient));
        if !p.memory[v].retain_outputs {
            mem.live[d] = mem.live[d].saturating_add(p.memory[v].outputs);
        }
        for &e in &p.in_edges[v] {
            let u = p.edges[e].source;
            mem.consumers_left[u] -= 1;
            mem.last_consumer_finish[u] = mem.last_consumer_finish[u].max(finish);
            if mem.consumers_left[u] == 0 && !p.memory[u].retain_outputs {
                let bytes = p.memory[u].outputs;
                mem.frees.push(Reverse((mem.last_consumer_finish[u], self.device_of[u], bytes)));
            }
        }

        let mut now_ready = Vec::new();
        if finish <= self.now {
            self.last_done[d] = true;
            self.complete(v, &mut now_ready);
        }
        now_ready
    }

    /// The latest finish time so far.
    pub(crate) fn makespan(&self) -> u64 {
        self.finish.iter().copied().max().unwrap_or(0)
    }

    /// [`PlaceError::OutOfMemory`] for `algo`, naming the unstarted op that comes first in
    /// topological order.
    pub(crate) fn out_of_memory(&self, algo: &'static str) -> PlaceError {
        let p = self.problem;
        let first = p.topo_order.iter().copied().find(|&v| !self.scheduled[v]).unwrap_or(0);
        PlaceError::OutOfMemory {
            algo,
            unplaced: p.len() - self.count,
            total: p.len(),
            first: p.names[first].clone(),
        }
    }

    /// The timeline as a [`Schedule`], peak memory by the simulator's rules.
    pub(crate) fn into_schedule(self) -> Schedule {
        let p = self.problem;
        Schedule {
            makespan_us: self.makespan(),
            peak_memory_bytes: memory_peaks(
                p,
                &self.device_of,
                &self.start,
                &self.finish,
                &self.links,
            ),
            order: self.order,
            start_us: self.start,
            finish_us: self.finish,
            transfers: self.links.issued,
        }
    }

    /// The placement, or [`PlaceError::OutOfMemory`] if some ops could not be started.
    pub(crate) fn into_placement(self, algo: &'static str) -> Result<Placement, PlaceError> {
        if self.count < self.problem.len() {
            return Err(self.out_of_memory(algo));
        }
        let device_of = self.device_of.clone();
        let schedule = self.into_schedule();
        Ok(schedule.into_placement(algo, device_of, 0.0))
    }
}
