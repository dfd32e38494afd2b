//! Share groups' data side (KIP-932, "queues for Kafka"): the state of each share-partition
//! (a share group's view of one topic partition) on the shard that leads the partition, and
//! its durable record.
//!
//! - [`partition`] — the sans-IO state machine: acquisition locks, delivery counts,
//!   acknowledge / release / reject, archiving past `share.delivery.count.limit`, the
//!   share-partition start offset;
//! - [`store`] — the durable form: one append-only file per share-partition, next to the
//!   partition's segments, replayed when the share-partition is first used.

pub mod partition;
pub mod store;
