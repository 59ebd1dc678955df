//! The engine's synchronisation primitives: a ready queue per worker pool and the countdown
//! that moves a task into it.
//!
//! # Protocol
//!
//! Every task has a countdown of the tasks it waits for. A worker that finishes a task calls
//! [`Countdown::arrive`] on the countdown of each successor; the call that brings it to zero
//! (exactly one, since each predecessor arrives once) pushes the successor into the ready
//! queue of its pool. Workers [`ReadyQueue::pop`] the task of lowest rank (the plan's order),
//! sleeping on the queue's condition variable while it is empty, until the queue is closed:
//! by the worker that finishes the last task of the step, or by the first one that fails.
//! A closed queue wakes every sleeper and hands out nothing more, so no worker waits for a
//! task that will never come.
//!
//! # Memory orderings
//!
//! * [`Countdown::arrive`] is a `fetch_sub` with `AcqRel`: its release half publishes what the
//!   arriving worker wrote (the predecessor's outputs) and its acquire half, in the worker
//!   that reaches zero, makes every earlier arrival's writes visible to it; the successor is
//!   then handed over under the queue's mutex, which carries them on to the worker that pops
//!   it. (Outputs are also stored under their own mutexes; the orderings make the protocol
//!   correct on its own.)
//! * Everything else in a queue is under its mutex; `sleepers` lets a push skip the
//!   notification, a system call, when no worker sleeps. A sleeper counts itself before it
//!   waits and the pusher reads the count under the same mutex, so no wake-up is lost.
//! * A worker that makes a successor ready for its own queue while that queue looks empty may
//!   keep it and run it next instead of queueing it (ParallelExecutor's fast executor does the
//!   same): the countdown's acquire already made the predecessors' writes visible to it, and a
//!   chain of tasks then runs on one thread without a hand-over. It does not when the step has
//!   failed.
//! * Before it sleeps, a worker that found its queue empty looks for a while, yielding the
//!   processor, at `hint` (the queue's length, stored under the mutex, read without it,
//!   `Relaxed`): a hand-over to a worker still looking then costs no wake-up. The hint only
//!   decides when to take the mutex again; whether to run, wait or stop is decided under it.
//!
//! With the `loom` feature the primitives use loom's types, and the tests in this file explore
//! every interleaving of small cases (`cargo test --workspace --lib --features ordo-exec/loom
//! loom`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(feature = "loom")]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(feature = "loom"))]
use std::sync::{Condvar, Mutex, MutexGuard};

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

/// How long an idle worker looks for work, yielding the processor, before it sleeps (on its
/// queue, or in the pool between steps): a hand-over to a worker still looking costs no
/// wake-up (about 10 µs, more on a virtual machine, and the woken core then runs its first
/// kernel cold). One millisecond covers the waits between devices inside a step of the zoo's
/// small models, and bounds what an idle worker spends when devices outnumber cores (its yields
/// then give the processor to the workers that have work).
#[cfg(not(feature = "loom"))]
pub(crate) const LOOK_FOR: std::time::Duration = std::time::Duration::from_millis(1);

/// Yields the processor until `found` says there is something to do, for at most
/// [`LOOK_FOR`]. Nothing under loom, whose model has no time.
#[cfg(not(feature = "loom"))]
pub(crate) fn look_until(found: impl Fn() -> bool) {
    let since = std::time::Instant::now();
    while !found() && since.elapsed() < LOOK_FOR {
        std::thread::yield_now();
    }
}

#[cfg(feature = "loom")]
pub(crate) fn look_until(_found: impl Fn() -> bool) {}

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

#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two predecessors finish on two threads; exactly one of them makes the successor ready,
    /// and the worker that pops it sees both of their writes.
    #[test]
    fn loom_the_last_arrival_hands_over_and_publishes() {
        loom::model(|| {
            let done = Arc::new((Countdown::new(2), ReadyQueue::default()));
            let outputs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
            let producers: Vec<_> = (0..2)
                .map(|i| {
                    let (done, outputs) = (done.clone(), outputs.clone());
                    thread::spawn(move || {
                        outputs[i].store(i + 1, Ordering::Relaxed);
                        if done.0.arrive() {
                            done.1.push(0, 7);
                        }
                    })
                })
                .collect();
            assert_eq!(done.1.pop(), Some(7));
            assert_eq!(outputs[0].load(Ordering::Relaxed), 1);
            assert_eq!(outputs[1].load(Ordering::Relaxed), 2);
            for p in producers {
                p.join().unwrap();
            }
        });
    }

    /// A worker sleeping on an empty queue is woken by a close: it never waits forever.
    #[test]
    fn loom_close_wakes_a_sleeping_worker() {
        loom::model(|| {
            let queue = Arc::new(ReadyQueue::default());
            let worker = {
                let queue = queue.clone();
                thread::spawn(move || queue.pop())
            };
            queue.close();
            assert_eq!(worker.join().unwrap(), None);
        });
    }

    /// A push to a queue with a sleeping worker is never lost, whichever comes first.
    #[test]
    fn loom_a_push_wakes_a_sleeping_worker() {
        loom::model(|| {
            let queue = Arc::new(ReadyQueue::default());
            let worker = {
                let queue = queue.clone();
                thread::spawn(move || queue.pop())
            };
            queue.push(3, 1);
            assert_eq!(worker.join().unwrap(), Some(1));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_rank_first_then_nothing_after_close() {
        let q = ReadyQueue::default();
        q.push(5, 50);
        q.push(1, 10);
        q.push(3, 30);
        assert_eq!((q.pop(), q.pop()), (Some(10), Some(30)));
        q.close();
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn only_the_last_arrival_reports_zero() {
        let c = Countdown::new(3);
        assert_eq!([c.arrive(), c.arrive(), c.arrive()], [false, false, true]);
    }
}
