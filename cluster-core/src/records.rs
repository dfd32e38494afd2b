//! Metadata records: the entries of the replicated metadata log (KRaft's idea: the cluster's
//! metadata *is* a log, and every node's view is that log applied in order).
//!
//! The log form says what changed (`RegisterBroker`, `FenceBroker`, `PartitionChange`);
//! a snapshot lists the state itself (`BrokerSnapshot`, `Partition` with its current leader
//! and epochs), so a node that restores one needs none of the history.

use std::collections::BTreeMap;

/// Kafka's `node.id`.
pub type NodeId = i32;
/// A topic's id (Kafka's topic UUID, 16 bytes).
pub type TopicId = [u8; 16];
/// A partition's leader when none is elected.
pub const NO_LEADER: NodeId = -1;

/// Where a broker is reached.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// What a broker says about itself when it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node_id: NodeId,
    /// Random per process start: a restarted broker has a new one; two live processes with
    /// the same `node.id` have different ones (the second is refused).
    pub incarnation: u128,
    pub cluster_id: String,
    /// The Kafka listener clients are sent to (`advertised.listeners`).
    pub client: Endpoint,
    /// The cluster transport (QUIC over UDP) other nodes reach it at.
    pub cluster: Endpoint,
    /// Shards (cores) serving partitions on that node.
    pub shards: u32,
    pub rack: Option<String>,
}

/// One replica of a partition: the node and the shard on it that owns the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Replica {
    pub node: NodeId,
    pub shard: u32,
}

/// A partition's full state (creation, and snapshots).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecord {
    pub topic_id: TopicId,
    pub partition: i32,
    /// The first replica is the preferred leader.
    pub replicas: Vec<Replica>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
    /// Bumped at every leader change (KIP-320: clients and followers fence stale leaders).
    pub leader_epoch: i32,
    /// Bumped at every change of any kind; a change names the epoch it was computed from.
    pub partition_epoch: i32,
    /// A reassignment in flight (KIP-455): replicas being added (copying the log, not yet
    /// all in sync) and replicas to remove once every target is in sync. Both empty when
    /// none is; the targets are `replicas` minus `removing`.
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

/// A change to a partition, computed by the controller from the state at
/// `expected_partition_epoch`; applied only if the partition is still at that epoch (two
/// changes computed from the same state cannot both apply). `None` leaves a field as it is
/// (`Some(vec![])` clears a list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionChange {
    pub topic_id: TopicId,
    pub partition: i32,
    pub expected_partition_epoch: i32,
    pub leader: Option<NodeId>,
    pub isr: Option<Vec<NodeId>>,
    /// A reassignment's new replica set (KIP-455), and its adding / removing lists.
    pub replicas: Option<Vec<Replica>>,
    pub adding: Option<Vec<NodeId>>,
    pub removing: Option<Vec<NodeId>>,
}

impl PartitionChange {
    /// A change of nothing yet, from the state at `expected_partition_epoch`: callers set the
    /// fields they change.
    pub fn new(topic_id: TopicId, partition: i32, expected_partition_epoch: i32) -> Self {
        PartitionChange {
            topic_id,
            partition,
            expected_partition_epoch,
            leader: None,
            isr: None,
            replicas: None,
            adding: None,
            removing: None,
        }
    }
}

/// A broker's state in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerSnapshot {
    pub registration: BrokerRegistration,
    pub epoch: u64,
    pub fenced: bool,
}

/// One entry of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker (re)starts. Its broker epoch becomes the record's log offset; it starts
    /// fenced (no leaderships) until it has caught up with the metadata log.
    RegisterBroker(BrokerRegistration),
    /// A broker missed its session (or restarted): it leads nothing until unfenced.
    FenceBroker {
        node_id: NodeId,
        broker_epoch: u64,
    },
    UnfenceBroker {
        node_id: NodeId,
        broker_epoch: u64,
    },
    Topic {
        name: String,
        id: TopicId,
        configs: BTreeMap<String, String>,
    },
    Partition(PartitionRecord),
    PartitionChange(PartitionChange),
    RemoveTopic {
        id: TopicId,
    },
    /// A topic config set (`Some`) or removed (`None`).
    TopicConfig {
        id: TopicId,
        key: String,
        value: Option<String>,
    },
    /// Producer ids handed out in blocks: the next block starts here.
    ProducerIds {
        node_id: NodeId,
        next_producer_id: i64,
    },
    /// Snapshot form of a broker (the log uses RegisterBroker / Fence / Unfence).
    BrokerSnapshot(BrokerSnapshot),
}

impl MetadataRecord {
    /// A short name for logs and counters.
    pub fn kind(&self) -> &'static str {
        match self {
            MetadataRecord::RegisterBroker(_) => "register-broker",
            MetadataRecord::FenceBroker { .. } => "fence-broker",
            MetadataRecord::UnfenceBroker { .. } => "unfence-broker",
            MetadataRecord::Topic { .. } => "topic",
            MetadataRecord::Partition(_) => "partition",
            MetadataRecord::PartitionChange(_) => "partition-change",
            MetadataRecord::RemoveTopic { .. } => "remove-topic",
            MetadataRecord::TopicConfig { .. } => "topic-config",
            MetadataRecord::ProducerIds { .. } => "producer-ids",
            MetadataRecord::BrokerSnapshot(_) => "broker-snapshot",
        }
    }
}

/// A topic id as Kafka prints UUIDs (8-4-4-4-12 hex).
pub fn topic_id_string(id: &TopicId) -> String {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_ids_print_as_uuids() {
        let mut id = [0u8; 16];
        id[0] = 0xab;
        id[15] = 0x01;
        assert_eq!(topic_id_string(&id), "ab000000-0000-0000-0000-000000000001");
    }
}
