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
//! # Model checking
//!
//! The queue and the countdown (`queue/ready.rs`) are written against the primitives of a
//! `sync` module and compiled twice: here on std's, and in the tests of `queue/loom_tests.rs`
//! on loom's, whose model explores every interleaving of small cases. The loom copy is an
//! ordinary test module (loom is a dev-dependency), so `cargo test` runs the model checks with
//! the rest and nothing is built again under other features or flags.

#[cfg(test)]
mod loom_tests;
mod ready;

pub(crate) use ready::{Countdown, ReadyQueue};

/// The primitives that `ready` is written against: std's (the loom tests give it loom's).
mod sync {
    pub(super) use super::look_until;
    pub(super) use std::sync::atomic::{AtomicUsize, Ordering};
    pub(super) use std::sync::{Condvar, Mutex, MutexGuard};
}

/// How long an idle worker looks for work, yielding the processor, before it sleeps (on its
/// queue, or in the pool between steps): a hand-over to a worker still looking costs no
/// wake-up (about 10 µs, more on a virtual machine, and the woken core then runs its first
/// kernel cold). One millisecond covers the waits between devices inside a step of the zoo's
/// small models, and bounds what an idle worker spends when devices outnumber cores (its yields
/// then give the processor to the workers that have work).
pub(crate) const LOOK_FOR: std::time::Duration = std::time::Duration::from_millis(1);

/// Yields the processor until `found` says there is something to do, for at most
/// [`LOOK_FOR`].
pub(crate) fn look_until(found: impl Fn() -> bool) {
    let since = std::time::Instant::now();
    while !found() && since.elapsed() < LOOK_FOR {
        std::thread::yield_now();
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
