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
//! Compressed sections are walked through a decompressing reader (gzip, LZ4, zstd), so a
//! bomb costs the time to inflate up to `max_plain_bytes` but never that much memory.
//!
//! Sans-IO like the rest of the crate: the broker decides where to run it (compressed batches
//! on a helper thread, since decompression can take a while).

use std::fmt;

use crate::batch::Compression;
use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::compression::{decompress_bounded, decompressing_reader};
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

/// Checks a produced batch whose header and CRC `crate::batch::validate` accepted, all at
/// once (see [`check_produced_yielding`]).
pub fn check_produced(batch: &[u8], max_plain_bytes: usize) -> Result<Checked, Invalid> {
    futures_lite::future::block_on(check_produced_yielding(batch, max_plain_bytes, || {
        std::future::ready(())
    }))
}

/// Checks a produced batch, awaiting `yield_now()` after every `YIELD_EVERY_BYTES` of
/// decompressed output: a runtime passes its own yield, so a large compressed batch (or a
/// bomb) is checked on the thread that received it without holding that thread's other
/// work for more than a moment.
pub async fn check_produced_yielding<Y: std::future::Future<Output = ()>>(
    batch: &[u8],
    max_plain_bytes: usize,
    yield_now: impl FnMut() -> Y,
) -> Result<Checked, Invalid> {
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
    let count = h.records_count as usize;
    let codec_error = |e: String| {
        if e.contains("size limit") {
            Invalid::TooLarge {
                limit: max_plain_bytes,
            }
        } else {
            Invalid::Codec(format!("records do not decompress: {e}"))
        }
    };
    if codec == Compression::None {
        return walk(
            &mut Slice {
                data: section,
                at: 0,
            },
            count,
        )
        .await;
    }
    match decompressing_reader(codec, section).map_err(|e| codec_error(e.0))? {
        // Streamed: memory stays at one buffer however large the output.
        Some(reader) => {
            walk(
                &mut Stream {
                    reader,
                    buf: vec![0; STREAM_BUFFER_BYTES],
                    pos: 0,
                    len: 0,
                    consumed: 0,
                    limit: max_plain_bytes as u64,
                    since_yield: 0,
                    yield_now,
                },
                count,
            )
            .await
        }
        None => {
            let plain = decompress_bounded(codec, section, max_plain_bytes)
                .map_err(|e| codec_error(e.0))?;
            walk(
                &mut Slice {
                    data: &plain,
                    at: 0,
                },
                count,
            )
            .await
        }
    }
}

/// Buffer of the streaming walk over a decompressing reader.
const STREAM_BUFFER_BYTES: usize = 64 << 10;

/// Where the records are read from: a slice (plain batches) or a decompressing stream. Both
/// count what they have consumed; `Ok(None)` / `Ok(false)` means the bytes ran out.
trait Source {
    async fn varint(&mut self) -> Result<Option<i64>, Invalid>;
    async fn skip(&mut self, n: u64) -> Result<bool, Invalid>;
    fn consumed(&self) -> u64;
    async fn at_end(&mut self) -> Result<bool, Invalid>;
}

struct Slice<'a> {
    data: &'a [u8],
    at: usize,
}

impl Source for Slice<'_> {
    async fn varint(&mut self) -> Result<Option<i64>, Invalid> {
        Ok(get_varlong(&self.data[self.at..]).map(|(v, n)| {
            self.at += n;
            v
        }))
    }

    async fn skip(&mut self, n: u64) -> Result<bool, Invalid> {
        let left = (self.data.len() - self.at) as u64;
        if n > left {
            return Ok(false);
        }
        self.at += n as usize;
        Ok(true)
    }

    fn consumed(&self) -> u64 {
        self.at as u64
    }

    async fn at_end(&mut self) -> Result<bool, Invalid> {
        Ok(self.at == self.data.len())
    }
}

/// Decompressed output between two yields.
pub const YIELD_EVERY_BYTES: u64 = 256 << 10;

struct Stream<'a, F> {
    reader: Box<dyn std::io::Read + 'a>,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    consumed: u64,
    limit: u64,
    since_yield: u64,
    yield_now: F,
}

impl<F, Y> Stream<'_, F>
where
    F: FnMut() -> Y,
    Y: std::future::Future<Output = ()>,
{
    /// Refills the buffer when it is used up; `false` at the end of the output.
    async fn fill(&mut self) -> Result<bool, Invalid> {
        if self.pos < self.len {
            return Ok(true);
        }
        if self.since_yield >= YIELD_EVERY_BYTES {
            self.since_yield = 0;
            (self.yield_now)().await;
        }
        let n = loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Invalid::Codec(format!("records do not decompress: {e}"))),
            }
        };
        (self.pos, self.len) = (0, n);
        self.since_yield += n as u64;
        Ok(n > 0)
    }

    fn take(&mut self, n: usize) {
        self.pos += n;
        self.consumed += n as u64;
    }

    fn check_limit(&self) -> Result<(), Invalid> {
        if self.consumed > self.limit {
            return Err(Invalid::TooLarge {
                limit: self.limit as usize,
            });
        }
        Ok(())
    }
}

impl<F, Y> Source for Stream<'_, F>
where
    F: FnMut() -> Y,
    Y: std::future::Future<Output = ()>,
{
    async fn varint(&mut self) -> Result<Option<i64>, Invalid> {
        let mut bytes = [0u8; 10];
        for i in 0..bytes.len() {
            if !self.fill().await? {
                return Ok(None);
            }
            bytes[i] = self.buf[self.pos];
            self.take(1);
            if bytes[i] & 0x80 == 0 {
                self.check_limit()?;
                return Ok(get_varlong(&bytes[..=i]).map(|(v, _)| v));
            }
        }
        Ok(None)
    }

    async fn skip(&mut self, mut n: u64) -> Result<bool, Invalid> {
        while n > 0 {
            if !self.fill().await? {
                return Ok(false);
            }
            let step = n.min((self.len - self.pos) as u64) as usize;
            self.take(step);
            self.check_limit()?;
            n -= step as u64;
        }
        Ok(true)
    }

    fn consumed(&self) -> u64 {
        self.consumed
    }

    async fn at_end(&mut self) -> Result<bool, Invalid> {
        Ok(!self.fill().await?)
    }
}

/// Walks `count` records and requires the section to end right after the last one.
async fn walk(s: &mut impl Source, count: usize) -> Result<Checked, Invalid> {
    let mut keyless = Vec::new();
    for i in 0..count {
        let has_key = record(s, i)
            .await?
            .ok_or_else(|| Invalid::Record(format!("record {i} is malformed")))?;
        if !has_key {
            keyless.push(i as i32);
        }
    }
    if !s.at_end().await? {
        return Err(Invalid::Record(format!(
            "bytes after the last of {count} records"
        )));
    }
    Ok(Checked {
        keyless,
        plain_bytes: s.consumed() as usize,
    })
}

/// Decodes record `index`: whether it has a key, or `None` if it is malformed.
async fn record(s: &mut impl Source, index: usize) -> Result<Option<bool>, Invalid> {
    let Some(len) = s.varint().await?.and_then(|l| u64::try_from(l).ok()) else {
        return Ok(None);
    };
    let end = s.consumed().saturating_add(len);
    // attributes, timestamp delta, then the offset delta, which must run 0, 1, 2, ...
    if !s.skip(1).await?
        || s.varint().await?.is_none()
        || s.varint().await? != Some(index as i64)
        || s.consumed() > end
    {
        return Ok(None);
    }
    // Key, value, then each header's key (never null) and value: a length, then the bytes.
    let Some(has_key) = field(s, end, true).await? else {
        return Ok(None);
    };
    if field(s, end, true).await?.is_none() {
        return Ok(None);
    }
    let Some(headers) = s.varint().await? else {
        return Ok(None);
    };
    if headers < 0 || s.consumed() > end {
        return Ok(None);
    }
    for _ in 0..headers {
        if field(s, end, false).await?.is_none()
            || field(s, end, true).await?.is_none()
            || s.consumed() > end
        {
            return Ok(None);
        }
    }
    Ok((s.consumed() == end).then_some(has_key))
}

/// A length-prefixed field of a record ending at `end`: `Some(present)`, or `None` if
/// malformed (a null where none is allowed, or bytes past the record's end).
async fn field(s: &mut impl Source, end: u64, nullable: bool) -> Result<Option<bool>, Invalid> {
    let Some(n) = s.varint().await? else {
        return Ok(None);
    };
    if n < 0 {
        return Ok(nullable.then_some(false));
    }
    let n = n as u64;
    if s.consumed().saturating_add(n) > end || !s.skip(n).await? {
        return Ok(None);
    }
    Ok(Some(true))
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
