//! Free space on the data directory's filesystem, and what the broker does when it runs low.
//!
//! Shard 0 measures free space (`statvfs`) every `limits::DISK_CHECK_INTERVAL_MS`. Below
//! `storage.min.free.bytes` (Redpanda's name; Kafka has none) the broker refuses what would
//! fill the disk — produce (KAFKA_STORAGE_ERROR, which clients retry) and new topics or
//! partitions (POLICY_VIOLATION) — and keeps serving reads, offset commits and deletions, which
//! free space.
//!
//! A full disk must never stop a topic deletion from being recorded: a small reserve file is
//! kept in the data directory, and a catalog save that fails for lack of space deletes it and
//! tries once more.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// File that holds space back for catalog saves on a full disk.
pub const RESERVE_FILE: &str = ".space-reserve";

#[derive(Debug)]
pub struct DiskSpace {
    dir: PathBuf,
    min_free_bytes: u64,
    free_bytes: AtomicU64,
    low: AtomicBool,
}

impl DiskSpace {
    pub fn new(dir: &Path, min_free_bytes: u64) -> DiskSpace {
        let d = DiskSpace {
            dir: dir.to_path_buf(),
            min_free_bytes,
            free_bytes: AtomicU64::new(u64::MAX),
            low: AtomicBool::new(false),
        };
        d.refresh();
        d
    }

    /// Measures free space now; returns whether it is below the minimum (logs changes).
    pub fn refresh(&self) -> bool {
        let Some(free) = free_bytes(&self.dir) else {
            return self.is_low();
        };
        self.free_bytes.store(free, Ordering::Relaxed);
        let low = free < self.min_free_bytes;
        let was = self.low.swap(low, Ordering::Relaxed);
        if low && !was {
            tracing::warn!(
                free_bytes = free,
                min_free_bytes = self.min_free_bytes,
                "disk space low: refusing produce and new topics until space is freed (storage.min.free.bytes)"
            );
        } else if was && !low {
            tracing::info!(
                free_bytes = free,
                "disk space recovered: produce and new topics accepted again"
            );
        }
        low
    }

    pub fn is_low(&self) -> bool {
        self.low.load(Ordering::Relaxed)
    }

    pub fn free(&self) -> u64 {
        self.free_bytes.load(Ordering::Relaxed)
    }

    pub fn reason(&self) -> String {
        format!(
            "free disk space ({} bytes) is below storage.min.free.bytes ({} bytes)",
            self.free(),
            self.min_free_bytes
        )
    }
}

/// Free bytes available to this process on `dir`'s filesystem.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we pass and reads the NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail.saturating_mul(st.f_frsize))
}

/// `(total, available)` bytes of `dir`'s filesystem (DescribeLogDirs' `total_bytes` and
/// `usable_bytes`).
pub fn capacity_bytes(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: as in `free_bytes`.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| {
        (
            st.f_blocks.saturating_mul(st.f_frsize),
            st.f_bavail.saturating_mul(st.f_frsize),
        )
    })
}

/// Creates the reserve file (`limits::DISK_RESERVE_BYTES`, written, not sparse) if missing.
/// Best effort: on a disk already full it is simply absent.
pub fn ensure_reserve(dir: &Path) {
    let path = dir.join(RESERVE_FILE);
    if path.exists() {
        return;
    }
    let write = || -> io::Result<()> {
        let data = vec![0u8; crate::limits::DISK_RESERVE_BYTES];
        std::fs::write(&path, &data)?;
        std::fs::File::open(&path)?.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&path);
        tracing::warn!(error = %e, "could not create the disk-space reserve file");
    }
}

/// Runs `save`; if it fails for lack of space, frees the reserve file and runs it once more.
pub fn with_reserve<T>(dir: &Path, mut save: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    match save() {
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
            let path = dir.join(RESERVE_FILE);
            if std::fs::remove_file(&path).is_ok() {
                tracing::warn!("disk full: released the space reserve to save the catalog");
                return save();
            }
            Err(e)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_and_flags_low_space() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(free_bytes(dir.path()).is_some_and(|f| f > 0));
        assert!(!DiskSpace::new(dir.path(), 0).is_low());
        let d = DiskSpace::new(dir.path(), u64::MAX);
        assert!(d.is_low());
        assert!(d.reason().contains("storage.min.free.bytes"));
    }

    #[test]
    fn the_reserve_is_released_when_a_save_runs_out_of_space() {
        let dir = tempfile::tempdir().expect("tempdir");
        ensure_reserve(dir.path());
        assert!(dir.path().join(RESERVE_FILE).exists());
        let mut tries = 0;
        let r = with_reserve(dir.path(), || {
            tries += 1;
            if tries == 1 {
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(r.expect("second try"), 2);
        assert!(!dir.path().join(RESERVE_FILE).exists());
    }
}
