//! Shards: one glommio executor pinned per core, and which shard owns which partition.
//!
//! Every partition is owned by exactly one shard, chosen by a stable hash of
//! `(topic, partition)`; only that shard opens its files, appends, reads and flushes. Other
//! shards reach it through glommio channels (arrives with the Kafka front end), never through
//! shared memory, so the hot path takes no locks.

use std::io;
use std::sync::Arc;

use std::time::Duration;

use glommio::{LocalExecutorBuilder, Placement};

use crate::limits;

/// The shard that owns `topic`/`partition` among `shards` (FNV-1a, stable across runs and
/// builds, so a restart reopens each partition on the same shard).
pub fn shard_for(topic: &str, partition: i32, shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in topic.bytes().chain(partition.to_be_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % shards.max(1) as u64) as usize
}

/// Cores to run on: `cores` (the `cores` setting), or every core this process may use.
pub fn shard_count(cores: Option<usize>) -> usize {
    cores.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How shards may use their cores.
#[derive(Clone, Copy, Debug, Default)]
pub struct Polling {
    /// A pinned shard with nothing to run polls this long before it sleeps (Seastar's
    /// `--idle-poll-time-us`): a wake-up from sleep costs the host's scheduling latency, a
    /// poll does not.
    pub idle_poll: Duration,
    /// The cores are shared with other busy processes (`overprovisioned`): no pinning, no
    /// idle polling and no polled disk I/O (glommio's poll ring spins while a request is in
    /// flight).
    pub overprovisioned: bool,
}

/// Starts `n` executors, one per shard, pinned to the first `n` cores the process may use
/// (unless overprovisioned), each running `shard_main(id, n, config)`, and waits for all of
/// them.
pub fn run_shards<C, F, Fut>(
    n: usize,
    polling: Polling,
    config: Arc<C>,
    shard_main: F,
) -> io::Result<()>
where
    C: Send + Sync + 'static,
    F: Fn(usize, usize, Arc<C>) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = io::Result<()>> + 'static,
{
    // The cores this process may use (`taskset -c 4-7 strand serve` pins shards to 4-7).
    let cpus = strand_tuning::cpus::allowed();
    if polling.overprovisioned {
        glommio::set_iopoll_enabled(false);
    }
    let mut handles = Vec::with_capacity(n);
    for id in 0..n {
        let cfg = Arc::clone(&config);
        let f = shard_main.clone();
        // Pin when there is a core per shard; oversubscribed (tests) shards float.
        let placement = if n <= cpus.len() && !polling.overprovisioned {
            Placement::Fixed(cpus[id])
        } else {
            Placement::Unbound
        };
        let mut builder = LocalExecutorBuilder::new(placement);
        if !polling.idle_poll.is_zero() && !polling.overprovisioned {
            // glommio ignores it for an unpinned executor (it would steal a shared core).
            builder = builder.spin_before_park(polling.idle_poll);
        }
        let handle = builder
            .name(&format!("strand-shard-{id}"))
            .io_memory(limits::EXECUTOR_IO_MEMORY_BYTES)
            .spawn(move || async move { f(id, n, cfg).await })
            .map_err(|e| io::Error::other(format!("cannot start shard {id}: {e}")))?;
        handles.push(handle);
    }
    let mut first_error = None;
    for (id, h) in handles.into_iter().enumerate() {
        let result = h
            .join()
            .map_err(|e| io::Error::other(format!("shard {id} crashed: {e}")))
            .and_then(|r| r);
        if let Err(e) = result {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_is_stable_and_spread() {
        assert_eq!(shard_for("orders", 3, 4), shard_for("orders", 3, 4));
        let mut counts = [0usize; 4];
        for p in 0..400 {
            counts[shard_for("orders", p, 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 50), "{counts:?}");
        assert_eq!(shard_for("x", 0, 1), 0);
    }
}
