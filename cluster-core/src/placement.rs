//! Placement: which nodes hold a new partition's replicas, which of them leads, and which
//! shard owns it on each node.
//!
//! - Only registered, unfenced brokers get replicas; a replication factor above their count
//!   is INVALID_REPLICATION_FACTOR (Kafka's message).
//! - Leaders are balanced: each new partition is led by the usable broker leading the fewest
//!   partitions so far (this topic's included), ties broken by a rotation derived from the
//!   topic name, so many one-partition topics do not all land on node 1.
//! - Followers follow the leader in node-id order (a ring), so replica sets differ between
//!   leaders and the load of following is spread too.
//! - The shard on a node comes from the caller's `shard_of(topic, partition, shards)` (the
//!   broker's own hash today, so a single node's data directory layout does not change).

use std::collections::BTreeMap;

use strand_wire::ErrorCode;

use crate::image::Image;
use crate::records::{NodeId, Replica, NO_LEADER};

/// The most partitions one topic may have (the broker's `limits::PARTITIONS_PER_TOPIC_MAX`:
/// placement allocates per partition, so an absurd count must not reach it).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// A refused request: the Kafka error and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// The replicas of partitions `0..partitions` of a new topic `topic`, the leader first.
pub fn assign(
    image: &Image,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    shard_of: &dyn Fn(&str, i32, u32) -> u32,
    pending_leads: &BTreeMap<NodeId, u64>,
) -> Result<Vec<Vec<Replica>>, Refusal> {
    assign_from(
        image,
        topic,
        0,
        partitions,
        replication_factor,
        shard_of,
        pending_leads,
    )
}

/// The replicas of partitions `first..partitions` of `topic` (CreatePartitions adds them to
/// an existing topic), the leader first; element 0 is partition `first`. `pending_leads`
/// counts the leaderships proposed but not yet in `image` (changes asked at once are placed
/// as if the earlier ones had landed, so a burst of small topics is spread, not stacked).
pub fn assign_from(
    image: &Image,
    topic: &str,
    first: i32,
    partitions: i32,
    replication_factor: i16,
    shard_of: &dyn Fn(&str, i32, u32) -> u32,
    pending_leads: &BTreeMap<NodeId, u64>,
) -> Result<Vec<Vec<Replica>>, Refusal> {
    debug_assert!(first >= 0, "first partition {first}");
    let usable: Vec<(NodeId, u32)> = image
        .usable_brokers()
        .map(|b| (b.registration.node_id, b.registration.shards.max(1)))
        .collect();
    if partitions > PARTITIONS_PER_TOPIC_MAX {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!("Number of partitions {partitions} is above this cluster's limit of {PARTITIONS_PER_TOPIC_MAX} per topic."),
        ));
    }
    if partitions <= 0 {
        return Err(Refusal::new(
            ErrorCode::InvalidPartitions,
            format!(
                "Number of partitions was set to an invalid non-positive value ({partitions})."
            ),
        ));
    }
    if replication_factor <= 0 {
        return Err(Refusal::new(
            ErrorCode::InvalidReplicationFactor,
            format!("Replication factor must be larger than 0, or -1 to use the default value (was {replication_factor})."),
        ));
    }
    let rf = replication_factor as usize;
    if rf > usable.len() {
        return Err(Refusal::new(
            ErrorCode::InvalidReplicationFactor,
            format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                usable.len()
            ),
        ));
    }
    let mut leads: BTreeMap<NodeId, u64> = usable.iter().map(|(n, _)| (*n, 0)).collect();
    for t in image.topics.values() {
        for p in t.partitions.values() {
            if let Some(c) = leads.get_mut(&p.leader) {
                *c += 1;
            }
        }
    }
    for (node, n) in pending_leads {
        if let Some(c) = leads.get_mut(node) {
            *c += n;
        }
    }
    let rotation = name_hash(topic) as usize % usable.len();
    let mut out = Vec::with_capacity((partitions - first).max(0) as usize);
    for partition in first..partitions {
        // The least-loaded usable broker, scanning from this topic's rotation.
        let leader_at = (0..usable.len())
            .map(|k| (rotation + partition as usize + k) % usable.len())
            .min_by_key(|&i| leads[&usable[i].0])
            .unwrap_or(0);
        if let Some(c) = leads.get_mut(&usable[leader_at].0) {
            *c += 1;
        }
        let replicas: Vec<Replica> = (0..rf)
            .map(|k| {
                let (node, shards) = usable[(leader_at + k) % usable.len()];
                let shard = shard_of(topic, partition, shards);
                debug_assert!(shard < shards, "shard_of returned {shard} of {shards}");
                Replica {
                    node,
                    shard: shard.min(shards - 1),
                }
            })
            .collect();
        out.push(replicas);
    }
    Ok(out)
}

/// The leader a partition gets from its ISR: the first replica (preferred order) that is in
/// `isr` and usable, else none.
pub fn choose_leader(
    replicas: &[Replica],
    isr: &[NodeId],
    usable: &dyn Fn(NodeId) -> bool,
) -> NodeId {
    replicas
        .iter()
        .map(|r| r.node)
        .find(|n| isr.contains(n) && usable(*n))
        .unwrap_or(NO_LEADER)
}

fn name_hash(s: &str) -> u32 {
    // FNV-1a: stable across platforms and releases (std's hasher is not).
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
