//! Sans-IO Kafka wire codecs for Strand.
//!
//! Nothing in this crate touches a socket, a file or a runtime: every function takes bytes
//! and returns values (or bytes). The broker, the client and the load generator all sit on it.
//!
//! # Layout
//! - [`batch`] — the Kafka v2 record-batch header: a zero-copy view ([`batch::BatchHeader`]),
//!   validation (magic, lengths, CRC-32C) and the one in-place edit the broker makes on append
//!   (assigning the base offset, which the CRC does not cover).
//! - [`builder`] — builds valid v2 batches (uncompressed) record by record; used by tests,
//!   benchmarks and, later, the native client.
//! - [`records`] — the records inside an uncompressed batch, read in place, and rebuilding a
//!   batch that keeps only some of them (log compaction).
//! - [`validate`] — what a broker checks of a produced batch beyond its CRC (Kafka's
//!   `LogValidator`): counts, every record decodable, bounded decompression.
//! - [`compression`] — gzip, snappy, LZ4 and zstd for a batch's records section (the
//!   client compresses and decompresses; the broker stores batches as they come).
//! - [`varint`] — Kafka's zig-zag varints used inside records.
//! - [`error`] — Kafka error codes, by their protocol names.
//! - [`frame`] — splitting a byte stream into size-prefixed frames, without copies.
//! - [`fetch`] — Fetch responses as socket segments: record sets pass through uncopied.
//! - [`api`] — request decoding and response encoding with the `kafka-protocol` crate
//!   (re-exported as [`kafka`]): generated from Kafka's own JSON schemas, so every version's
//!   flexible fields and tagged fields match Kafka's; record sets stay `Bytes` slices.

pub use kafka_protocol as kafka;

pub mod api;
pub mod batch;
pub mod builder;
pub mod cluster;
pub mod compression;
pub mod error;
pub mod fetch;
pub mod frame;
pub mod records;
pub mod sasl;
pub mod validate;
pub mod varint;

pub use batch::{BatchError, BatchHeader};
pub use error::ErrorCode;
