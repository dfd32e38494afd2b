//! Builds uncompressed Kafka v2 record batches, record by record.
//!
//! Record layout (inside the batch, after the 61-byte header):
//! `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//!  keyLength varint (-1 = null), key, valueLength varint, value, headerCount varint`.

use crate::batch::{compute_crc, HEADER_BYTES, LOG_OVERHEAD, MAGIC_V2};
use crate::varint::{put_varint, put_varlong};

/// Accumulates records and produces one batch. Producer fields default to "no producer"
/// (`producerId = -1`), as a non-idempotent producer sends.
#[derive(Debug)]
pub struct BatchBuilder {
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    records: Vec<u8>,
    count: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: u16,
}

impl BatchBuilder {
    pub fn new(base_timestamp_ms: i64) -> BatchBuilder {
        BatchBuilder {
            base_timestamp_ms,
            max_timestamp_ms: base_timestamp_ms,
            records: Vec::new(),
            count: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            attributes: 0,
        }
    }

    /// A builder whose record buffer starts with room for `bytes` (no regrowth while filling a
    /// batch of about that size).
    pub fn with_capacity(base_timestamp_ms: i64, bytes: usize) -> BatchBuilder {
        let mut b = BatchBuilder::new(base_timestamp_ms);
        b.records.reserve(bytes);
        b
    }

    /// Marks the batch as sent by an idempotent producer.
    pub fn producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> BatchBuilder {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction (attributes bit 4); needs [`Self::producer`].
    pub fn transactional(mut self) -> BatchBuilder {
        self.attributes |= ATTR_TRANSACTIONAL;
        self
    }

    /// Appends one record, `timestamp_delta_ms` after the batch's base timestamp.
    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp_delta_ms: i64) {
        self.push_record(key, Some(value), timestamp_delta_ms);
    }

    /// Appends a tombstone (null value): on a compacted topic, "delete this key".
    pub fn push_tombstone(&mut self, key: &[u8], timestamp_delta_ms: i64) {
        self.push_record(Some(key), None, timestamp_delta_ms);
    }

    fn push_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, timestamp_delta_ms: i64) {
        use crate::varint::varlong_len;
        let klen = key.map_or(-1, |k| k.len() as i64);
        let vlen = value.map_or(-1, |v| v.len() as i64);
        // The record body's length first (it prefixes the record), so the record is written
        // straight into the batch: one copy of the key and value.
        let body_len = 1
            + varlong_len(timestamp_delta_ms)
            + varlong_len(i64::from(self.count))
            + varlong_len(klen)
            + key.map_or(0, <[u8]>::len)
            + varlong_len(vlen)
            + value.map_or(0, <[u8]>::len)
            + 1;
        let out = &mut self.records;
        out.reserve(body_len + 5);
        put_varint(out, body_len as i32);
        out.push(0); // record attributes
        put_varlong(out, timestamp_delta_ms);
        put_varint(out, self.count);
        put_varlong(out, klen);
        if let Some(k) = key {
            out.extend_from_slice(k);
        }
        put_varlong(out, vlen);
        if let Some(v) = value {
            out.extend_from_slice(v);
        }
        put_varint(out, 0); // no headers
        self.count += 1;
        self.max_timestamp_ms = self
            .max_timestamp_ms
            .max(self.base_timestamp_ms + timestamp_delta_ms);
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the finished batch will take.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.records.len()
    }

    /// Writes the header, computes the CRC-32C and returns the batch (base offset 0).
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        let batch_length = (HEADER_BYTES - LOG_OVERHEAD + self.records.len()) as i32;
        out.extend_from_slice(&0i64.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
        out.push(MAGIC_V2);
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&(self.count - 1).max(0).to_be_bytes());
        out.extend_from_slice(&self.base_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.records);
        let crc = compute_crc(&out);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

/// Batch attribute bit: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: u16 = 0x10;
/// Batch attribute bit: a control batch (transaction marker).
pub const ATTR_CONTROL: u16 = 0x20;

/// A transaction marker: a control batch of one record whose key is
/// `version i16 = 0, type i16 (0 abort, 1 commit)` and whose value is
/// `version i16 = 0, coordinatorEpoch i32`, from producer `producer_id` at `producer_epoch`.
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&i16::from(commit).to_be_bytes());
    let mut value = [0u8; 6];
    value[2..6].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::new(timestamp_ms).producer(producer_id, producer_epoch, -1);
    b.attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL;
    b.push(Some(&key), &value, 0);
    b.finish()
}

/// Whether a control batch is a commit marker (`Some(true)`), an abort marker
/// (`Some(false)`), or not a marker we know (`None`).
pub fn marker_kind(batch: &[u8]) -> Option<bool> {
    let h = crate::batch::BatchHeader::parse(batch).ok()?;
    if !h.is_control() {
        return None;
    }
    let recs = crate::records::records(batch).ok()?;
    let key = recs.first()?.key?;
    if key.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// The coordinator epoch a marker carries (its value: version int16, coordinator epoch
/// int32), or `None` if `batch` is not a marker we can read.
pub fn marker_coordinator_epoch(batch: &[u8]) -> Option<i32> {
    marker_kind(batch)?;
    let recs = crate::records::records(batch).ok()?;
    let value = recs.first()?.value?;
    let epoch: [u8; 4] = value.get(2..6)?.try_into().ok()?;
    Some(i32::from_be_bytes(epoch))
}

/// A batch of `records` records of `record_bytes` value bytes each (keyless), for tests and
/// benchmarks. Values are a repeating pattern seeded by `seed`.
pub fn filler_batch(records: usize, record_bytes: usize, timestamp_ms: i64, seed: u8) -> Vec<u8> {
    let value: Vec<u8> = (0..record_bytes)
        .map(|i| seed.wrapping_add(i as u8))
        .collect();
    let mut b = BatchBuilder::new(timestamp_ms);
    for _ in 0..records {
        b.push(None, &value, 0);
    }
    b.finish()
}

/// The keys and values of an uncompressed batch's records (UTF-8, lossy), for internal topics
/// Strand writes itself. Stops at the first malformed record.
pub fn plain_records(batch: &[u8]) -> Vec<(String, String)> {
    use crate::varint::get_varlong;
    let mut out = Vec::new();
    let Ok(h) = crate::BatchHeader::parse(batch) else {
        return out;
    };
    if h.attributes & 0x7 != 0 || batch.len() < HEADER_BYTES {
        return out;
    }
    let mut rest = &batch[HEADER_BYTES..];
    let next = |rest: &mut &[u8]| -> Option<i64> {
        let (v, n) = get_varlong(rest)?;
        *rest = &rest[n..];
        Some(v)
    };
    for _ in 0..h.records_count.max(0) {
        let parsed = (|| {
            let len = usize::try_from(next(&mut rest)?).ok()?;
            let mut rec = rest.get(..len)?;
            rest = &rest[len..];
            rec = rec.get(1..)?; // attributes
            next(&mut rec)?; // timestamp delta
            next(&mut rec)?; // offset delta
            let klen = next(&mut rec)?;
            let key = if klen < 0 {
                String::new()
            } else {
                let k = rec.get(..klen as usize)?;
                rec = &rec[klen as usize..];
                String::from_utf8_lossy(k).into_owned()
            };
            let vlen = next(&mut rec)?;
            let value = if vlen < 0 {
                String::new()
            } else {
                String::from_utf8_lossy(rec.get(..vlen as usize)?).into_owned()
            };
            Some((key, value))
        })();
        match parsed {
            Some(kv) => out.push(kv),
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_records_read_back_what_was_built() {
        let mut b = BatchBuilder::new(5);
        b.push(Some(b"k1"), b"v1", 0);
        b.push(None, b"v2", 1);
        let batch = b.finish();
        assert_eq!(
            plain_records(&batch),
            vec![
                ("k1".to_string(), "v1".to_string()),
                (String::new(), "v2".to_string())
            ]
        );
    }

    #[test]
    fn control_batches_are_valid_markers() {
        for commit in [false, true] {
            let batch = control_batch(42, 3, commit, 7, 1000);
            let h = crate::batch::validate(&batch).expect("valid batch");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!((h.producer_id, h.producer_epoch), (42, 3));
            assert_eq!(marker_kind(&batch), Some(commit));
        }
        let plain = BatchBuilder::new(0).finish();
        assert_eq!(marker_kind(&plain), None);
    }
}
