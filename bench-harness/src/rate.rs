//! The send schedule (sans-IO). At a fixed rate, message `i` of a producer is due at
//! `start + i / rate`: its *intended* send time. Latency measured from the intended time
//! includes the time a stalled broker kept the sender from sending (coordinated-omission
//! correction); latency from the actual send call does not. At max rate the two coincide.

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Schedule {
    start: Instant,
    /// Seconds between two messages; `None` at max rate.
    interval_s: Option<f64>,
    sent: u64,
}

impl Schedule {
    /// `per_s`: messages per second, `None` for max rate.
    pub fn new(start: Instant, per_s: Option<f64>) -> Schedule {
        Schedule {
            start,
            interval_s: per_s.filter(|r| *r > 0.0).map(|r| 1.0 / r),
            sent: 0,
        }
    }

    /// When the next message is due; `None` at max rate (always due).
    pub fn next_due(&self) -> Option<Instant> {
        self.interval_s
            .map(|iv| self.start + Duration::from_secs_f64(self.sent as f64 * iv))
    }

    /// How long to wait at `now` before the next message is due (zero if due or late).
    pub fn wait(&self, now: Instant) -> Duration {
        self.next_due()
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    /// Takes the next message at `now`: returns its intended send time (`now` at max rate,
    /// the scheduled time at a fixed rate even when that is in the past).
    pub fn take(&mut self, now: Instant) -> Instant {
        let due = self.next_due().unwrap_or(now);
        self.sent += 1;
        due
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_intended_times_do_not_slip_when_late() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, Some(1000.0));
        assert_eq!(s.take(t0), t0);
        assert_eq!(s.wait(t0), Duration::from_millis(1));
        // The sender was stalled 200 ms: the next messages keep their intended times, so a
        // latency measured from them includes the stall.
        let late = t0 + Duration::from_millis(200);
        assert_eq!(s.wait(late), Duration::ZERO);
        assert_eq!(s.take(late), t0 + Duration::from_millis(1));
        assert_eq!(s.take(late), t0 + Duration::from_millis(2));
        assert_eq!(s.sent(), 3);
    }

    #[test]
    fn max_rate_is_always_due_now() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, None);
        let later = t0 + Duration::from_secs(3);
        assert_eq!(s.wait(later), Duration::ZERO);
        assert_eq!(s.take(later), later);
    }
}
