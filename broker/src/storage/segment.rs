//! One segment's in-memory state (sans-IO): offsets, logical size, sparse indexes.
//!
//! Files of a segment with base offset B, in the partition directory:
//! `{B:020}.log` (batches, verbatim), `{B:020}.index` and `{B:020}.timeindex` (see
//! [`super::index`]) and `{B:020}.txnindex` (see [`super::txn`]), written when the segment
//! is closed.

use super::index::{relative, OffsetIndex, TimeIndex};
use super::types::{BatchMeta, Offset};

pub fn log_file_name(base: Offset) -> String {
    format!("{:020}.log", base.0)
}
pub fn index_file_name(base: Offset) -> String {
    format!("{:020}.index", base.0)
}
pub fn time_index_file_name(base: Offset) -> String {
    format!("{:020}.timeindex", base.0)
}
/// The segment's aborted-transaction index (see [`super::txn`]).
pub fn txn_index_file_name(base: Offset) -> String {
    format!("{:020}.txnindex", base.0)
}

/// Parses `00000000000000000042.log` into `Offset(42)`.
pub fn parse_log_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

#[derive(Clone, Debug, PartialEq)]
pub struct SegmentState {
    /// Offset the segment's file is named after; no batch in it starts lower.
    pub base: Offset,
    /// One past the last offset stored (== `base` while empty).
    pub next: Offset,
    /// Logical bytes of batches in the `.log` file (the file itself may be preallocated).
    pub size_bytes: u64,
    pub offset_index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Bytes appended since the last sparse index entry.
    bytes_since_index: u64,
    /// `maxTimestamp` of the first batch: what `segment.ms` is measured from.
    pub first_timestamp_ms: Option<i64>,
    /// Largest `maxTimestamp` of any batch: what `retention.ms` is measured against.
    pub max_timestamp_ms: i64,
}

impl SegmentState {
    pub fn new(base: Offset) -> SegmentState {
        SegmentState {
            base,
            next: base,
            size_bytes: 0,
            offset_index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_index: 0,
            first_timestamp_ms: None,
            max_timestamp_ms: i64::MIN,
        }
    }

    /// A closed segment rebuilt from its index files (no scan of the `.log`).
    pub fn from_indexes(
        base: Offset,
        next: Offset,
        size_bytes: u64,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        max_timestamp_ms: i64,
    ) -> SegmentState {
        SegmentState {
            base,
            next,
            size_bytes,
            offset_index,
            time_index,
            bytes_since_index: 0,
            first_timestamp_ms: None,
            max_timestamp_ms,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// Accounts for a batch written at `position` (which must be the current end).
    pub fn record_batch(&mut self, meta: &BatchMeta, position: u64, index_interval_bytes: u32) {
        assert_eq!(
            position, self.size_bytes,
            "batches are appended at the segment's end"
        );
        assert!(
            meta.base_offset >= self.next,
            "offsets only grow within a segment"
        );
        if position > 0 && self.bytes_since_index >= u64::from(index_interval_bytes) {
            let rel = relative(self.base, meta.base_offset);
            self.offset_index.push(rel, position as u32);
            self.time_index
                .push(self.max_timestamp_ms.max(meta.max_timestamp_ms), rel);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += u64::from(meta.bytes);
        self.size_bytes += u64::from(meta.bytes);
        self.next = meta.last_offset.next();
        self.first_timestamp_ms.get_or_insert(meta.max_timestamp_ms);
        self.max_timestamp_ms = self.max_timestamp_ms.max(meta.max_timestamp_ms);
    }

    /// Where to start scanning for `offset` in this segment's file.
    pub fn position_floor(&self, offset: Offset) -> u64 {
        if offset <= self.base {
            return 0;
        }
        let rel = relative(self.base, offset.min(self.next));
        self.offset_index
            .floor(rel)
            .map_or(0, |e| u64::from(e.position))
    }

    /// An offset whose batch starts at or before byte `position` (from the sparse index).
    pub fn offset_at_or_before(&self, position: u64) -> Offset {
        self.offset_index
            .floor_position(position)
            .map_or(self.base, |e| {
                Offset(self.base.0 + i64::from(e.relative_offset))
            })
    }

    /// The offset from which to scan for the first batch with a timestamp `>= timestamp_ms`.
    pub fn time_offset_floor(&self, timestamp_ms: i64) -> Offset {
        match self.time_index.floor_before(timestamp_ms) {
            None => self.base,
            Some(e) => Offset(self.base.0 + i64::from(e.relative_offset)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(log_file_name(Offset(42)), "00000000000000000042.log");
        assert_eq!(
            parse_log_file_name("00000000000000000042.log"),
            Some(Offset(42))
        );
        assert_eq!(parse_log_file_name("42.log"), None);
        assert_eq!(parse_log_file_name("00000000000000000042.index"), None);
    }
}
