//! Giving freed memory back to the operating system.
//!
//! glibc adjusts its mmap and trim thresholds as a program runs: once a 16 MiB buffer
//! (a fetch read, a large request frame) has been freed, allocations up to 16 MiB come from
//! the thread's arena and up to 32 MiB of free space stays at each arena's top, where
//! `malloc_trim` cannot reach it (it trims only the main arena's top). `configure_allocator`
//! fixes both thresholds at `limits::ALLOCATOR_MMAP_THRESHOLD_BYTES`: buffers that large
//! are mapped and unmapped on their own, and an arena gives back its top beyond that.
//!
//! glibc's allocator keeps what a thread frees in that thread's arena for reuse; after
//! thousands of connections close, their buffers stay resident (3,000 connections left
//! 230 MB behind, 21,000 left 1.4 GB). `malloc_trim` returns the free pages of every arena.
//! Shard 0 calls it from a blocking thread, at most once per `limits::DISK_CHECK_INTERVAL_MS`
//! and only when connections have closed since the last call (`Admission::closed`).

/// Fixes glibc's mmap and trim thresholds (see above); called once before the shards start.
pub fn configure_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning parameters.
    unsafe {
        let bytes = crate::limits::ALLOCATOR_MMAP_THRESHOLD_BYTES as libc::c_int;
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
        libc::mallopt(libc::M_TRIM_THRESHOLD, bytes);
    }
}

/// Returns free heap pages to the OS; a no-op where the C library has no `malloc_trim`.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free lists; it takes
    // each arena's lock, so it is safe to call while other threads allocate.
    unsafe {
        libc::malloc_trim(0);
    }
}
