//! Shared by the crash-test child (`strand-log-writer`) and the tests that check it: the
//! batch written for a sequence number, and the log settings (small segments so crashes land
//! in rolls too).

use crate::storage::LogConfig;

/// The batch the crash child writes for `seq`: a few records whose timestamp and bytes derive
/// from `seq`, so every batch differs and can be rebuilt to compare byte for byte.
pub fn crash_batch(seq: u64) -> Vec<u8> {
    let records = 1 + (seq % 8) as usize;
    let bytes = 200 + (seq % 1500) as usize;
    strand_wire::builder::filler_batch(records, bytes, seq as i64, seq as u8)
}

/// Small segments (rolls every ~256 KiB), index entries every 4 KiB.
pub fn crash_log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        index_interval_bytes: 4096,
        ..LogConfig::default()
    }
}
