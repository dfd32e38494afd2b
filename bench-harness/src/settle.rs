//! When a warm-up is over. A JVM broker on one core starts slow (the interpreter, then the
//! JIT), builds a backlog, and drains it: its first 20-40 s say nothing about its steady
//! state. `compare-brokers` therefore warms each broker for at least a minimum and then until
//! the per-second publish p99 has *settled*, at most a maximum — the same rule for both.
//!
//! Settled means, over the last [`WINDOW`] seconds compared with the [`WINDOW`] before:
//! - every second acknowledged something (no stall),
//! - the send rate is steady: within [`RATE_TOLERANCE`] of the target rate (a producer that
//!   is still catching up on a backlog sends above it), or of its own median at `max` rate,
//! - the p99 is no longer falling: the median per-second p99 is at least half of the
//!   previous window's (a cold broker's p99 falls from seconds to milliseconds; noise of a
//!   steady one goes both ways).
//!
//! Sans-IO: the run loop hands in one [`Second`] per interval.

/// Seconds in each of the two windows compared.
pub const WINDOW: usize = 5;
/// How far a settled second's send rate may be from the target (or the median).
pub const RATE_TOLERANCE: f64 = 0.10;
/// The current window's median p99 must be at least this fraction of the previous one's.
pub const FALLING_RATIO: f64 = 0.5;

/// One reporting interval, as the rule sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Second {
    /// Publish p99 of the acks in this second; `None` when nothing was acknowledged.
    pub p99_us: Option<u64>,
    /// Messages handed to the client per second.
    pub send_rate: f64,
}

/// Whether the latency has settled at the end of `seconds` (oldest first). `target_rate` is
/// the workload's fixed rate (messages/s) or `None` at `max`.
pub fn settled(seconds: &[Second], target_rate: Option<f64>) -> bool {
    if seconds.len() < 2 * WINDOW {
        return false;
    }
    let (before, now) = seconds[seconds.len() - 2 * WINDOW..].split_at(WINDOW);
    let (Some(p99_now), Some(p99_before)) = (median_p99(now), median_p99(before)) else {
        return false;
    };
    let rates: Vec<f64> = now.iter().map(|s| s.send_rate).collect();
    let reference = target_rate.unwrap_or_else(|| median(&rates));
    let steady = reference > 0.0
        && rates
            .iter()
            .all(|r| (r - reference).abs() <= RATE_TOLERANCE * reference);
    steady && p99_now >= FALLING_RATIO * p99_before
}

/// The median p99 of a window; `None` if a second in it acknowledged nothing.
fn median_p99(window: &[Second]) -> Option<f64> {
    let v: Option<Vec<f64>> = window.iter().map(|s| s.p99_us.map(|p| p as f64)).collect();
    v.map(|v| median(&v))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p99_ms: f64, rate: f64) -> Second {
        Second {
            p99_us: Some((p99_ms * 1000.0) as u64),
            send_rate: rate,
        }
    }

    #[test]
    fn a_steady_broker_settles_after_two_windows() {
        let v: Vec<Second> = (0..10).map(|i| s(3.0 + (i % 3) as f64, 51_200.0)).collect();
        assert!(!settled(&v[..9], Some(51_200.0)));
        assert!(settled(&v, Some(51_200.0)));
    }

    #[test]
    fn a_falling_p99_is_not_settled() {
        // Kafka's cold start measured on one core (e2e p99 per second, ms), then steady.
        let cold = [
            1631.0, 692.0, 307.0, 82.0, 33.0, 57.0, 71.0, 56.0, 47.0, 14.0,
        ];
        let v: Vec<Second> = cold.iter().map(|&p| s(p, 51_200.0)).collect();
        assert!(!settled(&v, Some(51_200.0)));
        let mut v = v;
        for p in [8.7, 27.0, 34.0, 145.0, 76.0] {
            v.push(s(p, 51_200.0));
        }
        assert!(settled(&v, Some(51_200.0)));
    }

    #[test]
    fn a_producer_catching_up_or_a_stall_is_not_settled() {
        let mut v: Vec<Second> = (0..10).map(|_| s(5.0, 51_200.0)).collect();
        v[8].send_rate = 87_000.0; // draining a backlog
        assert!(!settled(&v, Some(51_200.0)));
        let mut v: Vec<Second> = (0..10).map(|_| s(5.0, 51_200.0)).collect();
        v[9].p99_us = None;
        assert!(!settled(&v, Some(51_200.0)));
    }

    #[test]
    fn at_max_rate_the_rate_is_compared_with_its_own_median() {
        let mut v: Vec<Second> = (0..10).map(|_| s(20.0, 200_000.0)).collect();
        assert!(settled(&v, None));
        v[7].send_rate = 120_000.0;
        assert!(!settled(&v, None));
    }
}
