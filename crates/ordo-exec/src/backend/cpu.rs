//! The CPU backend: devices that share the host's memory, and collectives between them in one
//! process.
//!
//! A [`CpuDevice`] runs a kernel on the thread that launches it, so its work is done when the
//! call returns: its events are complete when recorded, and waiting for one has nothing to
//! do. Its buffers are the host's tensors, shared, so uploading and downloading copy nothing.
//!
//! [`CpuCollectives`] matches the calls of the participants as a multi-process library does:
//! the `k`-th collective that a rank issues in a group meets the `k`-th of every other rank
//! of that group, and the `k`-th buffer that one rank sends another is its `k`-th receive.
//! A call records the participant's part and returns; [`CpuHandle::wait`] blocks until the
//! other parts are in (or the timeout passes, naming the ranks that never came).
//!
//! # Protocol
//!
//! One mutex guards every pending operation, one condition variable announces every change.
//! Issuing a part, taking a result and removing a finished operation all happen under the
//! mutex; a waiter re-checks its operation after every wake-up and gives up at its deadline.
//! The first waiter to find every part in computes the result (a sum in group order) and
//! stores it for the others, so the result does not depend on which rank waits first. The
//! last participant to take the result removes the operation.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Backend, BackendError, Collectives, Device, Handle, Launch, Launched};
use ordo_ir::DType;

use crate::cpu::{Data, KernelError, Tensor};

/// How long a CPU collective waits for its other participants by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// CPU devices and the in-process collectives between them.
#[derive(Debug)]
pub struct Cpu {
    devices: Vec<CpuDevice>,
    collectives: CpuCollectives,
}

impl Cpu {
    /// `devices` CPU devices whose collectives wait [`DEFAULT_TIMEOUT`] for a participant.
    pub fn new(devices: usize) -> Self {
        Self::with_timeout(devices, DEFAULT_TIMEOUT)
    }

    /// `devices` CPU devices whose collectives wait `timeout` for a participant.
    pub fn with_timeout(devices: usize, timeout: Duration) -> Self {
        Self {
            devices: vec![CpuDevice { _host: () }; devices],
            collectives: CpuCollectives::new(devices, timeout),
        }
    }
}

impl Clone for Cpu {
    /// The same devices with collectives of their own: calls on the copy never meet calls on
    /// the original.
    fn clone(&self) -> Self {
        Self::with_timeout(self.devices.len(), self.collectives.timeout)
    }
}

impl Backend for Cpu {
    type Buffer = Arc<Tensor>;
    type Device = CpuDevice;
    type Collectives = CpuCollectives;

    fn devices(&self) -> usize {
        self.devices.len()
    }

    fn device(&self, index: usize) -> &CpuDevice {
        &self.devices[index]
    }

    fn collectives(&self) -> &CpuCollectives {
        &self.collectives
    }

    fn name(&self) -> &str {
        "cpu"
    }
}

/// A CPU device: kernels run on the launching thread. CPU devices share the host's memory,
/// so one is like another; a plan's device index tells them apart.
#[derive(Clone, Copy, Debug)]
pub struct CpuDevice {
    _host: (),
}

/// An event of a CPU stream: complete when recorded, since the stream's work is done when
/// enqueued.
#[derive(Clone, Copy, Debug)]
pub struct CpuEvent {
    _complete: (),
}

impl Device for CpuDevice {
    type Buffer = Arc<Tensor>;
    type Event = CpuEvent;

    fn upload(&self, _stream: u32, host: &Arc<Tensor>) -> Result<Arc<Tensor>, BackendError> {
        Ok(host.clone())
    }

    fn download(&self, buffer: &Arc<Tensor>) -> Result<Arc<Tensor>, BackendError> {
        Ok(buffer.clone())
    }

    fn launch(
        &self,
        _stream: u32,
        launch: Launch<'_, Arc<Tensor>>,
    ) -> Result<Launched<Arc<Tensor>>, KernelError> {
        let inputs: Vec<&Tensor> = launch.inputs.iter().map(|b| &***b).collect();
        let params: Vec<&Tensor> = launch.params.iter().map(|b| &***b).collect();
        // The state is the launch's own copy unless another reader still shares it; then the
        // kernel advances a copy, and the shared values stay as they were.
        let mut state: Vec<Tensor> = launch.state.into_iter().map(Arc::unwrap_or_clone).collect();
        let outputs = launch.program.run_node(
            launch.node,
            &inputs,
            &params,
            &mut state,
            launch.step,
            launch.settings,
        )?;
        Ok(Launched {
            outputs: outputs.into_iter().map(Arc::new).collect(),
            state: state.into_iter().map(Arc::new).collect(),
        })
    }

    fn record(&self, _stream: u32) -> CpuEvent {
        CpuEvent { _complete: () }
    }

    fn wait(&self, _stream: u32, _event: &CpuEvent) -> Result<(), BackendError> {
        Ok(())
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

/// What a pending collective does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce,
    Broadcast { root: usize },
}

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::AllReduce => "all-reduce".into(),
            Kind::Broadcast { root } => format!("broadcast from rank {root}"),
        }
    }
}

/// A collective some participants have issued.
#[derive(Debug)]
struct Pending {
    kind: Kind,
    /// Per position in the group: whether that rank issued its part, and its buffer.
    issued: Vec<bool>,
    parts: Vec<Option<Arc<Tensor>>>,
    /// Set by the first waiter to find every part in (or by a participant that disagrees).
    result: Option<Result<Arc<Tensor>, BackendError>>,
    /// Participants that have taken the result.
    taken: usize,
}

#[derive(Debug, Default)]
struct Table {
    /// Per (group, rank): how many collectives the rank has issued in the group.
    issued: HashMap<(Vec<usize>, usize), u64>,
    /// Per (group, sequence number): the collective, until every participant took its result.
    pending: HashMap<(Vec<usize>, u64), Pending>,
    /// Per (from, to): how many buffers were sent and how many receives were issued.
    sent: HashMap<(usize, usize), (u64, u64)>,
    /// Per (from, to, sequence number): a sent buffer not yet received.
    in_flight: HashMap<(usize, usize, u64), Arc<Tensor>>,
}

#[derive(Debug, Default)]
struct Shared {
    table: Mutex<Table>,
    changed: Condvar,
}

/// Collectives between the CPU devices of one process.
#[derive(Debug)]
pub struct CpuCollectives {
    ranks: usize,
    timeout: Duration,
    shared: Arc<Shared>,
}

impl CpuCollectives {
    /// Collectives among ranks `0..ranks`, whose handles wait at most `timeout`.
    pub fn new(ranks: usize, timeout: Duration) -> Self {
        Self { ranks, timeout, shared: Arc::default() }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics under the lock; a poisoned table is still consistent.
        self.shared.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_group(&self, op: &str, group: &[usize], rank: usize) -> Result<usize, BackendError> {
        let mismatch = |problem: String| BackendError::Mismatch { op: op.into(), problem };
        if group.is_empty() || group.windows(2).any(|w| w[0] >= w[1]) {
            return Err(mismatch(format!(
                "group {group:?} is not a list of distinct ranks in ascending order"
            )));
        }
        if let Some(&r) = group.iter().find(|&&r| r >= self.ranks) {
            return Err(mismatch(format!(
                "rank {r} of group {group:?} is not below {}",
                self.ranks
            )));
        }
        group
            .iter()
            .position(|&r| r == rank)
            .ok_or_else(|| mismatch(format!("rank {rank} is not in group {group:?}")))
    }

    fn check_pair(&self, op: &str, from: usize, to: usize) -> Result<(), BackendError> {
        if from == to || from >= self.ranks || to >= self.ranks {
            return Err(BackendError::Mismatch {
                op: op.into(),
                problem: format!(
                    "a transfer joins two distinct ranks below {}, not {from} and {to}",
                    self.ranks
                ),
            });
        }
        Ok(())
    }

    /// Records `rank`'s part of the next collective of `group`.
    fn issue(
        &self,
        group: &[usize],
        rank: usize,
        kind: Kind,
        part: Option<&Arc<Tensor>>,
    ) -> Result<CpuHandle, BackendError> {
        let position = self.check_group(&kind.label(), group, rank)?;
        let mut table = self.table();
        let seq = {
            let next = table.issued.entry((group.to_vec(), rank)).or_insert(0);
            *next += 1;
            *next - 1
        };
        let op = format!("{} #{seq} in group {group:?}", kind.label());
        let pending = table.pending.entry((group.to_vec(), seq)).or_insert_with(|| Pending {
            kind,
            issued: vec![false; group.len()],
            parts: vec![None; group.len()],
            result: None,
            taken: 0,
        });
        pending.issued[position] = true;
        pending.parts[position] = part.cloned();
        if pending.kind != kind && pending.result.is_none() {
            pending.result = Some(Err(BackendError::Mismatch {
                op: op.clone(),
                problem: format!(
                    "rank {rank} issued a {} where another rank issued a {}",
                    kind.label(),
                    pending.kind.label()
                ),
            }));
        }
        drop(table);
        self.shared.changed.notify_all();
        Ok(CpuHandle {
            shared: self.shared.clone(),
            timeout: self.timeout,
            op,
            wait: Wait::Collective { group: group.to_vec(), seq },
        })
    }
}

impl Collectives for CpuCollectives {
    type Buffer = Arc<Tensor>;
    type Handle = CpuHandle;

    fn all_reduce(
        &self,
        group: &[usize],
        rank: usize,
        buffer: &Arc<Tensor>,
    ) -> Result<CpuHandle, BackendError> {
        self.issue(group, rank, Kind::AllReduce, Some(buffer))
    }

    fn broadcast(
        &self,
        group: &[usize],
        root: usize,
        rank: usize,
        buffer: Option<&Arc<Tensor>>,
    ) -> Result<CpuHandle, BackendError> {
        let kind = Kind::Broadcast { root };
        if !group.contains(&root) || (rank == root) != buffer.is_some() {
            return Err(BackendError::Mismatch {
                op: kind.label(),
                problem: format!(
                    "in group {group:?}, the root gives a buffer and every other rank none \
                     (rank {rank} gave {})",
                    if buffer.is_some() { "one" } else { "none" }
                ),
            });
        }
        self.issue(group, rank, kind, buffer)
    }

    fn send(
        &self,
        from: usize,
        to: usize,
        buffer: &Arc<Tensor>,
    ) -> Result<CpuHandle, BackendError> {
        self.check_pair("send", from, to)?;
        let mut table = self.table();
        let counts = table.sent.entry((from, to)).or_insert((0, 0));
        let seq = counts.0;
        counts.0 += 1;
        table.in_flight.insert((from, to, seq), buffer.clone());
        drop(table);
        self.shared.changed.notify_all();
        Ok(CpuHandle {
            shared: self.shared.clone(),
            timeout: self.timeout,
            op: format!("send #{seq} from rank {from} to rank {to}"),
            wait: Wait::Sent(buffer.clone()),
        })
    }

    fn recv(&self, to: usize, from: usize) -> Result<CpuHandle, BackendError> {
        self.check_pair("receive", from, to)?;
        let mut table = self.table();
        let counts = table.sent.entry((from, to)).or_insert((0, 0));
        let seq = counts.1;
        counts.1 += 1;
        Ok(CpuHandle {
            shared: self.shared.clone(),
            timeout: self.timeout,
            op: format!("receive #{seq} on rank {to} from rank {from}"),
            wait: Wait::Received { from, to, seq },
        })
    }
}

#[derive(Debug)]
enum Wait {
    Collective { group: Vec<usize>, seq: u64 },
    Sent(Arc<Tensor>),
    Received { from: usize, to: usize, seq: u64 },
}

/// The handle of a CPU collective or transfer.
#[derive(Debug)]
pub struct CpuHandle {
    shared: Arc<Shared>,
    timeout: Duration,
    op: String,
    wait: Wait,
}

impl Handle for CpuHandle {
    type Buffer = Arc<Tensor>;

    fn wait(self) -> Result<Arc<Tensor>, BackendError> {
        let deadline = Instant::now() + self.timeout;
        let mut table = self.shared.table.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let done = match &self.wait {
                Wait::Sent(buffer) => return Ok(buffer.clone()),
                Wait::Received { from, to, seq } => {
                    table.in_flight.remove(&(*from, *to, *seq)).map(Ok)
                }
                Wait::Collective { group, seq } => take_result(&mut table, group, *seq, &self.op),
            };
            if let Some(result) = done {
                return result;
            }
            let now = Instant::now();
            if now >= deadline {
                let missing = match &self.wait {
                    Wait::Received { from, .. } => vec![*from],
                    Wait::Collective { group, seq } => table
                        .pending
                        .get(&(group.clone(), *seq))
                        .map(|p| group.iter().zip(&p.issued).filter(|(_, i)| !**i).map(|(r, _)| *r))
                        .map_or_else(Vec::new, Iterator::collect),
                    Wait::Sent(_) => Vec::new(),
                };
                return Err(BackendError::Timeout { op: self.op, waited: self.timeout, missing });
            }
            table = self
                .shared
                .changed
                .wait_timeout(table, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The result of collective `seq` of `group` once every part is in (computing it if this is
/// the first waiter to see them all); removes the collective when its last participant takes
/// it.
fn take_result(
    table: &mut Table,
    group: &[usize],
    seq: u64,
    op: &str,
) -> Option<Result<Arc<Tensor>, BackendError>> {
    let key = (group.to_vec(), seq);
    let pending = table.pending.get_mut(&key)?;
    if pending.result.is_none() {
        if pending.issued.iter().any(|i| !i) {
            return None;
        }
        pending.result = Some(match pending.kind {
            Kind::AllReduce => sum_in_order(&pending.parts, group, op),
            Kind::Broadcast { root } => {
                let position = group.iter().position(|&r| r == root).unwrap_or(0);
                pending.parts[position].clone().ok_or_else(|| BackendError::Mismatch {
                    op: op.into(),
                    problem: format!("root {root} gave no buffer"),
                })
            }
        });
    }
    pending.taken += 1;
    let result = pending.result.clone();
    if pending.taken == group.len() {
        table.pending.remove(&key);
    }
    result
}

/// The sum of the parts, added in group order: `((p0 + p1) + p2) + ...`.
fn sum_in_order(
    parts: &[Option<Arc<Tensor>>],
    group: &[usize],
    op: &str,
) -> Result<Arc<Tensor>, BackendError> {
    let part = |i: usize| parts[i].as_deref().expect("every part is in");
    let mut sum = part(0).clone();
    for (i, &rank) in group.iter().enumerate().skip(1) {
        let add = part(i);
        let shapes_match = sum.shape() == add.shape();
        let added = shapes_match
            && match (add.data(), sum.dtype()) {
                (Data::F32(x), DType::F32) => {
                    let acc = sum.as_f32_mut().expect("an f32 tensor");
                    acc.iter_mut().zip(x).for_each(|(a, b)| *a += b);
                    true
                }
                (Data::I64(x), DType::I64) => {
                    let acc = sum.as_i64_mut().expect("an i64 tensor");
                    acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.wrapping_add(*b));
                    true
                }
                _ => false,
            };
        if !added {
            return Err(BackendError::Mismatch {
                op: op.into(),
                problem: format!(
                    "rank {rank} gave {} where rank {} gave {}",
                    add.fact(),
                    group[0],
                    part(0).fact()
                ),
            });
        }
    }
    Ok(Arc::new(sum))
}
