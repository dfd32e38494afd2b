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
//! - [`varint`] — Kafka's zig-zag varints used inside records.
//! - [`error`] — Kafka error codes, by their protocol names.
//!
//! Kafka request/response codecs arrive with the Kafka front end (issue 3), from the
//! `kafka-protocol` crate, re-exported here with the few extensions we need.

pub mod batch;
pub mod builder;
pub mod error;
pub mod varint;

pub use batch::{BatchError, BatchHeader};
pub use error::ErrorCode;
