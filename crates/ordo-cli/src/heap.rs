//! A counting global allocator for the profiler's temporary memory: the bytes the process has
//! allocated, and their peak. It counts only once [`enable`]d (by `ordo profile`), so that the
//! other commands, and the runtime's worker threads, pay one relaxed load per allocation and
//! never contend on the counters.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
// Signed: memory allocated before counting started may be freed after.
static CURRENT: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);
static BASE: AtomicI64 = AtomicI64::new(0);

/// Starts counting allocations.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// The system allocator, counting when enabled.
pub struct Counting;

// SAFETY: every call is forwarded to `System` with the same arguments; the counters have no
// effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as i64);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as i64);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        new
    }
}

fn count(bytes: i64) {
    if ENABLED.load(Ordering::Relaxed) {
        let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

/// Reads the counters (after [`enable`]).
pub struct Meter;

impl ordo::profiling::HeapMeter for Meter {
    fn start(&self) {
        let now = CURRENT.load(Ordering::Relaxed);
        BASE.store(now, Ordering::Relaxed);
        PEAK.store(now, Ordering::Relaxed);
    }

    fn peak_growth(&self) -> u64 {
        let growth = PEAK.load(Ordering::Relaxed) - BASE.load(Ordering::Relaxed);
        u64::try_from(growth).unwrap_or(0)
    }
}
