//! A partition as one replica of several: batches appended exactly as the leader wrote them
//! (its offsets, epoch and bytes), the leader-epoch cache kept on disk beside the segments
//! (Kafka's `leader-epoch-checkpoint`), leading an epoch (stamped on every batch appended),
//! and reads cut at the high watermark for consumers. The rules themselves (where a follower
//! truncates, when a write is committed) are sans-IO in `strand_cluster_core::replication`.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use bytes::BytesMut;
use strand_cluster_core::replication::epoch_cache::EpochCache;
use strand_wire::batch::{BatchHeader, HEADER_BYTES};

use super::{AppendError, Origin, PartitionLog, ReadOut};
use crate::storage::recovery::sync_dir;
use crate::storage::types::{BatchMeta, Offset};

/// The epoch cache's file in the partition directory (Kafka's name and text format: a version
/// line `0`, a count line, then `epoch start_offset` per line).
pub const EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

/// A replica's epochs: the cache (persisted) and the epoch it leads in, if it leads.
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    pub(crate) cache: EpochCache,
    pub(crate) leading: Option<i32>,
    /// As a follower: the leader's high watermark last heard (not persisted yet).
    pub(crate) high_watermark: i64,
}

/// Loads the checkpoint; a missing file is an empty cache, a damaged one too (with a warning:
/// the follower then truncates to its high watermark at the next leader change, which is safe).
pub(super) fn read_checkpoint(dir: &Path) -> Epochs {
    let text = match fs::read_to_string(dir.join(EPOCH_CHECKPOINT_FILE)) {
        Ok(text) => text,
        Err(_) => return Epochs::default(),
    };
    match parse_checkpoint(&text).and_then(EpochCache::from_entries) {
        Ok(cache) => Epochs {
            cache,
            ..Epochs::default()
        },
        Err(why) => {
            tracing::warn!(dir = %dir.display(), %why, "ignoring a damaged leader-epoch checkpoint");
            Epochs::default()
        }
    }
}

fn parse_checkpoint(text: &str) -> Result<Vec<(i32, i64)>, String> {
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err("unknown version".into());
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or("no entry count")?;
    let entries: Vec<(i32, i64)> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            match (
                it.next().and_then(|e| e.parse().ok()),
                it.next().and_then(|o| o.parse().ok()),
            ) {
                (Some(e), Some(o)) => Ok((e, o)),
                _ => Err(format!("bad entry {l:?}")),
            }
        })
        .collect::<Result<_, _>>()?;
    if entries.len() != count {
        return Err(format!("{} entries, count says {count}", entries.len()));
    }
    Ok(entries)
}

/// Writes the checkpoint durably (temporary file, fdatasync, rename, directory sync).
fn write_checkpoint(dir: &Path, entries: &[(i32, i64)]) -> io::Result<()> {
    let mut text = format!("0\n{}\n", entries.len());
    for (epoch, offset) in entries {
        text.push_str(&format!("{epoch} {offset}\n"));
    }
    let tmp = dir.join(format!("{EPOCH_CHECKPOINT_FILE}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()?;
    fs::rename(&tmp, dir.join(EPOCH_CHECKPOINT_FILE))?;
    sync_dir(dir)
}

impl PartitionLog {
    /// A follower's append: the batch keeps the leader's base offset, epoch and bytes. Refused
    /// if it starts below this log's end (a gap is fine: compaction leaves them on the
    /// leader); validated like a client's batch (magic, lengths, CRC-32C). A newer epoch is
    /// written to the epoch cache on disk before the batch. Producer and transaction state follow the
    /// batch as on the leader, so a retried batch is still recognised after a failover.
    pub async fn append_replica(
        &self,
        batch: BytesMut,
        now_ms: i64,
    ) -> Result<BatchMeta, AppendError> {
        self.append_as(batch, now_ms, Origin::Replica).await
    }

    /// The checks and the epoch bookkeeping of [`Self::append_replica`], run holding the
    /// append permit.
    pub(super) async fn follow_on(&self, header: &BatchHeader) -> Result<(), AppendError> {
        let (end, cache) = {
            let st = self.inner.state.borrow();
            (st.log.log_end(), st.epochs.cache.clone())
        };
        if header.base_offset < end.0 {
            return Err(AppendError::Replica(format!(
                "base offset {} is below the log end {end}",
                header.base_offset
            )));
        }
        // Only a newer epoch adds an entry, as in Kafka's `LeaderEpochFileCache.assign`: a
        // batch no leader stamped (written on a single node, or before replication) carries
        // whatever its producer put there (librdkafka 0, the Java client -1).
        let epoch = header.partition_leader_epoch;
        if epoch < 0 || cache.latest().is_some_and(|(latest, _)| epoch <= latest) {
            return Ok(());
        }
        let mut cache = cache;
        cache.assign(epoch, header.base_offset);
        self.persist_epochs(cache).await.map_err(AppendError::Io)
    }

    /// This replica leads `epoch` from now on: the epoch starts at the log end (recorded on
    /// disk before anything of it is appended) and every batch appended carries it.
    pub async fn become_leader(&self, epoch: i32) -> io::Result<()> {
        let _permit = self.lock_appends().await?;
        let (end, mut cache) = {
            let st = self.inner.state.borrow();
            (st.log.log_end(), st.epochs.cache.clone())
        };
        match cache.latest() {
            Some((latest, _)) if epoch < latest => {
                return Err(io::Error::other(format!(
                    "cannot lead epoch {epoch}: this log has epoch {latest}"
                )))
            }
            Some((latest, _)) if epoch == latest => {}
            _ => {
                cache.assign(epoch, end.0);
                self.persist_epochs(cache).await?;
            }
        }
        self.inner.state.borrow_mut().epochs.leading = Some(epoch);
        Ok(())
    }

    /// Drops the epoch cache's entries that start at the log end: epochs this replica led
    /// without appending anything (`become_leader` records an epoch before its first
    /// batch). A follower does this when the leader's divergence answer cuts nothing, as
    /// Kafka's `truncateTo` does at the log end: else it asks with that epoch, which the
    /// leader never had, forever — and never rejoins the ISR (found by the simulation, #19).
    /// `Ok(true)`: some were dropped.
    pub async fn drop_empty_epochs(&self) -> io::Result<bool> {
        let _permit = self.lock_appends().await?;
        let (end, mut cache) = {
            let st = self.inner.state.borrow();
            (st.log.log_end(), st.epochs.cache.clone())
        };
        let before = cache.entries().len();
        cache.truncate_from_end(end.0);
        if cache.entries().len() == before {
            return Ok(false);
        }
        self.persist_epochs(cache).await?;
        Ok(true)
    }

    /// This replica no longer leads: batches appended from now on come from a leader.
    pub fn become_follower(&self) {
        self.inner.state.borrow_mut().epochs.leading = None;
    }

    /// As a follower: the leader's high watermark, as last heard (0 after a restart).
    pub fn replica_high_watermark(&self) -> i64 {
        self.inner.state.borrow().epochs.high_watermark
    }

    pub fn set_replica_high_watermark(&self, high_watermark: i64) {
        self.inner.state.borrow_mut().epochs.high_watermark = high_watermark;
    }

    /// Whether both handles are the same partition log (not a re-created one).
    pub fn is_same(&self, other: &PartitionLog) -> bool {
        std::rc::Rc::ptr_eq(&self.inner, &other.inner)
    }

    /// Wakes reads waiting for something new (the high watermark moved).
    pub fn notify_readers(&self) {
        self.inner.appended.notify(usize::MAX);
    }

    /// The epoch this replica leads in, if any.
    pub fn leading_epoch(&self) -> Option<i32> {
        self.inner.state.borrow().epochs.leading
    }

    /// A copy of the leader-epoch cache.
    pub fn epoch_cache(&self) -> EpochCache {
        self.inner.state.borrow().epochs.cache.clone()
    }

    /// OffsetsForLeaderEpoch for this log: the largest epoch `<= epoch` it knows and where
    /// that epoch ended here.
    pub fn end_offset_for(&self, epoch: i32) -> (i32, i64) {
        let st = self.inner.state.borrow();
        st.epochs.cache.end_offset_for(epoch, st.log.log_end().0)
    }

    /// Saves the in-memory cache (after a truncation cut it).
    pub(super) async fn save_epochs(&self) -> io::Result<()> {
        let cache = self.epoch_cache();
        self.persist_epochs(cache).await
    }

    async fn persist_epochs(&self, cache: EpochCache) -> io::Result<()> {
        let dir = self.inner.dir.clone();
        let entries = cache.entries().to_vec();
        glommio::executor()
            .spawn_blocking(move || write_checkpoint(&dir, &entries))
            .await?;
        self.inner.state.borrow_mut().epochs.cache = cache;
        Ok(())
    }
}

impl ReadOut {
    /// What a consumer may see of this read: the log as if it ended at `high_watermark`
    /// (batches at or past it dropped; `log_end` and `last_stable` capped there). A leader's
    /// high watermark falls on a batch boundary (followers fetch whole batches).
    pub fn bounded(mut self, high_watermark: Offset) -> ReadOut {
        self.batches.retain(|b| {
            b.len() >= HEADER_BYTES
                && BatchHeader::parse(b).is_ok_and(|h| h.base_offset < high_watermark.0)
        });
        self.log_end = self.log_end.min(high_watermark);
        self.last_stable = self.last_stable.min(high_watermark);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_text_round_trips_and_damage_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_checkpoint(dir.path(), &[(0, 0), (3, 120), (7, 4_000)]).expect("write");
        let text = fs::read_to_string(dir.path().join(EPOCH_CHECKPOINT_FILE)).expect("read");
        assert_eq!(text, "0\n3\n0 0\n3 120\n7 4000\n");
        assert_eq!(
            read_checkpoint(dir.path()).cache.entries(),
            &[(0, 0), (3, 120), (7, 4_000)]
        );
        assert!(parse_checkpoint("1\n0\n").is_err());
        assert!(parse_checkpoint("0\n2\n1 5\n").is_err());
        assert!(parse_checkpoint("0\n1\n1 x\n").is_err());
        fs::write(dir.path().join(EPOCH_CHECKPOINT_FILE), "0\n2\n5 10\n3 20\n").expect("write");
        assert!(read_checkpoint(dir.path()).cache.entries().is_empty());
    }
}
