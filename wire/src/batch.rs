//! The Kafka v2 record-batch header (magic 2), read in place.
//!
//! ```text
//! offset  size  field                  covered by CRC
//!   0      8    baseOffset             no  (the broker assigns it on append)
//!   8      4    batchLength            no  (bytes after this field)
//!  12      4    partitionLeaderEpoch   no
//!  16      1    magic (= 2)            no
//!  17      4    crc (CRC-32C)          -
//!  21      2    attributes             yes ... to the end of the batch
//!  23      4    lastOffsetDelta
//!  27      8    baseTimestamp
//!  35      8    maxTimestamp
//!  43      8    producerId
//!  51      2    producerEpoch
//!  53      4    baseSequence
//!  57      4    recordsCount
//!  61      -    records (possibly compressed)
//! ```
//!
//! All integers are big-endian. Strand stores batches verbatim, so a fetch can hand back the
//! very bytes a producer sent (with the base offset filled in).

use std::fmt;

/// Bytes before the records: the fixed header size of a v2 batch.
pub const HEADER_BYTES: usize = 61;
/// Bytes before `batchLength` counts: `baseOffset` + `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// Where the CRC-covered part starts (the `attributes` field).
pub const CRC_START: usize = 21;
/// The only record-batch format Strand accepts.
pub const MAGIC_V2: u8 = 2;

/// Compression codec from the low three attribute bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// Why a batch was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than a header, or than `batchLength` announces.
    Truncated { needed: usize, have: usize },
    /// `batchLength` smaller than a header or not matching the bytes given.
    BadLength { batch_length: i32, have: usize },
    /// Magic byte other than 2 (v0/v1 message sets are not accepted).
    BadMagic(u8),
    /// CRC-32C over attributes..end does not match the header.
    BadCrc { stored: u32, computed: u32 },
    /// Attributes name a codec Kafka does not define.
    BadCompression(u16),
    /// Negative record count or offset delta.
    BadCounts {
        records: i32,
        last_offset_delta: i32,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated { needed, have } => {
                write!(
                    f,
                    "record batch truncated: needs {needed} bytes, have {have}"
                )
            }
            BatchError::BadLength { batch_length, have } => {
                write!(
                    f,
                    "record batch length {batch_length} does not fit {have} bytes"
                )
            }
            BatchError::BadMagic(m) => write!(f, "record batch magic {m} unsupported (need 2)"),
            BatchError::BadCrc { stored, computed } => write!(
                f,
                "record batch CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            BatchError::BadCompression(a) => write!(f, "unknown compression in attributes {a:#x}"),
            BatchError::BadCounts {
                records,
                last_offset_delta,
            } => write!(
                f,
                "bad record counts: records={records} lastOffsetDelta={last_offset_delta}"
            ),
        }
    }
}

impl std::error::Error for BatchError {}

impl BatchError {
    /// The Kafka error code a producer gets for this batch.
    pub fn error_code(&self) -> crate::ErrorCode {
        match self {
            BatchError::BadCrc { .. } | BatchError::Truncated { .. } => {
                crate::ErrorCode::CorruptMessage
            }
            BatchError::BadMagic(_) => crate::ErrorCode::UnsupportedForMessageFormat,
            _ => crate::ErrorCode::InvalidRecord,
        }
    }
}

/// The decoded fixed header of one v2 batch (a copy of 61 bytes' worth of fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: u8,
    pub crc: u32,
    pub attributes: u16,
    pub last_offset_delta: i32,
    pub base_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

impl BatchHeader {
    /// Reads the header at the front of `buf` without checking the CRC or the length.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::Truncated {
                needed: HEADER_BYTES,
                have: buf.len(),
            });
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length: be_i32(buf, 8),
            partition_leader_epoch: be_i32(buf, 12),
            magic: buf[16],
            crc: be_i32(buf, 17) as u32,
            attributes: be_u16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp_ms: be_i64(buf, 27),
            max_timestamp_ms: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_u16(buf, 51) as i16,
            base_sequence: be_i32(buf, 53),
            records_count: be_i32(buf, 57),
        })
    }

    /// Total bytes of this batch on the wire and on disk.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    pub fn compression(&self) -> Result<Compression, BatchError> {
        Ok(match self.attributes & 0x7 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return Err(BatchError::BadCompression(self.attributes)),
        })
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

/// Length of the batch at the front of `buf` from its `batchLength` field, if the 12-byte
/// prefix is there. Used to walk a run of batches.
pub fn peek_total_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let batch_length = be_i32(buf, 8);
    if batch_length < (HEADER_BYTES - LOG_OVERHEAD) as i32 {
        return None;
    }
    Some(LOG_OVERHEAD + batch_length as usize)
}

/// CRC-32C of the covered part of a whole batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// Validates that `buf` is exactly one well-formed v2 batch: magic, lengths, counts, codec and
/// CRC-32C. Returns its header.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::BadMagic(header.magic));
    }
    if header.batch_length < (HEADER_BYTES - LOG_OVERHEAD) as i32 {
        return Err(BatchError::BadLength {
            batch_length: header.batch_length,
            have: buf.len(),
        });
    }
    if header.total_len() > buf.len() {
        return Err(BatchError::Truncated {
            needed: header.total_len(),
            have: buf.len(),
        });
    }
    if header.total_len() != buf.len() {
        return Err(BatchError::BadLength {
            batch_length: header.batch_length,
            have: buf.len(),
        });
    }
    if header.records_count < 0 || header.last_offset_delta < 0 {
        return Err(BatchError::BadCounts {
            records: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    header.compression()?;
    let computed = compute_crc(buf);
    if computed != header.crc {
        return Err(BatchError::BadCrc {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Writes `base_offset` into the batch header in place (not covered by the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes the partition leader epoch into the batch header in place (not covered by the CRC;
/// a leader stamps its epoch on every batch it appends, as Kafka's does).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BatchBuilder;

    fn sample() -> Vec<u8> {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        b.push(Some(b"k1"), b"hello", 0);
        b.push(None, b"world", 5);
        b.finish()
    }

    #[test]
    fn valid_batch_round_trips() {
        let bytes = sample();
        let h = validate(&bytes).expect("valid");
        assert_eq!(h.records_count, 2);
        assert_eq!(h.last_offset_delta, 1);
        assert_eq!(h.max_timestamp_ms, 1_700_000_000_005);
        assert_eq!(h.total_len(), bytes.len());
        assert_eq!(peek_total_len(&bytes), Some(bytes.len()));
    }

    #[test]
    fn base_offset_is_outside_the_crc() {
        let mut bytes = sample();
        set_base_offset(&mut bytes, 42);
        let h = validate(&bytes).expect("still valid");
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.last_offset(), 43);
    }

    #[test]
    fn every_single_bit_flip_in_the_covered_part_is_caught() {
        let bytes = sample();
        for i in CRC_START..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[i] ^= 1 << bit;
                assert!(validate(&bad).is_err(), "flip at byte {i} bit {bit} passed");
            }
        }
    }

    #[test]
    fn truncation_and_bad_magic_are_refused() {
        let bytes = sample();
        assert!(matches!(
            validate(&bytes[..30]),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            validate(&bytes[..bytes.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        let mut bad = bytes.clone();
        bad[16] = 1;
        assert_eq!(validate(&bad), Err(BatchError::BadMagic(1)));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            validate(&longer),
            Err(BatchError::BadLength { .. })
        ));
    }
}
