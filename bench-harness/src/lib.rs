//! Strand's load generators.
//!
//! # Layout
//! - `src/bin/strand-rdkafka-perf.rs` — a light producer load generator on librdkafka with
//!   the output format of Kafka's `ProducerPerformance` (used by `scripts/bench-vs-kafka`).
//! - `src/bin/strand-native-perf.rs` — the same on the native client (`strand-client`), for
//!   `scripts/bench-client`.
//! - this file: what both share — the common flags and the summary line.
//!
//! Issue 8 brings the full harness: workloads (TOML), drivers (native client, librdkafka),
//! HdrHistogram measurement with coordinated-omission correction, and JSON/HTML reports.
//! The storage benchmark of issue 2 lives with the storage code it measures, as the
//! `strand-storage-bench` binary of `strand-broker`.

use hdrhistogram::Histogram;

/// Flags every producer load generator takes (Kafka's ProducerPerformance's meaning).
#[derive(clap::Args, Clone, Debug)]
pub struct ProducerArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long)]
    pub topic: String,
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// 0, 1, or -1/all.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub acks: String,
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    #[arg(long, default_value_t = 16384)]
    pub batch_size: usize,
}

/// A latency histogram in microseconds (1 us .. 10 min, 3 significant digits).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// The ProducerPerformance summary line for `records` of `record_size` bytes in `elapsed_s`.
pub fn summary_line(
    records: u64,
    record_size: usize,
    elapsed_s: f64,
    h: &Histogram<u64>,
) -> String {
    let ms = |q: f64| h.value_at_quantile(q) / 1000;
    let rate = records as f64 / elapsed_s;
    format!(
        "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, {} ms 50th, {} ms 95th, {} ms 99th, {} ms 99.9th.",
        records,
        rate,
        rate * record_size as f64 / (1024.0 * 1024.0),
        h.mean() / 1000.0,
        h.max() as f64 / 1000.0,
        ms(0.50),
        ms(0.95),
        ms(0.99),
        ms(0.999)
    )
}
