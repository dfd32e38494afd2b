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
//! - [`compaction`] — when to compact, which segments, which records survive.
//! - [`txn`] — open and aborted transactions, the last stable offset, `.txnindex` files.
//! - [`producer_state`] — idempotent-producer sequence checks per partition.
//!
//! I/O:
//! - [`dma`] — O_DIRECT segment writer on glommio's io_uring, aligned direct reads.
//! - [`read_pool`] — reads of old segments for fetches, on a few threads per shard (never
//!   queued behind the shard's fdatasyncs).
//! - [`cleaner`] — one compaction pass (blocking, off the shard thread) and the crash-safe
//!   swap of cleaned segments; recovery finishes interrupted swaps.
//! - [`housekeeping`] — retention, compaction passes and idle rolls, run in the background.
//! - [`recovery`] — opening a directory: indexes, tail scan, truncation (blocking std I/O).
//! - [`partition`] — `PartitionLog`: the state machine driven with real I/O, group commit,
//!   flusher, retention; [`partition_txn`] its transactional side (rebuild at open,
//!   read_committed reads, producers).

pub mod cache;
pub mod cleaner;
pub mod compaction;
pub mod dma;
pub mod housekeeping;
pub mod index;
pub mod log;
pub mod partition;
pub mod partition_txn;
pub mod prefill;
pub mod producer_state;
pub mod read_pool;
pub mod recovery;
pub mod scan;
pub mod segment;
pub mod shard_cache;
pub mod txn;
pub mod types;

pub use housekeeping::{CleanOptions, CleanReport};
pub use partition::{AppendError, PartitionLog, ReadError, ReadOut, StorageOptions, WeakLog};
pub use types::{BatchMeta, CleanupPolicy, LogConfig, Offset, TopicPartition};
