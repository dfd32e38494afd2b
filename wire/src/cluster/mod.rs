//! FlatBuffers codecs of the cluster's own data (not Kafka's wire format): the schemas are in
//! `wire/schema/`, the code below is generated from them by `scripts/flatc-generate`
//! (flatc 23.5.26) and committed. Never edit a `*_generated.rs` file by hand.
//!
//! Readers verify a buffer before touching it (`flatbuffers::root_with_opts`), then read
//! fields in place.

#[allow(
    clippy::all,
    clippy::pedantic,
    unused_imports,
    dead_code,
    deprecated,
    non_camel_case_types,
    non_snake_case,
    mismatched_lifetime_syntaxes,
    unsafe_op_in_unsafe_fn
)]
#[rustfmt::skip]
mod cluster_generated;

/// Broker -> broker requests and answers, e.g. transaction markers (`wire/schema/cluster.fbs`).
pub use cluster_generated::strand::broker;
/// Broker -> active controller requests and answers (`wire/schema/cluster.fbs`).
pub use cluster_generated::strand::controller;
/// The metadata log's records (`wire/schema/cluster.fbs`).
pub use cluster_generated::strand::metadata;
