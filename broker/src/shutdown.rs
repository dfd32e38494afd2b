//! A clean stop on SIGTERM or SIGINT, as Kafka's controlled shutdown: new produce requests are
//! refused (NOT_LEADER_OR_FOLLOWER, so clients retry after the restart), every shard flushes
//! its partitions (fdatasync), and the process exits. Without it SIGTERM killed the process as
//! `kill -9` does, and acks=1 batches younger than `log.flush.interval.ms`, still in a
//! segment writer's buffer, were lost (seen in CI: 3 acknowledged records after a restart).
//!
//! The signals are blocked in every thread (the mask is set before the shards start and is
//! inherited) and taken by one thread with `sigwait`; the shards poll the flag from a small
//! task (`SHUTDOWN_POLL_MS`), since a foreign thread cannot wake a glommio task directly.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static FLUSHED_SHARDS: AtomicUsize = AtomicUsize::new(0);

/// How often each shard looks at the flag.
pub const SHUTDOWN_POLL_MS: u64 = 20;
/// The longest the process waits for the shards' flushes before it exits anyway.
const FLUSH_WAIT_MS: u64 = 30_000;

/// True once a stop signal has arrived: refuse new writes.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Acquire)
}

/// A shard has flushed everything it acknowledged.
pub fn shard_flushed() {
    FLUSHED_SHARDS.fetch_add(1, Ordering::AcqRel);
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Blocks SIGTERM and SIGINT in the calling thread (and every thread it starts from now on)
/// and starts the thread that waits for them. Call before the shards start.
pub fn install(shards: usize) -> std::io::Result<()> {
    let set = stop_signals();
    // SAFETY: changes only this thread's signal mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    std::thread::Builder::new()
        .name("strand-signals".into())
        .spawn(move || {
            let mut signal: libc::c_int = 0;
            // SAFETY: waits on a set of signals blocked in every thread of the process.
            let rc = unsafe { libc::sigwait(&set, &mut signal) };
            if rc != 0 {
                tracing::warn!(error = rc, "sigwait failed; stop signals are ignored");
                return;
            }
            tracing::info!(
                signal,
                "stopping: refusing writes and flushing every partition"
            );
            REQUESTED.store(true, Ordering::Release);
            let started = Instant::now();
            while FLUSHED_SHARDS.load(Ordering::Acquire) < shards
                && started.elapsed() < Duration::from_millis(FLUSH_WAIT_MS)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            let flushed = FLUSHED_SHARDS.load(Ordering::Acquire);
            if flushed < shards {
                tracing::warn!(flushed, shards, "stopping before every shard flushed");
            } else {
                tracing::info!(ms = started.elapsed().as_millis() as u64, "stopped cleanly");
            }
            std::process::exit(0);
        })?;
    Ok(())
}
