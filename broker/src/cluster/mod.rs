//! The cluster's drivers: glommio code that moves bytes for the sans-IO state machines in
//! `strand-cluster-core` (the decisions live there; nothing here decides).
//!
//! - [`link`]: one node's cluster transport — a UDP socket on the shard's reactor feeding
//!   `cluster_core::transport::Transport` (QUIC + mutual TLS) and sending what it hands out.
//! - [`quorum_driver`]: one voter of the metadata quorum (raft-rs over the link, its log in a
//!   `FileStore`), on a controller executor of its own.
//!
//! - [`metadata_driver`]: a node's metadata side — the voter, and `cluster_core`'s
//!   `MetadataNode` applying the log to the image and, on the leader, acting as the active
//!   controller; answers brokers' controller requests over the link.
//! - [`broker_session`]: this node's broker registering and heartbeating with the controller.
//! - [`view`]: the image as shards see it (`ClusterView`, immutable, inside the catalog).
//! - [`handle`]: a shard's way to the controller executor (`ClusterHandle::call`).
//! - [`peers_down`]: peers whose tripwire closed, for the shards' Metadata answers.
//! - [`producer_ids`]: producer-id blocks reserved for this node by the controller.
//! - [`throttle_rates`]: this node's replication throttle rates (KIP-73), saved beside its data.
//! - [`tripwire`]: the liveness tripwire's TCP sockets (one held connection per peer; a
//!   closed connection whose redial is refused is evidence the peer's process died).
//!
//! Arrows: `cluster` imports `strand-cluster-core`, `limits` and `runtime`; `catalog` holds a
//! `ClusterView`, `cluster_member` (process wiring) starts the drivers and feeds the shards.

pub mod broker_session;
pub mod handle;
pub mod link;
pub mod metadata_driver;
pub mod peers_down;
pub mod producer_ids;
pub mod quorum_driver;
pub mod throttle_rates;
pub mod tripwire;
pub mod view;
