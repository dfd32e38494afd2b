//! Strand's load generator (placeholder).
//!
//! # Layout
//! Empty for now. Issue 8 brings workloads (TOML), drivers (native client, librdkafka),
//! HdrHistogram measurement with coordinated-omission correction, and JSON/HTML reports.
//! The storage benchmark of issue 2 lives with the storage code it measures, as the
//! `strand-storage-bench` binary of `strand-broker`.
