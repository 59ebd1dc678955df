//! One step of a bound plan on worker threads: the state the workers share, the worker loop,
//! and what each kind of task does. The protocol is in [`super::queue`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use ordo_ir::{Op, ParamId};

use super::bind::{Bound, Work};
use super::pool::Pool;
use super::queue::{Countdown, ReadyQueue};
use crate::cpu::{Data, KernelError, Tensor};
use crate::error::ExecError;
use crate::program::{Program, RunSettings};
use crate::sequential::fed;
use crate::state::Feeds;

/// Locks a mutex whose holder cannot leave it inconsistent (no kernel runs under a lock).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A value written once during a step and read after.
type Slot = Mutex<Option<Arc<Tensor>>>;

/// Bytes in use on a device, and the most seen.
#[derive(Debug, Default)]
struct Memory {
    in_use: u64,
    peak: u64,
}

/// Everything the workers of one step share. Tasks and buffers are indexed as in [`Bound`].
pub(crate) struct Step<'a> {
    pub bound: &'a Bound,
    pub program: &'a Program,
    pub settings: &'a RunSettings,
    pub step: u64,
    pub params: &'a [Arc<Tensor>],
    pub feeds: &'a [Feeds],
    pub budgets: &'a [Option<u64>],
    pub empty_kernels: bool,
    /// Optimizer state at the start of the step, per node (read by every replica).
    pub initial_slots: &'a [Vec<Tensor>],
    /// Per replica, per node: the optimizer state an update left, once it ran.
    pub slots: Vec<Vec<Mutex<Option<Vec<Tensor>>>>>,
    /// Per replica, per graph output: its value once computed.
    pub fetched: Vec<Vec<Mutex<Option<Tensor>>>>,
    /// Per replica: the next value of each updated parameter.
    pub updated: Vec<Mutex<Vec<(ParamId, Tensor)>>>,
    /// For a program unrolled over several steps, per replica, parameter and step `s > 0`:
    /// the value step `s - 1`'s update left, which the nodes of step `s` read (empty
    /// otherwise). Each is written once, by that update, before any reader runs: the plan
    /// orders the readers after it.
    versions: Vec<Vec<Vec<Slot>>>,
    values: Vec<Mutex<Option<Arc<Tensor>>>>,
    readers_left: Vec<AtomicUsize>,
    pending: Vec<Countdown>,
    queues: Vec<ReadyQueue>,
    remaining: AtomicUsize,
    failure: Mutex<Option<ExecError>>,
    stopped: AtomicBool,
    memory: Vec<Mutex<Memory>>,
    epoch: Instant,
    /// Per task, ns after the epoch.
    pub started: Vec<AtomicU64>,
    pub finished: Vec<AtomicU64>,
}

impl<'a> Step<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        bound: &'a Bound,
        program: &'a Program,
        settings: &'a RunSettings,
        step: u64,
        params: &'a [Arc<Tensor>],
        feeds: &'a [Feeds],
        slots: &'a [Vec<Tensor>],
        budgets: &'a [Option<u64>],
        empty_kernels: bool,
    ) -> Self {
        let n = bound.tasks.len();
        let replicas = bound.replicas;
        let outputs = program.graph().outputs.len();
        Self {
            bound,
            program,
            settings,
            step,
            params,
            feeds,
            budgets,
            empty_kernels,
            initial_slots: slots,
            slots: (0..replicas)
                .map(|_| slots.iter().map(|_| Mutex::new(None)).collect())
                .collect(),
            fetched: (0..replicas)
                .map(|_| (0..outputs).map(|_| Mutex::new(None)).collect())
                .collect(),
            updated: (0..replicas).map(|_| Mutex::new(Vec::new())).collect(),
            versions: match program.steps() {
                1 => Vec::new(),
                steps => (0..replicas)
                    .map(|_| {
                        (0..program.graph().params.len())
                            .map(|_| (0..steps).map(|_| Mutex::new(None)).collect())
                            .collect()
                    })
                    .collect(),
            },
            values: bound.buffers.iter().map(|_| Mutex::new(None)).collect(),
            readers_left: bound.buffers.iter().map(|b| AtomicUsize::new(b.readers)).collect(),
            pending: bound.tasks.iter().map(|t| Countdown::new(t.deps)).collect(),
            queues: (0..bound.devices).map(|_| ReadyQueue::default()).collect(),
            remaining: AtomicUsize::new(n),
            failure: Mutex::new(None),
            stopped: AtomicBool::new(false),
            memory: bound
                .persistent
                .iter()
                .map(|&p| Mutex::new(Memory { in_use: p, peak: p }))
                .collect(),
            epoch: Instant::now(),
            started: (0..n).map(|_| AtomicU64::new(0)).collect(),
            finished: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Runs the step on `pool`, `workers` of its threads per device (worker `i` serves device
    /// `i / workers`); returns once every task has finished or the first failure has stopped
    /// them.
    pub fn run(&self, pool: &Pool, workers: usize) -> Result<(), ExecError> {
        if self.bound.tasks.is_empty() {
            return Ok(());
        }
        for &t in &self.bound.roots {
            let task = &self.bound.tasks[t as usize];
            self.queues[task.device].push(task.rank, t);
        }
        pool.run(&|i| self.work(i / workers));
        match lock(&self.failure).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Bytes each device held at most.
    pub fn peaks(&self) -> Vec<u64> {
        self.memory.iter().map(|m| lock(m).peak).collect()
    }

    fn elapsed_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// A worker of device `q`: runs the tasks of its queue until it is closed.
    fn work(&self, q: usize) {
        let mut next = self.queues[q].pop();
        while let Some(t) = next {
            let t = t as usize;
            // Relaxed: read after the workers are joined, which orders everything.
            self.started[t].store(self.elapsed_ns(), Ordering::Relaxed);
            let result = self.allocate(t).and_then(|()| {
                catch_unwind(AssertUnwindSafe(|| self.execute(t)))
                    .unwrap_or_else(|_| Err(self.kernel_error(t, "the kernel panicked".into())))
            });
            self.finished[t].store(self.elapsed_ns(), Ordering::Relaxed);
            next = match result {
                Ok(()) => match self.complete(t, q) {
                    Some(kept) if !self.stopped.load(Ordering::Relaxed) => Some(kept),
                    _ => self.queues[q].pop(),
                },
                Err(e) => {
                    self.fail(e);
                    self.queues[q].pop()
                }
            };
        }
    }

    fn kernel_error(&self, t: usize, message: String) -> ExecError {
        let task = &self.bound.tasks[t];
        let node = match task.work {
            Work::Compute { node, .. } => self.program.graph().node(node).name.clone(),
            _ => task.name.clone(),
        };
        ExecError::Kernel {
            task: task.name.clone(),
            node,
            source: KernelError::Value { op: task.name.clone(), message },
        }
    }

    /// The task's outputs and workspace take memory when it starts.
    fn allocate(&self, t: usize) -> Result<(), ExecError> {
        let task = &self.bound.tasks[t];
        let mut need = vec![0u64; self.bound.devices];
        need[task.device] += task.workspace;
        for &b in &task.writes {
            let buffer = &self.bound.buffers[b as usize];
            need[buffer.device] += buffer.bytes;
        }
        for (d, &bytes) in need.iter().enumerate().filter(|(_, b)| **b > 0) {
            let mut memory = lock(&self.memory[d]);
            if let Some(budget) = self.budgets.get(d).copied().flatten()
                && memory.in_use + bytes > budget
            {
                return Err(ExecError::OutOfMemory {
                    device: d,
                    task: task.name.clone(),
                    needed: bytes,
                    in_use: memory.in_use,
                    budget,
                });
            }
            memory.in_use += bytes;
            memory.peak = memory.peak.max(memory.in_use);
        }
        Ok(())
    }

    fn free(&self, device: usize, bytes: u64) {
        let mut memory = lock(&self.memory[device]);
        memory.in_use = memory.in_use.saturating_sub(bytes);
    }

    /// Releases what the finished task held, then makes ready the successors it was the last
    /// predecessor of; the task that finishes last closes every queue. The first successor
    /// made ready for the finisher's own queue `q`, when that queue looks empty, is not queued
    /// but returned, for the finisher to run next without a hand-over.
    fn complete(&self, t: usize, q: usize) -> Option<u32> {
        let task = &self.bound.tasks[t];
        self.free(task.device, task.workspace);
        for &b in &task.writes {
            let buffer = &self.bound.buffers[b as usize];
            if buffer.readers == 0 && !buffer.retained {
                self.release(b);
            }
        }
        for &b in &task.reads {
            // AcqRel: the last reader must see every other reader done before it frees.
            if self.readers_left[b as usize].fetch_sub(1, Ordering::AcqRel) == 1
                && !self.bound.buffers[b as usize].retained
            {
                self.release(b);
            }
        }
        let mut kept = None;
        for &s in &task.succs {
            if self.pending[s as usize].arrive() {
                let succ = &self.bound.tasks[s as usize];
                if kept.is_none() && succ.device == q && self.queues[q].looks_empty() {
                    kept = Some(s);
                } else {
                    self.queues[succ.device].push(succ.rank, s);
                }
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.close_all();
        }
        kept
    }

    fn release(&self, b: u32) {
        let buffer = &self.bound.buffers[b as usize];
        lock(&self.values[b as usize]).take();
        self.free(buffer.device, buffer.bytes);
    }

    fn fail(&self, error: ExecError) {
        lock(&self.failure).get_or_insert(error);
        // Relaxed: a hint that stops workers from running tasks they kept; the queues, closed
        // under their mutexes, are what stops the step.
        self.stopped.store(true, Ordering::Relaxed);
        self.close_all();
    }

    fn close_all(&self) {
        for q in &self.queues {
            q.close();
        }
    }

    fn value(&self, t: usize, b: u32) -> Result<Arc<Tensor>, ExecError> {
        lock(&self.values[b as usize]).clone().ok_or_else(|| self.before_written(t))
    }

    fn before_written(&self, t: usize) -> ExecError {
        ExecError::Mismatch(format!(
            "task `{}` ran before one of its inputs was written",
            self.bound.tasks[t].name
        ))
    }

    /// Parameter `p` as task `t` of step `step` of an unrolled program reads it: the run's
    /// value in step 0 (and in every step, for one that no update writes), what the update of
    /// step `step - 1` left after.
    fn param(
        &self,
        t: usize,
        replica: usize,
        p: ParamId,
        step: u64,
    ) -> Result<Arc<Tensor>, ExecError> {
        if step == 0 || !self.program.is_updated(p) {
            return Ok(self.params[p.index()].clone());
        }
        lock(&self.versions[replica][p.index()][step as usize])
            .clone()
            .ok_or_else(|| self.before_written(t))
    }

    fn store(&self, b: u32, tensor: Tensor) {
        *lock(&self.values[b as usize]) = Some(Arc::new(tensor));
    }

    fn execute(&self, t: usize) -> Result<(), ExecError> {
        if self.empty_kernels {
            return Ok(());
        }
        match &self.bound.tasks[t].work {
            Work::Compute { node, inputs, outputs, fetch, replica } => {
                self.compute(t, *node, inputs, outputs, fetch, *replica)
            }
            Work::Transfer { from, to } => {
                let copy = (*self.value(t, *from)?).clone();
                self.store(*to, copy);
                Ok(())
            }
            Work::AllReduce { groups } => groups.iter().try_for_each(|group| {
                let sum = self.reduce(t, group)?;
                for &b in &group[1..] {
                    self.store(b, sum.clone());
                }
                self.store(group[0], sum);
                Ok(())
            }),
        }
    }

    /// The sum of a group's buffers, added in device order (so every run adds alike).
    fn reduce(&self, t: usize, group: &[u32]) -> Result<Tensor, ExecError> {
        let mut sum = (*self.value(t, group[0])?).clone();
        for &b in &group[1..] {
            let other = self.value(t, b)?;
            match (sum.as_f32_mut(), other.as_f32()) {
                (Some(acc), Some(add)) if acc.len() == add.len() => {
                    acc.iter_mut().zip(add).for_each(|(a, b)| *a += b)
                }
                _ => {
                    return Err(self.kernel_error(
                        t,
                        format!("cannot sum {} and {}", sum.fact(), other.fact()),
                    ));
                }
            }
        }
        Ok(sum)
    }

    fn compute(
        &self,
        t: usize,
        id: ordo_ir::NodeId,
        inputs: &[u32],
        outputs: &[Option<u32>],
        fetch: &[(usize, usize)],
        replica: usize,
    ) -> Result<(), ExecError> {
        let graph = self.program.graph();
        let node = graph.node(id);
        let call = self.program.call(id);
        let values: Vec<Arc<Tensor>> = if node.op == Op::Input {
            let feeds = &self.feeds[replica];
            vec![Arc::new(fed(feeds, &node.name, &node.outputs[0])?.clone())]
        } else {
            inputs.iter().map(|&b| self.value(t, b)).collect::<Result<_, _>>()?
        };
        let args: Vec<&Tensor> = values.iter().map(|v| &**v).collect();
        let params: Vec<Arc<Tensor>> = call
            .params
            .iter()
            .map(|&p| self.param(t, replica, p, call.step_offset))
            .collect::<Result<_, _>>()?;
        let params: Vec<&Tensor> = params.iter().map(|p| &**p).collect();
        // An update advances a copy of its optimizer state, kept until the step succeeds, so
        // that a failed step leaves the state as it was; in an unrolled step, the state the
        // same update of the step before left.
        let mut slots = match call.previous_update {
            None => self.initial_slots[id.index()].clone(),
            Some(previous) => lock(&self.slots[replica][previous.index()])
                .clone()
                .ok_or_else(|| self.before_written(t))?,
        };
        let outs = self
            .program
            .run_node(id, &args, &params, &mut slots, self.step, self.settings)
            .map_err(|source| ExecError::Kernel {
                task: self.bound.tasks[t].name.clone(),
                node: node.name.clone(),
                source,
            })?;
        // An update's state is kept even when empty (plain SGD): the same update of the next
        // unrolled step starts from it.
        if !slots.is_empty() || call.updates.is_some() {
            *lock(&self.slots[replica][id.index()]) = Some(slots);
        }
        for &(slot, k) in fetch {
            *lock(&self.fetched[replica][k]) = Some(outs[slot].clone());
        }
        if let Some(p) = call.updates {
            let next = call.step_offset as usize + 1;
            match self.versions.get(replica) {
                Some(versions) if next < versions[p.index()].len() => {
                    *lock(&versions[p.index()][next]) = Some(Arc::new(outs[0].clone()));
                }
                _ => lock(&self.updated[replica]).push((p, outs[0].clone())),
            }
        }
        for (slot, tensor) in outs.into_iter().enumerate() {
            if let Some(Some(b)) = outputs.get(slot) {
                self.store(*b, tensor);
            }
        }
        Ok(())
    }
}

/// Whether two tensors hold bitwise the same values.
pub(crate) fn bitwise_equal(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape()
        && match (a.data(), b.data()) {
            (Data::F32(x), Data::F32(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
            }
            (Data::I64(x), Data::I64(y)) => x == y,
            _ => false,
        }
}
