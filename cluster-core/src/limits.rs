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

/// An accepted connection must name its node (the hello) within this long, or it is closed:
/// a peer that completes the handshake and then says nothing would otherwise hold a slot for
/// as long as it answers keep-alives.
pub const CLUSTER_HELLO_DEADLINE_MS: u64 = 5_000;

/// When a node dials us again while its older connection to us still looks alive (it
/// restarted), our connection to it is closed and redialled if nothing came back on it for
/// this long: one to the old incarnation has been silent since it died, while one dialled
/// after the restart (or a healthy one carrying quorum traffic) heard from it just now —
/// closing those would only drop messages and could start a round of redials.
pub const CLUSTER_STALE_OUTGOING_MS: u64 = 200;

/// Accepted connections that have not yet named their node. Past it new ones are refused, so
/// a flood of handshakes cannot crowd out identified peers (new connections from a spoofed
/// address are stopped earlier, by a Retry).
pub const CLUSTER_UNIDENTIFIED_CONNECTIONS_MAX: usize = 64;

/// A connection that carried nothing (not even QUIC's keep-alives) for this long is closed.
/// Liveness is not the transport's call (the controller fences a broker after
/// `broker.session.timeout.ms`, raft elects after its election timeout): this only reclaims
/// dead connections. It must stay well above QUIC's probe timeout after backoff: at 3 s, a
/// connection under 10% loss and 3 ms of reordering (in the simulation) backed its probe timer
/// off past the idle timeout and died with 2.8 MB queued. A restarted peer resets stale
/// connections at once (stable stateless-reset key), so a long timeout costs nothing there.
pub const CLUSTER_IDLE_TIMEOUT_MS: u64 = 15_000;

/// How often an idle connection sends a keep-alive (so NAT and firewall state stay, and the
/// idle timeout only closes connections whose peer is gone).
pub const CLUSTER_KEEP_ALIVE_MS: u64 = 1_000;

/// QUIC flow-control window per stream and per connection: a peer may have this much in
/// flight before it waits for us to read. 8 MiB covers the bandwidth-delay product of 10 Gb/s
/// at 5 ms, and bounds what one peer can make us buffer.
pub const CLUSTER_RECEIVE_WINDOW_BYTES: u32 = 8 << 20;

/// Largest UDP payload path-MTU discovery tries (and that we accept). Per-datagram costs (a
/// syscall, a packet's encryption and bookkeeping) dominate QUIC's bulk throughput without
/// segmentation offload, so bigger datagrams where the path allows: 9,000-byte jumbo frames
/// in data centres, up to 64 KiB on loopback; on a 1,500-byte network the probes fail and it
/// stays at 1,452. Measured on loopback (`strand-transport-bench`): 177 MB/s at quinn's
/// default 1,452 bytes; 1.1-1.3 GB/s at 16 KiB and the same at 64 KiB, so 16 KiB (smaller
/// buffers per datagram).
pub const CLUSTER_MTU_UPPER_BOUND_BYTES: u16 = 16_384;

/// Most records one metadata batch (a raft entry or a snapshot) may hold. A snapshot lists
/// every broker, topic and partition: a million covers Kafka's largest KRaft clusters (a few
/// hundred thousand partitions) with room; beyond it a batch is refused as corrupt rather
/// than decoded into an unbounded vector.
pub const METADATA_BATCH_RECORDS_MAX: usize = 1_000_000;

/// Controller requests and answers received and not yet handled, per node. The controller
/// handles one in microseconds (a decision and a proposal); a backlog this deep means it is
/// stuck, and further ones are dropped (their askers time out and ask again) rather than
/// queued without bound.
pub const CONTROLLER_MESSAGES_QUEUED_MAX: usize = 4_096;

/// How long a controller request may wait for its batch to commit before it is answered
/// REQUEST_TIMED_OUT (the asker retries). Several election timeouts: a request made just
/// before the leader died can still be committed by the next one.
pub const CONTROLLER_REQUEST_TIMEOUT_MS: u64 = 10_000;

/// Committed metadata entries between two snapshots of the image (each one compacts the
/// quorum's log, so a restarted or new node catches up from the snapshot plus at most this
/// many entries). A snapshot travels to a lagging voter as one cluster message, so the
/// image must stay under `CLUSTER_MESSAGE_MAX_BYTES` encoded.
pub const METADATA_SNAPSHOT_EVERY_ENTRIES: u64 = 1_000;
