//! Requests from brokers to the active controller, and its answers (KRaft's
//! BrokerRegistration, BrokerHeartbeat, CreateTopics, DeleteTopics, CreatePartitions, topic
//! config changes, AllocateProducerIds, AlterPartition, ElectLeaders and
//! AlterPartitionReassignments, in our own FlatBuffers encoding: `wire/schema/cluster.fbs`,
//! namespace `strand.controller`).
//!
//! A request names a `request_id` chosen by the asker; the answer repeats it. Every node
//! also answers its own broker's requests in process, with the same types.

use std::collections::BTreeMap;

use flatbuffers::FlatBufferBuilder;
use strand_wire::cluster::controller as fb;
use strand_wire::ErrorCode;

use crate::controller::{AlterPartition, Election, Heartbeat, NewTopic};
use crate::records::{BrokerRegistration, NodeId, TopicId, NO_LEADER};
use crate::records_codec::{
    config_entries, configs_from, id_from, id_of, registration, registration_from, string,
    verifier_options,
};

/// What a broker asks of the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Register(BrokerRegistration),
    Heartbeat(Heartbeat),
    CreateTopic(NewTopic),
    DeleteTopic {
        name: String,
    },
    AllocateProducerIds {
        node_id: NodeId,
    },
    /// The topic's new total partition count.
    CreatePartitions {
        name: String,
        count: i32,
    },
    /// Configs set (`Some`) or removed (`None`); the asking broker validated them.
    AlterTopicConfigs {
        name: String,
        changes: BTreeMap<String, Option<String>>,
    },
    /// KIP-497: partition `topic`-`partition`'s leader `node_id`, at the epochs it knows,
    /// asks for the in-sync replica set `isr` (the answer comes once the change is applied,
    /// so the leader then sees it in its view).
    AlterPartition(AlterPartition),
    /// KIP-460: elect a leader for `topic`-`partition` (one request per partition; Kafka
    /// answers ElectLeaders per partition).
    ElectLeader {
        topic: String,
        partition: i32,
        election: Election,
    },
    /// KIP-455: move `topic`-`partition` to the replicas `target` (`None`: cancel the move
    /// in flight); KIP-860: without `allow_replication_factor_change` the count must stay.
    AlterReassignment {
        topic: String,
        partition: i32,
        target: Option<Vec<NodeId>>,
        allow_replication_factor_change: bool,
    },
}

impl Request {
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Register(_) => "register",
            Request::Heartbeat(_) => "heartbeat",
            Request::CreateTopic(_) => "create-topic",
            Request::DeleteTopic { .. } => "delete-topic",
            Request::AllocateProducerIds { .. } => "allocate-producer-ids",
            Request::CreatePartitions { .. } => "create-partitions",
            Request::AlterTopicConfigs { .. } => "alter-topic-configs",
            Request::AlterPartition { .. } => "alter-partition",
            Request::ElectLeader { .. } => "elect-leader",
            Request::AlterReassignment { .. } => "alter-reassignment",
        }
    }

    /// Whether asking again, after the first ask may have committed, gives the same outcome.
    /// A registration (the same incarnation is "already registered"), a heartbeat, an
    /// id block (a wasted block), a config change and an ISR change (its partition epoch
    /// rejects a stale repeat, and the leader asks afresh from what it then sees) may be
    /// asked again at a new controller. Creating and deleting topics and partitions may not:
    /// a repeat of a committed CreateTopic answers TOPIC_ALREADY_EXISTS, so the asker waits
    /// for the first ask's own answer (the proposer answers from the committed entry even
    /// after it lost the leadership) or its deadline. A preferred election asked again after
    /// it committed answers ELECTION_NOT_NEEDED: the partition is led as asked (Kafka's tool
    /// prints "Valid replica already elected"). An unclean one may not be repeated: if its
    /// leader was fenced meanwhile, a repeat would pick another out-of-sync replica. A move
    /// to a target asked again is "already moving there" (no change); a repeated cancel
    /// would answer NO_REASSIGNMENT_IN_PROGRESS.
    pub fn repeatable(&self) -> bool {
        match self {
            Request::Register(_)
            | Request::Heartbeat(_)
            | Request::AllocateProducerIds { .. }
            | Request::AlterTopicConfigs { .. }
            | Request::AlterPartition(_) => true,
            Request::ElectLeader { election, .. } => *election == Election::Preferred,
            Request::AlterReassignment { target, .. } => target.is_some(),
            Request::CreateTopic(_)
            | Request::DeleteTopic { .. }
            | Request::CreatePartitions { .. } => false,
        }
    }
}

/// The controller's answer to one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub request_id: u64,
    /// `None`: done.
    pub error: Option<(ErrorCode, String)>,
    /// On NOT_CONTROLLER, the node to ask instead, if known.
    pub controller: Option<NodeId>,
    /// Register: the broker's new epoch. Heartbeat: its current one.
    pub broker_epoch: u64,
    /// Heartbeat: whether the broker is fenced.
    pub fenced: bool,
    /// AllocateProducerIds: `(first id, block size)`.
    pub producer_ids: Option<(i64, i32)>,
    /// CreateTopic: the topic's id.
    pub topic_id: Option<TopicId>,
    /// The metadata offset at which the outcome was applied (0: nothing was written).
    pub metadata_offset: u64,
}

impl Answer {
    pub fn refused(request_id: u64, code: ErrorCode, message: impl Into<String>) -> Answer {
        Answer {
            request_id,
            error: Some((code, message.into())),
            ..Answer::default()
        }
    }
}

pub fn encode_request(request_id: u64, req: &Request) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(256);
    let (body_type, body) = match req {
        Request::Register(r) => {
            let registration = registration(&mut b, r);
            (
                fb::Body::Register,
                fb::Register::create(
                    &mut b,
                    &fb::RegisterArgs {
                        registration: Some(registration),
                    },
                )
                .as_union_value(),
            )
        }
        Request::Heartbeat(h) => (
            fb::Body::Heartbeat,
            fb::Heartbeat::create(
                &mut b,
                &fb::HeartbeatArgs {
                    node_id: h.node_id,
                    broker_epoch: h.broker_epoch,
                    metadata_offset: h.metadata_offset,
                    shutting_down: h.shutting_down,
                },
            )
            .as_union_value(),
        ),
        Request::CreateTopic(t) => {
            let name = b.create_string(&t.name);
            let configs = config_entries(&mut b, &t.configs);
            (
                fb::Body::CreateTopic,
                fb::CreateTopic::create(
                    &mut b,
                    &fb::CreateTopicArgs {
                        name: Some(name),
                        partitions: t.partitions,
                        replication_factor: t.replication_factor,
                        configs: Some(configs),
                    },
                )
                .as_union_value(),
            )
        }
        Request::DeleteTopic { name } => {
            let name = b.create_string(name);
            (
                fb::Body::DeleteTopic,
                fb::DeleteTopic::create(&mut b, &fb::DeleteTopicArgs { name: Some(name) })
                    .as_union_value(),
            )
        }
        Request::AllocateProducerIds { node_id } => (
            fb::Body::AllocateProducerIds,
            fb::AllocateProducerIds::create(
                &mut b,
                &fb::AllocateProducerIdsArgs { node_id: *node_id },
            )
            .as_union_value(),
        ),
        Request::CreatePartitions { name, count } => {
            let name = b.create_string(name);
            (
                fb::Body::CreatePartitions,
                fb::CreatePartitions::create(
                    &mut b,
                    &fb::CreatePartitionsArgs {
                        name: Some(name),
                        count: *count,
                    },
                )
                .as_union_value(),
            )
        }
        Request::AlterTopicConfigs { name, changes } => {
            let name = b.create_string(name);
            let set: BTreeMap<String, String> = changes
                .iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
                .collect();
            let set = config_entries(&mut b, &set);
            let removed: Vec<_> = changes
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| b.create_string(k))
                .collect();
            let removed = b.create_vector(&removed);
            (
                fb::Body::AlterTopicConfigs,
                fb::AlterTopicConfigs::create(
                    &mut b,
                    &fb::AlterTopicConfigsArgs {
                        name: Some(name),
                        set: Some(set),
                        removed: Some(removed),
                    },
                )
                .as_union_value(),
            )
        }
        Request::AlterPartition(AlterPartition {
            node_id,
            topic,
            partition,
            leader_epoch,
            partition_epoch,
            isr,
        }) => {
            let topic = b.create_string(topic);
            let isr = b.create_vector(isr);
            (
                fb::Body::AlterPartition,
                fb::AlterPartition::create(
                    &mut b,
                    &fb::AlterPartitionArgs {
                        node_id: *node_id,
                        topic: Some(topic),
                        partition: *partition,
                        leader_epoch: *leader_epoch,
                        partition_epoch: *partition_epoch,
                        isr: Some(isr),
                    },
                )
                .as_union_value(),
            )
        }
        Request::ElectLeader {
            topic,
            partition,
            election,
        } => {
            let topic = b.create_string(topic);
            (
                fb::Body::ElectLeader,
                fb::ElectLeader::create(
                    &mut b,
                    &fb::ElectLeaderArgs {
                        topic: Some(topic),
                        partition: *partition,
                        election: election.code(),
                    },
                )
                .as_union_value(),
            )
        }
        Request::AlterReassignment {
            topic,
            partition,
            target,
            allow_replication_factor_change,
        } => {
            let topic = b.create_string(topic);
            let replicas = target.as_ref().map(|t| b.create_vector(t));
            (
                fb::Body::AlterReassignment,
                fb::AlterReassignment::create(
                    &mut b,
                    &fb::AlterReassignmentArgs {
                        topic: Some(topic),
                        partition: *partition,
                        replicas,
                        allow_replication_factor_change: *allow_replication_factor_change,
                    },
                )
                .as_union_value(),
            )
        }
    };
    let root = fb::Request::create(
        &mut b,
        &fb::RequestArgs {
            request_id,
            body_type,
            body: Some(body),
        },
    );
    b.finish(root, None);
    b.finished_data().to_vec()
}

/// A request and its id; malformed input is an error naming what was wrong.
pub fn decode_request(bytes: &[u8]) -> Result<(u64, Request), String> {
    let r = flatbuffers::root_with_opts::<fb::Request>(&verifier_options(bytes), bytes)
        .map_err(|e| format!("controller request: {e}"))?;
    let unknown = || format!("controller request: unknown kind {}", r.body_type().0);
    let req = match r.body_type() {
        fb::Body::Register => {
            let reg = r.body_as_register().ok_or_else(unknown)?;
            Request::Register(registration_from(
                reg.registration().ok_or("register: no registration")?,
            )?)
        }
        fb::Body::Heartbeat => {
            let h = r.body_as_heartbeat().ok_or_else(unknown)?;
            Request::Heartbeat(Heartbeat {
                node_id: h.node_id(),
                broker_epoch: h.broker_epoch(),
                metadata_offset: h.metadata_offset(),
                shutting_down: h.shutting_down(),
            })
        }
        fb::Body::CreateTopic => {
            let t = r.body_as_create_topic().ok_or_else(unknown)?;
            Request::CreateTopic(NewTopic {
                name: string(t.name(), "create topic: name")?,
                partitions: t.partitions(),
                replication_factor: t.replication_factor(),
                configs: configs_from(t.configs())?,
            })
        }
        fb::Body::DeleteTopic => {
            let t = r.body_as_delete_topic().ok_or_else(unknown)?;
            Request::DeleteTopic {
                name: string(t.name(), "delete topic: name")?,
            }
        }
        fb::Body::AllocateProducerIds => {
            let a = r.body_as_allocate_producer_ids().ok_or_else(unknown)?;
            Request::AllocateProducerIds {
                node_id: a.node_id(),
            }
        }
        fb::Body::CreatePartitions => {
            let c = r.body_as_create_partitions().ok_or_else(unknown)?;
            Request::CreatePartitions {
                name: string(c.name(), "create partitions: name")?,
                count: c.count(),
            }
        }
        fb::Body::AlterTopicConfigs => {
            let a = r.body_as_alter_topic_configs().ok_or_else(unknown)?;
            let mut changes: BTreeMap<String, Option<String>> = configs_from(a.set())?
                .into_iter()
                .map(|(k, v)| (k, Some(v)))
                .collect();
            for key in a.removed().into_iter().flatten() {
                changes.insert(key.to_string(), None);
            }
            Request::AlterTopicConfigs {
                name: string(a.name(), "alter topic configs: name")?,
                changes,
            }
        }
        fb::Body::AlterPartition => {
            let a = r.body_as_alter_partition().ok_or_else(unknown)?;
            Request::AlterPartition(AlterPartition {
                node_id: a.node_id(),
                topic: string(a.topic(), "alter partition: topic")?,
                partition: a.partition(),
                leader_epoch: a.leader_epoch(),
                partition_epoch: a.partition_epoch(),
                isr: a.isr().map(|v| v.iter().collect()).unwrap_or_default(),
            })
        }
        fb::Body::ElectLeader => {
            let e = r.body_as_elect_leader().ok_or_else(unknown)?;
            Request::ElectLeader {
                topic: string(e.topic(), "elect leader: topic")?,
                partition: e.partition(),
                election: Election::from_code(e.election()).ok_or_else(|| {
                    format!("elect leader: unknown election type {}", e.election())
                })?,
            }
        }
        fb::Body::AlterReassignment => {
            let a = r.body_as_alter_reassignment().ok_or_else(unknown)?;
            Request::AlterReassignment {
                topic: string(a.topic(), "alter reassignment: topic")?,
                partition: a.partition(),
                target: a.replicas().map(|v| v.iter().collect()),
                allow_replication_factor_change: a.allow_replication_factor_change(),
            }
        }
        _ => return Err(unknown()),
    };
    Ok((r.request_id(), req))
}

pub fn encode_answer(a: &Answer) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(128);
    let message = a.error.as_ref().map(|(_, m)| b.create_string(m));
    let topic_id = a.topic_id.as_ref().map(id_of);
    let root = fb::Answer::create(
        &mut b,
        &fb::AnswerArgs {
            request_id: a.request_id,
            error_code: a.error.as_ref().map_or(0, |(c, _)| c.code()),
            message,
            controller: a.controller.unwrap_or(NO_LEADER),
            broker_epoch: a.broker_epoch,
            fenced: a.fenced,
            producer_id_start: a.producer_ids.map_or(-1, |(s, _)| s),
            producer_id_len: a.producer_ids.map_or(0, |(_, n)| n),
            topic_id: topic_id.as_ref(),
            metadata_offset: a.metadata_offset,
        },
    );
    b.finish(root, None);
    b.finished_data().to_vec()
}

pub fn decode_answer(bytes: &[u8]) -> Result<Answer, String> {
    let a = flatbuffers::root_with_opts::<fb::Answer>(&verifier_options(bytes), bytes)
        .map_err(|e| format!("controller answer: {e}"))?;
    let error = match a.error_code() {
        0 => None,
        code => Some((
            ErrorCode::from_code(code)
                .ok_or_else(|| format!("controller answer: unknown error code {code}"))?,
            a.message().unwrap_or_default().to_string(),
        )),
    };
    Ok(Answer {
        request_id: a.request_id(),
        error,
        controller: (a.controller() >= 0).then(|| a.controller()),
        broker_epoch: a.broker_epoch(),
        fenced: a.fenced(),
        producer_ids: (a.producer_id_start() >= 0)
            .then(|| (a.producer_id_start(), a.producer_id_len())),
        topic_id: a
            .topic_id()
            .map(|_| id_from(a.topic_id(), "answer"))
            .transpose()?,
        metadata_offset: a.metadata_offset(),
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::records::Endpoint;

    fn requests() -> Vec<Request> {
        let mut configs = BTreeMap::new();
        configs.insert("retention.ms".to_string(), "100".to_string());
        vec![
            Request::Register(BrokerRegistration {
                node_id: 3,
                incarnation: 1 << 100,
                cluster_id: "c".into(),
                client: Endpoint {
                    host: "h".into(),
                    port: 1,
                },
                cluster: Endpoint {
                    host: "::1".into(),
                    port: 2,
                },
                shards: 8,
                rack: None,
            }),
            Request::Heartbeat(Heartbeat {
                node_id: 1,
                broker_epoch: 99,
                metadata_offset: 1 << 40,
                shutting_down: true,
            }),
            Request::CreateTopic(NewTopic {
                name: "orders".into(),
                partitions: -1,
                replication_factor: -1,
                configs,
            }),
            Request::DeleteTopic { name: "x".into() },
            Request::CreatePartitions {
                name: "x".into(),
                count: 7,
            },
            Request::AlterTopicConfigs {
                name: "x".into(),
                changes: [
                    ("retention.ms".to_string(), Some("5".to_string())),
                    ("cleanup.policy".to_string(), None),
                ]
                .into_iter()
                .collect(),
            },
            Request::AllocateProducerIds { node_id: 0 },
            Request::AlterPartition(AlterPartition {
                node_id: 2,
                topic: "x".into(),
                partition: 3,
                leader_epoch: 4,
                partition_epoch: 9,
                isr: vec![2, 1],
            }),
            Request::ElectLeader {
                topic: "x".into(),
                partition: 5,
                election: Election::Preferred,
            },
            Request::ElectLeader {
                topic: "y".into(),
                partition: 0,
                election: Election::Unclean,
            },
            Request::AlterReassignment {
                topic: "x".into(),
                partition: 1,
                target: Some(vec![3, 1, 2]),
                allow_replication_factor_change: false,
            },
            Request::AlterReassignment {
                topic: "x".into(),
                partition: 2,
                target: None,
                allow_replication_factor_change: true,
            },
        ]
    }

    #[test]
    fn requests_and_answers_come_back_as_they_went_in() {
        for (i, r) in requests().into_iter().enumerate() {
            let bytes = encode_request(i as u64 + 7, &r);
            assert_eq!(decode_request(&bytes).unwrap(), (i as u64 + 7, r));
        }
        let answers = [
            Answer {
                request_id: 1,
                broker_epoch: 5,
                fenced: true,
                producer_ids: Some((1000, 1000)),
                topic_id: Some([9; 16]),
                metadata_offset: 77,
                ..Answer::default()
            },
            Answer {
                controller: Some(2),
                ..Answer::refused(2, ErrorCode::NotController, "ask node 2")
            },
            Answer::refused(3, ErrorCode::TopicAlreadyExists, ""),
            Answer::refused(4, ErrorCode::ElectionNotNeeded, "led"),
            Answer::refused(5, ErrorCode::PreferredLeaderNotAvailable, "out"),
            Answer::refused(6, ErrorCode::EligibleLeadersNotAvailable, "none"),
            Answer::refused(7, ErrorCode::NoReassignmentInProgress, "none"),
        ];
        for a in answers {
            assert_eq!(decode_answer(&encode_answer(&a)).unwrap(), a);
        }
    }

    #[test]
    fn garbage_is_an_error() {
        let good = encode_request(1, &requests()[0]);
        for cut in 0..good.len() {
            let _ = decode_request(&good[..cut]);
            let _ = decode_answer(&good[..cut]);
        }
        assert!(decode_request(&[]).is_err());
        assert!(decode_answer(&[1, 2, 3]).is_err());
    }
}
