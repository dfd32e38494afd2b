//! The records section of a compressed v2 batch (sans-IO): Kafka's four codecs.
//!
//! The batch header stays uncompressed; only the bytes after it (the records) are compressed,
//! and the codec is in the low three attribute bits. Formats as Kafka's clients write them:
//! gzip streams, snappy in the xerial framing the Java client uses (raw snappy is accepted on
//! read, as librdkafka may send it), LZ4 frames, zstd frames.

use std::io::{Read, Write};

use crate::batch::{compute_crc, BatchHeader, Compression, HEADER_BYTES, LOG_OVERHEAD};

/// Most bytes a records section may decompress to (a bomb guard; Kafka batches are far
/// smaller than this).
pub const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

#[derive(Debug)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CodecError {}

fn err(codec: Compression, e: impl std::fmt::Display) -> CodecError {
    CodecError(format!("{codec:?}: {e}"))
}

/// The codec's attribute bits.
pub fn attribute_bits(codec: Compression) -> u16 {
    match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// Parses Kafka's `compression.type` names.
pub fn parse_codec(name: &str) -> Option<Compression> {
    Some(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => return None,
    })
}

pub fn compress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).map_err(|e| err(codec, e))?;
            e.finish().map_err(|e| err(codec, e))
        }
        Compression::Snappy => {
            // xerial framing: magic, version 1, compatible version 1, then (length, block)*.
            let mut out = Vec::with_capacity(data.len() / 2 + 32);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in data.chunks(32 << 10) {
                let block = enc.compress_vec(chunk).map_err(|e| err(codec, e))?;
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).map_err(|e| err(codec, e))?;
            e.finish().map_err(|e| err(codec, e))
        }
        Compression::Zstd => zstd::bulk::compress(data, 1).map_err(|e| err(codec, e)),
    }
}

pub fn decompress(codec: Compression, data: &[u8]) -> Result<Vec<u8>, CodecError> {
    decompress_bounded(codec, data, DECOMPRESSED_BYTES_MAX)
}

/// Decompresses `data`, failing ("past the size limit") as soon as the output would exceed
/// `max_bytes`: a small bomb costs at most `max_bytes` of memory and the time to produce it.
pub fn decompress_bounded(
    codec: Compression,
    data: &[u8],
    max_bytes: usize,
) -> Result<Vec<u8>, CodecError> {
    let limit = max_bytes as u64;
    let read_all = |r: &mut dyn Read| -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        r.take(limit + 1)
            .read_to_end(&mut out)
            .map_err(|e| err(codec, e))?;
        if out.len() as u64 > limit {
            return Err(err(codec, "decompresses past the size limit"));
        }
        Ok(out)
    };
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_all(&mut flate2::read::GzDecoder::new(data)),
        Compression::Snappy if data.starts_with(XERIAL_MAGIC) => {
            let mut rest = data
                .get(16..)
                .ok_or_else(|| err(codec, "short xerial header"))?;
            let mut out = Vec::new();
            let mut dec = snap::raw::Decoder::new();
            while !rest.is_empty() {
                let len = rest
                    .get(..4)
                    .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                    .filter(|&l| l >= 0)
                    .ok_or_else(|| err(codec, "bad xerial block length"))?
                    as usize;
                let block = rest
                    .get(4..4 + len)
                    .ok_or_else(|| err(codec, "truncated xerial block"))?;
                let n = snap::raw::decompress_len(block).map_err(|e| err(codec, e))?;
                if out.len() + n > max_bytes {
                    return Err(err(codec, "decompresses past the size limit"));
                }
                out.extend_from_slice(&dec.decompress_vec(block).map_err(|e| err(codec, e))?);
                rest = &rest[4 + len..];
            }
            Ok(out)
        }
        Compression::Snappy => {
            let n = snap::raw::decompress_len(data).map_err(|e| err(codec, e))?;
            if n > max_bytes {
                return Err(err(codec, "decompresses past the size limit"));
            }
            snap::raw::Decoder::new()
                .decompress_vec(data)
                .map_err(|e| err(codec, e))
        }
        Compression::Lz4 => read_all(&mut lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => {
            read_all(&mut zstd::stream::read::Decoder::new(data).map_err(|e| err(codec, e))?)
        }
    }
}

/// A reader of `data` decompressed, for the codecs that stream (gzip, LZ4 frames, zstd):
/// validation walks the records through it without holding the whole output. `None` for
/// snappy, whose Kafka framings are block formats (their size is known before decoding, and
/// snappy cannot compress more than ~21:1, so no bomb gets far).
pub fn decompressing_reader<'a>(
    codec: Compression,
    data: &'a [u8],
) -> Result<Option<Box<dyn Read + 'a>>, CodecError> {
    Ok(match codec {
        Compression::Gzip => Some(Box::new(flate2::read::GzDecoder::new(data))),
        Compression::Lz4 => Some(Box::new(lz4_flex::frame::FrameDecoder::new(data))),
        Compression::Zstd => Some(Box::new(
            zstd::stream::read::Decoder::new(data).map_err(|e| err(codec, e))?,
        )),
        Compression::None | Compression::Snappy => None,
    })
}

/// Compresses an uncompressed batch's records section: same header (codec bits set), new
/// length and CRC.
pub fn compress_batch(batch: &[u8], codec: Compression) -> Result<Vec<u8>, CodecError> {
    if codec == Compression::None || batch.len() < HEADER_BYTES {
        return Ok(batch.to_vec());
    }
    let body = compress(codec, &batch[HEADER_BYTES..])?;
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&batch[..HEADER_BYTES]);
    out.extend_from_slice(&body);
    finish(&mut out, attribute_bits(codec));
    Ok(out)
}

/// The same batch with its records section decompressed (codec bits cleared, CRC redone), so
/// `records::records` can read it.
pub fn decompress_batch(batch: &[u8]) -> Result<Vec<u8>, CodecError> {
    let h = BatchHeader::parse(batch).map_err(|e| CodecError(e.to_string()))?;
    let codec = h.compression().map_err(|e| CodecError(e.to_string()))?;
    let end = h.total_len().min(batch.len());
    let body = decompress(codec, &batch[HEADER_BYTES.min(end)..end])?;
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&batch[..HEADER_BYTES]);
    out.extend_from_slice(&body);
    finish(&mut out, 0);
    Ok(out)
}

/// Marks a batch whose records section was replaced by its decompressed bytes as
/// uncompressed: codec bits cleared, length and CRC redone.
pub fn reseal_plain(out: &mut [u8]) {
    finish(out, 0);
}

fn finish(out: &mut [u8], codec_bits: u16) {
    let attributes = (u16::from_be_bytes([out[21], out[22]]) & !0x7) | codec_bits;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let batch_length = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = compute_crc(out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate;
    use crate::builder::BatchBuilder;

    #[test]
    fn every_codec_round_trips_a_batch() {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        for i in 0..200 {
            b.push(Some(format!("k{i}").as_bytes()), &[b'x'; 300], i);
        }
        let plain = b.finish();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let c = compress_batch(&plain, codec).expect("compress");
            let h = validate(&c).expect("valid compressed batch");
            assert_eq!(h.compression().expect("codec"), codec);
            assert!(c.len() < plain.len() / 4, "{codec:?} compresses");
            assert_eq!(
                decompress_batch(&c).expect("decompress"),
                plain,
                "{codec:?}"
            );
        }
        // Raw (unframed) snappy is read too.
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"hello")
            .expect("raw");
        assert_eq!(
            decompress(Compression::Snappy, &raw).expect("raw"),
            b"hello"
        );
        assert!(decompress(Compression::Gzip, b"not gzip").is_err());
    }
}
