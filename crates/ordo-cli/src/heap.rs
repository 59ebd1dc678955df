//! A counting global allocator: the bytes the process has allocated now and at its peak, for
//! the profiler's temporary memory. Two relaxed atomic additions per allocation, one atomic
//! max; the allocation itself is the system allocator's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static CURRENT: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting.
pub struct Counting;

// SAFETY: every call is forwarded to `System` with the same arguments; the counters have no
// effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grow(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size() as u64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            CURRENT.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            grow(new_size);
        }
        new
    }
}

fn grow(bytes: usize) {
    let now = CURRENT.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// Reads the counters; only meaningful when [`Counting`] is the global allocator.
pub struct Meter;

impl ordo_exec::HeapMeter for Meter {
    fn current(&self) -> u64 {
        CURRENT.load(Ordering::Relaxed)
    }

    fn reset_peak(&self) {
        PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    fn peak(&self) -> u64 {
        PEAK.load(Ordering::Relaxed)
    }
}
