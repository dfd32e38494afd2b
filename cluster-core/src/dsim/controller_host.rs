//! The active controller in the simulation: the real [`Controller`] over a committed
//! metadata log, answering registrations, heartbeats, metadata fetches and AlterPartition.
//! What it proposes commits after a drawn latency (the quorum's round trip; mostly a few
//! milliseconds, now and then hundreds), in order; the answer to a registration or an ISR
//! change goes out once its entry has committed. A failover commits a drawn part of what was
//! in flight and loses the rest, unanswered (the quorum itself is `quorum_sim.rs`'s
//! subject).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use strand_wire::ErrorCode;

use super::{Addr, Msg, TOPIC};
use crate::controller::{Controller, ControllerConfig, Election, Heartbeat, NewTopic};
use crate::image::{Applied, Image};
use crate::records::{BrokerRegistration, Endpoint, MetadataRecord, NodeId, NO_LEADER};

/// Metadata records per answer to a fetch.
const METADATA_BATCH: usize = 64;

/// An answer that waits for its entry to commit.
enum Deferred {
    Registered {
        to: Addr,
        incarnation: u64,
    },
    Alter {
        to: Addr,
        leader_epoch: i32,
        partition_epoch: i32,
    },
}

struct Proposal {
    at_ms: u64,
    records: Vec<MetadataRecord>,
    answer: Option<Deferred>,
}

pub(crate) struct ControllerHost {
    controller: Controller,
    /// Processes a liveness tripwire saw die (node -> incarnation): fenced at the next tick
    /// without waiting for the session (`crate::liveness`, `cluster.liveness.tripwire`).
    gone: BTreeMap<NodeId, u128>,
    pub(crate) image: Image,
    /// The committed log: (entry number, record); a record's offset is its index + 1.
    log: Vec<(u64, MetadataRecord)>,
    entries: u64,
    /// Proposed, not committed yet, in order.
    pending: VecDeque<Proposal>,
    rng: ChaCha8Rng,
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
    /// one partition replicated on all of them. `seed` draws the commit latencies.
    pub(crate) fn bootstrap(nodes: usize, session_timeout_ms: u64, seed: u64) -> ControllerHost {
        let cfg = ControllerConfig {
            cluster_id: "dsim".into(),
            session_timeout_ms,
            default_partitions: 1,
            default_replication_factor: nodes as i16,
            producer_id_block_size: 1000,
        };
        let mut host = ControllerHost {
            controller: Controller::new(cfg),
            gone: BTreeMap::new(),
            image: Image::default(),
            log: Vec::new(),
            entries: 0,
            pending: VecDeque::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        for n in 1..=nodes as NodeId {
            let records = host
                .controller
                .register(&host.image, &registration(n, 1), 0)
                .expect("a first registration is accepted");
            host.apply(records);
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
            host.apply(answer.records);
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
        host.apply(records);
        host
    }

    /// Appends `records` as one entry and applies them; each record's outcome.
    fn apply(&mut self, records: Vec<MetadataRecord>) -> Vec<Applied> {
        if records.is_empty() {
            return Vec::new();
        }
        self.entries += 1;
        let mut rejected = BTreeSet::new();
        let mut outcomes = Vec::new();
        for r in records {
            self.log.push((self.entries, r.clone()));
            let offset = self.log.len() as u64;
            let before = self.image.partition(TOPIC, 0).map(|p| p.leader_epoch);
            outcomes.push(self.image.apply_in_entry(offset, &r, &mut rejected));
            let after = self.image.partition(TOPIC, 0).map(|p| p.leader_epoch);
            assert!(
                after >= before,
                "the leader epoch went back: {before:?} -> {after:?}"
            );
            self.controller.observe(&r);
        }
        outcomes
    }

    /// Proposes `records` as one entry; when it will commit (to schedule a look then).
    fn propose(
        &mut self,
        records: Vec<MetadataRecord>,
        answer: Option<Deferred>,
        now_ms: u64,
    ) -> Option<u64> {
        if records.is_empty() {
            return None;
        }
        let latency = if self.rng.gen_bool(0.02) {
            self.rng.gen_range(50..300)
        } else {
            self.rng.gen_range(1..6)
        };
        let after = self.pending.back().map_or(0, |p| p.at_ms);
        let at_ms = (now_ms + latency).max(after);
        self.pending.push_back(Proposal {
            at_ms,
            records,
            answer,
        });
        Some(at_ms)
    }

    /// Commits every entry due by `now_ms`; the answers that waited for them.
    pub(crate) fn commit_due(&mut self, now_ms: u64) -> Vec<(Addr, Msg)> {
        let mut answers = Vec::new();
        while self.pending.front().is_some_and(|p| p.at_ms <= now_ms) {
            if let Some(p) = self.pending.pop_front() {
                answers.extend(self.commit(p));
            }
        }
        answers
    }

    fn commit(&mut self, p: Proposal) -> Option<(Addr, Msg)> {
        let outcomes = self.apply(p.records);
        match p.answer? {
            Deferred::Registered { to, incarnation } => {
                let b = self.image.brokers.get(&to)?;
                (b.registration.incarnation == incarnation as u128).then(|| {
                    let answer = Ok(b.epoch);
                    (
                        to,
                        Msg::Registered {
                            incarnation,
                            answer,
                        },
                    )
                })
            }
            Deferred::Alter {
                to,
                leader_epoch,
                partition_epoch,
            } => {
                let error = outcomes.iter().find_map(|o| match o {
                    Applied::Rejected(code, _) => Some(*code),
                    Applied::Done => None,
                });
                let msg = Msg::AlterAnswer {
                    leader_epoch,
                    partition_epoch,
                    error,
                };
                Some((to, msg))
            }
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

    /// A tripwire saw `node`'s process (this incarnation) die.
    pub(crate) fn saw_die(&mut self, node: NodeId, incarnation: u64) {
        self.gone.insert(node, incarnation as u128);
    }

    /// Another voter becomes the active controller: of the entries in flight, a drawn
    /// prefix commits (the old leader had replicated it) and the rest is lost, unanswered;
    /// then a fresh `Controller` is activated over the committed image (sessions restart
    /// from now). The answers of the entries that committed.
    pub(crate) fn failover(&mut self, now_ms: u64) -> Vec<(Addr, Msg)> {
        let keep = self.rng.gen_range(0..=self.pending.len());
        let survivors: Vec<Proposal> = self.pending.drain(..).take(keep).collect();
        let answers = survivors
            .into_iter()
            .filter_map(|p| self.commit(p))
            .collect();
        let cfg = self.controller.config().clone();
        self.controller = Controller::new(cfg);
        self.controller.activate(&self.image, now_ms);
        answers
    }

    pub(crate) fn tick(&mut self, now_ms: u64, unclean: bool) -> Option<u64> {
        let records = self
            .controller
            .tick_with_evidence(&self.image, now_ms, &self.gone);
        let at = self.propose(records, None, now_ms);
        if unclean && self.leader().is_none() && self.pending.is_empty() {
            if let Ok(records) =
                self.controller
                    .elect_leader(&self.image, TOPIC, 0, Election::Unclean)
            {
                return self.propose(records, None, now_ms);
            }
        }
        at
    }

    /// A message from broker `from`: an answer now, if any, and when an entry it proposed
    /// will commit.
    pub(crate) fn receive(
        &mut self,
        from: Addr,
        msg: Msg,
        now_ms: u64,
    ) -> (Option<Msg>, Option<u64>) {
        match msg {
            Msg::Register { incarnation } => {
                let reg = registration(from, incarnation);
                match self.controller.register(&self.image, &reg, now_ms) {
                    // The same registration again (its answer was lost): answered now.
                    Ok(records) if records.is_empty() => {
                        let answer = Ok(self.image.brokers.get(&from).map_or(0, |b| b.epoch));
                        (
                            Some(Msg::Registered {
                                incarnation,
                                answer,
                            }),
                            None,
                        )
                    }
                    Ok(records) => {
                        let wait = Deferred::Registered {
                            to: from,
                            incarnation,
                        };
                        (None, self.propose(records, Some(wait), now_ms))
                    }
                    Err(refusal) => {
                        let answer = Err(refusal.code);
                        (
                            Some(Msg::Registered {
                                incarnation,
                                answer,
                            }),
                            None,
                        )
                    }
                }
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
                let (error, at) = match self.controller.heartbeat(&self.image, &hb, now_ms) {
                    Ok(answer) => (None, self.propose(answer.records, None, now_ms)),
                    Err(refusal) => (Some(refusal.code), None),
                };
                let answer = Msg::HeartbeatAnswer {
                    broker_epoch,
                    error,
                };
                (Some(answer), at)
            }
            Msg::MetadataFetch { from: offset } => {
                let start = (offset as usize).min(self.log.len());
                let end = (start + METADATA_BATCH).min(self.log.len());
                let answer = (end > start).then(|| Msg::Metadata {
                    from: offset,
                    records: self.log[start..end].to_vec(),
                });
                (answer, None)
            }
            Msg::Alter(req) => {
                let (leader_epoch, partition_epoch) = (req.leader_epoch, req.partition_epoch);
                let now = |error| {
                    Some(Msg::AlterAnswer {
                        leader_epoch,
                        partition_epoch,
                        error,
                    })
                };
                match self.controller.alter_partition(&self.image, &req) {
                    Ok(records) if records.is_empty() => (now(None), None),
                    Ok(records) => {
                        let wait = Deferred::Alter {
                            to: from,
                            leader_epoch,
                            partition_epoch,
                        };
                        (None, self.propose(records, Some(wait), now_ms))
                    }
                    Err(refusal) => (now(Some(refusal.code)), None),
                }
            }
            _ => (None, None),
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
