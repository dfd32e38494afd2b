//! What a broker checks of a produced batch beyond its header and CRC, as Kafka's
//! `LogValidator` does: the CRC only proves the bytes arrived as the client wrote them, not
//! that they make sense. A batch that passes here can be read back by any client and
//! compacted by the cleaner.
//!
//! - `recordsCount` >= 1 and `lastOffsetDelta + 1 == recordsCount` (Kafka: "Inconsistent
//!   batch offset range and record count");
//! - the records section (decompressed, within `max_plain_bytes`) holds exactly
//!   `recordsCount` records, each fully decodable — length, attributes, timestamp and offset
//!   deltas, key, value, headers — whose declared length matches what it holds, with offset
//!   deltas 0, 1, 2, ... and nothing after the last one.
//!
//! Sans-IO like the rest of the crate: the broker decides where to run it (compressed batches
//! on a helper thread, since decompression can take a while).

use std::fmt;

use crate::batch::Compression;
use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::compression::decompress_bounded;
use crate::varint::get_varlong;

/// Why a produced batch is refused, and the Kafka error the producer gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Counts that contradict each other (INVALID_RECORD).
    Counts(String),
    /// A record that does not decode, or bytes left over (INVALID_RECORD).
    Record(String),
    /// The records section does not decompress with the batch's codec (CORRUPT_MESSAGE).
    Codec(String),
    /// Decompresses past the limit (INVALID_RECORD, as Kafka answers a record too large to
    /// decompress).
    TooLarge { limit: usize },
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Counts(m) | Invalid::Record(m) | Invalid::Codec(m) => f.write_str(m),
            Invalid::TooLarge { limit } => {
                write!(f, "records decompress to more than {limit} bytes")
            }
        }
    }
}

impl Invalid {
    pub fn error_code(&self) -> crate::ErrorCode {
        match self {
            Invalid::Codec(_) => crate::ErrorCode::CorruptMessage,
            _ => crate::ErrorCode::InvalidRecord,
        }
    }
}

/// What the check learned: which records (by index in the batch) have a null key (refused on
/// compacted topics, each named in the response as Kafka does, KIP-467) and the size of the
/// records section once decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub keyless: Vec<i32>,
    pub plain_bytes: usize,
}

/// Checks a produced batch whose header and CRC `crate::batch::validate` accepted.
pub fn check_produced(batch: &[u8], max_plain_bytes: usize) -> Result<Checked, Invalid> {
    let h = BatchHeader::parse(batch).map_err(|e| Invalid::Record(e.to_string()))?;
    if h.records_count < 1 {
        return Err(Invalid::Counts(format!(
            "invalid record count {} for a produced batch",
            h.records_count
        )));
    }
    if i64::from(h.last_offset_delta) + 1 != i64::from(h.records_count) {
        return Err(Invalid::Counts(format!(
            "inconsistent batch offset range and record count: lastOffsetDelta {} for {} records",
            h.last_offset_delta, h.records_count
        )));
    }
    let end = h.total_len().min(batch.len());
    let section = &batch[HEADER_BYTES.min(end)..end];
    let codec = h.compression().map_err(|e| Invalid::Codec(e.to_string()))?;
    let plain;
    let body: &[u8] = if codec == Compression::None {
        section
    } else {
        plain = decompress_bounded(codec, section, max_plain_bytes).map_err(|e| {
            if e.0.contains("size limit") {
                Invalid::TooLarge {
                    limit: max_plain_bytes,
                }
            } else {
                Invalid::Codec(format!("records do not decompress: {e}"))
            }
        })?;
        &plain
    };
    let mut at = 0;
    let mut keyless = Vec::new();
    for i in 0..h.records_count as usize {
        let (next, has_key) = record(body, at, i)
            .ok_or_else(|| Invalid::Record(format!("record {i} is malformed")))?;
        if !has_key {
            keyless.push(i as i32);
        }
        at = next;
    }
    if at != body.len() {
        return Err(Invalid::Record(format!(
            "{} bytes after the last of {} records",
            body.len() - at,
            h.records_count
        )));
    }
    Ok(Checked {
        keyless,
        plain_bytes: body.len(),
    })
}

/// Decodes record `index` at `start`: where the next one starts, and whether it has a key.
fn record(body: &[u8], start: usize, index: usize) -> Option<(usize, bool)> {
    let mut at = start;
    let varint = |at: &mut usize, stop: usize| -> Option<i64> {
        let (v, n) = get_varlong(body.get(*at..stop)?)?;
        *at += n;
        Some(v)
    };
    let len = usize::try_from(varint(&mut at, body.len())?).ok()?;
    let end = at.checked_add(len).filter(|&e| e <= body.len())?;
    at = at.checked_add(1).filter(|&a| a <= end)?; // attributes
    let _timestamp_delta = varint(&mut at, end)?;
    if varint(&mut at, end)? != index as i64 {
        return None; // offset deltas must run 0, 1, 2, ...
    }
    let bytes = |at: &mut usize, nullable: bool| -> Option<bool> {
        let n = varint(at, end)?;
        if n < 0 {
            return nullable.then_some(false);
        }
        *at = at
            .checked_add(usize::try_from(n).ok()?)
            .filter(|&s| s <= end)?;
        Some(true)
    };
    let has_key = bytes(&mut at, true)?;
    bytes(&mut at, true)?; // value
    let headers = varint(&mut at, end)?;
    if headers < 0 {
        return None;
    }
    for _ in 0..headers {
        // A header key is a non-null string; its value may be null.
        bytes(&mut at, false)?;
        bytes(&mut at, true)?;
    }
    (at == end).then_some((end, has_key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{compute_crc, validate};
    use crate::builder::BatchBuilder;
    use crate::compression::compress_batch;

    const LIMIT: usize = 1 << 20;

    fn sample() -> Vec<u8> {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        b.push(Some(b"a"), b"1", 0);
        b.push(None, b"2", 1);
        b.push_tombstone(b"c", 2);
        b.finish()
    }

    fn reseal(mut b: Vec<u8>) -> Vec<u8> {
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(validate(&b).is_ok(), "header and CRC still valid");
        b
    }

    #[test]
    fn good_batches_pass_in_every_codec() {
        let plain = sample();
        let c = check_produced(&plain, LIMIT).expect("valid");
        assert_eq!(c.keyless, vec![1]);
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let z = compress_batch(&plain, codec).expect("compress");
            assert_eq!(check_produced(&z, LIMIT), Ok(c.clone()), "{codec:?}");
        }
    }

    #[test]
    fn counts_that_lie_are_refused_even_with_a_valid_crc() {
        let mut b = sample();
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes()); // recordsCount
        assert!(matches!(
            check_produced(&reseal(b), LIMIT),
            Err(Invalid::Counts(_))
        ));
        let mut b = sample();
        b[23..27].copy_from_slice(&i32::MAX.to_be_bytes()); // lastOffsetDelta
        assert!(matches!(
            check_produced(&reseal(b), LIMIT),
            Err(Invalid::Counts(_))
        ));
        let mut b = sample();
        b[57..61].copy_from_slice(&2i32.to_be_bytes());
        b[23..27].copy_from_slice(&1i32.to_be_bytes());
        assert!(
            matches!(check_produced(&reseal(b), LIMIT), Err(Invalid::Record(_))),
            "a third record left over"
        );
    }

    #[test]
    fn garbage_records_and_wrong_codecs_are_refused() {
        let mut b = sample();
        for x in &mut b[HEADER_BYTES..] {
            *x = 0x7f;
        }
        assert!(matches!(
            check_produced(&reseal(b), LIMIT),
            Err(Invalid::Record(_))
        ));
        let mut b = sample();
        b[22] |= 1; // says gzip, is not
        let e = check_produced(&reseal(b), LIMIT).unwrap_err();
        assert_eq!(e.error_code(), crate::ErrorCode::CorruptMessage);
    }

    #[test]
    fn decompression_bombs_stop_at_the_limit() {
        let mut big = BatchBuilder::new(0);
        big.push(Some(b"k"), &vec![0u8; 4 << 20], 0);
        let z = compress_batch(&big.finish(), Compression::Zstd).expect("compress");
        assert!(z.len() < 4096, "a bomb: {} bytes", z.len());
        assert_eq!(
            check_produced(&z, LIMIT),
            Err(Invalid::TooLarge { limit: LIMIT })
        );
    }

    #[test]
    fn no_input_panics() {
        let base = sample();
        for i in HEADER_BYTES..base.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut b = base.clone();
                b[i] = v;
                let _ = check_produced(&reseal_lenient(b), LIMIT);
            }
        }
    }

    fn reseal_lenient(mut b: Vec<u8>) -> Vec<u8> {
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }
}
