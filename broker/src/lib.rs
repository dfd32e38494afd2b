//! The Strand broker: a thread-per-core server over a direct-I/O partition log.
//!
//! # Layout
//! - [`config`] — `BrokerConfig`: defaults, TOML file (Kafka's `log.*` names), validation.
//! - [`limits`] — every bound the broker enforces, with the reason for each.
//! - [`runtime`] — what shards run on: `shard` (pinned glommio executors, the partition ->
//!   shard hash), `wake` (cross-shard wake-ups over glommio shared channels — doorbells —,
//!   never a task waker handed to another thread), `helper_thread` (the cleaner leaves the
//!   shard's core), `clock` (`now_ms`, the one place time comes from).
//! - [`internal_topics`] — `__consumer_offsets` / `__transaction_state` and which partition
//!   a group or transactional id belongs to.
//! - [`server`] — data directory, per-shard start-up, listener, retention timer.
//! - [`shutdown`] — SIGTERM/SIGINT: refuse writes, flush every partition, exit 0.
//! - [`host`] — start-up view of the host: io-properties -> `StorageOptions`, tuning warnings
//!   (both from `strand-tuning`).
//! - [`node`] — one shard's partitions and catalog snapshot, the messages between shards, and the
//!   shard's group and transaction services (`node::group_service`, `node::txn_service`);
//!   shard 0 is the controller for catalog changes.
//! - [`admission`] — connection limits (`max.connections`, `max.connections.per.ip`, below
//!   the open-files limit), shared by every shard's listener.
//! - [`auto_create`] — topic auto-creation's per-request cap and broker-wide rate.
//! - [`memory`] — glibc allocator thresholds and `malloc_trim` after connections close.
//! - [`disk_space`] — free space on the data directory: produce and new topics refused
//!   below `storage.min.free.bytes`; a reserve file so a deletion can always be saved.
//! - [`catalog`] — topics, partition counts, configs; `Catalog::apply` (sans-IO) and the file.
//! - [`kafka`] — the Kafka front end: `conn` (a connection) and one module per API, with the
//!   table of supported versions.
//! - [`fetch_session`] — KIP-227 incremental fetch sessions, one cache per shard (sans-IO).
//! - [`group`] — the consumer-group coordinator, classic protocol (sans-IO).
//! - [`txn`] — the transaction coordinator (sans-IO) and its `__transaction_state` records.
//! - [`stages`] — per-shard latency histograms of each request stage (queue, decode, handle,
//!   write; hop, append, fsync wait), merged for the admin API (sans-IO).
//! - [`admin_http`] — the admin HTTP listener (`admin.listen`): health and `GET /v1/stages`.
//! - [`testkit`] — batches and settings shared by the crash-test child and its test.
//! - [`storage`] — the partition log: sans-IO state (`log`, `segment`, `index`, `scan`,
//!   `cache`, `producer_state`) and its I/O (`dma`, `recovery`, `partition`).
//!
//! Data flow of an append: `PartitionLog::append` validates the batch (CRC-32C), asks
//! `LogState` for its offsets and position, patches the base offset, copies the bytes into the
//! active `SegmentWriter`'s aligned buffer (written with O_DIRECT when full or on flush) and
//! into the hot-tail cache. `append_durable` then waits for a group-commit fdatasync.

pub mod admin_http;
pub mod admission;
pub mod auto_create;
pub mod catalog;
pub mod cluster;
pub mod cluster_config;
pub mod cluster_member;
pub mod config;
pub mod disk_space;
pub mod dynamic_configs;
pub mod fetch_session;
pub mod group;
pub mod host;
pub mod internal_topics;
pub mod kafka;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod node;
pub mod runtime;
pub mod security;
pub mod server;
pub mod share;
pub mod shutdown;
pub mod stages;
pub mod storage;
pub mod testkit;
pub mod topic_configs;
pub mod txn;

pub use config::BrokerConfig;
