//! The partition log: Kafka v2 batches stored verbatim in direct-I/O segment files.
//!
//! # Layout
//! Sans-IO (plain state, unit-tested deterministically):
//! - [`types`] — `Offset`, `LogConfig` (Kafka's topic-config names), `BatchMeta`.
//! - [`index`] — sparse offset and time indexes and their file format.
//! - [`segment`] — one segment's state and file names.
//! - [`log`] — `LogState`: offset assignment, roll, lookups, retention decisions.
//! - [`scan`] — walking stored batches; where a torn or corrupt tail starts.
//! - [`cache`] — the hot-tail cache of recent batches as `Bytes`.
//!
//! I/O:
//! - [`dma`] — O_DIRECT segment writer on glommio's io_uring, aligned direct reads.
//! - [`recovery`] — opening a directory: indexes, tail scan, truncation (blocking std I/O).
//! - [`partition`] — `PartitionLog`: the state machine driven with real I/O, group commit,
//!   flusher, retention.

pub mod cache;
pub mod dma;
pub mod index;
pub mod log;
pub mod partition;
pub mod recovery;
pub mod scan;
pub mod segment;
pub mod types;

pub use partition::{AppendError, PartitionLog, ReadError, ReadOut, StorageOptions};
pub use types::{BatchMeta, LogConfig, Offset};
