//! The cluster's drivers: glommio code that moves bytes for the sans-IO state machines in
//! `strand-cluster-core` (the decisions live there; nothing here decides).
//!
//! - [`link`]: one node's cluster transport — a UDP socket on the shard's reactor feeding
//!   `cluster_core::transport::Transport` (QUIC + mutual TLS) and sending what it hands out.
//! - [`quorum_driver`]: one voter of the metadata quorum (raft-rs over the link, its log in a
//!   `FileStore`), on a controller executor of its own.
//!
//! Arrows: `cluster` imports `strand-cluster-core`, `limits` and `runtime`; nothing in the
//! broker imports `cluster` yet (the quorum driver and routing come next, #17).

pub mod link;
pub mod quorum_driver;
