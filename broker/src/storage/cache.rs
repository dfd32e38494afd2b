//! The hot-tail cache: the most recently appended batches, as `Bytes`, so tail reads (the
//! common case for consumers that keep up) never touch the disk and never copy.
//!
//! Entries are evicted oldest first once the cache is over budget, but only when their bytes
//! are known to be on disk (the I/O layer says which); until then the cache is the only copy a
//! reader can use, so it may briefly run over budget under write-behind pressure.

use std::collections::VecDeque;

use bytes::Bytes;

use super::types::{BatchMeta, Offset};

#[derive(Clone, Debug)]
pub struct CachedBatch {
    pub meta: BatchMeta,
    /// The batch exactly as stored (base offset filled in).
    pub bytes: Bytes,
    /// Segment holding it and its end position there (to ask "is it written yet?").
    pub segment: Offset,
    pub end_position: u64,
}

#[derive(Debug)]
pub struct BatchCache {
    entries: VecDeque<CachedBatch>,
    bytes: usize,
    bytes_max: usize,
}

impl BatchCache {
    pub fn new(bytes_max: usize) -> BatchCache {
        BatchCache {
            entries: VecDeque::new(),
            bytes: 0,
            bytes_max,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn push(&mut self, entry: CachedBatch) {
        if let Some(last) = self.entries.back() {
            assert!(
                entry.meta.base_offset > last.meta.last_offset,
                "cache offsets must grow"
            );
        }
        self.bytes += entry.bytes.len();
        self.entries.push_back(entry);
    }

    /// Evicts oldest entries while over budget and `on_disk(entry)` holds.
    pub fn evict(&mut self, on_disk: impl Fn(&CachedBatch) -> bool) {
        while self.bytes > self.bytes_max {
            match self.entries.front() {
                Some(e) if on_disk(e) => {
                    self.bytes -= e.bytes.len();
                    self.entries.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Drops every entry of the given segments (compaction rewrote them).
    pub fn drop_segments(&mut self, segments: &[Offset]) {
        self.entries.retain(|e| !segments.contains(&e.segment));
        self.bytes = self.entries.iter().map(|e| e.bytes.len()).sum();
    }

    /// Drops entries wholly below `offset` (after retention moved the log start).
    pub fn drop_below(&mut self, offset: Offset) {
        while let Some(e) = self.entries.front() {
            if e.meta.last_offset >= offset {
                break;
            }
            self.bytes -= e.bytes.len();
            self.entries.pop_front();
        }
    }

    /// Batches from the one containing `offset`, up to `bytes_max` bytes (always at least one
    /// batch, as Kafka returns an oversized first batch whole). `None` if `offset` is older than
    /// the cache: read it from disk.
    pub fn read(&self, offset: Offset, bytes_max: usize) -> Option<Vec<Bytes>> {
        let first = self.entries.front()?;
        if offset < first.meta.base_offset {
            return None;
        }
        let start = self
            .entries
            .partition_point(|e| e.meta.last_offset < offset);
        let mut out = Vec::new();
        let mut total = 0usize;
        for e in self.entries.range(start..) {
            if !out.is_empty() && total + e.bytes.len() > bytes_max {
                break;
            }
            total += e.bytes.len();
            out.push(e.bytes.clone());
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(base: i64, len: usize) -> CachedBatch {
        CachedBatch {
            meta: BatchMeta {
                base_offset: Offset(base),
                last_offset: Offset(base + 1),
                max_timestamp_ms: 0,
                producer_id: -1,
                producer_epoch: -1,
                base_sequence: -1,
                bytes: len as u32,
            },
            bytes: Bytes::from(vec![base as u8; len]),
            segment: Offset(0),
            end_position: 0,
        }
    }

    #[test]
    fn reads_from_the_batch_holding_the_offset() {
        let mut c = BatchCache::new(1 << 20);
        for i in 0..5 {
            c.push(entry(i * 2, 100));
        }
        assert_eq!(c.read(Offset(3), 1000).map(|v| v.len()), Some(4));
        assert_eq!(c.read(Offset(3), 150).map(|v| v.len()), Some(1));
        assert_eq!(
            c.read(Offset(3), 1).map(|v| v.len()),
            Some(1),
            "first batch always whole"
        );
        assert_eq!(c.read(Offset(10), 1000).map(|v| v.len()), Some(0));
    }

    #[test]
    fn evicts_only_what_is_on_disk() {
        let mut c = BatchCache::new(250);
        for i in 0..5 {
            c.push(entry(i * 2, 100));
        }
        c.evict(|e| e.meta.base_offset < Offset(2));
        assert_eq!(c.bytes(), 400, "only the first entry was on disk");
        c.evict(|_| true);
        assert_eq!(c.bytes(), 200);
        assert!(
            c.read(Offset(0), 1000).is_none(),
            "evicted offsets go to disk"
        );
        c.drop_below(Offset(8));
        assert_eq!(c.bytes(), 100);
    }
}
