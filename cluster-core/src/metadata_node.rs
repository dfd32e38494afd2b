//! One node's side of the metadata log, without I/O: it applies committed entries to the
//! [`Image`] and, while this node leads the quorum, is the active controller — it turns
//! brokers' requests ([`Request`]) into record batches to propose and answers each request
//! once its batch is applied.
//!
//! The driver feeds it what the quorum says (committed entries, snapshots, leadership), the
//! requests that arrive (from this node's broker or over the cluster transport) and the
//! time; it returns [`Effect`]s: batches to propose, answers to send. Randomness (topic ids)
//! comes from the driver, so tests replay exactly.
//!
//! A batch names its proposer and request id, so the answer comes from applying the
//! committed entry — also when leadership moved between proposing and committing (the new
//! leader commits the old one's entry; the proposer still answers from it). A request whose
//! batch never commits is answered REQUEST_TIMED_OUT after `request_timeout_ms`.
//!
//! Offsets: entry `index` holds records `index << 20 | 1` .. (at most
//! [`METADATA_BATCH_RECORDS_MAX`] < 2^20 of them); a snapshot at `index` stands at
//! `index << 20 | 0xFFFFF`. A record's offset is a broker's epoch when it registers.

use std::collections::BTreeMap;

use strand_wire::ErrorCode;

use crate::controller::{Controller, ControllerConfig};
use crate::controller_rpc::{Answer, Request};
use crate::image::{Applied, Image};
use crate::limits::METADATA_BATCH_RECORDS_MAX;
use crate::records::{MetadataRecord, NodeId, TopicId};
use crate::records_codec::{decode_batch_with_proposer, encode_batch, encode_batch_for, Proposer};

const OFFSET_BITS: u32 = 20;
const _: () = assert!(METADATA_BATCH_RECORDS_MAX < (1 << OFFSET_BITS) - 1);

/// The offset of record `i` (from 0) of entry `index`.
pub fn record_offset(index: u64, i: usize) -> u64 {
    (index << OFFSET_BITS) | (i as u64 + 1)
}

/// The offset a snapshot taken at entry `index` stands at (after all of that entry's records).
pub fn snapshot_offset(index: u64) -> u64 {
    (index << OFFSET_BITS) | ((1 << OFFSET_BITS) - 1)
}

/// The entry an offset belongs to.
pub fn entry_of(offset: u64) -> u64 {
    offset >> OFFSET_BITS
}

/// `shard_of(topic, partition, shards)`: the shard a partition lives on at a node with
/// `shards` shards (the broker's hash).
pub type ShardOf = Box<dyn Fn(&str, i32, u32) -> u32 + Send>;

/// Who waits for an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asker {
    /// This node's own broker; the number is the asker's request id.
    Local(u64),
    /// Another node, over the cluster transport, with its request id.
    Remote(NodeId, u64),
}

impl Asker {
    fn request_id(self) -> u64 {
        match self {
            Asker::Local(id) | Asker::Remote(_, id) => id,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Propose this batch; if the quorum refuses it, call
    /// [`MetadataNode::proposal_failed`] with `request`.
    Propose { data: Vec<u8>, request: Option<u64> },
    /// Send this answer to `to`.
    Answer { to: Asker, answer: Answer },
}

#[derive(Clone, Debug)]
enum Expect {
    Nothing,
    BrokerEpoch(NodeId),
    Topic(TopicId),
    ProducerIds(i64, i32),
}

#[derive(Clone, Debug)]
struct Waiting {
    asker: Asker,
    expect: Expect,
    deadline_ms: u64,
    /// Leaders of the partitions this proposal creates (placement counts them until the
    /// proposal is applied or given up).
    leads: Vec<NodeId>,
    /// The log index the quorum appended the proposal at (`proposed`); `None` before, or
    /// once a snapshot covered it (then only the deadline answers).
    index: Option<u64>,
    /// CreatePartitions: the topic and its count once this proposal applies (a second one
    /// for the topic builds on it, as if the first had landed).
    grows: Option<(TopicId, i32)>,
}

pub struct MetadataNode {
    me: NodeId,
    cfg: ControllerConfig,
    image: Image,
    /// Some while this node is the active controller.
    controller: Option<Controller>,
    /// The quorum's leader as last reported.
    leader: Option<NodeId>,
    request_timeout_ms: u64,
    next_request_id: u64,
    waiting: BTreeMap<u64, Waiting>,
    /// The end of the last producer-id block proposed (blocks proposed back to back must not
    /// overlap before the first is applied).
    producer_ids_proposed_until: i64,
    shard_of: ShardOf,
    /// Liveness evidence from this node's tripwires: node -> the incarnation seen to die.
    /// Kept on every node, so a controller elected after the death (the dead node led the
    /// quorum) fences at once instead of granting a fresh session. Dropped when a fence or a
    /// new registration of that node commits, or when the tripwire sees it alive again.
    gone: BTreeMap<NodeId, u128>,
}

impl MetadataNode {
    /// `shard_of(topic, partition, shards)`: the shard a partition lives on at a node with
    /// `shards` shards (the broker's hash).
    pub fn new(
        me: NodeId,
        cfg: ControllerConfig,
        request_timeout_ms: u64,
        shard_of: ShardOf,
    ) -> MetadataNode {
        MetadataNode {
            me,
            cfg,
            image: Image::default(),
            controller: None,
            leader: None,
            request_timeout_ms,
            next_request_id: 1,
            waiting: BTreeMap::new(),
            producer_ids_proposed_until: 0,
            shard_of,
            gone: BTreeMap::new(),
        }
    }

    pub fn image(&self) -> &Image {
        &self.image
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }

    pub fn is_controller(&self) -> bool {
        self.controller.is_some()
    }

    /// Liveness evidence held (node -> incarnation seen to die).
    pub fn gone(&self) -> &BTreeMap<NodeId, u128> {
        &self.gone
    }

    /// This node's tripwire saw `node`'s process (`incarnation`) die: on the controller,
    /// fence it now (what `tick` decides).
    pub fn peer_gone(&mut self, node: NodeId, incarnation: u128, now_ms: u64) -> Vec<Effect> {
        let registered = self
            .image
            .brokers
            .get(&node)
            .map(|b| b.registration.incarnation);
        // Evidence about an incarnation that was already replaced is stale; an unknown one
        // (registration not yet applied here) is kept: it may be the registered one soon.
        if registered.is_none_or(|r| r == incarnation) {
            self.gone.insert(node, incarnation);
        }
        self.tick(now_ms)
    }

    /// This node's tripwire reached `node`'s process `incarnation`: it lives.
    pub fn peer_up(&mut self, node: NodeId, incarnation: u128) {
        if self.gone.get(&node) == Some(&incarnation) {
            self.gone.remove(&node);
        }
    }

    /// Requests waiting for their batch to apply.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The quorum's leader changed (`None`: unknown, an election is on).
    pub fn on_leader(&mut self, leader: Option<NodeId>, now_ms: u64) {
        self.leader = leader;
        if leader == Some(self.me) {
            if self.controller.is_none() {
                let mut c = Controller::new(self.cfg.clone());
                c.activate(&self.image, now_ms);
                self.controller = Some(c);
                self.producer_ids_proposed_until = self.image.next_producer_id;
            }
        } else {
            // Waiting requests stay: the new leader may still commit their batches.
            self.controller = None;
        }
    }

    /// A request from `asker`.
    pub fn request(&mut self, asker: Asker, req: Request, now_ms: u64) -> Vec<Effect> {
        self.request_with_id(asker, req, now_ms, [0; 16])
    }

    /// A request; `fresh_id` is a random topic id for a CreateTopic (the driver draws it).
    pub fn request_with_id(
        &mut self,
        asker: Asker,
        req: Request,
        now_ms: u64,
        fresh_id: TopicId,
    ) -> Vec<Effect> {
        let rid = asker.request_id();
        let Some(controller) = self.controller.as_mut() else {
            let mut a = Answer::refused(
                rid,
                ErrorCode::NotController,
                format!(
                    "node {} is not the active controller (the controller is {})",
                    self.me,
                    self.leader
                        .map_or("not known yet".to_string(), |l| format!("node {l}"))
                ),
            );
            a.controller = self.leader;
            return vec![Effect::Answer {
                to: asker,
                answer: a,
            }];
        };
        if let Asker::Remote(from, _) = asker {
            let named = match &req {
                Request::Register(r) => Some(r.node_id),
                Request::Heartbeat(h) => Some(h.node_id),
                Request::AllocateProducerIds { node_id } => Some(*node_id),
                Request::AlterPartition(a) => Some(a.node_id),
                Request::CreateTopic(_)
                | Request::DeleteTopic { .. }
                | Request::CreatePartitions { .. }
                | Request::AlterTopicConfigs { .. }
                | Request::ElectLeader { .. }
                | Request::AlterReassignment { .. } => None,
            };
            if let Some(named) = named.filter(|n| *n != from) {
                // The transport authenticated `from`: a node may speak only for itself.
                return vec![Effect::Answer {
                    to: asker,
                    answer: Answer::refused(
                        rid,
                        ErrorCode::InvalidRequest,
                        format!("node {from} sent a {} request for node {named}", req.kind()),
                    ),
                }];
            }
        }
        let image = &self.image;
        let mut pending_leads: BTreeMap<NodeId, u64> = BTreeMap::new();
        if matches!(
            req,
            Request::CreateTopic(_) | Request::CreatePartitions { .. }
        ) {
            for node in self.waiting.values().flat_map(|w| &w.leads) {
                *pending_leads.entry(*node).or_default() += 1;
            }
        }
        let decided = match &req {
            Request::Register(r) => controller
                .register(image, r, now_ms)
                .map(|recs| (recs, Expect::BrokerEpoch(r.node_id))),
            Request::Heartbeat(h) => controller
                .heartbeat(image, h, now_ms)
                .map(|a| (a.records, Expect::BrokerEpoch(h.node_id))),
            Request::CreateTopic(t) => controller
                .create_topic(image, t, fresh_id, &*self.shard_of, &pending_leads)
                .map(|recs| (recs, Expect::Topic(fresh_id))),
            Request::DeleteTopic { name } => controller
                .delete_topic(image, name)
                .map(|recs| (recs, Expect::Nothing)),
            Request::CreatePartitions { name, count } => {
                let grown = image.names.get(name).and_then(|id| {
                    self.waiting
                        .values()
                        .filter_map(|w| w.grows.filter(|(t, _)| t == id).map(|(_, n)| n))
                        .max()
                });
                controller
                    .create_partitions(image, name, *count, grown, &*self.shard_of, &pending_leads)
                    .map(|recs| (recs, Expect::Nothing))
            }
            Request::AlterTopicConfigs { name, changes } => controller
                .alter_topic_configs(image, name, changes)
                .map(|recs| (recs, Expect::Nothing)),
            Request::AlterPartition(a) => controller
                .alter_partition(image, a)
                .map(|recs| (recs, Expect::Nothing)),
            Request::ElectLeader {
                topic,
                partition,
                election,
            } => controller
                .elect_leader(image, topic, *partition, *election)
                .map(|recs| (recs, Expect::Nothing)),
            Request::AlterReassignment {
                topic,
                partition,
                target,
                allow_replication_factor_change,
            } => controller
                .alter_reassignment(
                    image,
                    topic,
                    *partition,
                    target.as_deref(),
                    *allow_replication_factor_change,
                    &*self.shard_of,
                )
                .map(|recs| (recs, Expect::Nothing)),
            Request::AllocateProducerIds { node_id } => {
                let start = self.producer_ids_proposed_until.max(image.next_producer_id);
                let size = self.cfg.producer_id_block_size;
                self.producer_ids_proposed_until = start + size;
                Ok((
                    vec![MetadataRecord::ProducerIds {
                        node_id: *node_id,
                        next_producer_id: start + size,
                    }],
                    Expect::ProducerIds(start, size as i32),
                ))
            }
        };
        let (records, expect) = match decided {
            Ok(d) => d,
            Err(refusal) => {
                return vec![Effect::Answer {
                    to: asker,
                    answer: Answer::refused(rid, refusal.code, refusal.message),
                }]
            }
        };
        if records.is_empty() {
            // Nothing to write (a heartbeat that changes nothing, a repeated registration).
            let mut answer = Answer {
                request_id: rid,
                metadata_offset: self.image.applied_offset,
                ..Answer::default()
            };
            self.fill(&mut answer, &expect);
            return vec![Effect::Answer { to: asker, answer }];
        }
        let id = self.next_request_id;
        self.next_request_id += 1;
        let leads = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) => Some(p.leader),
                _ => None,
            })
            .collect();
        let grows = match (&req, records.first()) {
            (Request::CreatePartitions { count, .. }, Some(MetadataRecord::Partition(p))) => {
                Some((p.topic_id, *count))
            }
            _ => None,
        };
        self.waiting.insert(
            id,
            Waiting {
                asker,
                expect,
                deadline_ms: now_ms + self.request_timeout_ms,
                leads,
                index: None,
                grows,
            },
        );
        let data = encode_batch_for(
            &records,
            Some(Proposer {
                node: self.me,
                request_id: id,
            }),
        );
        vec![Effect::Propose {
            data,
            request: Some(id),
        }]
    }

    /// The quorum appended request `request`'s proposal at log `index`.
    pub fn proposed(&mut self, request: u64, index: u64) {
        if let Some(w) = self.waiting.get_mut(&request) {
            w.index = Some(index);
        }
    }

    /// Requests whose entry's log index has been passed without it applying: another
    /// leader's entry replaced theirs (they never committed), answered NOT_CONTROLLER so the
    /// asker may ask again — also a request that must not be repeated once committed.
    fn replaced(&mut self, committed_index: u64) -> Vec<Effect> {
        let lost: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.index.is_some_and(|i| i <= committed_index))
            .map(|(id, _)| *id)
            .collect();
        let mut effects = Vec::new();
        for id in lost {
            if let Some(w) = self.waiting.remove(&id) {
                let mut a = Answer::refused(
                    w.asker.request_id(),
                    ErrorCode::NotController,
                    "the controller changed before the request committed (its entry was replaced)",
                );
                a.controller = self.leader;
                effects.push(Effect::Answer {
                    to: w.asker,
                    answer: a,
                });
            }
        }
        effects
    }

    /// A snapshot at or past these requests' entries: whether they applied is not known
    /// here any more; only their deadline answers them.
    fn forget_indexes_up_to(&mut self, index: u64) {
        for w in self.waiting.values_mut() {
            if w.index.is_some_and(|i| i <= index) {
                w.index = None;
            }
        }
    }

    /// The quorum refused a proposal (leadership moved before it was appended).
    pub fn proposal_failed(&mut self, request: u64, leader: Option<NodeId>) -> Vec<Effect> {
        let Some(w) = self.waiting.remove(&request) else {
            return Vec::new();
        };
        let mut a = Answer::refused(
            w.asker.request_id(),
            ErrorCode::NotController,
            "the controller changed before the request was written",
        );
        a.controller = leader;
        vec![Effect::Answer {
            to: w.asker,
            answer: a,
        }]
    }

    fn fill(&self, answer: &mut Answer, expect: &Expect) {
        match expect {
            Expect::Nothing => {}
            Expect::BrokerEpoch(node) => {
                if let Some(b) = self.image.brokers.get(node) {
                    answer.broker_epoch = b.epoch;
                    answer.fenced = b.fenced;
                }
            }
            Expect::Topic(id) => answer.topic_id = Some(*id),
            Expect::ProducerIds(start, len) => answer.producer_ids = Some((*start, *len)),
        }
    }

    /// The committed entry at `index`. An entry that does not decode is corrupt: an error
    /// the driver must treat as fatal for this node (every node applies the same log, so
    /// skipping it would fork this node's image).
    pub fn on_committed(&mut self, index: u64, data: &[u8]) -> Result<Vec<Effect>, String> {
        let batch =
            decode_batch_with_proposer(data).map_err(|e| format!("metadata entry {index}: {e}"))?;
        if self.image.applied_offset > 0 && entry_of(self.image.applied_offset) >= index {
            // Already in the image (a snapshot covered it).
            self.forget_indexes_up_to(index);
            return Ok(Vec::new());
        }
        let mut first_rejection = None;
        let mut last_offset = self.image.applied_offset;
        let mut rejected = std::collections::BTreeSet::new();
        for (i, r) in batch.records.iter().enumerate() {
            let offset = record_offset(index, i);
            let outcome = self.image.apply_in_entry(offset, r, &mut rejected);
            let applied = outcome == Applied::Done;
            if let Applied::Rejected(code, why) = outcome {
                first_rejection.get_or_insert((code, why));
            }
            // Applied or rejected, a committed record settles what the controller had in
            // flight for it (a rejected change is repaired afresh, as in `sim.rs`).
            if let Some(c) = self.controller.as_mut() {
                c.observe(r);
            }
            match r {
                // A fence that applied settles the evidence (a rejected one, for a stale
                // epoch, does not).
                MetadataRecord::FenceBroker { node_id, .. } if applied => {
                    self.gone.remove(node_id);
                }
                MetadataRecord::RegisterBroker(reg)
                    if self.gone.get(&reg.node_id) != Some(&reg.incarnation) =>
                {
                    self.gone.remove(&reg.node_id);
                }
                _ => {}
            }
            last_offset = offset;
        }
        // The image stands after the whole entry, even an empty one.
        self.image.applied_offset = self.image.applied_offset.max(last_offset);
        let mut effects = Vec::new();
        // Ours only at the index it was appended at: an entry of this node's previous
        // process (request ids start again at 1) committed late must not answer a new one.
        let ours = batch.proposer.filter(|p| {
            p.node == self.me
                && self
                    .waiting
                    .get(&p.request_id)
                    .is_some_and(|w| w.index.is_none_or(|i| i == index))
        });
        if let Some(p) = ours {
            if let Some(w) = self.waiting.remove(&p.request_id) {
                let mut answer = Answer {
                    request_id: w.asker.request_id(),
                    metadata_offset: last_offset,
                    ..Answer::default()
                };
                match first_rejection {
                    Some(e) => answer.error = Some(e),
                    None => self.fill(&mut answer, &w.expect),
                }
                effects.push(Effect::Answer {
                    to: w.asker,
                    answer,
                });
            }
        }
        // Entries apply in log order: a request still waiting whose entry's index is now
        // behind us was replaced by another leader's entry.
        effects.extend(self.replaced(index));
        Ok(effects)
    }

    /// A snapshot taken at entry `index` replaces the image.
    pub fn on_snapshot(&mut self, index: u64, data: &[u8], now_ms: u64) -> Result<(), String> {
        let batch =
            decode_batch_with_proposer(data).map_err(|e| format!("metadata snapshot: {e}"))?;
        self.image = Image::from_snapshot(snapshot_offset(index), &batch.records)?;
        self.forget_indexes_up_to(index);
        // Evidence the snapshot settled: the broker is fenced, or registered again since.
        let image = &self.image;
        self.gone.retain(|node, inc| {
            image
                .brokers
                .get(node)
                .is_none_or(|b| !b.fenced && b.registration.incarnation == *inc)
        });
        if let Some(c) = self.controller.as_mut() {
            c.activate(&self.image, now_ms);
            self.producer_ids_proposed_until = self.image.next_producer_id;
        }
        Ok(())
    }

    /// The image as a snapshot's data.
    pub fn snapshot_data(&self) -> Vec<u8> {
        encode_batch(&self.image.to_snapshot())
    }

    /// Time passed: the controller's own decisions (fencing expired brokers, repairs), and
    /// requests that waited too long.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Effect> {
        let mut effects = Vec::new();
        if let Some(c) = self.controller.as_mut() {
            let records = c.tick_with_evidence(&self.image, now_ms, &self.gone);
            if !records.is_empty() {
                effects.push(Effect::Propose {
                    data: encode_batch(&records),
                    request: None,
                });
            }
        }
        let expired: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.deadline_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(w) = self.waiting.remove(&id) {
                effects.push(Effect::Answer {
                    to: w.asker,
                    answer: Answer::refused(
                        w.asker.request_id(),
                        ErrorCode::RequestTimedOut,
                        format!(
                            "the metadata quorum did not commit the request within {} ms",
                            self.request_timeout_ms
                        ),
                    ),
                });
            }
        }
        effects
    }
}

#[cfg(test)]
mod tests;
