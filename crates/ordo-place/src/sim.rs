//! Simulating a placement: Baechi's execution simulator (the TensorFlow placer's
//! `VirtualScheduler`), and the execution model of m-ETF and m-SCT replayed on a given order.
//!
//! * [`simulate`] is Baechi's `VirtualScheduler`: the makespans Baechi reports for a placement.
//! * [`simulate_with_order`] runs each device's ops in a given order under the model m-ETF and
//!   m-SCT build their schedules in; on m-ETF's placement and order it gives m-ETF's own
//!   schedule, start times, makespan and peak memory included.
//!
//! The two differ in when tensors are sent and in which order a device runs its ops (see
//! [`crate::etf`] for why m-ETF's estimate and Baechi's simulator disagree).
//!
//! # The model of [`simulate`]
//!
//! * **Compute.** Each device runs one op at a time, in the order the simulation reaches them:
//!   `start = max(device free, ready)`, `finish = start + weight`.
//! * **Order.** Ops are taken globally by `(ready time, topological rank)`; an op's ready time
//!   is known once all its predecessors have been taken, and the device order is the order in
//!   which ops are taken.
//! * **Communication.** Each device has *one* channel that it shares for sending and receiving.
//!   When an op is taken, every tensor on its out-edges to another device is sent at once (in
//!   link order, tensors in list order): `send_start = max(producer finish, sender channel
//!   free)`, `recv_start = max(send_start, receiver channel free)`, `recv_end = recv_start +
//!   cost`; the sender's channel is then busy until `send_start + cost` and the receiver's until
//!   `recv_end`. A tensor crosses to a given device once: later consumers there reuse it.
//! * **Ready time** of an op: the latest over its in-edges of the producer's finish (same
//!   device, or an edge with no tensors) or the arrival of the edge's tensors on its device.
//! * **Memory** (per device, over time): persistent memory is resident from the start; an op
//!   allocates its outputs and temporary memory when it starts and frees the temporary memory
//!   when it finishes; its outputs are freed when its last consumer finishes, unless
//!   [`NodeMemory::retain_outputs`](ordo_cost::NodeMemory) is set (training: kept for backward)
//!   or it has no consumer. At equal times frees come first, so the peak is the largest level
//!   the memory holds over an interval. A received copy of a tensor takes its bytes on the
//!   receiver from the start of its send until its last consumer there finishes, or to the end
//!   when its producer's outputs are retained (Baechi does not count copies; ordo's simulator of
//!   plans does, and these peaks are its peaks).
//!
//! Compute and communication follow Baechi's `virtual_scheduler.py` and `device.py` exactly.
//! Memory is ordo's time-based version of Baechi's allocator rules (Baechi counts memory in the
//! order it processes ops, and keeps persistent memory only from the op's run on).
//!
//! **Memory limits.** The placers keep the peak of *their own* schedule within every device's
//! limit, which [`simulate_with_order`] reproduces. [`simulate`]'s timeline is a different one:
//! when outputs are retained (training) its peak cannot exceed the limits either, since nothing
//! is ever freed; in forward-only mode an output can live longer in it than in the placer's
//! schedule, and the peak can exceed a limit that the placement was built to fit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::PlaceError;
use ordo_problem::{PlaceProblem, Placement, PlacementFile};

/// A simulated execution of a placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Per device, its nodes in execution order.
    pub order: Vec<Vec<usize>>,
    /// Start time of each node in µs.
    pub start_us: Vec<u64>,
    /// Finish time of each node in µs.
    pub finish_us: Vec<u64>,
    /// The latest finish time in µs (0 for an empty graph).
    pub makespan_us: u64,
    /// Peak memory of each device in bytes.
    pub peak_memory_bytes: Vec<u64>,
    /// Every transfer, `(tensor index, receiving device)`, in the order it was booked on the
    /// channels.
    pub transfers: Vec<(usize, usize)>,
}

impl Schedule {
    /// The placement `device_of` as this schedule (its simulation) runs it: the schedule's
    /// orders, makespan, peaks and transfer order.
    pub fn into_placement(
        self,
        algo: &str,
        device_of: Vec<usize>,
        placement_seconds: f64,
    ) -> Placement {
        Placement {
            algo: algo.to_string(),
            device_of,
            order: self.order,
            makespan_us: self.makespan_us,
            peak_memory_bytes: self.peak_memory_bytes,
            transfers: Some(self.transfers),
            placement_seconds,
        }
    }
}

/// The file form of `placement`, with Baechi's simulated makespan of it and the problem's
/// lower bound ([`crate::lower_bounds`]) filled in.
pub fn placement_file(problem: &PlaceProblem, placement: &Placement) -> PlacementFile {
    let baechi_makespan_us = simulate(problem, &placement.device_of).makespan_us;
    let lower_bound_us = crate::bound::lower_bounds(problem).best_us();
    PlacementFile::new(problem, placement, baechi_makespan_us, lower_bound_us)
}

/// Simulates `problem` placed by `device_of` (a device index per node) with Baechi's
/// `VirtualScheduler`; see the [module documentation](self) for the model.
///
/// Time `O((|V| + |E|) log |V| + T)` for `T` tensor references on the links, memory
/// `O(|V| + m · |tensors|)` for `m` devices.
///
/// # Panics
/// If `device_of` does not have one entry per node or names a device that does not exist.
pub fn simulate(problem: &PlaceProblem, device_of: &[usize]) -> Schedule {
    check_devices(problem, device_of);
    let mut run = Run::new(problem, device_of);
    let mut queue = BinaryHeap::new();
    for v in 0..problem.len() {
        if problem.in_edges[v].is_empty() {
            queue.push(Reverse((0, problem.topo_rank[v], v)));
        }
    }
    while let Some(Reverse((ready, _, v))) = queue.pop() {
        for c in run.take(v, ready) {
            queue.push(Reverse((run.ready_time(c), problem.topo_rank[c], c)));
        }
    }
    run.finish()
}

/// Simulates `problem` placed by `device_of` with every device running its nodes in the order
/// given by `order` (one list per device), in m-ETF's execution model: the model in which
/// m-ETF and m-SCT build their schedules, so that for an m-ETF placement the result is m-ETF's
/// own schedule (same start times, makespan and peak memory).
///
/// Compute, channels and memory are as in [`simulate`], with two differences:
///
/// * a tensor is sent when its consumer starts (in link order, one tensor after another), not
///   when its producer finishes, so channels are used in the order consumers start;
/// * at each event (an op finishing, or an input becoming available), every free device whose
///   next op has all inputs available by now starts it, smallest topological rank first; an op
///   waits while its outputs and temporary memory do not fit, and a device reserves the
///   resident memory of its share of a colocation group when the first op of that share
///   starts.
///
/// Time `O(s · m · d)` for `s` events, `m` devices and in-degree `d`.
///
/// # Errors
/// [`PlaceError::Invalid`] if `device_of` or `order` do not fit the problem (wrong lengths, a
/// device out of range, a node missing, repeated or listed on another device than its own), or
/// if the order contradicts the graph's edges, so that no device can go on;
/// [`PlaceError::OutOfMemory`] if the devices' next ops can never fit in memory.
pub fn simulate_with_order(
    problem: &PlaceProblem,
    device_of: &[usize],
    order: &[Vec<usize>],
) -> Result<Schedule, PlaceError> {
    check_order(problem, device_of, order)?;
    crate::etf::replay(problem, device_of, order).map(crate::etf::Engine::into_schedule)
}

/// [`simulate_with_order`]'s makespan in µs.
///
/// # Errors
/// Those of [`simulate_with_order`].
pub fn makespan_with_order(
    problem: &PlaceProblem,
    device_of: &[usize],
    order: &[Vec<usize>],
) -> Result<u64, PlaceError> {
    simulate_with_order(problem, device_of, order).map(|s| s.makespan_us)
}

fn check_devices(problem: &PlaceProblem, device_of: &[usize]) {
    assert_eq!(device_of.len(), problem.len(), "device_of needs one device per node");
    let m = problem.devices.count();
    if let Some(v) = device_of.iter().position(|&d| d >= m) {
        panic!(
            "node `{}` is placed on device {}, but there are {m}",
            problem.names[v], device_of[v]
        );
    }
}

fn check_order(
    problem: &PlaceProblem,
    device_of: &[usize],
    order: &[Vec<usize>],
) -> Result<(), PlaceError> {
    let invalid = |msg: String| Err(PlaceError::Invalid(msg));
    let (n, m) = (problem.len(), problem.devices.count());
    if device_of.len() != n {
        return invalid(format!("device_of has {} entries for {n} nodes", device_of.len()));
    }
    if let Some(v) = device_of.iter().position(|&d| d >= m) {
        return invalid(format!(
            "node `{}` is on device {} of {m}",
            problem.names[v], device_of[v]
        ));
    }
    if order.len() != m {
        return invalid(format!("the order lists {} devices, there are {m}", order.len()));
    }
    let mut seen = vec![false; n];
    for (d, list) in order.iter().enumerate() {
        for &v in list {
            if v >= n || seen[v] || device_of[v] != d {
                let what =
                    if v >= n { format!("node index {v}") } else { problem.names[v].clone() };
                return invalid(format!(
                    "device {d}'s order lists `{what}`, which is out of range, repeated or placed \
                     elsewhere"
                ));
            }
            seen[v] = true;
        }
    }
    if let Some(v) = seen.iter().position(|&s| !s) {
        return invalid(format!("node `{}` is in no device's order", problem.names[v]));
    }
    Ok(())
}

/// The state of one simulation.
struct Run<'a> {
    problem: &'a PlaceProblem,
    device_of: &'a [usize],
    links: Links,
    device_free: Vec<u64>,
    pending: Vec<usize>,
    order: Vec<Vec<usize>>,
    start: Vec<u64>,
    finish: Vec<u64>,
}

impl<'a> Run<'a> {
    fn new(problem: &'a PlaceProblem, device_of: &'a [usize]) -> Self {
        let (n, m) = (problem.len(), problem.devices.count());
        Self {
            problem,
            device_of,
            links: Links::new(m, problem.tensors.len()),
            device_free: vec![0; m],
            pending: problem.in_edges.iter().map(Vec::len).collect(),
            order: vec![Vec::new(); m],
            start: vec![0; n],
            finish: vec![0; n],
        }
    }

    /// Runs `v` (ready at `ready`) on its device, sends its outputs, and returns the
    /// successors that became ready.
    fn take(&mut self, v: usize, ready: u64) -> Vec<usize> {
        let p = self.problem;
        let d = self.device_of[v];
        let start = self.device_free[d].max(ready);
        let finish = start.saturating_add(p.weights[v]);
        (self.start[v], self.finish[v]) = (start, finish);
        self.device_free[d] = finish;
        self.order[d].push(v);
        for &e in &p.out_edges[v] {
            let to = self.device_of[p.edges[e].target];
            if to != d {
                for &t in &p.edges[e].tensors {
                    if self.links.arrival(t, to).is_none() {
                        self.links.send(t, d, to, finish, p.tensors[t].comm_us);
                    }
                }
            }
        }
        let mut ready_now = Vec::new();
        for &e in &p.out_edges[v] {
            let c = p.edges[e].target;
            self.pending[c] -= 1;
            if self.pending[c] == 0 {
                ready_now.push(c);
            }
        }
        ready_now
    }

    /// Ready time of `v`, whose predecessors have all been taken.
    fn ready_time(&self, v: usize) -> u64 {
        let p = self.problem;
        let d = self.device_of[v];
        p.in_edges[v]
            .iter()
            .map(|&e| {
                let edge = &p.edges[e];
                let u = edge.source;
                if self.device_of[u] == d || edge.tensors.is_empty() {
                    self.finish[u]
                } else {
                    edge.tensors
                        .iter()
                        .map(|&t| self.links.arrival(t, d).expect("an input tensor was sent"))
                        .max()
                        .unwrap_or(0)
                }
            })
            .max()
            .unwrap_or(0)
    }

    fn finish(self) -> Schedule {
        let peak_memory_bytes =
            memory_peaks(self.problem, self.device_of, &self.start, &self.finish, &self.links);
        Schedule {
            makespan_us: self.finish.iter().copied().max().unwrap_or(0),
            order: self.order,
            start_us: self.start,
            finish_us: self.finish,
            peak_memory_bytes,
            transfers: self.links.issued,
        }
    }
}

/// Baechi's channel model: one channel per device, shared by sends and receives, and a cache of
/// the tensors each device has received.
#[derive(Clone, Debug)]
pub(crate) struct Links {
    devices: usize,
    channel_free: Vec<u64>,
    /// `tensor * devices + device` -> arrival time, `u64::MAX` if not there.
    arrival: Vec<u64>,
    /// Every transfer so far, `(tensor, receiving device)`, in booking order.
    pub(crate) issued: Vec<(usize, usize)>,
    /// When each transfer of `issued` starts sending.
    pub(crate) sent_at: Vec<u64>,
}

impl Links {
    pub(crate) fn new(devices: usize, tensors: usize) -> Self {
        Self {
            devices,
            channel_free: vec![0; devices],
            arrival: vec![u64::MAX; tensors * devices],
            issued: Vec::new(),
            sent_at: Vec::new(),
        }
    }

    /// When tensor `t` arrived on `device`, if it has been sent there.
    pub(crate) fn arrival(&self, t: usize, device: usize) -> Option<u64> {
        let at = self.arrival[t * self.devices + device];
        (at != u64::MAX).then_some(at)
    }

    /// When `device`'s channel is next free.
    pub(crate) fn channel_free(&self, device: usize) -> u64 {
        self.channel_free[device]
    }

    /// Sends tensor `t` (`cost` µs) from `from` to `to`, available on `from` at `ready`; both
    /// channels are used and `to` keeps the tensor. Returns the arrival time.
    pub(crate) fn send(&mut self, t: usize, from: usize, to: usize, ready: u64, cost: u64) -> u64 {
        let send_start = ready.max(self.channel_free[from]);
        let recv_end = send_start.max(self.channel_free[to]).saturating_add(cost);
        self.channel_free[from] = send_start.saturating_add(cost);
        self.channel_free[to] = recv_end;
        self.arrival[t * self.devices + to] = recv_end;
        self.issued.push((t, to));
        self.sent_at.push(send_start);
        recv_end
    }

    /// When `cost` µs of data available on `from` at `ready` would arrive on `to` if sent now,
    /// changing nothing.
    pub(crate) fn dry_send(&self, from: usize, to: usize, ready: u64, cost: u64) -> u64 {
        let send_start = ready.max(self.channel_free[from]);
        send_start.max(self.channel_free[to]).saturating_add(cost)
    }
}

/// Peak memory of each device for the given start and finish times and transfers, by the
/// rules in the [module documentation](self). Time `O((|V| + T) log (|V| + T))` for `T`
/// transfers, plus `O(|E|)`.
pub(crate) fn memory_peaks(
    problem: &PlaceProblem,
    device_of: &[usize],
    start: &[u64],
    finish: &[u64],
    links: &Links,
) -> Vec<u64> {
    let m = problem.devices.count();
    let mut base = vec![0u64; m];
    let mut events: Vec<Vec<(u64, i128)>> = vec![Vec::new(); m];
    for v in 0..problem.len() {
        let (d, mem) = (device_of[v], &problem.memory[v]);
        base[d] = base[d].saturating_add(mem.persistent);
        events[d].push((start[v], i128::from(mem.temporary) + i128::from(mem.outputs)));
        events[d].push((finish[v], -i128::from(mem.temporary)));
        if !mem.retain_outputs && !problem.out_edges[v].is_empty() {
            let freed = problem.out_edges[v]
                .iter()
                .map(|&e| finish[problem.edges[e].target])
                .max()
                .unwrap_or(0);
            events[d].push((freed, -i128::from(mem.outputs)));
        }
    }
    // A received copy lives from its send's start until its last reader there finishes, or to
    // the end when its producer's outputs are retained.
    let mut last_reader: std::collections::HashMap<(usize, usize), u64> =
        std::collections::HashMap::new();
    for edge in &problem.edges {
        let to = device_of[edge.target];
        for &t in &edge.tensors {
            let at = last_reader.entry((t, to)).or_default();
            *at = (*at).max(finish[edge.target]);
        }
    }
    for (&(t, to), &sent) in links.issued.iter().zip(&links.sent_at) {
        let tensor = &problem.tensors[t];
        events[to].push((sent, i128::from(tensor.bytes)));
        if !problem.memory[tensor.producer].retain_outputs {
            events[to].push((last_reader[&(t, to)], -i128::from(tensor.bytes)));
        }
    }
    events
        .into_iter()
        .zip(base)
        .map(|(mut list, base)| {
            list.sort_unstable_by_key(|&(time, _)| time);
            let (mut level, mut peak) = (i128::from(base), i128::from(base));
            for (i, &(time, delta)) in list.iter().enumerate() {
                level += delta;
                if list.get(i + 1).is_none_or(|&(next, _)| next != time) {
                    peak = peak.max(level);
                }
            }
            u64::try_from(peak).unwrap_or(u64::MAX)
        })
        .collect()
}
