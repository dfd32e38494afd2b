//! A helper thread doing CPU work for a shard (the cleaner) leaves the shard's core and may
//! lower its priority, so the shard's requests do not wait behind it. A shard's threads are pinned; a thread it starts
//! inherits that pinning, which `leave_shard_core` undoes.

use std::io;

/// Lets the calling thread run on any core, at `nice`. Best effort: a refusal leaves the
/// thread as it was (logged at debug).
pub fn leave_shard_core(nice: libc::c_int) {
    // SAFETY: plain syscalls on the calling thread with initialised arguments.
    unsafe {
        let mut all: libc::cpu_set_t = std::mem::zeroed();
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        for cpu in 0..cpus.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut all);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &all) != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "helper thread keeps its core");
        }
        set_nice(nice);
    }
}

fn set_nice(nice: libc::c_int) {
    // SAFETY: a plain syscall on the calling thread.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "helper thread keeps its priority");
        }
    }
}
