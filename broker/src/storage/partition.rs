//! A partition's log on disk, owned by exactly one shard: the [`LogState`] state machine
//! driven with real I/O ([`SegmentWriter`], [`super::read_pool`]) and the hot-tail [`BatchCache`].
//!
//! Concurrency is cooperative (one glommio executor): state lives in a `RefCell` that is never
//! borrowed across an `.await`. Appends take a one-permit semaphore (one writer per
//! partition) so a segment roll cannot interleave with another append. Durable appends share
//! fdatasyncs (group commit): one caller leads a sync round covering everything appended so
//! far, the others wait for the durable offset to pass theirs.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use event_listener::Event;
use glommio::sync::Semaphore;
use strand_wire::batch::{self, peek_total_len};

use super::cache::{BatchCache, CachedBatch};
use super::dma::{open_for_direct_reads, SegmentWriter};
use super::log::{LocateError, LogState};
use super::recovery::{sync_dir, write_indexes, RecoveryReport};
use super::scan::split_batches;
use super::segment::{log_file_name, SegmentState};
use super::shard_cache::{shard_cache, CacheOwner};
use super::types::{BatchMeta, LogConfig, Offset};

mod append_error;
mod flusher;
mod reload;
mod replica;
mod time_lookup;
mod written;

use crate::limits;
use crate::storage::producer_state::{ProducerStates, SeqCheck};
pub use append_error::AppendError;

/// Sizes of a partition's I/O machinery (defaults in [`crate::limits`]).
#[derive(Clone, Debug)]
pub struct StorageOptions {
    pub write_chunk_bytes: usize,
    pub write_behind_depth: usize,
    pub cache_bytes: usize,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            write_chunk_bytes: limits::WRITE_CHUNK_BYTES,
            write_behind_depth: limits::WRITE_BEHIND_DEPTH,
            cache_bytes: limits::PARTITION_CACHE_BYTES,
        }
    }
}

#[derive(Debug)]
pub enum ReadError {
    OutOfRange { log_start: Offset, log_end: Offset },
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::OutOfRange { log_start, log_end } => {
                write!(f, "offset out of range [{log_start}, {log_end}]")
            }
            ReadError::Io(e) => write!(f, "storage error: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Whole batches, as stored, ready to be written to a socket.
#[derive(Debug, Default)]
pub struct ReadOut {
    pub batches: Vec<Bytes>,
    pub log_start: Offset,
    pub log_end: Offset,
    /// The last stable offset when read (read_committed reads stop there).
    pub last_stable: Offset,
    /// For a read_committed read: `(producer id, first offset)` of aborted transactions
    /// overlapping the batches returned.
    pub aborted: Vec<(i64, i64)>,
}

pub(super) struct State {
    pub(super) log: LogState,
    writer: Rc<SegmentWriter>,
    pub(super) readers: BTreeMap<Offset, Arc<File>>,
    pub(super) cache: BatchCache,
    /// Every offset below this has been fdatasynced.
    durable: Offset,
    syncing: bool,
    /// Every offset below this has been written (`written`); a write round is running.
    written: Offset,
    writing: bool,
    unflushed_bytes: u64,
    closed: bool,
    /// Idempotent producers' last batches (duplicate and sequence checks).
    pub(super) producers: ProducerStates,
    /// A failed write or sync: the partition refuses appends from then on.
    error: Option<String>,
    /// Compaction progress: the dirty part of the log starts here.
    pub(super) first_dirty: Offset,
    /// When the earliest tombstone kept by compaction falls due for removal.
    pub(super) tombstone_due_ms: Option<i64>,
    /// A compaction pass is running (one at a time).
    pub(super) cleaning: bool,
    /// Open and aborted transactions, the last stable offset.
    pub(super) txns: super::txn::PartitionTxns,
    /// Truncations so far (`truncate_to`): a sync waiter that sees it change fails rather
    /// than acknowledge offsets that may have been cut.
    pub(super) truncations: u64,
    /// Leader epochs and where each started (`leader-epoch-checkpoint`), and the epoch this
    /// replica leads in, if it leads (stamped on every batch it appends).
    pub(super) epochs: replica::Epochs,
}

pub(super) struct Inner {
    pub(super) dir: PathBuf,
    options: StorageOptions,
    pub(super) state: RefCell<State>,
    pub(super) append_lock: Semaphore,
    durable_changed: Event,
    /// Notified after every append (long-polling fetches wait on it).
    appended: Event,
}

impl CacheOwner for Inner {
    fn evict_oldest(&self) -> bool {
        // Never borrowed when the shard's budget asks (`ShardCache::shrink`); if it were,
        // this partition just skips its turn.
        let Ok(mut st) = self.state.try_borrow_mut() else {
            return false;
        };
        let (segment, written) = (st.log.active().base, st.writer.written());
        st.cache
            .evict_oldest(|e| e.segment != segment || e.end_position <= written)
    }
}

/// A handle to one partition's log; clones share it (on the owning shard only).
#[derive(Clone)]
pub struct PartitionLog {
    pub(super) inner: Rc<Inner>,
}

/// A handle that does not keep the log open: a fetch session's memo of where a name resolved
/// (a deleted partition's files close when its last strong handle goes).
#[derive(Clone)]
pub struct WeakLog(std::rc::Weak<Inner>);

impl WeakLog {
    pub fn upgrade(&self) -> Option<PartitionLog> {
        self.0.upgrade().map(|inner| PartitionLog { inner })
    }
}

impl PartitionLog {
    pub fn downgrade(&self) -> WeakLog {
        WeakLog(Rc::downgrade(&self.inner))
    }

    /// Opens (recovering) or creates the partition in `dir` and starts its flusher.
    pub async fn open(
        dir: PathBuf,
        config: LogConfig,
        options: StorageOptions,
    ) -> io::Result<(PartitionLog, RecoveryReport)> {
        // A log of this partition dropped without a close may still have zeros landing.
        super::prefill::settled(&dir).await;
        let (state, report) = reload::load_state(&dir, config, &options).await?;
        let partition = PartitionLog {
            inner: Rc::new(Inner {
                dir,
                options,
                state: RefCell::new(state),
                append_lock: Semaphore::new(1),
                durable_changed: Event::new(),
                appended: Event::new(),
            }),
        };
        let owner: Rc<dyn CacheOwner> = partition.inner.clone();
        shard_cache().register(Rc::downgrade(&owner));
        partition.rebuild_producers().await?;
        partition.rebuild_txns().await?;
        partition.spawn_flusher();
        Ok((partition, report))
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn log_start(&self) -> Offset {
        self.inner.state.borrow().log.log_start()
    }

    pub fn log_end(&self) -> Offset {
        self.inner.state.borrow().log.log_end()
    }

    /// A read with nothing to return, answered without a task: `offset` is the log end (or,
    /// for a read_committed read, at or past the last stable offset; on a replicated leader,
    /// at or past `visible_end`, the high watermark). `None` when there is something to
    /// read, or the offset is out of range (the full read reports that). A consumer of 1,000
    /// partitions asks for all of them in every fetch, and most have nothing new; a consumer
    /// parked at the high watermark is woken by every append, which it cannot see yet.
    pub fn read_nothing_new(
        &self,
        offset: Offset,
        committed: bool,
        visible_end: Option<Offset>,
    ) -> Option<ReadOut> {
        let st = self.inner.state.borrow();
        let (log_start, log_end) = (st.log.log_start(), st.log.log_end());
        let last_stable = st.txns.last_stable(log_end);
        let stop = if committed { last_stable } else { log_end };
        let stop = visible_end.map_or(stop, |end| stop.min(end));
        (offset >= stop && offset >= log_start && offset <= log_end).then(|| ReadOut {
            batches: Vec::new(),
            log_start,
            log_end,
            last_stable,
            aborted: Vec::new(),
        })
    }

    /// What a read at `offset` would report without its records: the offsets a fetch answers
    /// for a partition it had no room left to read (the response's byte budget was spent).
    /// Out of range as [`Self::read`] would be.
    pub fn read_offsets(&self, offset: Offset) -> Result<ReadOut, ReadError> {
        let st = self.inner.state.borrow();
        let (log_start, log_end) = (st.log.log_start(), st.log.log_end());
        if offset < log_start || offset > log_end {
            return Err(ReadError::OutOfRange { log_start, log_end });
        }
        Ok(ReadOut {
            batches: Vec::new(),
            log_start,
            log_end,
            last_stable: st.txns.last_stable(log_end),
            aborted: Vec::new(),
        })
    }

    /// Every offset below this survives a crash.
    pub fn durable_offset(&self) -> Offset {
        self.inner.state.borrow().durable
    }

    /// Resolves at the next append (for long-polling fetches; pair with a timeout).
    pub fn appended(&self) -> event_listener::EventListener {
        self.inner.appended.listen()
    }

    pub fn size_bytes(&self) -> u64 {
        self.inner.state.borrow().log.size_bytes()
    }

    pub fn segment_count(&self) -> usize {
        self.inner.state.borrow().log.segments().count()
    }

    pub fn config(&self) -> LogConfig {
        self.inner.state.borrow().log.config().clone()
    }

    pub fn set_config(&self, config: LogConfig) {
        self.inner.state.borrow_mut().log.set_config(config);
    }

    /// Appends one batch (validated: magic 2, lengths, CRC-32C), assigning its offsets.
    /// Takes the batch by value (a slice of the request frame, split off without copying): the
    /// base offset is patched in place and the same bytes become the cache entry.
    /// Returns once the bytes are in the write path; durability follows the flush policy.
    pub async fn append(&self, batch: BytesMut, now_ms: i64) -> Result<BatchMeta, AppendError> {
        self.append_as(batch, now_ms, Origin::Client).await
    }

    /// [`Self::append`] for a client's batch (offsets assigned, idempotence checked, the
    /// leader's epoch stamped) or a replicated one (kept as the leader wrote it; see
    /// [`Self::append_replica`]).
    async fn append_as(
        &self,
        mut batch: BytesMut,
        now_ms: i64,
        origin: Origin,
    ) -> Result<BatchMeta, AppendError> {
        let header = batch::validate(&batch).map_err(AppendError::Invalid)?;
        let _permit = self
            .inner
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|e| AppendError::Io(io::Error::other(e.to_string())))?;
        if origin == Origin::Replica {
            self.follow_on(&header).await?;
        }
        let writer = self.inner.state.borrow().writer.clone();
        writer
            .wait_capacity(self.inner.options.write_behind_depth)
            .await
            .map_err(AppendError::Io)?;
        let base = match origin {
            Origin::Client => self.log_end(),
            Origin::Replica => Offset(header.base_offset),
        };
        if self
            .inner
            .state
            .borrow()
            .log
            .needs_roll_at(&header, base, now_ms)
        {
            self.roll()
                .await
                .map_err(|e| self.fail(e))
                .map_err(AppendError::Io)?;
        }
        let writer = self.inner.state.borrow().writer.clone();
        // Writes cover the appended bytes rounded up to a block, never more.
        let reach = writer.end() + batch.len() as u64;
        writer
            .reserve(reach)
            .await
            .map_err(|e| AppendError::Io(self.fail(e)))?;
        let mut st = self.inner.state.borrow_mut();
        if let Some(e) = &st.error {
            return Err(AppendError::Io(io::Error::other(e.clone())));
        }
        // A transaction marker (written by the coordinator, never by a client: Produce refuses
        // control batches).
        let marker = if header.is_control() {
            strand_wire::builder::marker_kind(&batch)
        } else {
            None
        };
        let coordinator_epoch = marker
            .and_then(|_| strand_wire::builder::marker_coordinator_epoch(&batch))
            .unwrap_or(0);
        // A stale marker would end whatever transaction the producer's newer epoch (or a
        // newer coordinator's) has open here: refused.
        if header.producer_id >= 0 && origin == Origin::Client && header.is_control() {
            let (pid, epoch) = (header.producer_id, header.producer_epoch);
            if let Some(stale) = st.producers.check_marker(pid, epoch, coordinator_epoch) {
                return Err(stale.into());
            }
        }
        if header.producer_id >= 0 && !header.is_control() && origin == Origin::Client {
            let check = st.producers.check(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.records_count,
            );
            match check {
                SeqCheck::Accept => {}
                SeqCheck::Duplicate { base_offset } => {
                    return Err(AppendError::Duplicate(base_offset))
                }
                SeqCheck::OutOfOrder { expected } => {
                    return Err(AppendError::OutOfOrderSequence { expected })
                }
                SeqCheck::Fenced { .. } => return Err(AppendError::Fenced),
            }
        }
        let (meta, position) = match origin {
            Origin::Client => st.log.append(&header),
            Origin::Replica => st.log.append_at(&header, Offset(header.base_offset)),
        };
        if header.producer_id >= 0 {
            if header.is_control() {
                st.producers
                    .fence(header.producer_id, header.producer_epoch, coordinator_epoch);
            } else {
                st.producers.record(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.records_count,
                    meta.base_offset,
                    header.max_timestamp_ms,
                );
            }
            st.txns.apply(&header, meta.base_offset, marker);
        }
        assert_eq!(
            position,
            st.writer.end(),
            "log state and segment writer disagree"
        );
        if origin == Origin::Client {
            batch::set_base_offset(&mut batch, meta.base_offset.0);
            if let Some(epoch) = st.epochs.leading {
                batch::set_partition_leader_epoch(&mut batch, epoch);
            }
        }
        let bytes = st.cache.store(batch);
        if let Err(e) = st.writer.append(&bytes) {
            st.error = Some(e.to_string());
            return Err(AppendError::Io(e));
        }
        let segment = st.log.active().base;
        let end_position = position + bytes.len() as u64;
        st.cache.push(CachedBatch {
            meta,
            bytes,
            segment,
            end_position,
        });
        let written = st.writer.written();
        st.cache
            .evict(|e| e.segment != segment || e.end_position <= written);
        st.unflushed_bytes += u64::from(meta.bytes);
        let flush_now = st.unflushed_bytes >= st.log.config().flush_bytes && !st.syncing;
        drop(st);
        shard_cache().shrink();
        self.inner.appended.notify(usize::MAX);
        if flush_now {
            let me = self.clone();
            let target = meta.last_offset.next();
            glommio::spawn_local(async move {
                let _ = me.sync_to(target).await;
            })
            .detach();
        }
        Ok(meta)
    }

    /// Appends and returns only after the batch is fdatasynced (what `acks=all` uses).
    /// Concurrent durable appends share one fdatasync.
    pub async fn append_durable(
        &self,
        batch: BytesMut,
        now_ms: i64,
    ) -> Result<BatchMeta, AppendError> {
        let meta = self.append(batch, now_ms).await?;
        self.sync_to(meta.last_offset.next())
            .await
            .map_err(AppendError::Io)?;
        Ok(meta)
    }

    /// Makes everything appended so far durable.
    pub async fn flush(&self) -> io::Result<()> {
        let end = self.log_end();
        self.sync_to(end).await
    }

    /// Waits until every offset below `target` is durable, leading a sync round if none is
    /// running (group commit).
    pub async fn sync_to(&self, target: Offset) -> io::Result<()> {
        let truncations = self.inner.state.borrow().truncations;
        loop {
            let listener = self.inner.durable_changed.listen();
            let lead = {
                let mut st = self.inner.state.borrow_mut();
                if let Some(e) = &st.error {
                    return Err(io::Error::other(e.clone()));
                }
                if st.truncations != truncations {
                    return Err(io::Error::other(format!(
                        "the log was truncated before offsets below {target} were acknowledged"
                    )));
                }
                if st.durable >= target {
                    return Ok(());
                }
                if target > st.log.log_end() {
                    // Truncated away (a follower's `truncate_to`) before it became durable.
                    return Err(io::Error::other(format!(
                        "offsets below {target} were truncated before they were synced"
                    )));
                }
                let lead = !st.syncing;
                st.syncing = true;
                lead
            };
            if !lead {
                listener.await;
                continue;
            }
            let result = self.sync_round().await;
            self.inner.state.borrow_mut().syncing = false;
            self.inner.durable_changed.notify(usize::MAX);
            result.map_err(|e| self.fail(e))?;
        }
    }

    async fn sync_round(&self) -> io::Result<()> {
        // Let tasks that are already runnable (typically the writers just acknowledged by the
        // previous round) append first, so this round covers them too.
        futures_lite::future::yield_now().await;
        let (writer, upto_offset, upto_pos, bytes) = {
            let st = self.inner.state.borrow();
            (
                st.writer.clone(),
                st.log.log_end(),
                st.writer.end(),
                st.unflushed_bytes,
            )
        };
        writer.sync(upto_pos).await?;
        let mut st = self.inner.state.borrow_mut();
        st.durable = st.durable.max(upto_offset);
        st.written = st.written.max(upto_offset);
        st.unflushed_bytes = st.unflushed_bytes.saturating_sub(bytes);
        Ok(())
    }

    pub(super) fn fail(&self, e: io::Error) -> io::Error {
        tracing::error!(dir = %self.inner.dir.display(), error = %e, "partition storage failed");
        self.inner
            .state
            .borrow_mut()
            .error
            .get_or_insert_with(|| e.to_string());
        e
    }

    /// Closes the active segment (written, synced, trimmed, indexed) and opens the next.
    pub(super) async fn roll(&self) -> io::Result<()> {
        let (old, base) = {
            let st = self.inner.state.borrow();
            (st.writer.clone(), st.log.log_end())
        };
        let dir = self.inner.dir.clone();
        let path = dir.join(log_file_name(base));
        let config = self.config();
        let writer = SegmentWriter::open(
            &path,
            0,
            preallocation(&config),
            self.inner.options.write_chunk_bytes,
        )
        .await?;
        old.finish().await?;
        let (closed, txn_index) = {
            let st = self.inner.state.borrow();
            let closed: SegmentState = st.log.active().clone();
            let txn_index = st.txns.index_for_segment(closed.base, closed.next);
            (closed, txn_index)
        };
        // Closed segments always have a reader (compaction and truncation rely on it): the
        // closing one gets its now if it was never read from disk as the active one.
        let closing = closed.base;
        let needs_reader = !self.inner.state.borrow().readers.contains_key(&closing);
        let reader = glommio::executor()
            .spawn_blocking(move || -> io::Result<Option<File>> {
                write_indexes(&dir, &closed)?;
                super::partition_txn::write_txn_index(&dir, closed.base, &txn_index)?;
                sync_dir(&dir)?;
                needs_reader
                    .then(|| open_for_direct_reads(&dir.join(log_file_name(closed.base))))
                    .transpose()
            })
            .await?;
        let mut st = self.inner.state.borrow_mut();
        if let Some(r) = reader {
            st.readers.entry(closing).or_insert_with(|| Arc::new(r));
        }
        let new_base = st.log.roll();
        debug_assert_eq!(new_base, base);
        st.writer = writer;
        st.durable = st.durable.max(base);
        st.written = st.written.max(base);
        st.unflushed_bytes = 0;
        Ok(())
    }

    /// Reads whole batches starting with the one holding `offset`, about `bytes_max` bytes
    /// (at least one batch). Recent batches come from the cache, older ones from disk; either
    /// way they are `Bytes` slices, never copied. An offset inside a compacted gap reads from
    /// the next batch that exists.
    pub async fn read(&self, offset: Offset, bytes_max: usize) -> Result<ReadOut, ReadError> {
        let mut offset = offset;
        // Empty batches (left by compaction) read so far: a response made of nothing else
        // makes librdkafka grow its fetch size as if a record were too large, so the read goes
        // on until it has a record or reaches the log end.
        let mut empties: Vec<Bytes> = Vec::new();
        loop {
            match self.read_segment(offset, bytes_max).await? {
                Ok(mut out) => {
                    let last = out
                        .batches
                        .last()
                        .and_then(|b| batch::BatchHeader::parse(b).ok());
                    let only_empties = out.batches.iter().all(|b| is_empty_batch(b));
                    match last {
                        Some(h) if only_empties && h.last_offset() + 1 < out.log_end.0 => {
                            empties.append(&mut out.batches);
                            offset = Offset(h.last_offset() + 1);
                        }
                        _ => {
                            if !empties.is_empty() {
                                empties.append(&mut out.batches);
                                out.batches = empties;
                            }
                            return Ok(out);
                        }
                    }
                }
                Err(next_segment) => offset = next_segment,
            }
        }
    }

    /// Opens the active segment's reader on its first read from disk: only the active
    /// segment may lack one (closed segments get theirs when they close or at open), so a
    /// partition costs one descriptor, its writer's, until its tail is read from disk (most
    /// tail reads come from the cache). Kept only if no truncation ran meanwhile and `base`
    /// is still the active segment (a truncation may remove its file and make another of
    /// that name); the caller reads again either way, so a read's position and its file
    /// always come from one look at the state.
    async fn open_active_reader(&self, base: Offset) -> Result<(), ReadError> {
        let truncations = self.inner.state.borrow().truncations;
        let path = self.inner.dir.join(log_file_name(base));
        let opened = glommio::executor()
            .spawn_blocking(move || open_for_direct_reads(&path))
            .await;
        let mut st = self.inner.state.borrow_mut();
        let current = st.truncations == truncations && st.log.active().base == base;
        match opened {
            Ok(f) if current => {
                st.readers.entry(base).or_insert_with(|| Arc::new(f));
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(_) if !current => Ok(()),
            Err(e) => Err(ReadError::Io(e)),
        }
    }

    /// One segment's part of [`Self::read`]: `Err(next)` when the segment holds no batch at or
    /// after `offset` (compaction removed the rest of its range) and the read goes on at `next`.
    async fn read_segment(
        &self,
        offset: Offset,
        bytes_max: usize,
    ) -> Result<Result<ReadOut, Offset>, ReadError> {
        let mut opened = false;
        let (active, loc, file, bound, mut out) = loop {
            let missing = {
                let st = self.inner.state.borrow();
                let (log_start, log_end) = (st.log.log_start(), st.log.log_end());
                let loc = st.log.locate(offset).map_err(|e| match e {
                    LocateError::OutOfRange { log_start, log_end } => {
                        ReadError::OutOfRange { log_start, log_end }
                    }
                })?;
                let mut out = ReadOut {
                    batches: Vec::new(),
                    log_start,
                    log_end,
                    last_stable: st.txns.last_stable(log_end),
                    aborted: Vec::new(),
                };
                if offset == log_end {
                    return Ok(Ok(out));
                }
                if let Some(batches) = st.cache.read(offset, bytes_max) {
                    out.batches = batches;
                    return Ok(Ok(out));
                }
                let active = loc.segment_base == st.log.active().base;
                let bound = if active {
                    loc.segment_bytes.min(st.writer.written())
                } else {
                    loc.segment_bytes
                };
                match st.readers.get(&loc.segment_base).cloned() {
                    Some(file) => break (active, loc, file, bound, out),
                    None => (loc.segment_base, active),
                }
            };
            match missing {
                // At most once: a second miss means the open did not stick (a truncation
                // ran meanwhile, or another does now); the next read tries again.
                (base, true) if !opened => {
                    self.open_active_reader(base).await?;
                    opened = true;
                }
                (base, _) => {
                    return Err(ReadError::Io(io::Error::other(format!(
                        "no reader for segment {base}"
                    ))))
                }
            }
        };
        let mut pos = loc.position;
        let mut want = (bytes_max as u64).clamp(limits::READ_BYTES_MIN, limits::READ_BYTES_MAX);
        let mut total = 0usize;
        while pos < bound {
            let len = want.min(bound - pos) as usize;
            let chunk = super::read_pool::read(Arc::clone(&file), pos, len)
                .await
                .map_err(ReadError::Io)?;
            let batches = split_batches(&chunk);
            if batches.is_empty() {
                // The next batch is larger than what we read: read exactly that much.
                match peek_total_len(&chunk) {
                    Some(n) if (n as u64) > want && pos + n as u64 <= bound => {
                        want = n as u64;
                        continue;
                    }
                    _ => {
                        return Err(ReadError::Io(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "no whole batch at position {pos} of segment {}",
                                loc.segment_base
                            ),
                        )))
                    }
                }
            }
            let mut advanced = 0;
            for (h, start, end) in batches {
                advanced = end;
                if h.last_offset() < offset.0 {
                    continue;
                }
                if !out.batches.is_empty() && total + (end - start) > bytes_max {
                    return Ok(Ok(out));
                }
                total += end - start;
                out.batches.push(chunk.slice(start..end));
            }
            if !out.batches.is_empty() {
                return Ok(Ok(out));
            }
            pos += advanced as u64;
        }
        if !active && loc.segment_next > offset {
            return Ok(Err(loc.segment_next));
        }
        Ok(Ok(out))
    }

    /// Flushes everything and stops the background flusher.
    pub async fn close(&self) -> io::Result<()> {
        let result = self.flush().await;
        self.inner.state.borrow_mut().closed = true;
        result
    }
}

/// Who wrote the batch being appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Client,
    Replica,
}

/// A batch without records (what compaction leaves where it removed a segment's last batch).
fn is_empty_batch(b: &[u8]) -> bool {
    batch::BatchHeader::parse(b).is_ok_and(|h| h.records_count == 0 && !h.is_control())
}

fn preallocation(config: &LogConfig) -> u64 {
    if config.preallocate {
        config.segment_bytes
    } else {
        0
    }
}
