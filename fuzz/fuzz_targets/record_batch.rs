//! Arbitrary bytes as a record batch: validation must refuse or accept, never panic, and
//! whatever it accepts must have a consistent header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strand_wire::batch::{peek_total_len, validate};

fuzz_target!(|data: &[u8]| {
    let _ = peek_total_len(data);
    if let Ok(h) = validate(data) {
        assert_eq!(h.total_len(), data.len());
        assert!(h.last_offset() >= h.base_offset);
    }
});
