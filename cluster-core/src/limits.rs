//! The cluster's bounds, each with its reason (the broker's own are in `broker/src/limits.rs`).

/// Largest cluster message (one frame on a transport stream). Replication will carry record
/// batches, which Kafka caps at `message.max.bytes` (1 MiB by default, configurable to more);
/// 16 MiB leaves room for a batch of batches plus its header and still stops a peer that sends
/// a garbage length from making us buffer gigabytes.
pub const CLUSTER_MESSAGE_MAX_BYTES: usize = 16 << 20;

/// Bytes queued for one peer beyond what QUIC's flow control has accepted. Past it, `send`
/// answers `Full` (backpressure to the caller) rather than growing: a slow or cut-off peer must
/// not take the node's memory with it. Four of the largest messages.
pub const CLUSTER_PEER_QUEUE_MAX_BYTES: usize = 4 * CLUSTER_MESSAGE_MAX_BYTES;

/// Connections a node accepts at once. A cluster needs one per peer node (each direction has
/// its own); Kafka clusters rarely pass a few hundred brokers, and an unauthenticated peer
/// costs a handshake's state until it is refused.
pub const CLUSTER_CONNECTIONS_MAX: usize = 1024;

/// A connection that carried nothing (not even QUIC's keep-alives) for this long is closed.
/// Three times the keep-alive interval below, so one lost keep-alive does not drop a peer.
pub const CLUSTER_IDLE_TIMEOUT_MS: u64 = 3_000;

/// How often an idle connection sends a keep-alive; also how quickly a dead peer is noticed
/// (with `CLUSTER_IDLE_TIMEOUT_MS`), well inside `broker.session.timeout.ms` (9 s).
pub const CLUSTER_KEEP_ALIVE_MS: u64 = 1_000;

/// QUIC flow-control window per stream and per connection: a peer may have this much in
/// flight before it waits for us to read. 8 MiB covers the bandwidth-delay product of 10 Gb/s
/// at 5 ms, and bounds what one peer can make us buffer.
pub const CLUSTER_RECEIVE_WINDOW_BYTES: u32 = 8 << 20;

/// Largest UDP payload path-MTU discovery tries. Per-datagram costs (a syscall, a packet's
/// encryption and bookkeeping) dominate QUIC's bulk throughput without segmentation offload,
/// so bigger datagrams where the path allows: 9,000-byte jumbo frames in data centres, 64 KiB
/// on loopback. On a 1,500-byte network the probes fail and it stays at 1,452. Measured on
/// loopback (`strand-transport-bench`): 177 MB/s at quinn's default 1,452 bytes.
pub const CLUSTER_MTU_UPPER_BOUND_BYTES: u16 = 65_527;
