//! Metrics (#20), counted per shard: each glommio executor is one thread, so a shard's
//! counters are a thread-local of plain integers (no locks, no atomics on the hot path).
//! Record only on a shard's own thread (never inside `spawn_blocking`). A scrape of
//! `GET /metrics` asks every shard for a copy (`ShardMsg::Metrics`, `node::metrics_probe`)
//! and [`expose`] writes them in Prometheus's text format.
//!
//! Histograms ([`Hist`]) have one fixed layout, in microseconds: bucket `i` (0..=22) holds
//! observations up to 2^(i+3) µs (8 µs, 16 µs, ... about 33.5 s), the last one the rest
//! (`+Inf`). Exposed in seconds, as Prometheus names them.

pub mod cluster;
pub mod expose;

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

/// Buckets of a [`Hist`]: 23 bounded ones and `+Inf`.
pub const HIST_BUCKETS: usize = 24;

/// The "error code" of a request that closed its connection (undecodable, or an API version
/// not supported): no Kafka error code was sent.
pub const CONNECTION_CLOSED: i16 = i16::MIN;

/// Kafka API keys counted one by one (every key below this; Kafka's go to 92 today); any
/// other key is counted in the last slot.
pub const API_KEYS: usize = 96;

/// A latency histogram with the fixed layout above.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hist {
    pub buckets: [u64; HIST_BUCKETS],
    pub count: u64,
    pub sum_us: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            buckets: [0; HIST_BUCKETS],
            count: 0,
            sum_us: 0,
        }
    }
}

impl Hist {
    /// The bucket of an observation of `us` microseconds.
    pub fn bucket_of(us: u64) -> usize {
        // ceil(log2(us)), 0 for 0 and 1.
        let log2_up = if us <= 1 {
            0
        } else {
            64 - (us - 1).leading_zeros() as usize
        };
        log2_up.saturating_sub(3).min(HIST_BUCKETS - 1)
    }

    /// The upper bound of bucket `i`, in seconds (`+Inf` for the last).
    pub fn upper_bound_s(i: usize) -> f64 {
        if i + 1 >= HIST_BUCKETS {
            f64::INFINITY
        } else {
            (1u64 << (i + 3)) as f64 / 1e6
        }
    }

    pub fn observe(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket_of(us)] += 1;
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }
}

/// One shard's counters.
#[derive(Clone, Debug, Default)]
pub struct ShardMetrics {
    /// Requests received, by API key (`API_KEYS` slots, the last for any other key).
    pub requests: Vec<u64>,
    /// Request latency, from the frame read to the response written, by API key (requests
    /// without a response, acks=0 produces, are not in it).
    pub latency: Vec<Hist>,
    /// Record batch bytes and records appended by produce requests on this shard.
    pub bytes_in: u64,
    pub records_in: u64,
    /// Record bytes returned by fetch requests answered on this shard.
    pub bytes_out: u64,
    /// Kafka connections accepted and closed by this shard.
    pub connections_accepted: u64,
    pub connections_closed: u64,
    /// TLS handshakes that failed (or timed out), SASL authentications that succeeded and
    /// that failed, on this shard.
    pub tls_handshake_failures: u64,
    pub sasl_authentications: u64,
    pub sasl_authentication_failures: u64,
    /// fdatasync latency of this shard's partition logs.
    pub fsync: Hist,
    /// O_DIRECT segment write latency (submitted until completed, ordering wait included).
    pub dma_write: Hist,
    /// Segment writes in flight (write-behind occupancy): writes and their bytes.
    pub dma_writes_inflight: u64,
    pub dma_bytes_inflight: u64,
    /// Compaction passes finished on this shard's partitions, and their bytes before and after.
    pub cleaner_passes: u64,
    pub cleaner_bytes_before: u64,
    pub cleaner_bytes_after: u64,
    /// Messages sent to other shards (produce hops, fetch reads, probes).
    pub cross_shard_messages: u64,
    /// Errors answered, by (API key, Kafka error code): per partition for Produce and Fetch,
    /// [`CONNECTION_CLOSED`] for a request that closed its connection. Bounded: the keys
    /// are Kafka's APIs and error codes.
    pub errors: HashMap<(i16, i16), u64>,
}

/// The slot of `api_key` in per-API tables: its own below `API_KEYS - 1`, the last for any
/// other (so a client sending made-up keys adds no series).
pub fn api_slot(api_key: i16) -> usize {
    usize::try_from(api_key)
        .ok()
        .filter(|&k| k < API_KEYS - 1)
        .unwrap_or(API_KEYS - 1)
}

impl ShardMetrics {
    pub fn request(&mut self, api_key: i16) {
        if self.requests.is_empty() {
            self.requests = vec![0; API_KEYS];
        }
        self.requests[api_slot(api_key)] += 1;
    }

    pub fn request_done(&mut self, api_key: i16, took: Duration) {
        if self.latency.is_empty() {
            self.latency = vec![Hist::default(); API_KEYS];
        }
        self.latency[api_slot(api_key)].observe(took);
    }

    pub fn error(&mut self, api_key: i16, code: i16) {
        *self.errors.entry((api_key, code)).or_default() += 1;
    }

    /// Adds another shard's counts.
    pub fn merge(&mut self, other: &ShardMetrics) {
        if self.requests.is_empty() {
            self.requests = vec![0; API_KEYS];
        }
        for (a, b) in self.requests.iter_mut().zip(other.requests.iter()) {
            *a += b;
        }
        if self.latency.is_empty() {
            self.latency = vec![Hist::default(); API_KEYS];
        }
        for (a, b) in self.latency.iter_mut().zip(other.latency.iter()) {
            a.merge(b);
        }
        self.bytes_in += other.bytes_in;
        self.records_in += other.records_in;
        self.bytes_out += other.bytes_out;
        self.connections_accepted += other.connections_accepted;
        self.connections_closed += other.connections_closed;
        self.tls_handshake_failures += other.tls_handshake_failures;
        self.sasl_authentications += other.sasl_authentications;
        self.sasl_authentication_failures += other.sasl_authentication_failures;
        self.fsync.merge(&other.fsync);
        self.dma_write.merge(&other.dma_write);
        self.dma_writes_inflight += other.dma_writes_inflight;
        self.dma_bytes_inflight += other.dma_bytes_inflight;
        self.cleaner_passes += other.cleaner_passes;
        self.cleaner_bytes_before += other.cleaner_bytes_before;
        self.cleaner_bytes_after += other.cleaner_bytes_after;
        self.cross_shard_messages += other.cross_shard_messages;
        for (k, v) in &other.errors {
            *self.errors.entry(*k).or_default() += v;
        }
    }
}

thread_local! {
    static LOCAL: RefCell<ShardMetrics> = RefCell::new(ShardMetrics::default());
    static ENABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// `metrics.enabled` for this thread (shard), set when the shard starts.
pub fn set_enabled(on: bool) {
    ENABLED.with(|e| e.set(on));
}

/// Runs `f` on this thread's (shard's) counters, unless counting is off.
pub fn with(f: impl FnOnce(&mut ShardMetrics)) {
    if ENABLED.with(|e| e.get()) {
        LOCAL.with(|m| f(&mut m.borrow_mut()));
    }
}

/// A copy of this shard's counters.
pub fn snapshot() -> ShardMetrics {
    LOCAL.with(|m| m.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds() {
        assert_eq!(Hist::bucket_of(0), 0);
        assert_eq!(Hist::bucket_of(1), 0);
        assert_eq!(
            Hist::bucket_of(8),
            0,
            "8 µs is in the first bucket (le 8 µs)"
        );
        assert_eq!(Hist::bucket_of(9), 1);
        assert_eq!(Hist::bucket_of(16), 1);
        assert_eq!(
            Hist::bucket_of(1 << 25),
            22,
            "about 33.5 s: the last bounded one"
        );
        assert_eq!(Hist::bucket_of((1 << 25) + 1), 23);
        assert_eq!(Hist::bucket_of(u64::MAX), 23);
        for us in [1u64, 7, 8, 9, 100, 1000, 123_456, 1 << 25] {
            let i = Hist::bucket_of(us);
            assert!(
                us as f64 / 1e6 <= Hist::upper_bound_s(i),
                "{us} µs in bucket {i}"
            );
            if i > 0 {
                assert!(
                    us as f64 / 1e6 > Hist::upper_bound_s(i - 1),
                    "{us} µs above {i}-1"
                );
            }
        }
        assert!(Hist::upper_bound_s(HIST_BUCKETS - 1).is_infinite());
    }

    #[test]
    fn counts_merge_across_shards() {
        let mut a = ShardMetrics::default();
        a.request(0);
        a.request(0);
        a.request(1);
        a.request(-3);
        a.request(500);
        a.request_done(0, Duration::from_micros(100));
        a.bytes_in = 10;
        let mut b = ShardMetrics::default();
        b.request(0);
        b.request_done(0, Duration::from_millis(2));
        b.bytes_in = 5;
        b.fsync.observe(Duration::from_micros(300));
        let mut all = ShardMetrics::default();
        all.merge(&a);
        all.merge(&b);
        assert_eq!(all.requests[0], 3);
        assert_eq!(all.requests[1], 1);
        assert_eq!(
            all.requests[API_KEYS - 1],
            2,
            "unknown keys share the last slot"
        );
        assert_eq!(all.latency[0].count, 2);
        assert_eq!(all.latency[0].sum_us, 2_100);
        assert_eq!(all.bytes_in, 15);
        assert_eq!(all.fsync.count, 1);
    }
}
