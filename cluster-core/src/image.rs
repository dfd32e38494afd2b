//! The metadata image: the committed metadata log applied in order. Every node builds the
//! same image from the same log — `apply` is deterministic and never fails halfway: a record
//! that no longer fits the state it was computed from (a second creation of one topic, a
//! partition change from a stale epoch) is *rejected* as a whole, identically everywhere, and
//! the rejection is the answer its requester gets.
//!
//! [`Image::digest`] is a hash of the whole state, for checking that nodes agree;
//! [`Image::to_snapshot`] / [`Image::from_snapshot`] turn it into records and back.

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::ErrorCode;

use crate::records::{
    BrokerRegistration, BrokerSnapshot, MetadataRecord, NodeId, PartitionChange, PartitionRecord,
    Replica, TopicId, NO_LEADER,
};

/// A broker as the cluster knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerState {
    pub registration: BrokerRegistration,
    /// The log offset of its registration: requests from an older incarnation carry an older
    /// epoch and are refused (STALE_BROKER_EPOCH).
    pub epoch: u64,
    pub fenced: bool,
}

/// A partition's current state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    pub replicas: Vec<Replica>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// A reassignment in flight (KIP-455): replicas being added and replicas to remove once
    /// every target (`replicas` minus `removing`) is in sync. Both empty when none is.
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

impl PartitionState {
    /// Whether a reassignment is in flight.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The shard owning this partition on `node`, if `node` holds a replica.
    pub fn shard_on(&self, node: NodeId) -> Option<u32> {
        self.replicas
            .iter()
            .find(|r| r.node == node)
            .map(|r| r.shard)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: TopicId,
    pub configs: BTreeMap<String, String>,
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// What applying one record did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// Nothing changed; the requester gets this error.
    Rejected(ErrorCode, String),
}

/// The metadata image. Ordered maps only, so iteration (and the digest) is the same on every
/// node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    pub brokers: BTreeMap<NodeId, BrokerState>,
    pub topics: BTreeMap<TopicId, TopicImage>,
    pub names: BTreeMap<String, TopicId>,
    /// The first producer id of the next block handed out.
    pub next_producer_id: i64,
    /// The offset of the last record applied (0: none).
    pub applied_offset: u64,
}

fn reject(code: ErrorCode, message: String) -> Applied {
    Applied::Rejected(code, message)
}

impl Image {
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.names.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        self.topic_by_name(topic)?.partitions.get(&partition)
    }

    /// Registered, unfenced brokers, by id.
    pub fn usable_brokers(&self) -> impl Iterator<Item = &BrokerState> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// Applies the record at log offset `offset` (offsets increase; the first is 1).
    pub fn apply(&mut self, offset: u64, record: &MetadataRecord) -> Applied {
        assert!(
            offset > self.applied_offset,
            "metadata offsets must increase: {offset} after {}",
            self.applied_offset
        );
        self.applied_offset = offset;
        let applied = match record {
            MetadataRecord::RegisterBroker(r) => {
                let restarted = self
                    .brokers
                    .get(&r.node_id)
                    .is_some_and(|b| b.registration.incarnation != r.incarnation);
                if restarted {
                    self.drop_leaderships(r.node_id);
                }
                self.brokers.insert(
                    r.node_id,
                    BrokerState {
                        registration: r.clone(),
                        epoch: offset,
                        fenced: true,
                    },
                );
                Applied::Done
            }
            MetadataRecord::BrokerSnapshot(b) => {
                self.brokers.insert(b.registration.node_id, broker_of(b));
                Applied::Done
            }
            MetadataRecord::FenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, true),
            MetadataRecord::UnfenceBroker {
                node_id,
                broker_epoch,
            } => self.set_fenced(*node_id, *broker_epoch, false),
            MetadataRecord::Topic { name, id, configs } => {
                if self.names.contains_key(name) {
                    reject(
                        ErrorCode::TopicAlreadyExists,
                        format!("Topic '{name}' already exists."),
                    )
                } else if self.topics.contains_key(id) {
                    reject(ErrorCode::InvalidRequest, "duplicate topic id".into())
                } else {
                    let fresh = self.names.insert(name.clone(), *id).is_none();
                    assert!(fresh, "topic name {name} indexed twice");
                    self.topics.insert(
                        *id,
                        TopicImage {
                            name: name.clone(),
                            id: *id,
                            configs: configs.clone(),
                            partitions: BTreeMap::new(),
                        },
                    );
                    Applied::Done
                }
            }
            MetadataRecord::Partition(p) => self.put_partition(p),
            MetadataRecord::PartitionChange(c) => self.change_partition(c),
            MetadataRecord::RemoveTopic { id } => match self.topics.remove(id) {
                Some(t) => {
                    let indexed = self.names.remove(&t.name);
                    assert_eq!(
                        indexed,
                        Some(*id),
                        "topic {} indexed under another id",
                        t.name
                    );
                    Applied::Done
                }
                None => reject(
                    ErrorCode::UnknownTopicOrPartition,
                    "This server does not host this topic ID.".into(),
                ),
            },
            MetadataRecord::TopicConfig { id, key, value } => match self.topics.get_mut(id) {
                Some(t) => {
                    match value {
                        Some(v) => t.configs.insert(key.clone(), v.clone()),
                        None => t.configs.remove(key),
                    };
                    Applied::Done
                }
                None => reject(
                    ErrorCode::UnknownTopicOrPartition,
                    "This server does not host this topic ID.".into(),
                ),
            },
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                if *next_producer_id <= self.next_producer_id {
                    reject(
                        ErrorCode::InvalidRequest,
                        format!(
                            "producer id block ending at {next_producer_id} is not after {}",
                            self.next_producer_id
                        ),
                    )
                } else {
                    self.next_producer_id = *next_producer_id;
                    Applied::Done
                }
            }
        };
        self.check_invariants();
        applied
    }

    /// A new incarnation of `node` registered: it leads nothing its predecessor led. Every
    /// partition it still leads becomes leaderless at a new leader epoch (and partition
    /// epoch), whatever else is in flight: the controller's fence of the old incarnation
    /// may have been rejected (computed from a state another change had moved on), and a
    /// new process leading its predecessor's epoch could write records at offsets where
    /// followers hold that epoch's lost tail — the same (epoch, offset) with two records,
    /// which epoch-based truncation cannot tell apart (found by the deterministic
    /// simulation, #19). Unfencing it, or the controller's repair, elects a leader again.
    fn drop_leaderships(&mut self, node: NodeId) {
        for t in self.topics.values_mut() {
            for p in t.partitions.values_mut() {
                if p.leader == node {
                    p.leader = NO_LEADER;
                    p.leader_epoch += 1;
                    p.partition_epoch += 1;
                }
            }
        }
    }

    /// Applies `record` at `offset` as one record of a committed entry: as [`Image::apply`],
    /// except that a partition change is rejected when an earlier change of the same
    /// partition in the entry was (`rejected` carries them through the entry). The later one
    /// was computed from the state the rejected one would have left; applied to another
    /// state (whose epoch it may well match) it could, say, put a lagging replica back into
    /// the ISR.
    pub fn apply_in_entry(
        &mut self,
        offset: u64,
        record: &MetadataRecord,
        rejected: &mut BTreeSet<(TopicId, i32)>,
    ) -> Applied {
        if let MetadataRecord::PartitionChange(c) = record {
            if rejected.contains(&(c.topic_id, c.partition)) {
                assert!(
                    offset > self.applied_offset,
                    "metadata offsets must increase: {offset} after {}",
                    self.applied_offset
                );
                self.applied_offset = offset;
                return reject(
                    ErrorCode::InvalidUpdateVersion,
                    format!(
                        "partition {}: an earlier change of it in the same entry was rejected",
                        c.partition
                    ),
                );
            }
        }
        let applied = self.apply(offset, record);
        if let (Applied::Rejected(..), MetadataRecord::PartitionChange(c)) = (&applied, record) {
            rejected.insert((c.topic_id, c.partition));
        }
        applied
    }

    fn set_fenced(&mut self, node_id: NodeId, broker_epoch: u64, fenced: bool) -> Applied {
        match self.brokers.get_mut(&node_id) {
            None => reject(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {node_id} is not registered"),
            ),
            Some(b) if b.epoch != broker_epoch => reject(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {node_id} is at epoch {}, not {broker_epoch}",
                    b.epoch
                ),
            ),
            Some(b) => {
                b.fenced = fenced;
                Applied::Done
            }
        }
    }

    fn put_partition(&mut self, p: &PartitionRecord) -> Applied {
        let Some(t) = self.topics.get_mut(&p.topic_id) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                "partition of an unknown topic id".into(),
            );
        };
        let state = PartitionState {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            adding: p.adding.clone(),
            removing: p.removing.clone(),
        };
        if let Err(e) = well_formed(&state) {
            return reject(ErrorCode::InvalidReplicaAssignment, e);
        }
        if t.partitions.contains_key(&p.partition) {
            return reject(
                ErrorCode::InvalidRequest,
                format!("partition {} of {} exists already", p.partition, t.name),
            );
        }
        t.partitions.insert(p.partition, state);
        Applied::Done
    }

    fn change_partition(&mut self, c: &PartitionChange) -> Applied {
        let Some(p) = self
            .topics
            .get_mut(&c.topic_id)
            .and_then(|t| t.partitions.get_mut(&c.partition))
        else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                "change of an unknown partition".into(),
            );
        };
        if p.partition_epoch != c.expected_partition_epoch {
            return reject(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "partition {} is at partition epoch {}, the change was computed at {}",
                    c.partition, p.partition_epoch, c.expected_partition_epoch
                ),
            );
        }
        let mut next = p.clone();
        if let Some(isr) = &c.isr {
            next.isr.clone_from(isr);
        }
        if let Some(replicas) = &c.replicas {
            next.replicas.clone_from(replicas);
        }
        if let Some(adding) = &c.adding {
            next.adding.clone_from(adding);
        }
        if let Some(removing) = &c.removing {
            next.removing.clone_from(removing);
        }
        let shrunk = match replicas_removed(p, &next) {
            Ok(shrunk) => shrunk,
            Err(e) => return reject(ErrorCode::InvalidRequest, e),
        };
        let moved = c.leader.is_some_and(|l| l != p.leader);
        if let Some(leader) = c.leader {
            next.leader = leader;
        }
        // A new leader epoch when the leader moves, and when replicas leave (as KRaft's
        // PartitionChangeBuilder): a removed replica's fetches are then fenced.
        if moved || shrunk {
            next.leader_epoch += 1;
        }
        next.partition_epoch += 1;
        if let Err(e) = well_formed(&next) {
            return reject(ErrorCode::InvalidRequest, e);
        }
        *p = next;
        Applied::Done
    }

    /// Invariants every applied state keeps (checked in release builds too: a violation is a
    /// bug in `apply`, and a node must not serve from a corrupt image). O(1) per record; the
    /// name index is checked where it changes.
    fn check_invariants(&self) {
        assert_eq!(
            self.names.len(),
            self.topics.len(),
            "the topic name index and the topics diverged"
        );
    }

    /// A 64-bit FNV-1a hash of the whole state (not of `applied_offset`: a restored snapshot
    /// and a replayed log give the same digest).
    pub fn digest(&self) -> u64 {
        let mut clone = self.clone();
        clone.applied_offset = 0;
        let text = format!("{clone:?}");
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// The records that rebuild this image (a metadata snapshot's content).
    pub fn to_snapshot(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for b in self.brokers.values() {
            out.push(MetadataRecord::BrokerSnapshot(BrokerSnapshot {
                registration: b.registration.clone(),
                epoch: b.epoch,
                fenced: b.fenced,
            }));
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::Topic {
                name: t.name.clone(),
                id: t.id,
                configs: t.configs.clone(),
            });
            for (partition, p) in &t.partitions {
                out.push(MetadataRecord::Partition(PartitionRecord {
                    topic_id: t.id,
                    partition: *partition,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    adding: p.adding.clone(),
                    removing: p.removing.clone(),
                }));
            }
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds {
                node_id: NO_LEADER,
                next_producer_id: self.next_producer_id,
            });
        }
        out
    }

    /// The image a snapshot taken at `offset` describes.
    pub fn from_snapshot(offset: u64, records: &[MetadataRecord]) -> Result<Image, String> {
        let mut image = Image::default();
        for (i, r) in records.iter().enumerate() {
            // Snapshot records take offsets 1..=n on a scratch image; the result is then
            // stamped with the snapshot's own offset.
            if let Applied::Rejected(code, why) = image.apply(i as u64 + 1, r) {
                return Err(format!(
                    "snapshot record {i} ({}): {code:?}: {why}",
                    r.kind()
                ));
            }
        }
        image.applied_offset = offset;
        Ok(image)
    }
}

fn broker_of(b: &BrokerSnapshot) -> BrokerState {
    BrokerState {
        registration: b.registration.clone(),
        epoch: b.epoch,
        fenced: b.fenced,
    }
}

/// A partition state the image accepts: replicas distinct, the ISR a non-empty subset of
/// them, the leader in the ISR (or none).
fn well_formed(p: &PartitionState) -> Result<(), String> {
    let mut nodes: Vec<NodeId> = p.replicas.iter().map(|r| r.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() != p.replicas.len() || nodes.is_empty() {
        return Err(format!(
            "replicas {:?} are empty or repeat a node",
            p.replicas
        ));
    }
    let mut isr = p.isr.clone();
    isr.sort_unstable();
    isr.dedup();
    if p.isr.is_empty()
        || isr.len() != p.isr.len()
        || p.isr.iter().any(|n| nodes.binary_search(n).is_err())
    {
        return Err(format!(
            "ISR {:?} is empty, repeats a node or is not within the replicas {nodes:?}",
            p.isr
        ));
    }
    if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
        return Err(format!("leader {} is not in the ISR {:?}", p.leader, p.isr));
    }
    let listed = |n: &NodeId| nodes.binary_search(n).is_ok();
    let mut moving: Vec<NodeId> = p.adding.iter().chain(&p.removing).copied().collect();
    moving.sort_unstable();
    moving.dedup();
    if moving.len() != p.adding.len() + p.removing.len()
        || !moving.iter().all(listed)
        || p.removing.len() >= nodes.len()
    {
        return Err(format!(
            "adding {:?} and removing {:?} must be distinct replicas of {nodes:?}, and leave a \
             target",
            p.adding, p.removing
        ));
    }
    Ok(())
}

/// Whether the change from `old` to `next` removes replicas, checked as a reassignment
/// allows: a replica leaves only when a reassignment completes (it was `removing`, and every
/// remaining replica is in the new ISR: "removed only once all targets are in sync") or is
/// cancelled (it was `adding`).
fn replicas_removed(old: &PartitionState, next: &PartitionState) -> Result<bool, String> {
    let gone: Vec<NodeId> = old
        .replicas
        .iter()
        .map(|r| r.node)
        .filter(|n| next.shard_on(*n).is_none())
        .collect();
    for n in &gone {
        if old.removing.contains(n) {
            if let Some(out) = next.replicas.iter().find(|r| !next.isr.contains(&r.node)) {
                return Err(format!(
                    "replica {n} is removed while target {} is not in the ISR {:?}",
                    out.node, next.isr
                ));
            }
        } else if !old.adding.contains(n) {
            return Err(format!(
                "replica {n} is removed outside a reassignment (replicas {:?})",
                old.replicas
            ));
        }
    }
    Ok(!gone.is_empty())
}
