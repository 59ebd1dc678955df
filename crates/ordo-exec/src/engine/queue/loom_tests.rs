//! The ready queue and the countdown compiled again on loom's primitives, and loom's model of
//! small cases: every interleaving of their threads is explored.

use loom::sync::Arc;
use loom::thread;

/// loom's primitives, in place of std's.
mod sync {
    pub(super) use loom::sync::atomic::{AtomicUsize, Ordering};
    pub(super) use loom::sync::{Condvar, Mutex, MutexGuard};

    /// Does nothing: loom's model has no time to look for, and a worker that looks and finds
    /// nothing goes on to sleep under the mutex, which the model explores.
    pub(super) fn look_until(_found: impl Fn() -> bool) {}
}

// The same file as the runtime's queue (the parent's `ready`), on the primitives above: loaded
// twice on purpose. What the tests below do not call is dead code here only.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "ready.rs"]
mod ready;

use ready::{Countdown, ReadyQueue};
use sync::{AtomicUsize, Ordering};

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
