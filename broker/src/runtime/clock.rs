//! Wall-clock time in milliseconds since the Unix epoch (record timestamps, timeouts that
//! survive a restart). Every module takes the time from here, so a simulated clock has one
//! place to go.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
