//! The Assigner's bookkeeping per layer call, in Rust (`ordo._ordo.AssignerPlan` and
//! `HostStep`, used by `ordo._step`): which placed layer a call is, whether the host submits
//! it itself or leaves it to a thread ([`HostWalk`]), and which layers have submitted, with
//! the waits for them. Every layer call of a distributed module comes here (from
//! `LayerCall`, or from the Python `Step`), so this is on the per-layer cost that the
//! wrappers add to a step (doc/python.md measures it).
//!
//! Threads and locking. The host thread (the one running the model's `forward`) reaches the
//! layers: `arrive`, `unreached_dependency`, `release_unreached` and `code_order` are called
//! on it only (`LayerCall` runs the common call only on the thread that `AssignerPlan.begin`
//! recorded as the step's host; the plan's slot for the step in progress is a mutex of its
//! own, never held while another is taken), and the walk lives in `host` (a mutex that is never contended, there so that
//! the class is `Sync` as a frozen Python class must be). `submissions` is shared: layers
//! submit from the host and from the threads of waiting layers (`mark_submitted`), those
//! threads block in `wait_submitted` (on `submitted_changed`, with the interpreter's lock
//! released), and `fail` wakes them when the step has failed. Every change of `submissions`
//! is made under its mutex and followed, while still under it, by `notify_all` when a thread
//! is waiting (`Submissions::waiting`, counted under the mutex before the thread sleeps), and
//! every wait re-checks its condition under the mutex, so no wake-up is lost; the mutex
//! orders the writes before the reads. A method that takes both mutexes takes `host` first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use ordo::assigner::{HostWalk, PlacedLayers};
use pyo3::prelude::*;

use crate::assign::host_criterion;
use crate::model::PyProblem;
use crate::planning::PyPlanned;
use crate::{error, usage};

/// A placement as the Assigner looks it up in every step: the layers by index, and for each
/// wrapped module (its qualified name) the layer of each of its calls in a step.
struct Lookup {
    names: Vec<String>,
    /// Per wrapped module: its qualified name and the layer of its `k`-th call in a step
    /// (`name` for the first, `name#k` after).
    calls: Vec<(String, Vec<Option<usize>>)>,
    layers: Arc<PlacedLayers>,
}

/// A placement prepared for the Assigner's steps (one per distributed module).
#[pyclass(name = "AssignerPlan", module = "ordo", frozen)]
pub struct PyAssignerPlan {
    lookup: Arc<Lookup>,
    /// The step in progress, between `begin` and `end` (the layer wrappers look it up).
    current: Mutex<Option<Current>>,
}

/// A step in progress: its bookkeeping, the Python `Step` that does everything but the common
/// case, and the host thread (the one that began it).
pub(crate) struct Current {
    pub core: Py<PyHostStep>,
    pub step: Py<PyAny>,
    pub host: ThreadId,
}

impl PyAssignerPlan {
    /// The step in progress when the calling thread is its host: `(bookkeeping, Step)`.
    pub(crate) fn current_on_this_thread(
        &self,
        py: Python<'_>,
    ) -> Option<(Py<PyHostStep>, Py<PyAny>)> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let c = current.as_ref()?;
        (c.host == std::thread::current().id())
            .then(|| (c.core.clone_ref(py), c.step.clone_ref(py)))
    }
}

#[pymethods]
impl PyAssignerPlan {
    /// The placed plan `planned` of `problem` (one layer per node: a profiled module's
    /// layers) as the Assigner walks it: a layer's index is its node's, its parents the
    /// problem's edges, its device and order the placement's, the global order the placer's
    /// (`ordo.global_order`).
    #[staticmethod]
    fn of_plan(py: Python<'_>, problem: &PyProblem, planned: &PyPlanned) -> PyResult<Self> {
        let placed = py
            .detach(|| ordo::assigner::placed_layers(&problem.inner, &planned.inner))
            .map_err(error)?;
        let layers = problem.inner.place.names.clone();
        let mut calls: Vec<(String, Vec<Option<usize>>)> = Vec::new();
        let mut module_of: HashMap<String, usize> = HashMap::new();
        for (layer, name) in layers.iter().enumerate() {
            // `name#k`: the module `name`'s call k (k >= 1); a suffix that is not such a
            // number is a layer no call reaches (released at the end of each step).
            let (module, k) = match name.split_once('#') {
                None => (name.as_str(), 0),
                // As the placement writes it: no sign, no leading zeros (`a#01` is no call).
                Some((module, text)) => match text.parse::<usize>() {
                    Ok(k) if k >= 1 && k.to_string() == text => (module, k),
                    _ => (module, usize::MAX),
                },
            };
            let m = *module_of.entry(module.to_owned()).or_insert_with(|| {
                calls.push((module.to_owned(), Vec::new()));
                calls.len() - 1
            });
            if k != usize::MAX {
                let slots = &mut calls[m].1;
                if slots.len() <= k {
                    slots.resize(k + 1, None);
                }
                slots[k] = Some(layer);
            }
        }
        let lookup = Lookup { names: layers, calls, layers: Arc::new(placed) };
        Ok(Self { lookup: Arc::new(lookup), current: Mutex::new(None) })
    }

    /// The layers by index: the problem's node names.
    #[getter]
    fn layers(&self) -> Vec<String> {
        self.lookup.names.clone()
    }

    /// The modules whose calls are layers, by qualified name; a module's index here is the
    /// number `HostStep.arrive` takes.
    #[getter]
    fn modules(&self) -> Vec<String> {
        self.lookup.calls.iter().map(|(name, _)| name.clone()).collect()
    }

    /// A step begins on the calling thread (its host): `core` its bookkeeping, `step` the
    /// Python `Step`, which the layer wrappers (`LayerCall`) find here until `end`.
    fn begin(&self, core: Py<PyHostStep>, step: Py<PyAny>) {
        let host = std::thread::current().id();
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Current { core, step, host });
    }

    /// The step in progress is over.
    fn end(&self) {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// The state of one step: `reorder` false runs every layer on the host in code order
    /// (the seed's debugging switch); `criterion` `gpu-topo` or `global-topo`; `runs_inline`
    /// per layer, whether its device runs it on the thread that submits it.
    fn step(&self, reorder: bool, criterion: &str, runs_inline: Vec<bool>) -> PyResult<PyHostStep> {
        let criterion = host_criterion(criterion)?;
        let lookup = Arc::clone(&self.lookup);
        let walk = HostWalk::new(Arc::clone(&lookup.layers), reorder.then_some(criterion));
        let host = HostState { walk, calls: vec![0; lookup.calls.len()] };
        let n = lookup.names.len();
        if runs_inline.len() != n {
            let given = runs_inline.len();
            return Err(usage(format!("runs_inline has {given} entries for {n} layers")));
        }
        Ok(PyHostStep {
            lookup,
            runs_inline,
            watched: AtomicBool::new(false),
            host: Mutex::new(host),
            submissions: Mutex::new(Submissions {
                submitted: vec![false; n],
                failed: false,
                waiting: 0,
            }),
            submitted_changed: Condvar::new(),
        })
    }
}

/// The host thread's part of a step.
struct HostState {
    walk: HostWalk,
    /// Per wrapped module, how many times the host has called it in this step.
    calls: Vec<usize>,
}

/// The layers that have submitted, shared by the host and the threads of waiting layers.
struct Submissions {
    submitted: Vec<bool>,
    /// The step failed: waiting layers give up.
    failed: bool,
    /// How many threads are blocked in `wait_submitted`: a change notifies only when some
    /// are (a notification is a system call even with no one waiting). A waiter counts itself
    /// under the mutex before it sleeps, so a change made under the mutex after that sees it.
    waiting: usize,
}

impl Submissions {
    /// Wakes the waiting threads, if any, after a change (made under the mutex).
    fn changed(&self, condvar: &Condvar) {
        if self.waiting > 0 {
            condvar.notify_all();
        }
    }
}

/// A layer the host reached runs on the host now: what it waits for has submitted.
const ON_HOST_READY: u8 = 0;
/// It runs on the host once what it waits for has submitted (`wait_submitted`).
const ON_HOST_AFTER_WAIT: u8 = 1;
/// It waits on a thread of its own.
const ON_THREAD: u8 = 2;

/// One step of a distributed module: the layers reached, their decisions and submissions.
#[pyclass(name = "HostStep", module = "ordo", frozen)]
pub struct PyHostStep {
    lookup: Arc<Lookup>,
    /// Per layer: its device runs it on the thread that submits it, at once.
    runs_inline: Vec<bool>,
    /// The Python `Step` watches the host's operations (a torch function mode is on): a
    /// layer's call must step the mode aside, which only the Python side does. Written and
    /// read on the host thread only (`Relaxed`: no other memory hangs on it).
    watched: AtomicBool,
    host: Mutex<HostState>,
    submissions: Mutex<Submissions>,
    submitted_changed: Condvar,
}

impl PyHostStep {
    fn host(&self) -> MutexGuard<'_, HostState> {
        // A panic under the lock leaves plain data behind; the step fails on its own error.
        self.host.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn submissions(&self) -> MutexGuard<'_, Submissions> {
        self.submissions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `arrive`, for the Python method and for `LayerCall`.
    pub(crate) fn arrive_at(&self, module: usize, came_from: &[usize]) -> PyResult<(usize, u8)> {
        let mut host = self.host();
        let (name, slots) = self
            .lookup
            .calls
            .get(module)
            .ok_or_else(|| usage(format!("module {module}: no such wrapped module")))?;
        let k = host.calls[module];
        host.calls[module] += 1;
        let Some(layer) = slots.get(k).copied().flatten() else {
            let layer = if k == 0 { name.clone() } else { format!("{name}#{k}") };
            return Err(usage(format!(
                "layer `{layer}` is not in the placement: the profile did not see this call \
                 (a branch or a call count the example inputs did not take); profile with \
                 inputs that take it"
            )));
        };
        if host.walk.is_reached(layer) {
            let name = &self.lookup.names[layer];
            return Err(usage(format!("layer `{name}` reached twice in one step")));
        }
        let on_host = host.walk.reach(layer, came_from).map_err(error)?;
        if !on_host {
            return Ok((layer, ON_THREAD));
        }
        let submissions = self.submissions();
        let ready = host.walk.waits(layer).iter().all(|&w| submissions.submitted[w]);
        Ok((layer, if ready { ON_HOST_READY } else { ON_HOST_AFTER_WAIT }))
    }

    /// Whether a layer call the host makes now may run without the Python `Step`: layer
    /// `layer` runs on the host at once (`how` 0), on a device that runs it there, and no mode
    /// watches the host's operations.
    pub(crate) fn runs_here(&self, layer: usize, how: u8) -> bool {
        how == ON_HOST_READY && self.runs_inline[layer] && !self.watched.load(Ordering::Relaxed)
    }

    /// `mark_submitted`, for the Python method and for `LayerCall`.
    pub(crate) fn mark(&self, layer: usize) -> PyResult<()> {
        let mut submissions = self.submissions();
        let flag = submissions
            .submitted
            .get_mut(layer)
            .ok_or_else(|| usage(format!("layer {layer}: out of range")))?;
        *flag = true;
        submissions.changed(&self.submitted_changed);
        Ok(())
    }
}

#[pymethods]
impl PyHostStep {
    /// The host calls module `module` (its index in `AssignerPlan.modules`), whose arguments
    /// were computed by the layers `came_from` (indices; `None` for none). Returns the layer
    /// (its index) and how it runs: 0 on the host now, 1 on the host after `wait_submitted`,
    /// 2 on a thread of its own.
    #[pyo3(signature = (module, came_from = None))]
    fn arrive(&self, module: usize, came_from: Option<Vec<usize>>) -> PyResult<(usize, u8)> {
        self.arrive_at(module, came_from.as_deref().unwrap_or(&[]))
    }

    /// The Python `Step` watches the host's operations from now on: layer calls go through
    /// it (`LayerCall` no longer runs them itself).
    fn watching(&self) {
        self.watched.store(true, Ordering::Relaxed);
    }

    /// Blocks (the interpreter's lock released) until every layer `layer` waits for has
    /// submitted: true then, false if the step failed meanwhile. An `OrdoError` naming the
    /// layers still missing after `timeout` seconds.
    fn wait_submitted(&self, py: Python<'_>, layer: usize, timeout: f64) -> PyResult<bool> {
        let limit = Duration::try_from_secs_f64(timeout)
            .map_err(|_| usage(format!("timeout={timeout}: not a number of seconds")))?;
        let waits = self.host().walk.waits(layer).to_vec();
        let missing = py.detach(|| {
            let mut guard = self.submissions();
            guard.waiting += 1;
            let (mut guard, _) = self
                .submitted_changed
                .wait_timeout_while(guard, limit, |s| {
                    !s.failed && !waits.iter().all(|&w| s.submitted[w])
                })
                .unwrap_or_else(PoisonError::into_inner);
            guard.waiting -= 1;
            if guard.failed {
                return None;
            }
            Some(waits.iter().copied().filter(|&w| !guard.submitted[w]).collect::<Vec<_>>())
        });
        match missing {
            None => Ok(false),
            Some(missing) if missing.is_empty() => Ok(true),
            Some(missing) => {
                let mut names: Vec<&str> =
                    missing.iter().map(|&w| self.lookup.names[w].as_str()).collect();
                names.sort_unstable();
                let name = &self.lookup.names[layer];
                Err(usage(format!(
                    "layer `{name}` waited {timeout} s for layers {names:?} to start"
                )))
            }
        }
    }

    /// `layer` has submitted to its device: the layers waiting for it may go on.
    fn mark_submitted(&self, layer: usize) -> PyResult<()> {
        self.mark(layer)
    }

    /// The host's forward is over: the layers it did not reach (a branch not taken) count as
    /// submitted, so that nothing waits for them.
    fn release_unreached(&self) {
        let host = self.host();
        let mut submissions = self.submissions();
        for (layer, flag) in submissions.submitted.iter_mut().enumerate() {
            *flag |= !host.walk.is_reached(layer);
        }
        submissions.changed(&self.submitted_changed);
    }

    /// The step failed: every layer waiting in `wait_submitted` gives up.
    fn fail(&self) {
        let mut submissions = self.submissions();
        submissions.failed = true;
        submissions.changed(&self.submitted_changed);
    }

    /// A layer of `roots` that cannot submit until the host goes further, with the unreached
    /// layer it waits for (indices), or `None`.
    fn unreached_dependency(&self, roots: Vec<usize>) -> Option<(usize, usize)> {
        let host = self.host();
        let submissions = self.submissions();
        let n = submissions.submitted.len();
        let roots: Vec<usize> = roots.into_iter().filter(|&r| r < n).collect();
        host.walk.unreached_dependency(&roots, |l| submissions.submitted[l])
    }

    /// The layers the host reached, by name, in the order it reached them.
    fn code_order(&self) -> Vec<String> {
        let host = self.host();
        host.walk.code_order().iter().map(|&l| self.lookup.names[l].clone()).collect()
    }
}
