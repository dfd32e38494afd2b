//! A native Kafka client for Strand (and any Kafka-compatible broker), thread-per-core: a
//! sans-IO core (protocol versions and framing, partitioning, batching decisions) and a
//! glommio driver (connections whose requests are pipelined). The `strand` command line and
//! the load generator use it.
//!
//! # Layout
//! Sans-IO:
//! - [`protocol`] — `Wire`: API-version negotiation, request framing, matching responses to
//!   requests by correlation id (codecs from `kafka-protocol` via `strand_wire`).
//! - [`partitioner`] — Kafka's murmur2 key partitioner (same choice as the Java client and
//!   librdkafka's `murmur2_random`) and the sticky partitioner for keyless records.
//! - [`error`] — `ClientError`: a Kafka error code by name, or what went wrong locally.
//! - [`security`] — `ClientSecurity`: `security.protocol`, SASL and TLS settings from Kafka
//!   client properties, and the rustls configuration.
//!
//! glommio driver:
//! - [`conn`] — `BrokerConn`: one connection (TCP or TLS, SASL-authenticated where asked), a
//!   writer and a reader task, many requests in flight.
//! - [`cluster`] — `Cluster`: bootstrap, metadata, one connection per broker, shared.
//! - [`admin`] — topics, configs, groups, offsets, as methods on `Cluster`.
//! - [`producer`] — `Producer`: batching (`linger.ms`, `batch.size`), acks 0/1/all,
//!   idempotence, compression, delivery futures, bounded memory.
//! - [`consumer`] — `Consumer`: assigned or subscribed partitions, pipelined fetches, commits.
//! - [`group`] — group membership with the classic protocol (range assignor, heartbeats,
//!   rejoin on rebalance, leave); the payload codecs and the assignor are sans-IO.
//!
//! Batch compression (gzip, snappy, lz4, zstd) is `strand_wire::compression`. Not yet:
//! transactional producing, cooperative rebalancing.

pub mod admin;
pub mod cluster;
pub mod conn;
pub mod consumer;
pub mod error;
pub mod group;
pub mod partitioner;
pub mod producer;
pub mod protocol;
pub mod security;
pub mod share;

pub use admin::{GroupInfo, OffsetSpec};
pub use cluster::{Cluster, Metadata, TopicInfo};
pub use consumer::{Consumer, ConsumerConfig, Record, StartAt};
pub use error::ClientError;
pub use producer::{Delivery, Producer, ProducerConfig};
pub use security::{is_security_key, ClientSecurity, Protocol, SaslSettings, TlsSettings};
pub use strand_wire::sasl::Mechanism;
