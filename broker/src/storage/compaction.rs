//! Log compaction decisions (sans-IO): when a log is worth cleaning, which segments a pass
//! reads and rewrites, and which records survive.
//!
//! Vocabulary (Kafka's): the log below `first_dirty` has been cleaned before (the *clean*
//! part); from `first_dirty` up to the *first uncleanable offset* it is *dirty*. The active
//! segment and segments newer than `min.compaction.lag.ms` are never touched. A pass:
//! 1. builds a [`KeyMap`] (key -> newest offset) over the dirty segments;
//! 2. rewrites every closed segment below the map's upper bound, in [`plan`]'s groups of
//!    neighbours (so small cleaned segments merge), keeping a record only if no newer record
//!    with its key exists ([`Decider::keep`]); offsets never change, gaps are fine;
//! 3. drops a tombstone (null value) once it is the newest for its key and
//!    `delete.retention.ms` has passed since its batch's timestamp.
//!
//! Transactions (see `super::txn::BatchFate`): markers and the data of transactions still open
//! are kept whole and their keys are not indexed; data of aborted transactions is removed;
//! committed transactional data is compacted like any other.
//!
//! What is kept, never filtered: records without a
//! key (a compacted topic refuses them at produce; older ones from before a policy change are
//! kept rather than silently dropped). Compressed batches are filtered decompressed and
//! written back with their codec.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use strand_wire::records::RecordView;
use strand_wire::BatchHeader;

use super::log::LogState;
use super::segment::SegmentState;
use super::types::Offset;

/// A 128-bit digest of a key: two SipHash-1-3 runs with different prefixes. Kafka's cleaner
/// keys its map by a 128-bit MD5 digest for the same reason: a full key could be large, and
/// a 64-bit hash collision would drop a live record; at 128 bits that is negligible.
pub fn key_digest(key: &[u8]) -> u128 {
    let mut a = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut a);
    let mut b = std::collections::hash_map::DefaultHasher::new();
    0xA5u8.hash(&mut b);
    key.hash(&mut b);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// Key digest -> newest offset seen for that key, over the dirty part of the log.
#[derive(Debug, Default)]
pub struct KeyMap {
    map: HashMap<u128, i64>,
}

impl KeyMap {
    pub fn insert(&mut self, key: &[u8], offset: Offset) {
        let slot = self.map.entry(key_digest(key)).or_insert(offset.0);
        *slot = (*slot).max(offset.0);
    }

    pub fn newest(&self, key: &[u8]) -> Option<Offset> {
        self.map.get(&key_digest(key)).map(|&o| Offset(o))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What one cleaning pass will do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanPlan {
    /// Dirty segments whose keys go into the map, oldest first.
    pub dirty: Vec<Offset>,
    /// Groups of neighbouring closed segments to rewrite, each into one segment named after
    /// its first. Every closed segment below `upper` is in exactly one group.
    pub groups: Vec<Vec<Offset>>,
    /// One past the last offset the pass covers (the next pass's `first_dirty`).
    pub upper: Offset,
    /// The dirty share that triggered the pass (for logs).
    pub dirty_ratio_milli: u32,
}

/// Why a log is (not) cleaned now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Clean(CleanPlan),
    /// Nothing dirty and no tombstone due.
    Idle,
    /// Dirty, but below `min.cleanable.dirty.ratio` (per mille).
    BelowRatio(u32),
}

/// Decides whether to clean `log` at `now_ms`. `first_dirty` is where the previous pass
/// stopped; `tombstones_due` says a kept tombstone's `delete.retention.ms` has run out.
pub fn plan(log: &LogState, first_dirty: Offset, now_ms: i64, tombstones_due: bool) -> Verdict {
    let config = log.config();
    let uncleanable = first_uncleanable(log, now_ms);
    let closed: Vec<&SegmentState> = log
        .segments()
        .take_while(|s| s.base < uncleanable)
        .collect();
    let (mut dirty_bytes, mut clean_bytes) = (0u64, 0u64);
    let mut dirty = Vec::new();
    let mut oldest_dirty_ts = None;
    for s in &closed {
        if s.next > first_dirty && !s.is_empty() {
            dirty_bytes += s.size_bytes;
            dirty.push(s.base);
            oldest_dirty_ts.get_or_insert(s.max_timestamp_ms);
        } else {
            clean_bytes += s.size_bytes;
        }
    }
    let total = dirty_bytes + clean_bytes;
    let ratio_milli = (dirty_bytes * 1000).checked_div(total).unwrap_or(0) as u32;
    let overdue = config.max_compaction_lag_ms < i64::MAX
        && oldest_dirty_ts
            .is_some_and(|ts| now_ms.saturating_sub(ts) > config.max_compaction_lag_ms);
    if dirty_bytes == 0 && !tombstones_due {
        return Verdict::Idle;
    }
    let wanted = (config.min_cleanable_dirty_ratio.clamp(0.0, 1.0) * 1000.0) as u32;
    if ratio_milli < wanted && !overdue && !tombstones_due {
        return Verdict::BelowRatio(ratio_milli);
    }
    let upper = closed
        .last()
        .map_or(first_dirty, |s| s.next.max(first_dirty));
    Verdict::Clean(CleanPlan {
        dirty,
        groups: group_segments(&closed, config.segment_bytes),
        upper,
        dirty_ratio_milli: ratio_milli,
    })
}

/// The first offset a pass must not touch: the active segment's base, or the first segment
/// holding a record newer than `min.compaction.lag.ms`.
pub fn first_uncleanable(log: &LogState, now_ms: i64) -> Offset {
    let lag = log.config().min_compaction_lag_ms;
    let active = log.active().base;
    if lag <= 0 {
        return active;
    }
    log.segments()
        .take_while(|s| s.base < active)
        .find(|s| !s.is_empty() && s.max_timestamp_ms > now_ms.saturating_sub(lag))
        .map_or(active, |s| s.base)
}

/// Neighbouring segments whose combined size fits one segment and whose offsets fit the
/// 32-bit relative offsets of one segment's index.
pub fn group_segments(segments: &[&SegmentState], segment_bytes: u64) -> Vec<Vec<Offset>> {
    let mut groups: Vec<Vec<Offset>> = Vec::new();
    let (mut size, mut first) = (0u64, Offset(0));
    for s in segments {
        let fits = !groups.is_empty()
            && size + s.size_bytes <= segment_bytes
            && s.next.0 - first.0 <= i64::from(u32::MAX);
        if fits {
            size += s.size_bytes;
            groups.last_mut().expect("a group").push(s.base);
        } else {
            size = s.size_bytes;
            first = s.base;
            groups.push(vec![s.base]);
        }
    }
    groups
}

/// Decides record by record during a rewrite.
#[derive(Debug)]
pub struct Decider<'a> {
    pub map: &'a KeyMap,
    /// Tombstones in batches with `maxTimestamp` at or below this are dropped (once newest).
    pub tombstone_horizon_ms: i64,
}

impl Decider<'_> {
    pub fn new(map: &KeyMap, now_ms: i64, delete_retention_ms: i64) -> Decider<'_> {
        Decider {
            map,
            tombstone_horizon_ms: now_ms.saturating_sub(delete_retention_ms.max(0)),
        }
    }

    /// Whether `record` of the batch `header` survives.
    pub fn keep(&self, header: &BatchHeader, record: &RecordView<'_>) -> bool {
        let Some(key) = record.key else {
            return true;
        };
        let offset = Offset(header.base_offset + record.offset_delta);
        if self.map.newest(key).is_some_and(|newest| offset < newest) {
            return false;
        }
        !(record.is_tombstone() && header.max_timestamp_ms <= self.tombstone_horizon_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::types::{CleanupPolicy, LogConfig};
    use strand_wire::builder::filler_batch;

    fn log_with(segments: usize, ratio: f64) -> LogState {
        let config = LogConfig {
            segment_bytes: 4000,
            cleanup_policy: CleanupPolicy::COMPACT,
            min_cleanable_dirty_ratio: ratio,
            ..LogConfig::default()
        };
        let mut log = LogState::new(config, vec![]);
        let h = strand_wire::batch::validate(&filler_batch(1, 900, 1000, 0)).expect("valid");
        while log.segments().count() < segments {
            if log.needs_roll(&h, 0) {
                log.roll();
            }
            log.append(&h);
        }
        log
    }

    #[test]
    fn the_active_segment_is_never_planned() {
        let log = log_with(4, 0.5);
        let Verdict::Clean(plan) = plan(&log, Offset(0), 0, false) else {
            panic!("an all-dirty log is cleaned")
        };
        let active = log.active().base;
        assert!(plan.groups.iter().flatten().all(|&b| b < active));
        assert_eq!(plan.upper, active);
        assert_eq!(plan.dirty.len(), 3);
    }

    #[test]
    fn dirty_ratio_and_lags_gate_a_pass() {
        let log = log_with(6, 0.5);
        let closed: Vec<Offset> = log.segments().map(|s| s.base).collect();
        // Everything below the 5th segment is clean: 1 dirty of 5 closed = 20%.
        let first_dirty = closed[4];
        assert_eq!(plan(&log, first_dirty, 0, false), Verdict::BelowRatio(200));
        assert!(matches!(
            plan(&log, first_dirty, 0, true),
            Verdict::Clean(_)
        ));
        assert_eq!(plan(&log, log.active().base, 0, false), Verdict::Idle);

        let mut overdue = log_with(6, 0.5);
        let mut c = overdue.config().clone();
        c.max_compaction_lag_ms = 10;
        overdue.set_config(c);
        assert!(matches!(
            plan(&overdue, first_dirty, 5000, false),
            Verdict::Clean(_)
        ));

        let mut young = log_with(6, 0.0);
        let mut c = young.config().clone();
        c.min_compaction_lag_ms = 60_000;
        young.set_config(c);
        assert_eq!(first_uncleanable(&young, 2000), closed[0]);
        assert_eq!(first_uncleanable(&young, 100_000), young.active().base);
    }

    #[test]
    fn groups_fit_one_segment() {
        let log = log_with(8, 0.5);
        let segs: Vec<&SegmentState> = log.segments().collect();
        let groups = group_segments(&segs, 8000);
        assert!(groups.iter().all(|g| !g.is_empty()));
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), segs.len());
        for g in &groups {
            let size: u64 = g
                .iter()
                .map(|b| log.segment(*b).expect("segment").size_bytes)
                .sum();
            assert!(size <= 8000 || g.len() == 1, "{g:?} is {size} bytes");
        }
    }

    #[test]
    fn newest_record_per_key_survives_and_old_tombstones_go() {
        let mut b = strand_wire::builder::BatchBuilder::new(1000);
        b.push(Some(b"a"), b"old", 0);
        b.push(Some(b"b"), b"only", 0);
        b.push(Some(b"a"), b"new", 0);
        b.push_tombstone(b"c", 0);
        b.push(None, b"keyless", 0);
        let batch = b.finish();
        let h = strand_wire::batch::validate(&batch).expect("valid");
        let mut map = KeyMap::default();
        for r in strand_wire::records::records(&batch).expect("records") {
            if let Some(k) = r.key {
                map.insert(k, Offset(r.offset_delta));
            }
        }
        let keep = |now: i64| -> Vec<i64> {
            let d = Decider::new(&map, now, 500);
            strand_wire::records::records(&batch)
                .expect("records")
                .iter()
                .filter(|r| d.keep(&h, r))
                .map(|r| r.offset_delta)
                .collect()
        };
        assert_eq!(
            keep(1200),
            vec![1, 2, 3, 4],
            "tombstone kept within delete.retention.ms"
        );
        assert_eq!(keep(1600), vec![1, 2, 4], "tombstone dropped after it");
        assert_ne!(key_digest(b"a"), key_digest(b"b"));
    }
}
