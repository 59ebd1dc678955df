//! The ready queue and the countdown, on the primitives of the parent's `sync` module (std's
//! in the runtime, loom's in the model checks); the protocol and its memory orderings are
//! written down in the parent module.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::sync::{AtomicUsize, Condvar, Mutex, MutexGuard, Ordering, look_until};

/// How many predecessors of a task have still to finish.
#[derive(Debug)]
pub(crate) struct Countdown(AtomicUsize);

impl Countdown {
    pub(crate) fn new(count: usize) -> Self {
        Self(AtomicUsize::new(count))
    }

    /// One predecessor finished: whether it was the last.
    pub(crate) fn arrive(&self) -> bool {
        self.0.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

#[derive(Debug, Default)]
struct State {
    ready: BinaryHeap<Reverse<(u32, u32)>>,
    closed: bool,
    sleepers: usize,
}

/// Tasks ready to run on one pool of workers, lowest rank first.
#[derive(Debug, Default)]
pub(crate) struct ReadyQueue {
    state: Mutex<State>,
    wake: Condvar,
    /// Ready tasks, or 1 once closed: a hint that looking workers read without the lock.
    hint: AtomicUsize,
}

impl ReadyQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker never panics while holding the lock (kernels run outside it), so a
        // poisoned lock still holds consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `task` of `rank` ready.
    pub(crate) fn push(&self, rank: u32, task: u32) {
        let mut state = self.lock();
        state.ready.push(Reverse((rank, task)));
        self.hint.store(state.ready.len(), Ordering::Relaxed);
        if state.sleepers > 0 {
            self.wake.notify_one();
        }
    }

    /// The ready task of lowest rank, waiting for one; `None` once the queue is closed.
    pub(crate) fn pop(&self) -> Option<u32> {
        let mut state = self.lock();
        let mut looked = false;
        loop {
            if state.closed {
                return None;
            }
            if let Some(Reverse((_, task))) = state.ready.pop() {
                self.hint.store(state.ready.len(), Ordering::Relaxed);
                return Some(task);
            }
            if !looked {
                // Look for a while without the lock; whatever the hint says, the decision is
                // taken again under the lock, so a stale hint costs a round, never a task.
                drop(state);
                look_until(|| self.hint.load(Ordering::Relaxed) > 0);
                looked = true;
                state = self.lock();
                continue;
            }
            state.sleepers += 1;
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            state.sleepers -= 1;
        }
    }

    /// Whether the queue holds no ready task, as far as a look without the lock can tell.
    pub(crate) fn looks_empty(&self) -> bool {
        self.hint.load(Ordering::Relaxed) == 0
    }

    /// Hands out nothing more and wakes every sleeper.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.hint.store(1, Ordering::Relaxed);
        self.wake.notify_all();
    }
}
