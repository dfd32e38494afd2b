//! Kafka's internal topics and which of their partitions a group or a transactional id
//! belongs to: shared by the group and transaction coordinators, the node (which creates the
//! topics) and the front end (FindCoordinator), so none of them imports another for it.

/// Kafka's internal offsets topic.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Its partition count (Kafka's `offsets.topic.num.partitions` defaults to 50; fewer here,
/// since each partition is a log with its own buffers).
pub const OFFSETS_PARTITIONS: i32 = 8;

/// Kafka's internal transaction log.
pub const TXN_TOPIC: &str = "__transaction_state";
/// Its partition count (Kafka's `transaction.state.log.num.partitions` defaults to 50; fewer
/// here, as for the offsets topic: each partition is a log with its own buffers).
pub const TXN_PARTITIONS: i32 = 8;

/// FNV-1a of `key` modulo `partitions`: which internal-topic partition a group or a
/// transactional id belongs to (stable across runs and builds).
pub fn internal_partition(key: &str, partitions: i32) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % partitions.max(1) as u32) as i32
}

pub fn offsets_partition(group: &str) -> i32 {
    internal_partition(group, OFFSETS_PARTITIONS)
}

/// The `__transaction_state` partition of a transactional id.
pub fn txn_partition(transactional_id: &str) -> i32 {
    internal_partition(transactional_id, TXN_PARTITIONS)
}
