//! Arbitrary bytes as a record batch: validation must refuse or accept, never panic, and
//! whatever it accepts must have a consistent header. The record-level checks a produced
//! batch goes through (`validate::check_produced`: counts, records, bounded decompression)
//! and the record reader run on the same bytes without a CRC in the way, and each codec's
//! bounded decompression on the raw bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_wire::batch::{peek_total_len, validate, Compression};
use strand_wire::compression::decompress_bounded;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let _ = peek_total_len(data);
    if let Ok(h) = validate(data) {
        assert_eq!(h.total_len(), data.len());
        assert!(h.last_offset() >= h.base_offset);
    }
    if let Ok(c) = strand_wire::validate::check_produced(data, LIMIT) {
        assert!(c.plain_bytes <= LIMIT.max(data.len()));
    }
    let _ = strand_wire::records::records(data);
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        if let Ok(out) = decompress_bounded(codec, data, LIMIT) {
            assert!(out.len() <= LIMIT);
        }
    }
});
