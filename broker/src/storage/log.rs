//! The partition log as a plain state machine (sans-IO).
//!
//! `LogState` decides; [`super::partition`] does the I/O. Inputs are batch headers, offsets,
//! timestamps and the clock's `now_ms`; outputs are offsets, file positions and lists of
//! segments to create or delete. Nothing here touches a file, so unit tests drive rolls,
//! retention and lookups deterministically.

use std::collections::VecDeque;

use strand_wire::BatchHeader;

use super::segment::SegmentState;
use super::types::{BatchMeta, LogConfig, Offset};

/// Largest allowed `segment.bytes`: sparse-index positions are `u32`, as in Kafka.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;

/// Where a read starts: a segment and a byte position from which to scan batch headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub segment_base: Offset,
    pub position: u64,
    /// Logical size of that segment when located (reads never go past it).
    pub segment_bytes: u64,
    /// One past the segment's last offset: where to go on when a compacted segment holds no
    /// batch at or after the offset wanted (the rest of its range was cleaned away).
    pub segment_next: Offset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocateError {
    /// Below the log start offset or above the log end offset (Kafka's OFFSET_OUT_OF_RANGE).
    OutOfRange { log_start: Offset, log_end: Offset },
}

#[derive(Debug)]
pub struct LogState {
    config: LogConfig,
    /// Oldest first; the last one is the active segment. Never empty.
    segments: VecDeque<SegmentState>,
    /// First offset a consumer may read (Kafka's log start offset).
    log_start: Offset,
}

impl LogState {
    /// A log from recovered segments (oldest first), or an empty log at offset 0.
    pub fn new(config: LogConfig, mut segments: Vec<SegmentState>) -> LogState {
        if segments.is_empty() {
            segments.push(SegmentState::new(Offset(0)));
        }
        let log_start = segments[0].base;
        let state = LogState {
            config,
            segments: segments.into(),
            log_start,
        };
        state.check_invariants();
        state
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    pub fn log_start(&self) -> Offset {
        self.log_start
    }

    /// The log end offset: the offset the next batch gets.
    pub fn log_end(&self) -> Offset {
        self.active().next
    }

    pub fn active(&self) -> &SegmentState {
        self.segments
            .back()
            .expect("a log always has an active segment")
    }

    pub fn segments(&self) -> impl Iterator<Item = &SegmentState> {
        self.segments.iter()
    }

    pub fn segment(&self, base: Offset) -> Option<&SegmentState> {
        self.segments.iter().find(|s| s.base == base)
    }

    /// Total logical bytes over all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size_bytes).sum()
    }

    /// Must the active segment be closed before a batch of `batch_bytes` with the header's
    /// offsets is appended at `now_ms`? (Kafka's `segment.bytes`, `segment.ms`, and the
    /// 32-bit relative-offset limit.) An empty segment is never rolled.
    pub fn needs_roll(&self, header: &BatchHeader, now_ms: i64) -> bool {
        self.needs_roll_at(header, self.log_end(), now_ms)
    }

    /// [`Self::needs_roll`] for a batch that keeps its own base offset `base` (a replicated
    /// batch: at or past the log end, after a gap compaction left on the leader).
    pub fn needs_roll_at(&self, header: &BatchHeader, base: Offset, now_ms: i64) -> bool {
        let active = self.active();
        if active.is_empty() {
            return false;
        }
        let last = base.0 + i64::from(header.last_offset_delta);
        let too_big = active.size_bytes + header.total_len() as u64 > self.config.segment_bytes;
        let too_old = active
            .first_timestamp_ms
            .is_some_and(|t| now_ms.saturating_sub(t) >= self.config.segment_ms as i64);
        let offset_overflow = last - active.base.0 > i64::from(u32::MAX);
        too_big || too_old || offset_overflow
    }

    /// Closes the active segment and opens a new, empty one at the log end offset.
    pub fn roll(&mut self) -> Offset {
        let base = self.log_end();
        self.segments.push_back(SegmentState::new(base));
        self.check_invariants();
        base
    }

    /// Assigns offsets to a validated batch and accounts for it in the active segment.
    /// Returns the batch's metadata (with its new offsets) and its byte position in the active
    /// segment. The caller writes the bytes there with the base offset patched in.
    pub fn append(&mut self, header: &BatchHeader) -> (BatchMeta, u64) {
        self.append_at(header, self.log_end())
    }

    /// [`Self::append`] at base offset `base`, at or past the log end (a replicated batch
    /// keeps the leader's offsets, gaps included).
    pub fn append_at(&mut self, header: &BatchHeader, base: Offset) -> (BatchMeta, u64) {
        assert!(base >= self.log_end(), "append at {base} below the log end");
        let mut meta = BatchMeta::from_header(header);
        meta.base_offset = base;
        meta.last_offset = Offset(base.0 + i64::from(header.last_offset_delta));
        let interval = self.config.index_interval_bytes;
        let active = self.segments.back_mut().expect("active segment");
        let position = active.size_bytes;
        active.record_batch(&meta, position, interval);
        (meta, position)
    }

    /// Finds where to start reading for `offset`. `offset == log_end` is in range (an empty
    /// read that waits for data); anything outside `[log_start, log_end]` is not.
    pub fn locate(&self, offset: Offset) -> Result<Location, LocateError> {
        if offset < self.log_start || offset > self.log_end() {
            return Err(LocateError::OutOfRange {
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        // The last segment whose base is <= offset, skipping empty segments.
        let i = self
            .segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1);
        let seg = self
            .segments
            .range(i..)
            .find(|s| s.next > offset)
            .unwrap_or(self.active());
        Ok(Location {
            segment_base: seg.base,
            position: seg.position_floor(offset),
            segment_bytes: seg.size_bytes,
            segment_next: seg.next,
        })
    }

    /// The offset from which to scan for the first batch with `maxTimestamp >= timestamp_ms`
    /// (ListOffsets by time). `None` when no batch is that recent.
    pub fn locate_time(&self, timestamp_ms: i64) -> Option<Offset> {
        let seg = self
            .segments
            .iter()
            .find(|s| !s.is_empty() && s.max_timestamp_ms >= timestamp_ms)?;
        Some(seg.time_offset_floor(timestamp_ms).max(self.log_start))
    }

    /// The largest batch `maxTimestamp` in the log (ListOffsets MAX_TIMESTAMP), if any.
    pub fn max_timestamp(&self) -> Option<i64> {
        self.segments
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.max_timestamp_ms)
            .max()
    }

    /// How many of the oldest segments retention would delete now (`retention.ms`,
    /// `retention.bytes`). The active segment is never deleted.
    pub fn retention_candidates(&self, now_ms: i64) -> usize {
        let closed = self.segments.len() - 1;
        let mut by_time = 0;
        if self.config.retention_ms >= 0 {
            by_time = self
                .segments
                .iter()
                .take(closed)
                .take_while(|s| {
                    now_ms.saturating_sub(s.max_timestamp_ms) > self.config.retention_ms
                })
                .count();
        }
        let mut by_size = 0;
        if self.config.retention_bytes >= 0 {
            let mut excess = self.size_bytes() as i64 - self.config.retention_bytes;
            for s in self.segments.iter().take(closed) {
                if excess - s.size_bytes as i64 >= 0 {
                    excess -= s.size_bytes as i64;
                    by_size += 1;
                } else {
                    break;
                }
            }
        }
        by_time.max(by_size)
    }

    /// Drops the `n` oldest segments from the state and moves the log start offset.
    /// Returns their base offsets so the I/O layer can delete the files.
    pub fn remove_oldest(&mut self, n: usize) -> Vec<Offset> {
        let n = n.min(self.segments.len() - 1);
        let removed: Vec<Offset> = self.segments.drain(..n).map(|s| s.base).collect();
        if let Some(first) = self.segments.front() {
            self.log_start = self.log_start.max(first.base);
        }
        self.check_invariants();
        removed
    }

    /// DeleteRecords: moves the log start offset up to `to` (at most the log end) and drops
    /// the closed segments wholly below it. Returns their base offsets (files to delete).
    pub fn advance_log_start(&mut self, to: Offset) -> Vec<Offset> {
        let to = to.min(self.log_end());
        self.log_start = self.log_start.max(to);
        let n = self
            .segments
            .iter()
            .take(self.segments.len() - 1)
            .take_while(|s| s.next <= self.log_start)
            .count();
        let removed: Vec<Offset> = self.segments.drain(..n).map(|s| s.base).collect();
        self.check_invariants();
        removed
    }

    /// Replaces the neighbouring closed segments `bases` by one compacted segment covering the
    /// same offsets (same base, same next). Returns false, changing nothing, if they are no
    /// longer there as given (a concurrent deletion).
    pub fn replace_segments(&mut self, bases: &[Offset], cleaned: SegmentState) -> bool {
        let Some(i) = self
            .segments
            .iter()
            .position(|s| Some(&s.base) == bases.first())
        else {
            return false;
        };
        let end = i + bases.len();
        if end >= self.segments.len()
            || !self
                .segments
                .range(i..end)
                .map(|s| s.base)
                .eq(bases.iter().copied())
        {
            return false;
        }
        assert_eq!(cleaned.base, bases[0], "a cleaned segment keeps its base");
        assert_eq!(
            cleaned.next,
            self.segments[end - 1].next,
            "a cleaned segment keeps its offset range"
        );
        self.segments.drain(i..end);
        self.segments.insert(i, cleaned);
        self.check_invariants();
        true
    }

    /// Cheap structural invariants, checked in release builds too.
    pub fn check_invariants(&self) {
        assert!(!self.segments.is_empty(), "log has no active segment");
        assert!(self.log_start <= self.log_end(), "log_start > log_end");
        let mut prev: Option<&SegmentState> = None;
        for s in &self.segments {
            assert!(s.base <= s.next, "segment {} next below base", s.base);
            if let Some(p) = prev {
                assert!(
                    p.next <= s.base,
                    "segments {} and {} overlap",
                    p.base,
                    s.base
                );
            }
            prev = Some(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::builder::filler_batch;

    fn header(records: usize, value_bytes: usize, ts: i64) -> BatchHeader {
        strand_wire::batch::validate(&filler_batch(records, value_bytes, ts, 0)).expect("valid")
    }

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 10_000,
            index_interval_bytes: 1000,
            ..LogConfig::default()
        }
    }

    fn append(log: &mut LogState, h: &BatchHeader, now: i64) -> BatchMeta {
        if log.needs_roll(h, now) {
            log.roll();
        }
        log.append(h).0
    }

    #[test]
    fn delete_records_moves_the_start_and_drops_whole_segments_below_it() {
        let mut log = LogState::new(config(), vec![]);
        let h = header(10, 100, 0);
        for _ in 0..3 {
            append(&mut log, &h, 0);
            log.roll();
        }
        append(&mut log, &h, 0);
        assert_eq!(log.segments().count(), 4);
        assert_eq!(log.advance_log_start(Offset(15)), vec![Offset(0)]);
        assert_eq!(log.log_start(), Offset(15));
        assert_eq!(log.advance_log_start(Offset(5)), vec![], "never moves back");
        assert_eq!(log.log_start(), Offset(15));
        // Past the end: clamped to the end; the active segment always stays.
        assert_eq!(
            log.advance_log_start(Offset(99)),
            vec![Offset(10), Offset(20)]
        );
        assert_eq!(log.log_start(), Offset(40));
        assert_eq!(log.segments().count(), 1);
    }

    #[test]
    fn offsets_are_assigned_contiguously() {
        let mut log = LogState::new(config(), vec![]);
        let h = header(3, 10, 0);
        let a = append(&mut log, &h, 0);
        let b = append(&mut log, &h, 0);
        assert_eq!((a.base_offset, a.last_offset), (Offset(0), Offset(2)));
        assert_eq!((b.base_offset, b.last_offset), (Offset(3), Offset(5)));
        assert_eq!(log.log_end(), Offset(6));
    }

    #[test]
    fn rolls_by_size_and_by_time() {
        let mut log = LogState::new(config(), vec![]);
        let h = header(1, 900, 0); // ~ 970 bytes
        for _ in 0..25 {
            append(&mut log, &h, 0);
        }
        let sizes: Vec<u64> = log.segments().map(|s| s.size_bytes).collect();
        assert!(sizes.len() >= 3, "{sizes:?}");
        assert!(sizes.iter().all(|&s| s <= 10_000));
        let before = log.segments().count();
        let old = header(1, 10, 0);
        assert!(log.needs_roll(&old, config().segment_ms as i64 + 1));
        append(&mut log, &old, config().segment_ms as i64 + 1);
        assert_eq!(log.segments().count(), before + 1);
    }

    #[test]
    fn locate_uses_the_sparse_index_and_segment_bases() {
        let mut log = LogState::new(config(), vec![]);
        let h = header(2, 300, 0); // ~ 680 bytes
        let mut metas = Vec::new();
        for _ in 0..40 {
            metas.push(append(&mut log, &h, 0));
        }
        for m in &metas {
            let loc = log.locate(m.last_offset).expect("in range");
            let seg = log.segment(loc.segment_base).expect("segment");
            assert!(seg.base <= m.base_offset && m.last_offset < seg.next);
            assert!(loc.position < seg.size_bytes);
        }
        let end = log.locate(log.log_end()).expect("end is in range");
        assert_eq!(end.segment_base, log.active().base);
        assert!(log.locate(Offset(log.log_end().0 + 1)).is_err());
    }

    #[test]
    fn locate_time_finds_the_segment_with_newer_records() {
        let mut log = LogState::new(config(), vec![]);
        for t in 0..40 {
            append(&mut log, &header(1, 900, t * 100), 0);
        }
        let from = log.locate_time(2050).expect("found");
        let loc = log.locate(from).expect("in range");
        let seg = log.segment(loc.segment_base).expect("segment");
        assert!(seg.max_timestamp_ms >= 2050);
        assert!(
            from.0 <= 20,
            "scan starts at or before the first batch at 2050: {from}"
        );
        assert!(log.locate_time(10_000).is_none());
    }

    #[test]
    fn retention_by_bytes_and_time_never_touches_the_active_segment() {
        let mut cfg = config();
        cfg.retention_bytes = 25_000;
        let mut log = LogState::new(cfg, vec![]);
        for t in 0..60 {
            append(&mut log, &header(1, 900, t), 0);
        }
        let n = log.retention_candidates(0);
        assert!(n > 0);
        let removed = log.remove_oldest(n);
        assert_eq!(removed.len(), n);
        assert!(log.size_bytes() >= 25_000 - 10_000 && log.size_bytes() <= 25_000 + 10_000);
        assert_eq!(
            log.log_start(),
            log.segments().next().map(|s| s.base).unwrap_or_default()
        );

        let mut cfg = config();
        cfg.retention_ms = 1000;
        let mut log = LogState::new(cfg, vec![]);
        for _ in 0..30 {
            append(&mut log, &header(1, 900, 0), 0);
        }
        let segs = log.segments().count();
        assert_eq!(log.retention_candidates(500), 0);
        assert_eq!(
            log.retention_candidates(5000),
            segs - 1,
            "all but the active one"
        );
    }
}
