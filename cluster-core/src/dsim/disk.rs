//! A broker's simulated disk: the partition's log at three levels of durability, and what a
//! kill -9 or a power cut leaves of it.

use crate::replication::epoch_cache::EpochCache;

/// The log: `(leader epoch, value)` per offset, on a disk of three levels, `synced <=
/// written <= len`: appended (`len`: the process's memory only), written (handed to the
/// device — the page cache or the device's own cache: outlives a kill -9, not a power cut)
/// and synced (fdatasynced: outlives a power cut).
#[derive(Clone, Debug, Default)]
pub(crate) struct Disk {
    pub(crate) records: Vec<(i32, u64)>,
    pub(crate) written: i64,
    pub(crate) synced: i64,
    /// The fdatasync in flight, if any, and how far it reaches: what was written when it
    /// started (one at a time; what is written meanwhile waits for the next: group commit).
    pub(crate) syncing: Option<i64>,
    pub(crate) cache: EpochCache,
}

impl Disk {
    pub(crate) fn len(&self) -> i64 {
        self.records.len() as i64
    }

    pub(crate) fn append(&mut self, epoch: i32, value: u64) {
        self.cache.assign(epoch, self.len());
        self.records.push((epoch, value));
    }

    pub(crate) fn truncate(&mut self, to: i64) {
        self.records.truncate(to.max(0) as usize);
        self.written = self.written.min(self.len());
        self.synced = self.synced.min(self.len());
        // A sync in flight covers what was written when it started and is still there, not
        // what is appended in place of the cut records.
        self.syncing = self.syncing.map(|upto| upto.min(self.len()));
        self.cache.truncate_from_end(self.len());
    }

    /// The process is gone: of the log, `kept` offsets are left, all of them on the device
    /// (what a restart reads back is durable now), and no sync is in flight.
    pub(crate) fn cut_to(&mut self, kept: i64) {
        self.truncate(kept);
        self.written = self.len();
        self.syncing = None;
    }

    pub(crate) fn last_epoch(&self) -> i32 {
        self.cache.latest().map_or(-1, |(e, _)| e)
    }
}
