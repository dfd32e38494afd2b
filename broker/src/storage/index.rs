//! Sparse per-segment indexes: offset -> file position, and timestamp -> offset.
//!
//! Both are kept in memory as sorted vectors (a 1 GiB segment with 4 KiB spacing has 256 Ki
//! entries, 2 MiB) and written to disk when a segment is closed. On disk (all big-endian):
//!
//! ```text
//! header (32 bytes): magic "STRX" | version u16 = 1 | kind u8 (1 offset, 2 time) | 0u8
//!                  | entries u32 | crc32 (IEEE, of the entries) u32
//!                  | segment_bytes u64 (logical size of the .log)
//!                  | extra i64 (offset index: next offset after the segment;
//!                              time index: largest timestamp in the segment)
//! offset entry (8):  relative offset u32 | position u32
//! time entry  (12):  max timestamp so far i64 | relative offset u32
//! ```
//!
//! An index whose header, CRC or `segment_bytes` does not match is rebuilt by scanning the
//! segment, so a missing or stale index costs time, never correctness.

use super::types::Offset;

pub const INDEX_MAGIC: &[u8; 4] = b"STRX";
pub const INDEX_VERSION: u16 = 1;
pub const INDEX_HEADER_BYTES: usize = 32;
const KIND_OFFSET: u8 = 1;
const KIND_TIME: u8 = 2;

/// One sparse entry: the first batch at or after `position` starts at `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// Offsets relative to the segment's base offset, positions in bytes from the file start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetEntry>,
}

impl OffsetIndex {
    pub fn push(&mut self, relative_offset: u32, position: u32) {
        if let Some(last) = self.entries.last() {
            debug_assert!(relative_offset > last.relative_offset && position > last.position);
        }
        self.entries.push(OffsetEntry {
            relative_offset,
            position,
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with the largest offset `<= relative_offset`: where to start scanning.
    pub fn floor(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let i = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// File bytes; `next_offset` (one past the segment's last offset) rides in the header.
    /// The last entry at or before byte `position` (positions grow with offsets).
    pub fn floor_position(&self, position: u64) -> Option<OffsetEntry> {
        let i = self
            .entries
            .partition_point(|e| u64::from(e.position) <= position);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    pub fn encode(&self, segment_bytes: u64, next_offset: Offset) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.entries.len() * 8);
        for e in &self.entries {
            body.extend_from_slice(&e.relative_offset.to_be_bytes());
            body.extend_from_slice(&e.position.to_be_bytes());
        }
        with_header(
            KIND_OFFSET,
            self.entries.len(),
            segment_bytes,
            next_offset.0,
            body,
        )
    }

    /// Decodes an index file and its segment's next offset; `None` if it is damaged or was
    /// written for another segment size.
    pub fn decode(bytes: &[u8], segment_bytes: u64) -> Option<(OffsetIndex, Offset)> {
        let (body, extra) = check_header(bytes, KIND_OFFSET, 8, segment_bytes)?;
        let entries = body
            .chunks_exact(8)
            .map(|c| OffsetEntry {
                relative_offset: u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                position: u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        Some((OffsetIndex { entries }, Offset(extra)))
    }
}

/// One time entry: batches from `relative_offset` on have timestamps up to `max_timestamp_ms`
/// as the running maximum first reached this value there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub max_timestamp_ms: i64,
    pub relative_offset: u32,
}

/// Running maximum timestamp -> relative offset, sparse like Kafka's `.timeindex`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeEntry>,
}

impl TimeIndex {
    /// Records a new entry if `max_timestamp_ms` raises the running maximum.
    pub fn push(&mut self, max_timestamp_ms: i64, relative_offset: u32) {
        if self
            .entries
            .last()
            .is_none_or(|e| max_timestamp_ms > e.max_timestamp_ms)
        {
            self.entries.push(TimeEntry {
                max_timestamp_ms,
                relative_offset,
            });
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry before the first whose running maximum reaches `timestamp_ms`: scanning from
    /// there finds the first batch with a timestamp `>= timestamp_ms`. `None` means "from the
    /// start of the segment".
    pub fn floor_before(&self, timestamp_ms: i64) -> Option<TimeEntry> {
        let i = self
            .entries
            .partition_point(|e| e.max_timestamp_ms < timestamp_ms);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    pub fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    /// File bytes; the segment's largest timestamp rides in the header.
    pub fn encode(&self, segment_bytes: u64, max_timestamp_ms: i64) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.entries.len() * 12);
        for e in &self.entries {
            body.extend_from_slice(&e.max_timestamp_ms.to_be_bytes());
            body.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        with_header(
            KIND_TIME,
            self.entries.len(),
            segment_bytes,
            max_timestamp_ms,
            body,
        )
    }

    /// Decodes a time index file and its segment's largest timestamp.
    pub fn decode(bytes: &[u8], segment_bytes: u64) -> Option<(TimeIndex, i64)> {
        let (body, extra) = check_header(bytes, KIND_TIME, 12, segment_bytes)?;
        let entries = body
            .chunks_exact(12)
            .map(|c| {
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&c[0..8]);
                TimeEntry {
                    max_timestamp_ms: i64::from_be_bytes(ts),
                    relative_offset: u32::from_be_bytes([c[8], c[9], c[10], c[11]]),
                }
            })
            .collect();
        Some((TimeIndex { entries }, extra))
    }
}

fn with_header(kind: u8, entries: usize, segment_bytes: u64, extra: i64, body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_HEADER_BYTES + body.len());
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&INDEX_VERSION.to_be_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(entries as u32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&segment_bytes.to_be_bytes());
    out.extend_from_slice(&extra.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn check_header(
    bytes: &[u8],
    kind: u8,
    entry_bytes: usize,
    segment_bytes: u64,
) -> Option<(&[u8], i64)> {
    if bytes.len() < INDEX_HEADER_BYTES || &bytes[0..4] != INDEX_MAGIC {
        return None;
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != INDEX_VERSION || bytes[6] != kind {
        return None;
    }
    let entries = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let crc = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    let mut size = [0u8; 8];
    size.copy_from_slice(&bytes[16..24]);
    let mut extra = [0u8; 8];
    extra.copy_from_slice(&bytes[24..32]);
    let body = &bytes[INDEX_HEADER_BYTES..];
    if u64::from_be_bytes(size) != segment_bytes
        || body.len() != entries * entry_bytes
        || crc32fast::hash(body) != crc
    {
        return None;
    }
    Some((body, i64::from_be_bytes(extra)))
}

/// Helper for callers holding absolute offsets.
pub fn relative(base: Offset, offset: Offset) -> u32 {
    debug_assert!(offset >= base && offset.0 - base.0 <= i64::from(u32::MAX));
    (offset.0 - base.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_floor_finds_the_entry_at_or_before() {
        let mut idx = OffsetIndex::default();
        idx.push(0, 0);
        idx.push(10, 4096);
        idx.push(25, 9000);
        assert_eq!(idx.floor(0).map(|e| e.position), Some(0));
        assert_eq!(idx.floor(9).map(|e| e.position), Some(0));
        assert_eq!(idx.floor(10).map(|e| e.position), Some(4096));
        assert_eq!(idx.floor(24).map(|e| e.position), Some(4096));
        assert_eq!(idx.floor(1000).map(|e| e.position), Some(9000));
        assert_eq!(OffsetIndex::default().floor(3), None);
    }

    #[test]
    fn time_index_keeps_only_rising_maxima() {
        let mut idx = TimeIndex::default();
        idx.push(100, 0);
        idx.push(90, 3); // not a new maximum
        idx.push(200, 5);
        idx.push(300, 9);
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.floor_before(50), None);
        assert_eq!(idx.floor_before(100), None);
        assert_eq!(idx.floor_before(150).map(|e| e.relative_offset), Some(0));
        assert_eq!(idx.floor_before(300).map(|e| e.relative_offset), Some(5));
        assert_eq!(idx.floor_before(999).map(|e| e.relative_offset), Some(9));
    }

    #[test]
    fn files_round_trip_and_damage_is_detected() {
        let mut idx = OffsetIndex::default();
        for i in 0..100u32 {
            idx.push(i * 7, i * 4096 + 1);
        }
        let bytes = idx.encode(1234, Offset(700));
        assert_eq!(
            OffsetIndex::decode(&bytes, 1234),
            Some((idx.clone(), Offset(700)))
        );
        assert_eq!(OffsetIndex::decode(&bytes, 1235), None, "stale size");
        let mut bad = bytes.clone();
        bad[40] ^= 1;
        assert_eq!(OffsetIndex::decode(&bad, 1234), None, "bit flip");
        assert_eq!(
            OffsetIndex::decode(&bytes[..bytes.len() - 1], 1234),
            None,
            "short"
        );
        assert_eq!(TimeIndex::decode(&bytes, 1234), None, "wrong kind");

        let mut t = TimeIndex::default();
        t.push(5, 0);
        t.push(9, 4);
        assert_eq!(TimeIndex::decode(&t.encode(77, 9), 77), Some((t, 9)));
    }
}
