//! Newtypes and per-log configuration (Kafka's topic-config names).

use std::fmt;

/// A Kafka offset: the position of a record in a partition, counted in records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub i64);

impl Offset {
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Per-log settings, named as Kafka's topic configs (broker-wide defaults in
/// `crate::config` use the `log.*` names).
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment when the next batch would pass this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment when its first batch is this old.
    pub segment_ms: u64,
    /// `retention.ms`: delete closed segments whose newest record is older; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest closed segments while the log is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u32,
    /// `flush.ms`: fdatasync data at most this long after it was appended (buffered appends).
    pub flush_ms: u64,
    /// `flush.bytes` (Redpanda's name): fdatasync once this many bytes are unflushed.
    pub flush_bytes: u64,
    /// `preallocate`: fallocate each new segment to `segment.bytes` (cheaper fdatasync).
    pub preallocate: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            flush_ms: 100,
            flush_bytes: 32 << 20,
            preallocate: true,
        }
    }
}

/// Metadata kept for each appended batch (returned to the caller and held by the cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub max_timestamp_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub bytes: u32,
}

impl BatchMeta {
    pub fn from_header(h: &strand_wire::BatchHeader) -> BatchMeta {
        BatchMeta {
            base_offset: Offset(h.base_offset),
            last_offset: Offset(h.last_offset()),
            max_timestamp_ms: h.max_timestamp_ms,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            bytes: h.total_len() as u32,
        }
    }
}
