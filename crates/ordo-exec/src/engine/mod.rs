//! The engine: runs a [`Plan`] out of order on the devices of a [`Backend`] (CPU devices with
//! real kernels unless told otherwise).
//!
//! A plan names, for every device, its streams (compute, sub-compute, tx/rx per peer,
//! collective) with their tasks in order, the events that order tasks across streams, and the
//! buffers each task writes and reads. [`Executable::new`] binds it to a [`Program`] (the graph
//! the plan runs), and [`Executable::run_step`] runs one step:
//!
//! * **Dependency counting.** A task waits for the previous task of each stream it is on (a
//!   stream is an in-order queue: a transfer is on the sender's tx and the receiver's rx
//!   stream, an all-reduce on the collective stream of every device it joins) and for the
//!   tasks behind the events it awaits ([`Sync::Events`]), or for everything the awaited
//!   device ran up to them ([`Sync::DeviceWait`]). When its count reaches zero it goes to the
//!   ready queue of its device, ordered by its position in the plan.
//! * **Workers.** Each device has `workers_per_device` threads, which run its compute and
//!   sub-compute tasks, the transfers it sends and the all-reduces it leads (on a CPU a copy or
//!   a sum needs a core as a kernel does; a separate copy thread would only compete with the
//!   workers for the cores). A stream never has two tasks in flight; tasks of different
//!   streams of one device run side by side when the device has workers for them. The threads
//!   start with the first step and serve every later one (`pool.rs`).
//! * **Buffers.** Values are immutable and shared ([`Arc`]): a task reads the version its
//!   producer wrote, so no write can reach a buffer another stream still reads. An all-reduce
//!   writes a new version in place of the old one, and the plan makes every later reader wait
//!   for it (checked when binding). A buffer's memory is charged to its device when its
//!   producer starts and released when its last reader, transfers included, has finished
//!   (retained buffers at the end of the step); a device's budget is never exceeded, an
//!   allocation that would is an error naming the task.
//! * **Backends.** The engine decides when a task may start; what it does is asked of the
//!   backend ([`crate::backend`]): a kernel launched on the task's stream, a transfer as a
//!   send and a receive, an all-reduce issued by every device it joins, events between
//!   streams. On CPU devices ([`Cpu`]) a call returns when its work is done.
//! * **Failures.** A kernel error (or panic) stops the step: the first error is kept, every
//!   queue is closed, workers finish the task in hand and exit, and the error names the task
//!   and node. Nothing waits on anything else: workers sleep only on their queue, which the
//!   last task or the first failure closes, and binding rejects plans with dependency cycles,
//!   so a step always ends.
//!
//! The synchronisation protocol and its memory orderings are written down in `queue.rs`, and
//! model-checked with loom; how a step is lent to the pool's threads, in `pool.rs`.

mod bind;
mod pool;
mod queue;
mod step;

use std::sync::Arc;

use ordo_ir::ParamId;
use ordo_sched::Plan;

pub use bind::Sync;

use crate::backend::{Backend, Cpu, Device};
use crate::cpu::Tensor;
use crate::error::ExecError;
use crate::program::{Program, RunSettings};
use crate::sequential::StepOutputs;
use crate::state::{Feeds, TrainState};
use bind::Bound;
use step::StepRunState;
pub(crate) use step::bitwise_equal;

/// The most worker threads a device may have: more than any machine has cores, and few
/// enough that a typo does not ask the system for ten thousand threads.
pub const MAX_WORKERS_PER_DEVICE: usize = 256;

/// How a plan runs.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    /// Cross-stream synchronisation.
    pub sync: Sync,
    /// Compute threads per device (at least 1).
    pub workers_per_device: usize,
    /// Per device, the bytes it may hold at once; `None` for no limit. Devices past the end
    /// of the list have no limit.
    pub memory_budget: Vec<Option<u64>>,
    /// Run no kernel and move no data: what is left is the engine's own cost.
    pub empty_kernels: bool,
    /// Seed, optimizer hyper-parameters and mode of the kernels.
    pub settings: RunSettings,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            sync: Sync::Events,
            workers_per_device: 1,
            memory_budget: Vec::new(),
            empty_kernels: false,
            settings: RunSettings::default(),
        }
    }
}

/// When one task ran, in µs from the start of the step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskSpan {
    /// Start.
    pub start_us: f64,
    /// End.
    pub finish_us: f64,
}

/// What a step produced and how it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRun {
    /// The graph's outputs, one set per replica (one for a placed plan, one per device for a
    /// data-parallel plan).
    pub outputs: Vec<StepOutputs>,
    /// Per task of the plan, when it ran.
    pub tasks: Vec<TaskSpan>,
    /// Wall time of the whole step, µs.
    pub wall_us: f64,
    /// Per device, the most bytes held at once.
    pub peak_memory_bytes: Vec<u64>,
}

/// A plan bound to the program it runs and the backend it runs on.
#[derive(Debug)]
pub struct Executable<B: Backend = Cpu> {
    program: Program,
    bound: Bound,
    options: EngineOptions,
    workers: Workers,
    backend: B,
}

impl<B: Backend + Clone> Clone for Executable<B> {
    /// A copy with its own worker threads and a clone of the backend (which, for [`Cpu`], has
    /// collectives of its own: the copies' collectives must not meet).
    fn clone(&self) -> Self {
        Self {
            program: self.program.clone(),
            bound: self.bound.clone(),
            options: self.options.clone(),
            workers: Workers::default(),
            backend: self.backend.clone(),
        }
    }
}

/// The worker threads of an [`Executable`], started by its first step and kept for the next
/// ones (see `pool.rs`). A clone starts its own.
#[derive(Default)]
struct Workers(std::sync::OnceLock<pool::Pool>);

impl Clone for Workers {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let started = self.0.get().map_or(0, pool::Pool::workers);
        f.debug_struct("Workers").field("started", &started).finish()
    }
}

impl Executable<Cpu> {
    /// Binds `plan` to `program` on CPU devices, one per device of the plan: every compute
    /// task must name a node of the program's graph, run on one device (a placed plan) or on
    /// every device (a data-parallel plan: replica `d` on device `d`), and find each input it
    /// reads in a buffer on its device.
    ///
    /// # Errors
    /// [`ExecError::Plan`] for a plan that breaks the rules of plans (including a dependency
    /// cycle); [`ExecError::Mismatch`] for a plan that does not run this graph;
    /// [`ExecError::Config`] for zero workers.
    pub fn new(program: Program, plan: &Plan, options: EngineOptions) -> Result<Self, ExecError> {
        Self::on(Cpu::new(plan.devices), program, plan, options)
    }
}

impl<B: Backend> Executable<B> {
    /// Binds `plan` to `program` on the devices of `backend` (device `d` of the plan on its
    /// device `d`), as [`Executable::new`] does on CPU devices.
    ///
    /// # Errors
    /// As [`Executable::new`]; [`ExecError::Config`] when the backend has fewer devices than
    /// the plan.
    pub fn on(
        backend: B,
        program: Program,
        plan: &Plan,
        options: EngineOptions,
    ) -> Result<Self, ExecError> {
        if options.workers_per_device == 0 {
            return Err(ExecError::Config("a device needs at least one worker thread".into()));
        }
        if options.workers_per_device > MAX_WORKERS_PER_DEVICE {
            return Err(ExecError::Config(format!(
                "{} worker threads per device; at most {MAX_WORKERS_PER_DEVICE}",
                options.workers_per_device
            )));
        }
        if backend.devices() < plan.devices {
            return Err(ExecError::Config(format!(
                "the plan runs on {} devices but the {} backend has {}",
                plan.devices,
                backend.name(),
                backend.devices()
            )));
        }
        let bound = bind::bind(&program, plan, options.sync)?;
        Ok(Self { program, bound, options, workers: Workers::default(), backend })
    }

    /// The backend it runs on.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// How many replicas a step runs: 1 for a placed plan, the number of devices for a
    /// data-parallel one.
    pub fn replicas(&self) -> usize {
        self.bound.replicas
    }

    /// Runs step `state.step + 1` with `feeds` (one set per replica), then stores each
    /// update's output as its parameter's next value and counts the step. The replicas of a
    /// data-parallel plan must agree bitwise on every updated parameter.
    ///
    /// # Errors
    /// [`ExecError::Config`] for the wrong number of feed sets; the first failure of the step
    /// ([`ExecError::Kernel`], [`ExecError::OutOfMemory`], [`ExecError::Feed`]), after which
    /// `state` is unchanged; [`ExecError::Mismatch`] when an output was never computed or the
    /// replicas disagree.
    pub fn run_step(&self, state: &mut TrainState, feeds: &[Feeds]) -> Result<StepRun, ExecError> {
        if feeds.len() != self.bound.replicas {
            return Err(ExecError::Config(format!(
                "the plan runs {} replica(s) but {} set(s) of feeds were given",
                self.bound.replicas,
                feeds.len()
            )));
        }
        let o = &self.options;
        let step = StepRunState::new(
            &self.backend,
            &self.bound,
            &self.program,
            &o.settings,
            state.step + 1,
            &state.params,
            feeds,
            &state.slots,
            &o.memory_budget,
            o.empty_kernels,
        );
        let pool = match self.workers.0.get() {
            Some(pool) => pool,
            None => {
                let threads = self.bound.devices.max(1) * o.workers_per_device;
                let pool = pool::Pool::new(threads).map_err(|e| {
                    ExecError::Config(format!("cannot start {threads} worker threads: {e}"))
                })?;
                // A concurrent first step may have started its own pool; either serves.
                let _ = self.workers.0.set(pool);
                self.workers.0.get().expect("set above")
            }
        };
        let started = std::time::Instant::now();
        step.run(pool, o.workers_per_device)?;
        for d in 0..self.bound.devices {
            self.backend.device(d).synchronize().map_err(|source| ExecError::Backend {
                task: format!("synchronize device {d}"),
                source,
            })?;
        }
        let wall_us = started.elapsed().as_secs_f64() * 1e6;
        let span = |ns: &std::sync::atomic::AtomicU64| {
            ns.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e3
        };
        let tasks = step
            .started
            .iter()
            .zip(&step.finished)
            .map(|(s, f)| TaskSpan { start_us: span(s), finish_us: span(f) })
            .collect();
        let peak_memory_bytes = step.peaks();
        if o.empty_kernels {
            state.step += self.program.steps();
            return Ok(StepRun { outputs: Vec::new(), tasks, wall_us, peak_memory_bytes });
        }
        let StepRunState { fetched, updated, slots, .. } = step;
        // Results come back to the host from the device that computed them.
        let download = |device: usize, buffer: &B::Buffer| {
            self.backend.device(device).download(buffer).map_err(|source| ExecError::Backend {
                task: format!("download from device {device}"),
                source,
            })
        };
        let outputs = fetched
            .into_iter()
            .map(|values| {
                let outputs = values
                    .into_iter()
                    .enumerate()
                    .map(|(k, v)| {
                        let (device, buffer) =
                            v.into_inner().unwrap_or_else(|p| p.into_inner()).ok_or_else(|| {
                                ExecError::Mismatch(format!("graph output {k} was never computed"))
                            })?;
                        Ok(Arc::unwrap_or_clone(download(device, &buffer)?))
                    })
                    .collect::<Result<_, ExecError>>()?;
                Ok(StepOutputs { outputs })
            })
            .collect::<Result<Vec<_>, ExecError>>()?;
        let mut updated: Vec<Vec<(ParamId, Arc<Tensor>)>> = updated
            .into_iter()
            .map(|u| {
                u.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .into_iter()
                    .map(|(p, (device, b))| Ok((p, download(device, &b)?)))
                    .collect::<Result<_, ExecError>>()
            })
            .collect::<Result<_, _>>()?;
        for u in &mut updated {
            u.sort_by_key(|(p, _)| *p);
        }
        for (r, other) in updated.iter().enumerate().skip(1) {
            let same = other.len() == updated[0].len()
                && other
                    .iter()
                    .zip(&updated[0])
                    .all(|(a, b)| a.0 == b.0 && bitwise_equal(&a.1, &b.1));
            if !same {
                return Err(ExecError::Mismatch(format!(
                    "replica {r} updated its parameters differently from replica 0"
                )));
            }
        }
        let mut slots = slots;
        // Node by node, so that the last unrolled step's state is what its home slot keeps.
        for (node, advanced) in slots.swap_remove(0).into_iter().enumerate() {
            if let Some((device, advanced)) =
                advanced.into_inner().unwrap_or_else(|p| p.into_inner())
            {
                let advanced = advanced
                    .iter()
                    .map(|b| download(device, b).map(Arc::unwrap_or_clone))
                    .collect::<Result<_, _>>()?;
                let home = self.program.call(ordo_ir::NodeId(node as u32)).slot_home;
                state.slots[home.index()] = advanced;
            }
        }
        for (p, t) in updated.swap_remove(0) {
            state.params[p.index()] = t;
        }
        state.step += self.program.steps();
        Ok(StepRun { outputs, tasks, wall_us, peak_memory_bytes })
    }
}
