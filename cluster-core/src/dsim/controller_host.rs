//! The active controller in the simulation: the real [`Controller`] over a committed
//! metadata log (what the quorum would commit; the quorum itself is `quorum_sim.rs`'s
//! subject), answering registrations, heartbeats, metadata fetches and AlterPartition.

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::ErrorCode;

use super::{Addr, Msg, TOPIC};
use crate::controller::{Controller, ControllerConfig, Election, Heartbeat, NewTopic};
use crate::image::Image;
use crate::records::{BrokerRegistration, Endpoint, MetadataRecord, NodeId, NO_LEADER};

/// Metadata records per answer to a fetch.
const METADATA_BATCH: usize = 64;

pub(crate) struct ControllerHost {
    controller: Controller,
    pub(crate) image: Image,
    /// The committed log: (entry number, record); a record's offset is its index + 1.
    log: Vec<(u64, MetadataRecord)>,
    entries: u64,
}

pub(crate) fn registration(node: NodeId, incarnation: u64) -> BrokerRegistration {
    BrokerRegistration {
        node_id: node,
        incarnation: incarnation as u128,
        cluster_id: "dsim".into(),
        client: Endpoint {
            host: "sim".into(),
            port: 9000 + node as u16,
        },
        cluster: Endpoint {
            host: "sim".into(),
            port: 9100 + node as u16,
        },
        shards: 1,
        rack: None,
    }
}

impl ControllerHost {
    /// A cluster of `nodes` brokers (first incarnations), unfenced, with topic [`TOPIC`]:
    /// one partition replicated on all of them.
    pub(crate) fn bootstrap(nodes: usize, session_timeout_ms: u64) -> ControllerHost {
        let cfg = ControllerConfig {
            cluster_id: "dsim".into(),
            session_timeout_ms,
            default_partitions: 1,
            default_replication_factor: nodes as i16,
            producer_id_block_size: 1000,
        };
        let mut host = ControllerHost {
            controller: Controller::new(cfg),
            image: Image::default(),
            log: Vec::new(),
            entries: 0,
        };
        for n in 1..=nodes as NodeId {
            let records = host
                .controller
                .register(&host.image, &registration(n, 1), 0)
                .expect("a first registration is accepted");
            host.commit(records);
            let epoch = host.image.brokers[&n].epoch;
            let hb = Heartbeat {
                node_id: n,
                broker_epoch: epoch,
                metadata_offset: epoch,
                shutting_down: false,
            };
            let answer = host
                .controller
                .heartbeat(&host.image, &hb, 0)
                .expect("a registered broker's heartbeat is accepted");
            host.commit(answer.records);
        }
        let topic = NewTopic {
            name: TOPIC.into(),
            partitions: 1,
            replication_factor: nodes as i16,
            configs: BTreeMap::new(),
        };
        let shard = |_: &str, _: i32, _: u32| 0;
        let records = host
            .controller
            .create_topic(&host.image, &topic, [7; 16], &shard, &BTreeMap::new())
            .expect("the topic is created");
        host.commit(records);
        host
    }

    /// Appends `records` as one entry and applies them.
    fn commit(&mut self, records: Vec<MetadataRecord>) {
        if records.is_empty() {
            return;
        }
        self.entries += 1;
        let mut rejected = BTreeSet::new();
        for r in records {
            self.log.push((self.entries, r.clone()));
            let offset = self.log.len() as u64;
            let before = self.image.partition(TOPIC, 0).map(|p| p.leader_epoch);
            self.image.apply_in_entry(offset, &r, &mut rejected);
            let after = self.image.partition(TOPIC, 0).map(|p| p.leader_epoch);
            assert!(
                after >= before,
                "the leader epoch went back: {before:?} -> {after:?}"
            );
            self.controller.observe(&r);
        }
    }

    /// The committed records from offset `from` (exclusive) on, for traces.
    pub(crate) fn records_after(&self, from: usize) -> impl Iterator<Item = &MetadataRecord> {
        self.log[from.min(self.log.len())..].iter().map(|(_, r)| r)
    }

    pub(crate) fn log_len(&self) -> usize {
        self.log.len()
    }

    /// The partition's leader as the controller knows it.
    pub(crate) fn leader(&self) -> Option<NodeId> {
        self.image
            .partition(TOPIC, 0)
            .map(|p| p.leader)
            .filter(|l| *l != NO_LEADER)
    }

    pub(crate) fn tick(&mut self, now_ms: u64, unclean: bool) {
        let records = self.controller.tick(&self.image, now_ms);
        self.commit(records);
        if unclean && self.leader().is_none() {
            if let Ok(records) =
                self.controller
                    .elect_leader(&self.image, TOPIC, 0, Election::Unclean)
            {
                self.commit(records);
            }
        }
    }

    /// A message from broker `from`; the answer, if any.
    pub(crate) fn receive(&mut self, from: Addr, msg: Msg, now_ms: u64) -> Option<Msg> {
        match msg {
            Msg::Register { incarnation } => {
                let reg = registration(from, incarnation);
                let answer = match self.controller.register(&self.image, &reg, now_ms) {
                    Ok(records) => {
                        self.commit(records);
                        Ok(self.image.brokers.get(&from).map_or(0, |b| b.epoch))
                    }
                    Err(refusal) => Err(refusal.code),
                };
                Some(Msg::Registered {
                    incarnation,
                    answer,
                })
            }
            Msg::Heartbeat {
                broker_epoch,
                metadata_offset,
            } => {
                let hb = Heartbeat {
                    node_id: from,
                    broker_epoch,
                    metadata_offset,
                    shutting_down: false,
                };
                let error = match self.controller.heartbeat(&self.image, &hb, now_ms) {
                    Ok(answer) => {
                        self.commit(answer.records);
                        None
                    }
                    Err(refusal) => Some(refusal.code),
                };
                Some(Msg::HeartbeatAnswer {
                    broker_epoch,
                    error,
                })
            }
            Msg::MetadataFetch { from: offset } => {
                let start = (offset as usize).min(self.log.len());
                let end = (start + METADATA_BATCH).min(self.log.len());
                (end > start).then(|| Msg::Metadata {
                    from: offset,
                    records: self.log[start..end].to_vec(),
                })
            }
            Msg::Alter(req) => {
                let (leader_epoch, partition_epoch) = (req.leader_epoch, req.partition_epoch);
                let error = match self.controller.alter_partition(&self.image, &req) {
                    Ok(records) => {
                        self.commit(records);
                        None
                    }
                    Err(refusal) => Some(refusal.code),
                };
                Some(Msg::AlterAnswer {
                    leader_epoch,
                    partition_epoch,
                    error,
                })
            }
            _ => None,
        }
    }
}

/// Whether a refusal of AlterPartition is definite (nothing was written), as the broker's
/// driver judges it (`replica_leader.rs`): only then may the leader drop its proposal.
pub(crate) fn definite(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::IneligibleReplica | ErrorCode::InvalidRequest
    )
}
