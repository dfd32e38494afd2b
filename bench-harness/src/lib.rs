//! Strand's load generator, `strand bench`, and two light producer-only load generators.
//!
//! # Layout
//! Sans-IO (unit-tested without a broker):
//! - [`workload`] — the TOML workload schema, defaults, validation, `--set` overrides.
//! - [`keys`] — key generators: none, round-robin, uniform random, zipf.
//! - [`rate`] — the fixed-rate schedule: each message's intended send time (coordinated-
//!   omission correction).
//! - [`measure`] — recorders (HdrHistograms, µs), one-second intervals and their
//!   `kafka-producer-perf-test`-style lines, the summary table.
//! - [`report`] — the versioned JSON report (host facts, workload, raw histograms as
//!   HdrHistogram interval logs).
//! - [`html`] — the self-contained HTML report, inline SVG plots.
//! - [`compare`] — the comparison tables (runs side by side, ratios).
//!
//! I/O:
//! - [`driver`] — the native-client driver (glommio executors, pinned) and the librdkafka one.
//! - [`run`] — one run: topics, driver, the once-a-second drain, stop and drain.
//! - [`brokers`] — starting `strand serve` and Apache Kafka (KRaft) for a bench.
//! - [`cli`] — `strand bench [run|compare-acks|compare-brokers]`.
//! - [`stages`] — the broker's request-stage timings from Strand's admin API.
//!
//! Binaries: `src/bin/strand-rdkafka-perf.rs` and `src/bin/strand-native-perf.rs`, producer
//! load generators with the flags and final line of Kafka's `ProducerPerformance` (used by
//! `scripts/bench-vs-kafka` and `scripts/bench-client`); this file holds what they share.
//! The storage benchmark of issue 2 lives with the storage code it measures, as the
//! `strand-storage-bench` binary of `strand-broker`.

pub mod broker_cpu;
pub mod brokers;
pub mod cli;
pub mod compare;
pub mod driver;
pub mod html;
pub mod keys;
pub mod measure;
pub mod placement;
pub mod rate;
pub mod report;
pub mod run;
pub mod settle;
pub mod stages;
pub mod workload;

pub use measure::latency_histogram;

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
