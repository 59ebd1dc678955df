//! The C allocator's settings for a process that runs training steps.

/// Makes the C allocator keep memory that is freed for the next allocation: glibc hands large
/// blocks (above a threshold that grows to 32 MiB) to the kernel with `mmap` and returns them
/// on free, so every step would fault in fresh zeroed pages for its large tensors (most of a
/// small model's step, and the page faults of parallel workers serialise in the kernel).
/// Serving them from the heap and keeping freed memory makes a step reuse the last step's
/// pages, as a framework's caching allocator does. Call it once, first thing in `main`,
/// before other threads exist; it does nothing elsewhere than on glibc.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes the allocator's thresholds; the caller calls it before
    // other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
