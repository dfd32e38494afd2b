//! Strand's load generators.
//!
//! # Layout
//! - `src/bin/strand-rdkafka-perf.rs` — a light producer load generator on librdkafka with
//!   the output format of Kafka's `ProducerPerformance` (used by `scripts/bench-vs-kafka`).
//!
//! Issue 8 brings the full harness: workloads (TOML), drivers (native client, librdkafka),
//! HdrHistogram measurement with coordinated-omission correction, and JSON/HTML reports.
//! The storage benchmark of issue 2 lives with the storage code it measures, as the
//! `strand-storage-bench` binary of `strand-broker`.
