//! The active controller's decisions, without I/O: what records to propose for a broker's
//! registration and heartbeats, for the passage of time (fencing brokers whose session
//! expired), for topic creation and deletion, and for producer-id blocks.
//!
//! The controller reads the committed [`Image`] and returns records; the driver proposes them
//! to the quorum, and answers the request once they are committed and applied (the apply's
//! [`Applied`](crate::image::Applied) outcome is the answer: two racing creations of one
//! topic both pass here, and the second is rejected, identically on every node, at apply).
//!
//! Broker sessions (when each broker last heartbeat) are soft state of the active
//! controller, as in KRaft: a controller that takes over gives every broker a fresh session
//! ([`Controller::activate`]) rather than fencing them all at once.

use std::collections::{BTreeMap, BTreeSet};

mod reassign;

use strand_wire::ErrorCode;

use crate::image::{Image, PartitionState, TopicImage};
use crate::placement::{self, choose_leader, Refusal};
use crate::records::{
    BrokerRegistration, MetadataRecord, NodeId, PartitionChange, PartitionRecord, TopicId,
    NO_LEADER,
};

/// The controller's settings, by Kafka's names where Kafka has them.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    pub cluster_id: String,
    /// `broker.session.timeout.ms` (Kafka's default 9000).
    pub session_timeout_ms: u64,
    /// `num.partitions`, for CreateTopics with -1.
    pub default_partitions: i32,
    /// `default.replication.factor`, for CreateTopics with -1.
    pub default_replication_factor: i16,
    /// Producer ids per block handed to a broker (Kafka: 1000).
    pub producer_id_block_size: i64,
}

/// A broker's heartbeat (Kafka's BrokerHeartbeat, in-process form).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub node_id: NodeId,
    pub broker_epoch: u64,
    /// The last metadata offset the broker has applied: it is unfenced once it has applied
    /// its own registration.
    pub metadata_offset: u64,
    /// Controlled shutdown: fence it now, moving its leaderships away first.
    pub shutting_down: bool,
}

/// A heartbeat's outcome: records to propose, and whether the broker is (or is about to be)
/// fenced once they apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub records: Vec<MetadataRecord>,
    pub fenced: bool,
}

/// A topic to create (CreateTopics' fields; -1 means the default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// KIP-497's AlterPartition: the leader `node_id` of `topic`-`partition`, at the leader and
/// partition epochs it knows, asks for the in-sync replica set `isr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartition {
    pub node_id: NodeId,
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<NodeId>,
}

/// KIP-460's election types (ElectLeaders' `election_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// The first replica leads, if it is in sync and usable.
    Preferred,
    /// A partition without a leader gets one: a usable in-sync replica, else any usable
    /// replica (which may lose acknowledged records: `unclean.leader.election.enable`).
    Unclean,
}

impl Election {
    /// The wire value (0 preferred, 1 unclean).
    pub fn code(self) -> i8 {
        match self {
            Election::Preferred => 0,
            Election::Unclean => 1,
        }
    }

    pub fn from_code(code: i8) -> Option<Election> {
        match code {
            0 => Some(Election::Preferred),
            1 => Some(Election::Unclean),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Session {
    last_heartbeat_ms: u64,
}

pub struct Controller {
    cfg: ControllerConfig,
    sessions: BTreeMap<NodeId, Session>,
    /// Fences and unfences proposed but not yet applied: a tick or a heartbeat does not
    /// propose the same one twice.
    fencing: BTreeSet<NodeId>,
    unfencing: BTreeSet<NodeId>,
    /// Partitions with a repair change proposed and not yet applied.
    repairing: BTreeSet<(TopicId, i32)>,
}

impl Controller {
    pub fn new(cfg: ControllerConfig) -> Controller {
        Controller {
            cfg,
            sessions: BTreeMap::new(),
            fencing: BTreeSet::new(),
            unfencing: BTreeSet::new(),
            repairing: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// This node became the active controller at `now_ms`.
    pub fn activate(&mut self, image: &Image, now_ms: u64) {
        self.fencing.clear();
        self.unfencing.clear();
        self.repairing.clear();
        self.sessions = image
            .brokers
            .keys()
            .map(|n| {
                (
                    *n,
                    Session {
                        last_heartbeat_ms: now_ms,
                    },
                )
            })
            .collect();
    }

    /// A committed record was applied: forget what it settles.
    pub fn observe(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::FenceBroker { node_id, .. } => {
                self.fencing.remove(node_id);
            }
            MetadataRecord::UnfenceBroker { node_id, .. } => {
                self.unfencing.remove(node_id);
            }
            MetadataRecord::RegisterBroker(r) => {
                self.fencing.remove(&r.node_id);
                self.unfencing.remove(&r.node_id);
            }
            MetadataRecord::PartitionChange(c) => {
                self.repairing.remove(&(c.topic_id, c.partition));
            }
            _ => {}
        }
    }

    fn alive(&self, node: NodeId, now_ms: u64) -> bool {
        self.sessions.get(&node).is_some_and(|s| {
            now_ms.saturating_sub(s.last_heartbeat_ms) < self.cfg.session_timeout_ms
        })
    }

    /// BrokerRegistration.
    pub fn register(
        &mut self,
        image: &Image,
        reg: &BrokerRegistration,
        now_ms: u64,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        if reg.cluster_id != self.cfg.cluster_id {
            return Err(Refusal::new(
                ErrorCode::InconsistentClusterId,
                format!(
                    "broker {} belongs to cluster {}, this is cluster {}",
                    reg.node_id, reg.cluster_id, self.cfg.cluster_id
                ),
            ));
        }
        if reg.node_id < 0 || reg.shards == 0 {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!(
                    "node.id must be >= 0 and shards > 0 (node.id {}, shards {})",
                    reg.node_id, reg.shards
                ),
            ));
        }
        let mut records = Vec::new();
        if let Some(old) = image.brokers.get(&reg.node_id) {
            if old.registration == *reg {
                // The same process retrying (its answer was lost): already registered.
                return Ok(Vec::new());
            }
            let same = old.registration.incarnation == reg.incarnation;
            if !same && !old.fenced && self.alive(reg.node_id, now_ms) {
                return Err(Refusal::new(
                    ErrorCode::DuplicateBrokerRegistration,
                    format!(
                        "node.id {} is already registered by a live broker (cluster endpoint {}); \
                         its session expires {} ms after its last heartbeat",
                        reg.node_id, old.registration.cluster, self.cfg.session_timeout_ms
                    ),
                ));
            }
            let unfence_pending = self.unfencing.contains(&reg.node_id);
            if (!old.fenced || unfence_pending) && !self.fencing.contains(&reg.node_id) {
                // A restart: the old incarnation's leaderships go first (also those an
                // unfence still in flight would give it).
                records.extend(self.fence_records(image, reg.node_id, old.epoch));
            }
        }
        // No session yet: it starts with the first heartbeat of the new incarnation (the
        // broker is fenced until then, so nothing expires meanwhile).
        records.push(MetadataRecord::RegisterBroker(reg.clone()));
        Ok(records)
    }

    /// BrokerHeartbeat.
    pub fn heartbeat(
        &mut self,
        image: &Image,
        hb: &Heartbeat,
        now_ms: u64,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let Some(b) = image.brokers.get(&hb.node_id) else {
            return Err(Refusal::new(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {} is not registered", hb.node_id),
            ));
        };
        if b.epoch != hb.broker_epoch {
            return Err(Refusal::new(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {} is at epoch {}, the heartbeat says {}",
                    hb.node_id, b.epoch, hb.broker_epoch
                ),
            ));
        }
        self.sessions.insert(
            hb.node_id,
            Session {
                last_heartbeat_ms: now_ms,
            },
        );
        let mut records = Vec::new();
        let mut fenced = b.fenced || self.fencing.contains(&hb.node_id);
        if hb.shutting_down {
            // Also while an unfence is in flight (a stop right after start-up): it would
            // commit after this answer and leave the stopped node unfenced and leading.
            let unfence_pending = self.unfencing.contains(&hb.node_id);
            if (!b.fenced || unfence_pending) && !self.fencing.contains(&hb.node_id) {
                records = self.fence_records(image, hb.node_id, b.epoch);
            }
            fenced = true;
        } else if b.fenced
            && hb.metadata_offset >= b.epoch
            && !self.unfencing.contains(&hb.node_id)
            && !self.fencing.contains(&hb.node_id)
        {
            records = self.unfence_records(image, hb.node_id, b.epoch);
            fenced = false;
        }
        Ok(HeartbeatAnswer { records, fenced })
    }

    /// Time passed: fence every unfenced broker whose session expired; then, with nothing
    /// else in flight, repair what an earlier decision left behind (a change rejected
    /// because another one got there first).
    pub fn tick(&mut self, image: &Image, now_ms: u64) -> Vec<MetadataRecord> {
        self.tick_with_evidence(image, now_ms, &BTreeMap::new())
    }

    /// [`Controller::tick`], and also fence each unfenced broker whose registered incarnation
    /// is in `gone` (what a liveness tripwire saw die, `crate::liveness`).
    pub fn tick_with_evidence(
        &mut self,
        image: &Image,
        now_ms: u64,
        gone: &BTreeMap<NodeId, u128>,
    ) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        let expired: Vec<(NodeId, u64, bool)> = image
            .brokers
            .values()
            .filter(|b| !b.fenced && !self.fencing.contains(&b.registration.node_id))
            .map(|b| {
                let node = b.registration.node_id;
                let dead = gone.get(&node) == Some(&b.registration.incarnation);
                (node, b.epoch, dead)
            })
            .collect();
        // Brokers fenced in one tick are decided one after the other on a scratch image, so
        // the second one's changes see the first one's (two changes computed from the same
        // partition epoch cannot both apply).
        let mut scratch: Option<Image> = None;
        for (node, epoch, dead) in expired {
            if !dead {
                if let std::collections::btree_map::Entry::Vacant(v) = self.sessions.entry(node) {
                    // Registered before this controller knew it: a fresh session.
                    v.insert(Session {
                        last_heartbeat_ms: now_ms,
                    });
                    continue;
                }
            }
            if dead || !self.alive(node, now_ms) {
                let base = scratch.get_or_insert_with(|| image.clone());
                let fence = self.fence_records(base, node, epoch);
                for r in &fence {
                    let offset = base.applied_offset + 1;
                    let _ = base.apply(offset, r);
                }
                records.extend(fence);
            }
        }
        if records.is_empty() && self.fencing.is_empty() && self.unfencing.is_empty() {
            records = self.repair_records(image);
        }
        records
    }

    /// Partition changes that bring the image back to what fencing promises: no fenced
    /// leader, no fenced broker in an ISR it is not the last member of, a leader wherever
    /// an in-sync replica is usable. Each partition at most once until its change applies.
    fn repair_records(&mut self, image: &Image) -> Vec<MetadataRecord> {
        let usable = |n: NodeId| image.brokers.get(&n).is_some_and(|b| !b.fenced);
        let mut records = Vec::new();
        for t in image.topics.values() {
            for (partition, p) in &t.partitions {
                if self.repairing.contains(&(t.id, *partition)) {
                    continue;
                }
                let alive: Vec<NodeId> = p.isr.iter().copied().filter(|n| usable(*n)).collect();
                let isr = if alive.is_empty() {
                    p.isr.clone()
                } else {
                    alive
                };
                let leader = if p.leader != NO_LEADER && usable(p.leader) && isr.contains(&p.leader)
                {
                    p.leader
                } else {
                    choose_leader(&p.replicas, &isr, &usable)
                };
                if leader == p.leader && isr == p.isr {
                    // Nothing to repair: a reassignment whose targets are all in sync
                    // completes here if the change that should have completed it did not.
                    if let Some(done) = self.completion_record(image, t.id, *partition, p) {
                        self.repairing.insert((t.id, *partition));
                        records.push(done);
                    }
                    continue;
                }
                self.repairing.insert((t.id, *partition));
                records.push(MetadataRecord::PartitionChange(PartitionChange {
                    leader: (leader != p.leader).then_some(leader),
                    isr: (isr != p.isr).then_some(isr),
                    ..PartitionChange::new(t.id, *partition, p.partition_epoch)
                }));
            }
        }
        records
    }

    /// FenceBroker for `node` at `epoch`, then its leaderships moved to another in-sync,
    /// usable replica (or to none) and it leaves every ISR it is not the last member of.
    fn fence_records(&mut self, image: &Image, node: NodeId, epoch: u64) -> Vec<MetadataRecord> {
        self.fencing.insert(node);
        let usable = |n: NodeId| {
            n != node
                && !self.fencing.contains(&n)
                && image.brokers.get(&n).is_some_and(|b| !b.fenced)
        };
        let mut records = vec![MetadataRecord::FenceBroker {
            node_id: node,
            broker_epoch: epoch,
        }];
        for t in image.topics.values() {
            for (partition, p) in &t.partitions {
                if p.leader != node && !p.isr.contains(&node) {
                    continue;
                }
                let isr: Vec<NodeId> = if p.isr.len() > 1 {
                    p.isr.iter().copied().filter(|n| *n != node).collect()
                } else {
                    p.isr.clone()
                };
                let leader = if p.leader == node {
                    Some(choose_leader(&p.replicas, &isr, &usable))
                } else {
                    None
                };
                if leader.is_none() && isr == p.isr {
                    continue;
                }
                records.push(MetadataRecord::PartitionChange(PartitionChange {
                    leader,
                    isr: (isr != p.isr).then_some(isr),
                    ..PartitionChange::new(t.id, *partition, p.partition_epoch)
                }));
            }
        }
        records
    }

    /// UnfenceBroker for `node`, then every leaderless partition it is in sync for led by
    /// the preferred usable in-sync replica.
    fn unfence_records(&mut self, image: &Image, node: NodeId, epoch: u64) -> Vec<MetadataRecord> {
        self.unfencing.insert(node);
        let usable = |n: NodeId| {
            n == node
                || (!self.fencing.contains(&n) && image.brokers.get(&n).is_some_and(|b| !b.fenced))
        };
        let mut records = vec![MetadataRecord::UnfenceBroker {
            node_id: node,
            broker_epoch: epoch,
        }];
        for t in image.topics.values() {
            for (partition, p) in &t.partitions {
                if p.leader != NO_LEADER || !p.isr.contains(&node) {
                    continue;
                }
                let leader = choose_leader(&p.replicas, &p.isr, &usable);
                if leader == NO_LEADER {
                    continue;
                }
                records.push(MetadataRecord::PartitionChange(PartitionChange {
                    leader: Some(leader),
                    ..PartitionChange::new(t.id, *partition, p.partition_epoch)
                }));
            }
        }
        records
    }

    /// CreateTopics for one topic. `id` is a fresh random topic id (the driver draws it).
    pub fn create_topic(
        &self,
        image: &Image,
        t: &NewTopic,
        id: TopicId,
        shard_of: &dyn Fn(&str, i32, u32) -> u32,
        pending_leads: &BTreeMap<NodeId, u64>,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        if image.names.contains_key(&t.name) {
            return Err(Refusal::new(
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{}' already exists.", t.name),
            ));
        }
        let partitions = if t.partitions == -1 {
            self.cfg.default_partitions
        } else {
            t.partitions
        };
        let rf = if t.replication_factor == -1 {
            self.cfg.default_replication_factor
        } else {
            t.replication_factor
        };
        let assignment =
            placement::assign(image, &t.name, partitions, rf, shard_of, pending_leads)?;
        let mut records = vec![MetadataRecord::Topic {
            name: t.name.clone(),
            id,
            configs: t.configs.clone(),
        }];
        for (partition, replicas) in assignment.into_iter().enumerate() {
            let isr = replicas.iter().map(|r| r.node).collect();
            records.push(MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: partition as i32,
                leader: replicas[0].node,
                replicas,
                isr,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: Vec::new(),
                removing: Vec::new(),
            }));
        }
        Ok(records)
    }

    /// CreatePartitions for one topic: `count` is the new total; the new partitions are
    /// placed as a new topic's are, with the replication factor of partition 0. `grown`: the
    /// count an earlier CreatePartitions still in flight will leave (this one builds on it).
    #[allow(clippy::too_many_arguments)]
    pub fn create_partitions(
        &self,
        image: &Image,
        name: &str,
        count: i32,
        grown: Option<i32>,
        shard_of: &dyn Fn(&str, i32, u32) -> u32,
        pending_leads: &BTreeMap<NodeId, u64>,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let Some(t) = image.names.get(name).and_then(|id| image.topics.get(id)) else {
            return Err(Refusal::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        let have = (t.partitions.len() as i32).max(grown.unwrap_or(0));
        if count <= have {
            return Err(Refusal::new(
                ErrorCode::InvalidPartitions,
                format!("Topic currently has {have} partitions, which is higher than the requested {count}."),
            ));
        }
        let rf = t
            .partitions
            .values()
            .next()
            .map_or(1, |p| (p.replicas.len() - p.removing.len()) as i16); // a move's target
        let assignment =
            placement::assign_from(image, name, have, count, rf, shard_of, pending_leads)?;
        Ok(assignment
            .into_iter()
            .zip(have..)
            .map(|(replicas, partition)| {
                MetadataRecord::Partition(PartitionRecord {
                    topic_id: t.id,
                    partition,
                    leader: replicas[0].node,
                    isr: replicas.iter().map(|r| r.node).collect(),
                    replicas,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding: Vec::new(),
                    removing: Vec::new(),
                })
            })
            .collect())
    }

    /// IncrementalAlterConfigs / AlterConfigs for one topic, already validated by the
    /// asking broker: each config set (`Some`) or removed (`None`).
    pub fn alter_topic_configs(
        &self,
        image: &Image,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let Some(t) = image.names.get(name).and_then(|id| image.topics.get(id)) else {
            return Err(Refusal::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        // Every key is written, even one equal to the committed value: another change to it
        // may be in flight, and the last one asked must be the one that stands.
        Ok(changes
            .iter()
            .map(|(key, value)| MetadataRecord::TopicConfig {
                id: t.id,
                key: key.clone(),
                value: value.clone(),
            })
            .collect())
    }

    /// AlterPartition (KIP-497) from a partition's leader, checked as Kafka's controller
    /// does: the topic and partition exist; the leader epoch is the current one (older:
    /// FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH); the asker leads it
    /// (INVALID_REQUEST); the partition epoch is the current one (INVALID_UPDATE_VERSION: the
    /// leader's view is behind, it retries from the new one); the ISR is a non-empty set of
    /// replicas that holds the leader (INVALID_REQUEST); a replica it adds is a registered,
    /// unfenced broker (INELIGIBLE_REPLICA). The same ISR as now writes nothing.
    pub fn alter_partition(
        &self,
        image: &Image,
        req: &AlterPartition,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let (t, p) = partition_of(image, &req.topic, req.partition)?;
        let at = format!("{}-{}", req.topic, req.partition);
        match req.leader_epoch.cmp(&p.leader_epoch) {
            std::cmp::Ordering::Less => {
                return Err(Refusal::new(
                    ErrorCode::FencedLeaderEpoch,
                    format!(
                        "{at} is at leader epoch {}, not {}",
                        p.leader_epoch, req.leader_epoch
                    ),
                ))
            }
            std::cmp::Ordering::Greater => {
                return Err(Refusal::new(
                    ErrorCode::UnknownLeaderEpoch,
                    format!(
                        "{at} is at leader epoch {}, not {}",
                        p.leader_epoch, req.leader_epoch
                    ),
                ))
            }
            std::cmp::Ordering::Equal => {}
        }
        if p.leader != req.node_id {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!(
                    "node {} does not lead {at} (node {} does)",
                    req.node_id, p.leader
                ),
            ));
        }
        if req.partition_epoch != p.partition_epoch {
            return Err(Refusal::new(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "{at} is at partition epoch {}, not {}",
                    p.partition_epoch, req.partition_epoch
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        let well_formed = !req.isr.is_empty()
            && req.isr.contains(&p.leader)
            && req
                .isr
                .iter()
                .all(|n| seen.insert(*n) && p.replicas.iter().any(|r| r.node == *n));
        if !well_formed {
            return Err(Refusal::new(
                ErrorCode::InvalidRequest,
                format!(
                    "ISR {:?} of {at} must be distinct replicas of {:?} holding the leader {}",
                    req.isr,
                    p.replicas.iter().map(|r| r.node).collect::<Vec<_>>(),
                    p.leader
                ),
            ));
        }
        // Not a broker being fenced either (its fence is proposed, not applied yet: a
        // controlled shutdown), or the stopped node would hold acks=all until repaired.
        let usable = |n: &NodeId| {
            !self.fencing.contains(n) && image.brokers.get(n).is_some_and(|b| !b.fenced)
        };
        if let Some(n) = req.isr.iter().find(|n| !p.isr.contains(n) && !usable(n)) {
            return Err(Refusal::new(
                ErrorCode::IneligibleReplica,
                format!("replica {n} of {at} is fenced or not registered"),
            ));
        }
        if req.isr == p.isr {
            return Ok(Vec::new());
        }
        // The ISR that holds every target of a reassignment completes it, in the same change
        // (KRaft's PartitionChangeBuilder does the same).
        let usable_node = |n: NodeId| usable(&n);
        if let Some(done) = reassign::try_complete(p, &req.isr, &usable_node) {
            return Ok(vec![done.change(t.id, req.partition, p)]);
        }
        Ok(vec![MetadataRecord::PartitionChange(PartitionChange {
            isr: Some(req.isr.clone()),
            ..PartitionChange::new(t.id, req.partition, p.partition_epoch)
        })])
    }

    /// ElectLeaders (KIP-460) for one partition, as KRaft's controller decides it.
    /// Preferred: the first replica already leads -> ELECTION_NOT_NEEDED; it is in sync and
    /// usable -> it leads (a new leader epoch; the old leader becomes its follower);
    /// else PREFERRED_LEADER_NOT_AVAILABLE. Unclean: a partition with a leader ->
    /// ELECTION_NOT_NEEDED; else a usable in-sync replica, else the first usable replica
    /// with the ISR reset to it alone; none -> ELIGIBLE_LEADERS_NOT_AVAILABLE.
    pub fn elect_leader(
        &self,
        image: &Image,
        topic: &str,
        partition: i32,
        election: Election,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let (t, p) = partition_of(image, topic, partition)?;
        let usable = |n: NodeId| {
            !self.fencing.contains(&n) && image.brokers.get(&n).is_some_and(|b| !b.fenced)
        };
        let at = format!("{topic}-{partition}");
        let change = |leader: NodeId, isr: Option<Vec<NodeId>>| {
            vec![MetadataRecord::PartitionChange(PartitionChange {
                leader: Some(leader),
                isr,
                ..PartitionChange::new(t.id, partition, p.partition_epoch)
            })]
        };
        match election {
            Election::Preferred => {
                let preferred = p.replicas.first().map_or(NO_LEADER, |r| r.node);
                if p.leader == preferred {
                    Err(Refusal::new(
                        ErrorCode::ElectionNotNeeded,
                        format!("{at}: the preferred replica {preferred} already leads"),
                    ))
                } else if p.isr.contains(&preferred) && usable(preferred) {
                    Ok(change(preferred, None))
                } else {
                    Err(Refusal::new(
                        ErrorCode::PreferredLeaderNotAvailable,
                        format!(
                            "{at}: the preferred replica {preferred} is {}",
                            if p.isr.contains(&preferred) {
                                "fenced or not registered"
                            } else {
                                "not in sync"
                            }
                        ),
                    ))
                }
            }
            Election::Unclean => {
                if p.leader != NO_LEADER {
                    return Err(Refusal::new(
                        ErrorCode::ElectionNotNeeded,
                        format!("{at} is led by {}", p.leader),
                    ));
                }
                let clean = choose_leader(&p.replicas, &p.isr, &usable);
                if clean != NO_LEADER {
                    return Ok(change(clean, None));
                }
                match p.replicas.iter().map(|r| r.node).find(|n| usable(*n)) {
                    Some(n) => Ok(change(n, Some(vec![n]))),
                    None => Err(Refusal::new(
                        ErrorCode::EligibleLeadersNotAvailable,
                        format!("{at}: no replica is on a live broker"),
                    )),
                }
            }
        }
    }

    /// DeleteTopics for one topic.
    pub fn delete_topic(&self, image: &Image, name: &str) -> Result<Vec<MetadataRecord>, Refusal> {
        match image.names.get(name) {
            Some(id) => Ok(vec![MetadataRecord::RemoveTopic { id: *id }]),
            None => Err(Refusal::new(
                ErrorCode::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            )),
        }
    }

    /// AllocateProducerIds: the block `[start, start + size)` for `node_id`, and the record
    /// that reserves it (the block is the broker's once that record is committed).
    pub fn allocate_producer_ids(&self, image: &Image, node_id: NodeId) -> (i64, MetadataRecord) {
        let start = image.next_producer_id;
        (
            start,
            MetadataRecord::ProducerIds {
                node_id,
                next_producer_id: start + self.cfg.producer_id_block_size,
            },
        )
    }
}

/// `topic`-`partition` in the image, or UNKNOWN_TOPIC_OR_PARTITION (Kafka's message).
fn partition_of<'a>(
    image: &'a Image,
    topic: &str,
    partition: i32,
) -> Result<(&'a TopicImage, &'a PartitionState), Refusal> {
    let unknown = || {
        Refusal::new(
            ErrorCode::UnknownTopicOrPartition,
            "This server does not host this topic-partition.",
        )
    };
    let t = image
        .names
        .get(topic)
        .and_then(|id| image.topics.get(id))
        .ok_or_else(unknown)?;
    let p = t.partitions.get(&partition).ok_or_else(unknown)?;
    Ok((t, p))
}
