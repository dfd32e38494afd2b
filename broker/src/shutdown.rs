//! A clean stop on SIGTERM or SIGINT, as Kafka's controlled shutdown: new produce requests are
//! refused (NOT_LEADER_OR_FOLLOWER, so clients retry after the restart), every shard flushes
//! its partitions (fdatasync), and the process exits. Without it SIGTERM killed the process as
//! `kill -9` does, and acks=1 batches younger than `log.flush.interval.ms`, still in a
//! segment writer's buffer, were lost (seen in CI: 3 acknowledged records after a restart).
//!
//! In a cluster the node also tells the controller it is stopping (a heartbeat with
//! `shutting_down`, `cluster::broker_session`): the controller fences it at once, moving its
//! leaderships to other in-sync replicas and taking it out of the ISRs, instead of after
//! `broker.session.timeout.ms`; and a restart right away may register again (a fenced node's
//! id is free). The process waits for that answer too, bounded by the heartbeat interval.
//!
//! The signals are blocked in every thread (the mask is set before the shards start and is
//! inherited) and taken by one thread with `sigwait`. A glommio task waits in [`signalled`]:
//! on the read end of a Unix socket pair whose write end the signal thread closes (a foreign
//! thread cannot wake a glommio task directly; before, every shard polled a flag every 20 ms,
//! 50 wake-ups a second each on an idle node).

use std::os::fd::{FromRawFd, IntoRawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_lite::AsyncReadExt;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static FLUSHED_SHARDS: AtomicUsize = AtomicUsize::new(0);
/// Write ends of the waiters' socket pairs; closed (dropped) when a stop signal arrives.
static WAITERS: Mutex<Vec<UnixStream>> = Mutex::new(Vec::new());
/// Controlled-shutdown steps the process waits for (one per cluster member), and those done.
static CONTROLLED_STOPS: AtomicUsize = AtomicUsize::new(0);
static CONTROLLED_STOPS_DONE: AtomicUsize = AtomicUsize::new(0);

/// How often a waiter looks at the flag when it has no socket pair to wait on.
pub const SHUTDOWN_POLL_MS: u64 = 20;
/// The longest the process waits for the shards' flushes before it exits anyway.
const FLUSH_WAIT_MS: u64 = 30_000;

/// True once a stop signal has arrived: refuse new writes.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Acquire)
}

/// Returns once a stop signal has arrived (at once if one has). Call on a glommio executor.
pub async fn signalled() {
    if let Ok((tx, rx)) = UnixStream::pair() {
        let registered = match WAITERS.lock() {
            // Checked under the lock: the signal thread sets the flag before it takes the
            // list, so a waiter either sees the flag or is in the list it closes.
            Ok(mut w) if !requested() => {
                w.push(tx);
                true
            }
            _ => false,
        };
        if registered {
            // SAFETY: the descriptor is this socket's own, handed over once.
            let mut rx = unsafe { glommio::net::UnixStream::from_raw_fd(rx.into_raw_fd()) };
            let mut byte = [0u8; 1];
            // Ends with EOF when the signal thread drops the write end (or an error: poll).
            let _ = rx.read(&mut byte).await;
        }
    }
    while !requested() {
        glommio::timer::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
    }
}

/// A shard has flushed everything it acknowledged.
pub fn shard_flushed() {
    FLUSHED_SHARDS.fetch_add(1, Ordering::AcqRel);
}

/// A cluster member will tell the controller it is stopping: the process waits for
/// [`controlled_stop_done`] (bounded) before it exits.
pub fn expect_controlled_stop() {
    CONTROLLED_STOPS.fetch_add(1, Ordering::AcqRel);
}

/// The controller has answered the stopping heartbeat (or it could not be asked).
pub fn controlled_stop_done() {
    CONTROLLED_STOPS_DONE.fetch_add(1, Ordering::AcqRel);
}

fn all_stopped(shards: usize) -> bool {
    FLUSHED_SHARDS.load(Ordering::Acquire) >= shards
        && CONTROLLED_STOPS_DONE.load(Ordering::Acquire) >= CONTROLLED_STOPS.load(Ordering::Acquire)
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
            match WAITERS.lock() {
                // Dropping the write ends wakes every waiter (EOF).
                Ok(mut w) => drop(std::mem::take(&mut *w)),
                Err(_) => tracing::warn!("stop waiters lost; they notice by polling"),
            }
            let started = Instant::now();
            while !all_stopped(shards) && started.elapsed() < Duration::from_millis(FLUSH_WAIT_MS) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let flushed = FLUSHED_SHARDS.load(Ordering::Acquire);
            if flushed < shards {
                tracing::warn!(flushed, shards, "stopping before every shard flushed");
            } else if !all_stopped(shards) {
                tracing::warn!("stopping before the controller answered the stopping heartbeat");
            } else {
                tracing::info!(ms = started.elapsed().as_millis() as u64, "stopped cleanly");
            }
            std::process::exit(0);
        })?;
    Ok(())
}
