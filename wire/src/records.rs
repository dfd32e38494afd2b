//! The records inside an uncompressed v2 batch, read in place, and rebuilding a batch that keeps
//! only some of them (what log compaction does).
//!
//! ```text
//! record: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//!         | keyLength varint | key | valueLength varint | value | headers count varint | ...
//! ```
//! A record's deltas are relative to its batch's `baseOffset` and `baseTimestamp`, so a record
//! copied byte for byte into a batch with the same base offset and base timestamp keeps its
//! offset and timestamp. That is how [`retain`] works: the header is kept (base offset, base
//! timestamp, `lastOffsetDelta`, producer fields), the dropped records' bytes are cut out, and
//! `batchLength`, `recordsCount` and the CRC-32C are recomputed.

use std::ops::Range;

use crate::batch::{compute_crc, BatchHeader, HEADER_BYTES, LOG_OVERHEAD};
use crate::varint::get_varlong;

/// One record of a batch, borrowed from the batch's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Offset relative to the batch's base offset.
    pub offset_delta: i64,
    /// Timestamp relative to the batch's base timestamp (CreateTime batches).
    pub timestamp_delta: i64,
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// `None` for a null value: a tombstone on a compacted topic.
    pub value: Option<&'a [u8]>,
    /// Where the whole record (length prefix included) lies in the batch.
    pub range: Range<usize>,
}

impl RecordView<'_> {
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordsError {
    /// The batch is compressed; its records are not readable in place.
    Compressed,
    /// A record's lengths or varints do not fit the batch.
    Malformed { record: usize },
    /// The header is not there.
    Truncated,
}

impl std::fmt::Display for RecordsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordsError::Compressed => f.write_str("compressed batch"),
            RecordsError::Malformed { record } => write!(f, "record {record} is malformed"),
            RecordsError::Truncated => f.write_str("batch shorter than its header"),
        }
    }
}

impl std::error::Error for RecordsError {}

/// The records of an uncompressed batch (whose CRC the caller has checked), in order.
pub fn records(batch: &[u8]) -> Result<Vec<RecordView<'_>>, RecordsError> {
    let h = BatchHeader::parse(batch).map_err(|_| RecordsError::Truncated)?;
    if h.attributes & 0x7 != 0 {
        return Err(RecordsError::Compressed);
    }
    let end = h.total_len().min(batch.len());
    let mut at = HEADER_BYTES;
    if end < at {
        // `batchLength` says the batch ends inside its own header (found by fuzzing).
        return Err(RecordsError::Truncated);
    }
    // Bounded by the bytes present, not by the (untrusted) count in the header.
    let mut out = Vec::with_capacity((h.records_count.max(0) as usize).min((end - at) / 7));
    for i in 0..h.records_count.max(0) as usize {
        let rec = parse_one(batch, at, end).ok_or(RecordsError::Malformed { record: i })?;
        at = rec.range.end;
        out.push(rec);
    }
    Ok(out)
}

fn parse_one(batch: &[u8], start: usize, end: usize) -> Option<RecordView<'_>> {
    let mut at = start;
    let next = |at: &mut usize| -> Option<i64> {
        let (v, n) = get_varlong(batch.get(*at..end)?)?;
        *at += n;
        Some(v)
    };
    let len = usize::try_from(next(&mut at)?).ok()?;
    let rec_end = at.checked_add(len).filter(|&e| e <= end)?;
    at += 1; // attributes
    let timestamp_delta = next(&mut at)?;
    let offset_delta = next(&mut at)?;
    let bytes = |at: &mut usize| -> Option<Option<&[u8]>> {
        let n = next(at)?;
        if n < 0 {
            return Some(None);
        }
        let stop = at.checked_add(usize::try_from(n).ok()?)?;
        if stop > rec_end {
            return None;
        }
        let s = &batch[*at..stop];
        *at = stop;
        Some(Some(s))
    };
    let key = bytes(&mut at)?;
    let value = bytes(&mut at)?;
    if at > rec_end {
        return None;
    }
    Some(RecordView {
        offset_delta,
        timestamp_delta,
        key,
        value,
        range: start..rec_end,
    })
}

/// What [`retain`] made of a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Retained {
    /// Every record is kept: store the original bytes.
    All,
    /// No record is kept: drop the batch.
    None,
    /// Some records are kept: this is the rebuilt batch (same base offset, base timestamp,
    /// `lastOffsetDelta` and producer fields; new length, count and CRC).
    Some(Vec<u8>),
}

/// Keeps the records of an uncompressed batch for which `keep` says yes.
pub fn retain(
    batch: &[u8],
    mut keep: impl FnMut(&RecordView<'_>) -> bool,
) -> Result<Retained, RecordsError> {
    let recs = records(batch)?;
    let kept: Vec<&RecordView<'_>> = recs.iter().filter(|r| keep(r)).collect();
    if kept.len() == recs.len() {
        return Ok(Retained::All);
    }
    if kept.is_empty() {
        return Ok(Retained::None);
    }
    let body: usize = kept.iter().map(|r| r.range.len()).sum();
    let mut out = Vec::with_capacity(HEADER_BYTES + body);
    out.extend_from_slice(&batch[..HEADER_BYTES]);
    for r in &kept {
        out.extend_from_slice(&batch[r.range.clone()]);
    }
    let batch_length = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(Retained::Some(out))
}

/// The batch's header with no records: keeps the batch's offset range (`lastOffsetDelta`)
/// and producer fields. Compaction leaves one where it removed a segment's last batch, so
/// consumers move past the removed offsets (Kafka keeps empty batches for the same reason).
pub fn emptied(batch: &[u8]) -> Vec<u8> {
    let mut out = batch[..HEADER_BYTES.min(batch.len())].to_vec();
    out.resize(HEADER_BYTES, 0);
    let batch_length = (HEADER_BYTES - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[57..61].copy_from_slice(&0i32.to_be_bytes());
    // No records, so no compressed records section either: clear the codec bits.
    let attributes = u16::from_be_bytes([out[21], out[22]]) & !0x7;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate;
    use crate::builder::BatchBuilder;

    fn sample() -> Vec<u8> {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        b.push(Some(b"a"), b"1", 0);
        b.push(Some(b"b"), b"2", 1);
        b.push(None, b"3", 2);
        b.push_tombstone(b"a", 3);
        b.finish()
    }

    #[test]
    fn records_are_read_in_place() {
        let batch = sample();
        let recs = records(&batch).expect("records");
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[0].key, Some(&b"a"[..]));
        assert_eq!(recs[1].value, Some(&b"2"[..]));
        assert_eq!(recs[2].key, None);
        assert!(recs[3].is_tombstone());
        let deltas: Vec<i64> = recs.iter().map(|r| r.offset_delta).collect();
        assert_eq!(deltas, vec![0, 1, 2, 3]);
    }

    #[test]
    fn retain_rebuilds_a_valid_batch_with_the_same_offsets() {
        let mut batch = sample();
        crate::batch::set_base_offset(&mut batch, 100);
        let out = retain(&batch, |r| r.offset_delta % 2 == 1).expect("retain");
        let Retained::Some(kept) = out else {
            panic!("expected a rebuilt batch, got {out:?}")
        };
        let h = validate(&kept).expect("valid after rebuild");
        assert_eq!(h.base_offset, 100);
        assert_eq!(h.records_count, 2);
        assert_eq!(h.last_offset_delta, 3, "lastOffsetDelta is kept");
        let recs = records(&kept).expect("records");
        assert_eq!(recs[0].offset_delta, 1);
        assert_eq!(recs[1].offset_delta, 3);
        assert_eq!(retain(&batch, |_| true), Ok(Retained::All));
        assert_eq!(retain(&batch, |_| false), Ok(Retained::None));
        let empty = emptied(&batch);
        let h = validate(&empty).expect("an emptied batch is valid");
        assert_eq!(
            (h.base_offset, h.last_offset(), h.records_count),
            (100, 103, 0)
        );
        assert!(records(&empty).expect("records").is_empty());
    }

    #[test]
    fn malformed_records_are_an_error_not_a_panic() {
        let batch = sample();
        for cut in HEADER_BYTES..batch.len() {
            let mut b = batch[..cut].to_vec();
            let len = (b.len() - LOG_OVERHEAD) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            assert!(records(&b).is_err(), "cut at {cut}");
        }
        let mut compressed = sample();
        compressed[22] |= 1;
        assert_eq!(records(&compressed), Err(RecordsError::Compressed));
        let mut short = sample();
        short[8..12].copy_from_slice(&20i32.to_be_bytes()); // ends inside the header
        assert_eq!(records(&short), Err(RecordsError::Truncated));
    }
}
