//! fdatasync latency after a small write: what an `acks=all` produce waits for.
//!
//! Two files: one preallocated (fallocate, as the broker keeps its active segment) and one
//! that grows with every write, so fdatasync must also commit the new size and block
//! allocation to the journal. The write goes through io_uring (QD1, O_DIRECT); fdatasync is a
//! plain syscall from this one thread, as the broker issues it from one blocking-pool thread
//! per shard. ext4's journal (jbd2) sleeps up to a jiffy (4 ms here) to batch commits when
//! the process asking for one is not the one that asked last, so another process fsyncing on
//! the same filesystem during the measurement shows up as a ~4 ms mode.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use super::ring::{open_direct, preallocate, Op, Ring};

/// Bytes written before each fdatasync (a typical produce batch).
pub const SYNC_WRITE_BYTES: usize = 16 << 10;

/// fdatasync latency percentiles, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncLatency {
    pub samples: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Nearest-rank percentile of sorted samples (`q` in 0..=1).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn fdatasync(file: &std::fs::File) -> io::Result<()> {
    // SAFETY: plain syscall on an fd `file` keeps open.
    if unsafe { libc::fdatasync(file.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("fdatasync: {e}")))
    }
}

/// `samples` rounds of: write the next 16 KiB of `path` with O_DIRECT, then fdatasync (timed).
pub fn sync_latency(path: &Path, preallocated: bool, samples: usize) -> io::Result<SyncLatency> {
    let file = open_direct(path, true)?;
    let len = SYNC_WRITE_BYTES as u64;
    if preallocated {
        preallocate(&file, len * samples as u64)?;
        // Commit the allocation itself before timing anything.
        fdatasync(&file)?;
    }
    // One ring (so one set of io-wq workers) for every sample.
    let mut ring = Ring::new(SYNC_WRITE_BYTES, 1)?;
    let mut times_us = Vec::with_capacity(samples);
    for i in 0..samples as u64 {
        let mut offset = Some(i * len);
        ring.run(&file, Op::Write, None, &mut || offset.take())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let t0 = Instant::now();
        fdatasync(&file)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        times_us.push(t0.elapsed().as_micros().max(1) as u64);
    }
    times_us.sort_unstable();
    Ok(SyncLatency {
        samples,
        p50_us: percentile(&times_us, 0.50),
        p99_us: percentile(&times_us, 0.99),
        max_us: times_us.last().copied().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.50), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
