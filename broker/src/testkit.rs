//! Shared by the crash-test child (`strand-log-writer`) and the tests that check it: the
//! batch written for a sequence number, and the log settings (small segments so crashes land
//! in rolls too); and [`run_local`], which the storage tests drive their logs with.

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
        // The zero-fill (off by default) is the path with more to get wrong after a crash.
        preallocate: true,
        ..LogConfig::default()
    }
}

/// Runs a test body on a fresh glommio executor of its own and waits for it (a panic in the
/// body fails the caller).
pub fn run_local<F: std::future::Future<Output = ()> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("test body");
}
