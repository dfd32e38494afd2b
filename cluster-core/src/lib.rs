//! Strand's cluster decisions, without I/O (no glommio, no sockets, no clock: time comes in
//! as `now_ms`). The broker's drivers feed these state machines and carry out what they
//! return; tests drive them deterministically.
//!
//! - [`config`]: `node.id`, `controller.quorum.voters` and the timeouts, parsed and checked.
//! - [`records`]: the metadata log's entries (KRaft's idea: metadata is a replicated log).
//! - [`image`]: the log applied in order — the same on every node; digests and snapshots.
//! - [`placement`]: replicas, leaders and shards for new partitions.
//! - [`controller`]: the active controller — registrations, heartbeats and fencing, leader
//!   choice, topic creation and deletion, producer-id blocks.
//! - [`file_store`]: the quorum's durable log, hard state and snapshot (std::fs, fdatasync).
//! - [`quorum`]: the metadata log's consensus, raft-rs's `RawNode` behind a poll/output
//!   surface (durable store, messages out, committed entries in order).
//! - [`transport`]: node-to-node messages over QUIC (quinn-proto) with mutual TLS, driven by
//!   datagrams and time; `transport::certs` makes a development CA and node certificates.
//! - [`messages`]: what travels between nodes (a channel byte, then raft's or our encoding).
//! - [`replication`]: a partition leader's replication rules (#18; wired in `broker/src/node/replica_leader.rs`): high
//!   watermark over the maximal ISR, `acks=all` and `min.insync.replicas`, ISR shrink and
//!   expand proposals; each replica's leader-epoch cache and the follower's divergence point.
//! - [`liveness`]: evidence that a peer's process died (a TCP tripwire per peer: its
//!   connection closed and its port refuses), which fences at once instead of after
//!   `broker.session.timeout.ms`; driven in `broker/src/cluster/tripwire.rs`.
//! - [`limits`]: the cluster's bounds, with reasons.
//! - [`dsim`]: a deterministic simulation of replication and the controller (#19): brokers,
//!   controller and client in one process over a seeded lossy network, clock and disk,
//!   invariants after every event; `strand-sim` runs many seeds.
//!
//! Arrows: `controller` -> `placement` -> `image` -> `records`; `quorum` stands alone (it
//! orders bytes; the driver decodes them into records); `transport` carries bytes and knows
//! only node ids; nothing here imports the broker.

pub mod broker_rpc;
pub mod config;
pub mod controller;
pub mod controller_rpc;
pub mod dsim;
pub mod file_store;
pub mod image;
pub mod limits;
pub mod liveness;
pub mod messages;
pub mod metadata_node;
pub mod placement;
pub mod quorum;
pub mod records;
pub mod records_codec;
pub mod replication;
pub mod transport;

#[cfg(test)]
mod quorum_sim;
#[cfg(test)]
mod sim;
