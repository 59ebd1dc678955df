//! Worker threads that outlive the steps they run.
//!
//! Starting and joining a thread per worker costs tens of µs a step on a virtual machine, a
//! tenth of a sub-millisecond step of the zoo's small models, so an [`Executable`] keeps its
//! workers in a pool and hands each step to them.
//!
//! # Protocol
//!
//! [`Pool::run`] publishes a job (a borrowed closure, called once with each worker's index)
//! under the pool's mutex with a new generation number, wakes the workers and waits until all
//! of them have returned from it. A worker waits for a generation it has not run, takes the
//! job under the mutex, calls it outside the mutex, and counts itself done under the mutex; the
//! last one wakes the caller. The job is therefore called only between its publication and the
//! return of `run`, which is what makes lending a non-`'static` closure to the threads sound. A
//! panic in a job is caught, the worker still counts itself done, and `run` resumes the first
//! panic once every worker is done. Runs are serialised by a second mutex. Dropping the pool
//! asks the workers to stop and joins them.
//!
//! Between steps a worker looks for the next generation for up to [`LOOK_FOR`], yielding the
//! processor, before it sleeps on the condition variable, so back-to-back steps cost no
//! wake-up. `generation` is mirrored in an atomic for that look (`Relaxed`: only a hint; the
//! job is taken under the mutex, which orders everything the caller wrote before publishing).
//!
//! [`Executable`]: super::Executable
//! [`LOOK_FOR`]: super::queue::LOOK_FOR

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::queue::look_until;

/// A job lent to the workers for one run. The lifetime is erased: see [`Pool::run`].
type Job = &'static (dyn Fn(usize) + Sync);

#[derive(Default)]
struct State {
    job: Option<Job>,
    generation: u64,
    running: usize,
    panic: Option<Box<dyn Any + Send>>,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Workers wait here for a new generation or the stop.
    start: Condvar,
    /// The caller of `run` waits here for the last worker.
    done: Condvar,
    /// `state.generation`, readable without the mutex.
    generation: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock and their panics are caught, so the state stays
        // consistent even if a lock was poisoned.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A fixed number of worker threads.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// One run at a time.
    running: Mutex<()>,
}

impl Pool {
    /// Starts `workers` threads.
    ///
    /// # Errors
    /// The system's error when a thread cannot start, after the threads already started have
    /// been stopped.
    pub(crate) fn new(workers: usize) -> std::io::Result<Self> {
        let mut pool = Self {
            shared: Arc::default(),
            threads: Vec::with_capacity(workers),
            running: Mutex::new(()),
        };
        for index in 0..workers {
            let shared = Arc::clone(&pool.shared);
            // On failure, dropping `pool` stops the threads started so far.
            let thread = std::thread::Builder::new()
                .name(format!("ordo-worker-{index}"))
                .spawn(move || work(&shared, index))?;
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// How many workers the pool has.
    pub(crate) fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Calls `job(i)` on worker `i` for every worker, and returns when all calls have returned
    /// (resuming the first panic of a call, if any).
    pub(crate) fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let _one_at_a_time = self.running.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the reference is only extended in type. Workers call the job only after
        // taking it under the mutex in this run's generation, and this function returns only
        // after every worker has counted itself done with it (below), so no call outlives the
        // borrow.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(job) };
        let mut state = self.shared.lock();
        state.job = Some(job);
        state.generation += 1;
        state.running = self.threads.len();
        self.shared.generation.store(state.generation, Ordering::Relaxed);
        self.shared.start.notify_all();
        while state.running > 0 {
            state = self.shared.done.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.job = None;
        if let Some(panic) = state.panic.take() {
            drop(state);
            resume_unwind(panic);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.start.notify_all();
        for thread in self.threads.drain(..) {
            // A worker never panics outside a job (those are caught).
            let _ = thread.join();
        }
    }
}

/// A worker: runs each generation's job with its `index` until asked to stop.
fn work(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        look_until(|| shared.generation.load(Ordering::Relaxed) != seen);
        let mut state = shared.lock();
        while state.generation == seen && !state.stop {
            state = shared.start.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if state.stop {
            return;
        }
        seen = state.generation;
        let job = state.job.expect("a new generation has a job");
        drop(state);
        let result = catch_unwind(AssertUnwindSafe(|| job(index)));
        let mut state = shared.lock();
        if let Err(panic) = result {
            state.panic.get_or_insert(panic);
        }
        state.running -= 1;
        if state.running == 0 {
            shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_every_job_once_and_borrows_end_with_the_run() {
        let pool = Pool::new(3).unwrap();
        for round in 0..200 {
            let calls: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            pool.run(&|i| {
                calls[i].fetch_add(round + 1, Ordering::Relaxed);
            });
            // `calls` is borrowed by the job and read right after: the run is over.
            let seen: Vec<usize> = calls.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            assert_eq!(seen, vec![round + 1; 3]);
        }
    }

    #[test]
    fn a_panicking_job_is_resumed_in_the_caller_and_the_pool_goes_on() {
        let pool = Pool::new(2).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(&|i| assert_ne!(i, 1, "worker 1 fails"));
        }));
        assert!(caught.is_err());
        let done = AtomicUsize::new(0);
        pool.run(&|_| {
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.load(Ordering::Relaxed), 2);
    }
}
