//! Building a partition's in-memory state from its files: when it opens, and again after a
//! replica's truncation (Kafka's `Log.truncateTo`), which cuts the files and then reloads
//! them the way recovery does, so one code path decides what a log on disk holds.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use strand_wire::batch::{self, peek_total_len, HEADER_BYTES};

use super::{preallocation, replica, PartitionLog, ReadError, State, StorageOptions};
use crate::limits;
use crate::storage::cache::BatchCache;
use crate::storage::dma::{open_for_direct_reads, SegmentWriter};
use crate::storage::log::LogState;
use crate::storage::producer_state::ProducerStates;
use crate::storage::recovery::{recover, remove_segment_files, sync_dir, RecoveryReport};
use crate::storage::segment::{
    index_file_name, log_file_name, time_index_file_name, txn_index_file_name,
};
use crate::storage::types::{LogConfig, Offset};

/// Recovers `dir` (see [`crate::storage::recovery`]) and opens its active segment for appends
/// and every segment for reads. Producer and transaction state are rebuilt by the caller
/// (they read through the partition).
pub(super) async fn load_state(
    dir: &Path,
    config: LogConfig,
    options: &StorageOptions,
) -> io::Result<(State, RecoveryReport)> {
    let (d, c) = (dir.to_path_buf(), config.clone());
    let (recovered, (first_dirty, tombstone_due_ms), epochs) = glommio::executor()
        .spawn_blocking(move || -> io::Result<_> {
            let recovered = recover(&d, &c)?;
            let epochs = replica::read_checkpoint(&d);
            Ok((
                recovered,
                crate::storage::cleaner::read_checkpoint(&d),
                epochs,
            ))
        })
        .await?;
    let mut log = LogState::new(config, recovered.segments);
    let stale = log.advance_log_start(recovered.log_start);
    if !stale.is_empty() {
        let d = dir.to_path_buf();
        glommio::executor()
            .spawn_blocking(move || -> io::Result<()> {
                for base in stale {
                    remove_segment_files(&d, base)?;
                }
                Ok(())
            })
            .await?;
    }
    let active = log.active();
    let writer = SegmentWriter::open(
        &dir.join(log_file_name(active.base)),
        active.size_bytes,
        preallocation(log.config()),
        options.write_chunk_bytes,
    )
    .await?;
    writer.sync(active.size_bytes).await?;
    // Every closed segment gets its reader now; the active one on its first read from disk
    // (`PartitionLog::open_active_reader`): a partition nobody reads from disk holds one
    // descriptor per closed segment and its writer's.
    let active_base = log.active().base;
    let bases: Vec<Offset> = log
        .segments()
        .map(|s| s.base)
        .filter(|&b| b != active_base)
        .collect();
    let d = dir.to_path_buf();
    let readers = glommio::executor()
        .spawn_blocking(move || -> io::Result<BTreeMap<Offset, Arc<File>>> {
            sync_dir(&d)?;
            bases
                .into_iter()
                .map(|b| {
                    Ok((
                        b,
                        Arc::new(open_for_direct_reads(&d.join(log_file_name(b)))?),
                    ))
                })
                .collect()
        })
        .await?;
    let durable = log.log_end();
    let mut epochs = epochs;
    // Entries past the log end name batches a crash lost (Kafka drops them the same way).
    epochs.cache.truncate_from_end(durable.0);
    let state = State {
        first_dirty: first_dirty.min(durable),
        log,
        writer,
        readers,
        cache: BatchCache::new(options.cache_bytes),
        durable,
        syncing: false,
        written: durable,
        writing: false,
        unflushed_bytes: 0,
        closed: false,
        producers: ProducerStates::default(),
        error: None,
        tombstone_due_ms,
        cleaning: false,
        txns: Default::default(),
        truncations: 0,
        epochs,
    };
    Ok((state, recovered.report))
}

impl PartitionLog {
    /// Rebuilds idempotent-producer state from the newest batches of the log (the last
    /// `PRODUCER_STATE_REBUILD_BYTES` of the active segment), so a producer that retries after
    /// a restart gets its duplicate recognised. Producers older than that window are treated
    /// as new (accepted), as Kafka does once their state has expired.
    pub(super) async fn rebuild_producers(&self) -> io::Result<()> {
        let (mut next, end) = {
            let st = self.inner.state.borrow();
            let active = st.log.active();
            let from = active
                .size_bytes
                .saturating_sub(limits::PRODUCER_STATE_REBUILD_BYTES);
            (
                active.offset_at_or_before(from).max(st.log.log_start()),
                st.log.log_end(),
            )
        };
        let mut states = ProducerStates::default();
        while next < end {
            let out = match self.read(next, limits::READ_BYTES_MAX as usize).await {
                Ok(out) if !out.batches.is_empty() => out,
                Ok(_) => break,
                Err(ReadError::OutOfRange { .. }) => break,
                Err(ReadError::Io(e)) => return Err(e),
            };
            for b in &out.batches {
                let h = batch::BatchHeader::parse(b).map_err(io::Error::other)?;
                if h.producer_id >= 0 && !h.is_control() {
                    states.record(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.records_count,
                        Offset(h.base_offset),
                        h.max_timestamp_ms,
                    );
                }
                next = Offset(h.last_offset() + 1);
            }
        }
        self.inner.state.borrow_mut().producers = states;
        Ok(())
    }

    /// Removes every batch at or after `offset` (a batch that straddles it goes whole, as in
    /// Kafka): what a follower, or a deposed leader, does where its log diverged from the new
    /// leader's. Segments after the cut are deleted, the cut segment is trimmed and becomes the
    /// active one, and the state is reloaded from the files (producers, transactions, indexes
    /// and the epoch cache follow). Returns the new log end offset. Refused below the log start
    /// offset (a replica that far behind is rebuilt from the leader instead). Only a replica
    /// that serves no client truncates (a follower, or a deposed leader): reads during the
    /// reload may see the transaction state incomplete. A failure once the files are being
    /// changed fails the partition (KAFKA_STORAGE_ERROR until it is reopened).
    pub async fn truncate_to(&self, offset: Offset) -> io::Result<Offset> {
        let _permit = self.hold_for_rewrite().await?;
        let result = self.truncate_locked(offset).await;
        self.inner.state.borrow_mut().cleaning = false;
        self.inner.durable_changed.notify(usize::MAX);
        result
    }

    /// Holds appends and compaction off (the `cleaning` flag is set; the caller clears it):
    /// a compaction pass swaps segments, so wait for it without holding up appends, then keep
    /// the next one out.
    async fn hold_for_rewrite(&self) -> io::Result<glommio::sync::Permit<'_>> {
        loop {
            while self.inner.state.borrow().cleaning {
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            let permit = self.lock_appends().await?;
            if self.claim(|st| &mut st.cleaning) {
                return Ok(permit);
            }
        }
    }

    /// Holds sync rounds off once everything written is synced (the `syncing` flag is set;
    /// the caller clears it).
    async fn hold_syncs(&self) -> io::Result<()> {
        loop {
            self.flush().await?;
            let listener = self.inner.durable_changed.listen();
            if self.claim(|st| &mut st.syncing) {
                return Ok(());
            }
            listener.await;
        }
    }

    /// Empties the log and starts it again at `offset`, with no epochs (Kafka's
    /// `truncateFullyAndStartAt`): a follower whose log ends below the leader's log start
    /// (DeleteRecords or retention there while it was away) copies the leader from its start.
    /// The next append must start at `offset`. A failure once the files are being changed
    /// fails the partition.
    pub async fn restart_at(&self, offset: Offset) -> io::Result<()> {
        if offset < self.log_start() {
            return Err(io::Error::other(format!(
                "cannot start the log again at {offset}, below its log start {}",
                self.log_start()
            )));
        }
        let _permit = self.hold_for_rewrite().await?;
        let result = match self.hold_syncs().await {
            Ok(()) => {
                let result = self.empty_and_reload(offset).await;
                self.inner.state.borrow_mut().syncing = false;
                result.map_err(|e| self.fail(e))
            }
            Err(e) => Err(e),
        };
        self.inner.state.borrow_mut().cleaning = false;
        self.inner.durable_changed.notify(usize::MAX);
        result
    }

    async fn empty_and_reload(&self, offset: Offset) -> io::Result<()> {
        let (bases, config, due) = {
            let mut st = self.inner.state.borrow_mut();
            st.truncations += 1;
            let bases: Vec<Offset> = st.log.segments().map(|s| s.base).collect();
            (bases, st.log.config().clone(), st.tombstone_due_ms)
        };
        let writer = self.inner.state.borrow().writer.clone();
        writer.finish().await?;
        let d = self.inner.dir.clone();
        glommio::executor()
            .spawn_blocking(move || -> io::Result<()> {
                // The new start first: a crash from here on reopens a log that starts at its
                // end or at `offset`, never one that claims offsets it no longer holds.
                crate::storage::recovery::write_log_start(&d, offset)?;
                match fs::remove_file(d.join(replica::EPOCH_CHECKPOINT_FILE)) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
                crate::storage::cleaner::write_checkpoint(&d, offset, due)?;
                // The new (empty) segment before the old ones go: a crash in between reopens
                // the old segments (the empty one dropped as an interrupted roll's, the start
                // clamped to their end), never a log without segments.
                if !bases.contains(&offset) {
                    File::create(d.join(log_file_name(offset)))?.sync_all()?;
                    sync_dir(&d)?;
                }
                for base in bases.into_iter().rev() {
                    remove_segment_files(&d, base)?;
                }
                File::create(d.join(log_file_name(offset)))?;
                sync_dir(&d)
            })
            .await?;
        let (start, end) = self.reload_held(config, offset, due).await?;
        if (start, end) != (offset, offset) {
            return Err(io::Error::other(format!(
                "a log started again at {offset} reopened as [{start}, {end})"
            )));
        }
        tracing::info!(dir = %self.inner.dir.display(), %offset, "emptied the log: it starts again at the leader's log start");
        Ok(())
    }

    /// After the files of a held log changed (`truncate_to`, `restart_at`): reopens them as at
    /// open and installs that state, still held (appends, compaction and sync rounds off),
    /// with the cleaner's progress (no further than the new end) and the truncation count
    /// carried over; producers and transactions are rebuilt, and the epoch cache — cut at the
    /// new end when read back — saved. Returns the new log start and end.
    async fn reload_held(
        &self,
        config: LogConfig,
        first_dirty: Offset,
        tombstone_due_ms: Option<i64>,
    ) -> io::Result<(Offset, Offset)> {
        let (mut state, _) = load_state(&self.inner.dir, config, &self.inner.options).await?;
        state.cleaning = true;
        state.syncing = true;
        let (start, end) = (state.log.log_start(), state.log.log_end());
        state.first_dirty = first_dirty.min(end);
        state.tombstone_due_ms = tombstone_due_ms;
        state.truncations = self.inner.state.borrow().truncations;
        let old = std::mem::replace(&mut *self.inner.state.borrow_mut(), state);
        drop(old);
        self.rebuild_producers().await?;
        self.rebuild_txns().await?;
        self.save_epochs().await?;
        Ok((start, end))
    }

    /// Sets the flag `which` picks if it is clear; whether it did.
    fn claim(&self, which: impl Fn(&mut State) -> &mut bool) -> bool {
        let mut st = self.inner.state.borrow_mut();
        let flag = which(&mut st);
        !std::mem::replace(flag, true)
    }

    async fn truncate_locked(&self, offset: Offset) -> io::Result<Offset> {
        {
            let st = self.inner.state.borrow();
            if offset >= st.log.log_end() {
                return Ok(st.log.log_end());
            }
            if offset < st.log.log_start() {
                return Err(io::Error::other(format!(
                    "cannot truncate to {offset}: below the log start offset {}",
                    st.log.log_start()
                )));
            }
        }
        // Everything written is synced and no sync round runs while the files change.
        self.hold_syncs().await?;
        let result = self.cut_and_reload(offset).await;
        let mut st = self.inner.state.borrow_mut();
        st.syncing = false;
        drop(st);
        match result {
            Ok(Some(end)) => Ok(end),
            // Refused before anything changed.
            Ok(None) => Err(io::Error::other(format!(
                "cannot truncate to {offset}: the batch holding it starts below the log start \
                 offset {}",
                self.log_start()
            ))),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The cut itself, with appends, compaction and sync rounds held off. `Ok(None)`: refused
    /// before any change (the cut would land below the log start offset).
    async fn cut_and_reload(&self, offset: Offset) -> io::Result<Option<Offset>> {
        let (loc, later, config, log_start, first_dirty, due) = {
            let mut st = self.inner.state.borrow_mut();
            st.truncations += 1;
            let loc = st
                .log
                .locate(offset)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
            let later: Vec<Offset> = st
                .log
                .segments()
                .map(|s| s.base)
                .filter(|&b| b > loc.segment_base)
                .collect();
            (
                loc,
                later,
                st.log.config().clone(),
                st.log.log_start(),
                st.first_dirty,
                st.tombstone_due_ms,
            )
        };
        let dir = self.inner.dir.clone();
        let path = dir.join(log_file_name(loc.segment_base));
        let (cut_at, cut_base) = glommio::executor()
            .spawn_blocking(move || find_cut(&path, loc.position, offset))
            .await?;
        if cut_base < log_start {
            return Ok(None);
        }
        let writer = self.inner.state.borrow().writer.clone();
        writer.finish().await?;
        let d = dir.clone();
        glommio::executor()
            .spawn_blocking(move || -> io::Result<()> {
                if first_dirty > cut_base {
                    // Compaction must look at what is appended from the cut on again.
                    crate::storage::cleaner::write_checkpoint(&d, cut_base, due)?;
                }
                cut_files(&d, loc.segment_base, cut_at, later)
            })
            .await?;
        let (_, new_end) = self.reload_held(config, first_dirty, due).await?;
        tracing::info!(dir = %self.inner.dir.display(), %offset, %new_end, "truncated the log");
        Ok(Some(new_end))
    }
}

/// Where segment `path` is cut for `offset`: the position and base offset of the first batch
/// (at or after byte `from`) that holds an offset at or past it (the file's end if none).
fn find_cut(path: &Path, from: u64, offset: Offset) -> io::Result<(u64, Offset)> {
    let mut file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut pos = from;
    let mut header = [0u8; HEADER_BYTES];
    while pos + HEADER_BYTES as u64 <= len {
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut header)?;
        let h = batch::BatchHeader::parse(&header).map_err(io::Error::other)?;
        let total = peek_total_len(&header)
            .filter(|&n| n > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad batch length"))?
            as u64;
        if h.last_offset() >= offset.0 {
            return Ok((pos, Offset(h.base_offset)));
        }
        pos += total;
    }
    Ok((pos.min(len), offset))
}

/// Deletes every segment in `later` (newest first), then trims segment `base` to `cut_at`
/// bytes and drops its index files (recovery rebuilds them for the active segment). In that
/// order, a crash at any point leaves a log that is a prefix of the old one, without a gap.
fn cut_files(dir: &Path, base: Offset, cut_at: u64, later: Vec<Offset>) -> io::Result<()> {
    for &b in later.iter().rev() {
        remove_segment_files(dir, b)?;
    }
    sync_dir(dir)?;
    let file = fs::OpenOptions::new()
        .write(true)
        .open(dir.join(log_file_name(base)))?;
    file.set_len(cut_at)?;
    file.sync_all()?;
    for name in [
        index_file_name(base),
        time_index_file_name(base),
        txn_index_file_name(base),
    ] {
        match fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    sync_dir(dir)
}
