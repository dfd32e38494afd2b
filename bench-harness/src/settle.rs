//! When a warm-up is over. A JVM broker on one core starts slow (the interpreter, then the
//! JIT), builds a backlog, and drains it: its first 20-40 s say nothing about its steady
//! state. `compare-brokers` therefore warms each broker for at least a minimum and then until
//! its latency has *settled*, at most a maximum — the same rule for both.
//!
//! Settled means, over the last [`WINDOW`] seconds compared with the [`WINDOW`] before:
//! - every second acknowledged something (no stall),
//! - the send rate is steady: within [`RATE_TOLERANCE`] of the target rate, or of its own
//!   median at `max` rate,
//! - no backlog is draining: the median per-second p50 is not falling (by more than
//!   [`P50_FALL_TOLERANCE`], or [`P50_FALL_FLOOR_US`] for millisecond medians) — a backlog
//!   delays every message, so it shows in the median, while noise moves only the tail;
//! - at a fixed rate, the median p50 is at most [`FIXED_RATE_P50_US_MAX`]: an asynchronous
//!   client keeps sending on schedule while a broker works through seconds of backlog at
//!   exactly the offered rate, a plateau no trend test sees (measured: Kafka 4.4 on one
//!   core, 10 MB/s, p50 flat at ~5.3 s for several seconds before it fell);
//! - the p99 is no longer collapsing: the median per-second p99 is at least
//!   [`FALLING_RATIO`] of the previous window's.
//!
//! Sans-IO: the run loop hands in one [`Second`] per interval.

/// Seconds in each of the two windows compared.
pub const WINDOW: usize = 5;
/// How far a settled second's send rate may be from the target (or the median).
pub const RATE_TOLERANCE: f64 = 0.10;
/// The current window's median p99 must be at least this fraction of the previous one's.
pub const FALLING_RATIO: f64 = 0.5;
/// The median p50 may fall by this fraction of the previous window's...
pub const P50_FALL_TOLERANCE: f64 = 0.2;
/// ...or by this much (µs), whichever is larger.
pub const P50_FALL_FLOOR_US: f64 = 2_000.0;
/// At a fixed rate a settled broker's median p50 is at most this (µs).
pub const FIXED_RATE_P50_US_MAX: f64 = 50_000.0;

/// One reporting interval, as the rule sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Second {
    /// Publish p50 and p99 of the acks in this second; `None` when nothing was acknowledged.
    pub p50_us: Option<u64>,
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
    let (Some(p99_now), Some(p99_before)) = (
        median_of(now, |s| s.p99_us),
        median_of(before, |s| s.p99_us),
    ) else {
        return false;
    };
    let (Some(p50_now), Some(p50_before)) = (
        median_of(now, |s| s.p50_us),
        median_of(before, |s| s.p50_us),
    ) else {
        return false;
    };
    let rates: Vec<f64> = now.iter().map(|s| s.send_rate).collect();
    let reference = target_rate.unwrap_or_else(|| median(&rates));
    let steady = reference > 0.0
        && rates
            .iter()
            .all(|r| (r - reference).abs() <= RATE_TOLERANCE * reference);
    let draining = p50_now < p50_before - (P50_FALL_TOLERANCE * p50_before).max(P50_FALL_FLOOR_US);
    let backlogged = target_rate.is_some() && p50_now > FIXED_RATE_P50_US_MAX;
    steady && !draining && !backlogged && p99_now >= FALLING_RATIO * p99_before
}

/// The median of a per-second value over a window; `None` if a second in it acknowledged
/// nothing.
fn median_of(window: &[Second], f: impl Fn(&Second) -> Option<u64>) -> Option<f64> {
    let v: Option<Vec<f64>> = window.iter().map(|s| f(s).map(|p| p as f64)).collect();
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

    /// A second with p99 `p99_ms` and a p50 of a fifth of it.
    fn s(p99_ms: f64, rate: f64) -> Second {
        Second {
            p50_us: Some((p99_ms * 200.0) as u64),
            p99_us: Some((p99_ms * 1000.0) as u64),
            send_rate: rate,
        }
    }

    fn with_p50(p50_ms: f64) -> Second {
        Second {
            p50_us: Some((p50_ms * 1000.0) as u64),
            p99_us: Some((p50_ms * 1100.0) as u64),
            send_rate: 10_240.0,
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
        // Kafka's cold start measured on one core (e2e p99 per second, ms), then steady;
        // the median stays low, so only the p99 rule is at work here.
        let tail = |p99_ms: f64| Second {
            p50_us: Some(1_500),
            p99_us: Some((p99_ms * 1000.0) as u64),
            send_rate: 51_200.0,
        };
        let cold = [
            1631.0, 692.0, 307.0, 82.0, 33.0, 57.0, 71.0, 56.0, 47.0, 14.0,
        ];
        let mut v: Vec<Second> = cold.iter().map(|&p| tail(p)).collect();
        assert!(!settled(&v, Some(51_200.0)));
        for p in [8.7, 27.0, 34.0, 145.0, 76.0] {
            v.push(tail(p));
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
        v[9].p50_us = None;
        assert!(!settled(&v, Some(51_200.0)));
    }

    #[test]
    fn a_backlog_at_the_offered_rate_is_not_settled_until_it_has_drained() {
        // Kafka 4.4 on one core at 10 MB/s (per-second mean latency, ms): a plateau at
        // ~5.3 s with the send rate exactly on target, then the drain, then steady.
        let trace = [
            4608.8, 4793.9, 4991.7, 5231.2, 5477.7, 5531.6, 5351.2, 5320.1, 5214.0, 5165.5, 5017.5,
            4794.4, 4505.9, 4252.9, 3833.1, 3238.6, 2677.7, 2173.5, 1669.8, 1004.6, 278.9, 1.8,
            1.7, 3.8, 1.6, 1.3, 1.8, 1.0, 1.3, 1.0, 1.0,
        ];
        let v: Vec<Second> = trace.iter().map(|&p| with_p50(p)).collect();
        let first = (10..=v.len()).find(|&n| settled(&v[..n], Some(10_240.0)));
        // Not on the plateau, not while draining: only once two windows are past the drain.
        assert_eq!(first, Some(30), "settled after {first:?} seconds");
    }

    #[test]
    fn millisecond_noise_in_the_median_does_not_count_as_draining() {
        let p50s = [1.8, 1.7, 3.8, 1.6, 1.7, 1.3, 1.8, 1.0, 1.3, 1.0];
        let v: Vec<Second> = p50s.iter().map(|&p| with_p50(p)).collect();
        assert!(settled(&v, Some(10_240.0)));
    }

    #[test]
    fn at_max_rate_the_rate_is_compared_with_its_own_median() {
        let mut v: Vec<Second> = (0..10).map(|_| s(20.0, 200_000.0)).collect();
        assert!(settled(&v, None));
        v[7].send_rate = 120_000.0;
        assert!(!settled(&v, None));
    }
}
