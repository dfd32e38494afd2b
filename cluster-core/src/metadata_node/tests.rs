//! Three nodes sharing one committed log (what the quorum would commit); node 1 leads unless a
//! test moves leadership. No network, no clock but the one passed in.

use std::collections::BTreeMap;

use super::*;
use crate::controller::{Heartbeat, NewTopic};
use crate::records::{BrokerRegistration, Endpoint, NO_LEADER};

fn cfg() -> ControllerConfig {
    ControllerConfig {
        cluster_id: "c".into(),
        session_timeout_ms: 9_000,
        default_partitions: 1,
        default_replication_factor: 1,
        producer_id_block_size: 1000,
    }
}

fn reg(node: NodeId) -> BrokerRegistration {
    BrokerRegistration {
        node_id: node,
        incarnation: 100 + node as u128,
        cluster_id: "c".into(),
        client: Endpoint {
            host: "127.0.0.1".into(),
            port: 9090 + node as u16,
        },
        cluster: Endpoint {
            host: "127.0.0.1".into(),
            port: 9190 + node as u16,
        },
        shards: 2,
        rack: None,
    }
}

struct Cluster {
    nodes: Vec<MetadataNode>,
    /// The committed log: (index, data).
    log: Vec<(u64, Vec<u8>)>,
    /// Answers delivered, by asker.
    answers: Vec<(Asker, Answer)>,
    now_ms: u64,
}

impl Cluster {
    fn new() -> Cluster {
        let nodes = (1..=3)
            .map(|n| {
                MetadataNode::new(
                    n,
                    cfg(),
                    5_000,
                    Box::new(|t: &str, p: i32, shards: u32| (t.len() as u32 + p as u32) % shards),
                )
            })
            .collect();
        let mut c = Cluster {
            nodes,
            log: Vec::new(),
            answers: Vec::new(),
            now_ms: 1_000,
        };
        c.lead(1);
        c
    }

    fn node(&mut self, n: NodeId) -> &mut MetadataNode {
        &mut self.nodes[n as usize - 1]
    }

    fn lead(&mut self, leader: NodeId) {
        let now = self.now_ms;
        for n in &mut self.nodes {
            n.on_leader(Some(leader), now);
        }
    }

    /// Commits `data` and applies it on every node.
    fn commit(&mut self, data: Vec<u8>) {
        let index = self.log.len() as u64 + 1;
        self.log.push((index, data.clone()));
        for i in 0..self.nodes.len() {
            let effects = self.nodes[i].on_committed(index, &data).unwrap();
            self.handle(effects, false);
        }
    }

    /// Carries out effects: proposals commit at once unless `hold` (then they are returned).
    fn handle(&mut self, effects: Vec<Effect>, hold: bool) -> Vec<Vec<u8>> {
        let mut held = Vec::new();
        for e in effects {
            match e {
                Effect::Propose { data, .. } if hold => held.push(data),
                Effect::Propose { data, .. } => self.commit(data),
                Effect::Answer { to, answer } => self.answers.push((to, answer)),
            }
        }
        held
    }

    fn ask(&mut self, at: NodeId, asker: Asker, req: Request) -> Answer {
        let now = self.now_ms;
        let mut id = [0u8; 16];
        id[0] = (self.log.len() + 1) as u8;
        id[15] = asker.request_id() as u8;
        let effects = self.node(at).request_with_id(asker, req, now, id);
        self.handle(effects, false);
        self.answer_for(asker).expect("an answer")
    }

    /// Tells node `at` the quorum appended the proposal in `effects` at the next log index
    /// (returned), as the driver does.
    fn mark_proposed(&mut self, at: NodeId, effects: &[Effect]) -> u64 {
        let request = effects.iter().find_map(|e| match e {
            Effect::Propose {
                request: Some(r), ..
            } => Some(*r),
            _ => None,
        });
        let index = self.log.len() as u64 + 1;
        self.node(at)
            .proposed(request.expect("a proposal for a request"), index);
        index
    }

    fn answer_for(&mut self, asker: Asker) -> Option<Answer> {
        let i = self.answers.iter().position(|(a, _)| *a == asker)?;
        Some(self.answers.remove(i).1)
    }

    fn start_brokers(&mut self) {
        for n in 1..=3 {
            let a = self.ask(1, Asker::Remote(n, n as u64), Request::Register(reg(n)));
            assert_eq!(a.error, None);
            assert!(a.fenced, "a broker starts fenced");
            assert!(a.broker_epoch > 0);
            let hb = Heartbeat {
                node_id: n,
                broker_epoch: a.broker_epoch,
                metadata_offset: a.metadata_offset,
                shutting_down: false,
            };
            let a = self.ask(1, Asker::Remote(n, 100 + n as u64), Request::Heartbeat(hb));
            assert_eq!(a.error, None);
            assert!(!a.fenced, "caught up: unfenced");
        }
    }
}

fn digests(c: &Cluster) -> Vec<u64> {
    c.nodes.iter().map(|n| n.image().digest()).collect()
}

#[test]
fn brokers_register_and_a_topic_is_spread_over_every_node() {
    let mut c = Cluster::new();
    c.start_brokers();
    let a = c.ask(
        1,
        Asker::Local(7),
        Request::CreateTopic(NewTopic {
            name: "orders".into(),
            partitions: 12,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }),
    );
    assert_eq!(a.error, None);
    let id = a.topic_id.expect("the topic's id");
    let image = c.nodes[2].image();
    let topic = image.topic_by_name("orders").unwrap();
    assert_eq!(topic.id, id);
    assert_eq!(topic.partitions.len(), 12);
    let mut per_node = BTreeMap::new();
    for p in topic.partitions.values() {
        assert_ne!(p.leader, NO_LEADER);
        *per_node.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![4, 4, 4]
    );
    let d = digests(&c);
    assert!(d.windows(2).all(|w| w[0] == w[1]), "{d:?}");
    // The answer's offset is where the asker can read its own write.
    assert_eq!(a.metadata_offset, c.nodes[0].image().applied_offset);

    // A second creation is refused as the image applies it, with Kafka's error.
    let a = c.ask(
        2,
        Asker::Local(8),
        Request::CreateTopic(NewTopic {
            name: "orders".into(),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }),
    );
    assert_eq!(
        a.error.unwrap().0,
        ErrorCode::NotController,
        "node 2 is not the controller"
    );
    let a = c.ask(
        1,
        Asker::Local(9),
        Request::CreateTopic(NewTopic {
            name: "orders".into(),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }),
    );
    assert_eq!(a.error.unwrap().0, ErrorCode::TopicAlreadyExists);
    let a = c.ask(
        1,
        Asker::Local(10),
        Request::DeleteTopic {
            name: "orders".into(),
        },
    );
    assert_eq!(a.error, None);
    assert!(c.nodes[1].image().topic_by_name("orders").is_none());
}

#[test]
fn partitions_are_added_and_topic_configs_changed_through_the_controller() {
    let mut c = Cluster::new();
    c.start_brokers();
    let create = |name: &str| {
        Request::CreateTopic(NewTopic {
            name: name.into(),
            partitions: 3,
            replication_factor: 1,
            configs: [("retention.ms".to_string(), "1000".to_string())]
                .into_iter()
                .collect(),
        })
    };
    assert_eq!(c.ask(1, Asker::Local(1), create("grow")).error, None);
    let a = c.ask(
        1,
        Asker::Local(2),
        Request::CreatePartitions {
            name: "grow".into(),
            count: 7,
        },
    );
    assert_eq!(a.error, None);
    let image = c.nodes[2].image();
    let t = image.topic_by_name("grow").unwrap();
    assert_eq!(
        t.partitions.keys().copied().collect::<Vec<_>>(),
        (0..7).collect::<Vec<_>>()
    );
    assert!(t.partitions.values().all(|p| p.leader != NO_LEADER));
    // Not fewer, nor the same count, nor an unknown topic.
    for (name, count, code) in [
        ("grow", 7, ErrorCode::InvalidPartitions),
        ("grow", 2, ErrorCode::InvalidPartitions),
        ("nope", 9, ErrorCode::UnknownTopicOrPartition),
    ] {
        let a = c.ask(
            1,
            Asker::Local(3),
            Request::CreatePartitions {
                name: name.into(),
                count,
            },
        );
        assert_eq!(a.error.map(|e| e.0), Some(code), "{name} -> {count}");
    }

    let a = c.ask(
        1,
        Asker::Local(4),
        Request::AlterTopicConfigs {
            name: "grow".into(),
            changes: [
                ("retention.ms".to_string(), None),
                ("cleanup.policy".to_string(), Some("compact".to_string())),
            ]
            .into_iter()
            .collect(),
        },
    );
    assert_eq!(a.error, None);
    for n in 0..3 {
        let image = c.nodes[n].image();
        let configs = &image.topic_by_name("grow").unwrap().configs;
        assert_eq!(
            configs.iter().collect::<Vec<_>>(),
            vec![(&"cleanup.policy".to_string(), &"compact".to_string())]
        );
    }
    let d = digests(&c);
    assert!(d.windows(2).all(|w| w[0] == w[1]), "{d:?}");
}

#[test]
fn small_topics_asked_at_once_are_spread_over_the_nodes() {
    let mut c = Cluster::new();
    c.start_brokers();
    // One node leads nothing yet, so each of the burst alone would go there.
    let two = Request::CreateTopic(NewTopic {
        name: "two".into(),
        partitions: 2,
        replication_factor: 1,
        configs: BTreeMap::new(),
    });
    assert_eq!(c.ask(1, Asker::Local(49), two).error, None);
    // Nine one-partition topics proposed before any is applied (a CreateTopics request's
    // topics are asked concurrently): each placement counts the ones still in flight.
    let mut held = Vec::new();
    for i in 0..9u8 {
        let now = c.now_ms;
        let req = Request::CreateTopic(NewTopic {
            name: format!("small-{i}"),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
        });
        let mut id = [0u8; 16];
        id[0] = 200;
        id[15] = i;
        let effects = c
            .node(1)
            .request_with_id(Asker::Local(50 + u64::from(i)), req, now, id);
        held.extend(c.handle(effects, true));
    }
    for data in held {
        c.commit(data);
    }
    let image = c.nodes[0].image();
    let mut per_node = BTreeMap::new();
    for i in 0..9 {
        let t = image.topic_by_name(&format!("small-{i}")).unwrap();
        *per_node.entry(t.partitions[&0].leader).or_insert(0) += 1;
    }
    let counts: Vec<u32> = per_node.values().copied().collect();
    assert!(
        counts.len() == 3 && counts.iter().all(|&n| (2..=4).contains(&n)),
        "{per_node:?}"
    );
}

#[test]
fn a_create_partitions_in_flight_is_built_on_by_the_next() {
    let mut c = Cluster::new();
    c.start_brokers();
    let three = Request::CreateTopic(NewTopic {
        name: "g".into(),
        partitions: 3,
        replication_factor: 1,
        configs: BTreeMap::new(),
    });
    assert_eq!(c.ask(1, Asker::Local(60), three).error, None);
    // 3 -> 5 and 3 -> 7 asked before either applies: as if one after the other.
    let mut held = Vec::new();
    for (i, count) in [(61u64, 5), (62, 7), (63, 6)] {
        let now = c.now_ms;
        let req = Request::CreatePartitions {
            name: "g".into(),
            count,
        };
        let effects = c
            .node(1)
            .request_with_id(Asker::Local(i), req, now, [9; 16]);
        held.extend(c.handle(effects, true));
    }
    assert_eq!(
        c.answer_for(Asker::Local(63))
            .and_then(|a| a.error)
            .map(|e| e.0),
        Some(ErrorCode::InvalidPartitions),
        "6 after 7 is fewer"
    );
    for data in held {
        c.commit(data);
    }
    assert_eq!(c.answer_for(Asker::Local(61)).unwrap().error, None);
    assert_eq!(c.answer_for(Asker::Local(62)).unwrap().error, None);
    let image = c.nodes[1].image();
    let t = image.topic_by_name("g").unwrap();
    assert_eq!(
        t.partitions.keys().copied().collect::<Vec<_>>(),
        (0..7).collect::<Vec<_>>()
    );
}

#[test]
fn a_non_controller_names_the_controller() {
    let mut c = Cluster::new();
    let a = c.ask(
        3,
        Asker::Local(1),
        Request::DeleteTopic { name: "x".into() },
    );
    let (code, message) = a.error.unwrap();
    assert_eq!(code, ErrorCode::NotController);
    assert!(message.contains("node 1"), "{message}");
    assert_eq!(a.controller, Some(1));
}

#[test]
fn a_duplicate_node_id_is_refused_with_a_clear_error() {
    let mut c = Cluster::new();
    c.start_brokers();
    let mut other = reg(2);
    other.incarnation = 999;
    let a = c.ask(1, Asker::Remote(2, 50), Request::Register(other));
    let (code, message) = a.error.unwrap();
    assert_eq!(code, ErrorCode::DuplicateBrokerRegistration);
    assert!(message.contains("node.id 2"), "{message}");
}

#[test]
fn a_batch_committed_after_leadership_moved_still_answers_its_asker() {
    let mut c = Cluster::new();
    c.start_brokers();
    let now = c.now_ms;
    let effects = c.node(1).request_with_id(
        Asker::Local(42),
        Request::CreateTopic(NewTopic {
            name: "late".into(),
            partitions: 3,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }),
        now,
        [4; 16],
    );
    c.mark_proposed(1, &effects);
    let held = c.handle(effects, true);
    assert_eq!(held.len(), 1);
    // Node 2 takes over; the old leader's entry is committed by it after all.
    c.lead(2);
    assert!(!c.nodes[0].is_controller());
    assert!(c.nodes[1].is_controller());
    c.commit(held.into_iter().next().unwrap());
    let a = c
        .answer_for(Asker::Local(42))
        .expect("answered from the committed entry");
    assert_eq!(a.error, None);
    assert_eq!(a.topic_id, Some([4; 16]));
    assert_eq!(c.nodes[0].waiting(), 0);
}

#[test]
fn a_batch_replaced_by_another_leaders_entry_answers_not_controller_at_once() {
    // Node 1 proposes a creation at index i, loses the leadership before it commits, and
    // node 2's own entry commits at i: the creation never happened, and the asker hears so
    // at once (NOT_CONTROLLER: ask again), not at its deadline.
    let mut c = Cluster::new();
    c.start_brokers();
    let now = c.now_ms;
    let new_topic = |name: &str| {
        Request::CreateTopic(NewTopic {
            name: name.into(),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
        })
    };
    let effects = c
        .node(1)
        .request_with_id(Asker::Local(43), new_topic("lost"), now, [5; 16]);
    let index = c.mark_proposed(1, &effects);
    assert_eq!(c.handle(effects, true).len(), 1, "held, never committed");
    c.lead(2);
    let a = c.ask(2, Asker::Local(44), new_topic("other"));
    assert_eq!(a.error, None);
    assert_eq!(
        c.log.len() as u64,
        index,
        "node 2's entry took index {index}"
    );
    let lost = c.answer_for(Asker::Local(43)).expect("answered at once");
    assert_eq!(lost.error.unwrap().0, ErrorCode::NotController);
    assert_eq!(lost.controller, Some(2));
    assert_eq!(c.nodes[0].waiting(), 0);
    assert!(c.nodes[0].image().topic_by_name("lost").is_none());
    // Asked again at the new controller, it is created (not TOPIC_ALREADY_EXISTS).
    let again = c.ask(2, Asker::Local(45), new_topic("lost"));
    assert_eq!(again.error, None);
}

#[test]
fn a_batch_that_never_commits_times_out() {
    let mut c = Cluster::new();
    let now = c.now_ms;
    let effects = c.node(1).request(
        Asker::Local(5),
        Request::DeleteTopic { name: "x".into() },
        now,
    );
    // Refused at once: no such topic.
    c.handle(effects, true);
    assert_eq!(
        c.answer_for(Asker::Local(5)).unwrap().error.unwrap().0,
        ErrorCode::UnknownTopicOrPartition
    );
    let effects = c.node(1).request(
        Asker::Local(6),
        Request::AllocateProducerIds { node_id: 1 },
        now,
    );
    assert_eq!(c.handle(effects, true).len(), 1);
    assert!(c
        .node(1)
        .tick(now + 4_999)
        .iter()
        .all(|e| !matches!(e, Effect::Answer { .. })));
    let effects = c.node(1).tick(now + 5_000);
    c.handle(effects, true);
    assert_eq!(
        c.answer_for(Asker::Local(6)).unwrap().error.unwrap().0,
        ErrorCode::RequestTimedOut
    );
    // The quorum refusing the proposal: NOT_CONTROLLER, with the leader named.
    let effects = c.node(1).request(
        Asker::Local(7),
        Request::AllocateProducerIds { node_id: 1 },
        now,
    );
    let Effect::Propose {
        request: Some(r), ..
    } = &effects[0]
    else {
        panic!("{effects:?}")
    };
    let effects = c.node(1).proposal_failed(*r, Some(3));
    c.handle(effects, true);
    let a = c.answer_for(Asker::Local(7)).unwrap();
    assert_eq!(a.error.unwrap().0, ErrorCode::NotController);
    assert_eq!(a.controller, Some(3));
}

#[test]
fn producer_id_blocks_in_flight_together_do_not_overlap() {
    let mut c = Cluster::new();
    let now = c.now_ms;
    let mut held = Vec::new();
    for asker in [1, 2, 3] {
        let e = c.node(1).request(
            Asker::Local(asker),
            Request::AllocateProducerIds { node_id: 1 },
            now,
        );
        held.extend(c.handle(e, true));
    }
    for data in held {
        c.commit(data);
    }
    let mut blocks: Vec<(i64, i32)> = [1, 2, 3]
        .iter()
        .map(|a| {
            let a = c.answer_for(Asker::Local(*a)).unwrap();
            assert_eq!(a.error, None);
            a.producer_ids.unwrap()
        })
        .collect();
    blocks.sort();
    assert_eq!(blocks, vec![(0, 1000), (1000, 1000), (2000, 1000)]);
    assert_eq!(c.nodes[2].image().next_producer_id, 3000);
}

#[test]
fn a_node_restored_from_a_snapshot_has_the_same_image_and_keeps_applying() {
    let mut c = Cluster::new();
    c.start_brokers();
    for i in 0..20 {
        let a = c.ask(
            1,
            Asker::Local(1000 + i),
            Request::CreateTopic(NewTopic {
                name: format!("t{i}"),
                partitions: 2,
                replication_factor: 1,
                configs: BTreeMap::new(),
            }),
        );
        assert_eq!(a.error, None);
    }
    let index = c.log.len() as u64;
    let snap = c.nodes[0].snapshot_data();
    let mut fresh = MetadataNode::new(3, cfg(), 5_000, Box::new(|_: &str, _: i32, _: u32| 0));
    fresh.on_snapshot(index, &snap, 0).unwrap();
    assert_eq!(fresh.image().digest(), c.nodes[0].image().digest());
    // Entries the snapshot covers are skipped; later ones apply.
    let (i, data) = c.log[3].clone();
    assert!(fresh.on_committed(i, &data).unwrap().is_empty());
    c.nodes[2] = fresh;
    let a = c.ask(
        1,
        Asker::Local(1),
        Request::DeleteTopic { name: "t3".into() },
    );
    assert_eq!(a.error, None);
    let d = digests(&c);
    assert!(d.windows(2).all(|w| w[0] == w[1]), "{d:?}");
    // A corrupt entry is an error, not a skipped entry.
    assert!(c.nodes[0].on_committed(index + 100, &[1, 2, 3]).is_err());
}

#[test]
fn a_node_speaks_only_for_itself() {
    let mut c = Cluster::new();
    let a = c.ask(1, Asker::Remote(2, 1), Request::Register(reg(3)));
    let (code, message) = a.error.unwrap();
    assert_eq!(code, ErrorCode::InvalidRequest);
    assert!(
        message.contains("node 2 sent a register request for node 3"),
        "{message}"
    );
    let a = c.ask(
        1,
        Asker::Remote(2, 2),
        Request::AllocateProducerIds { node_id: 1 },
    );
    assert_eq!(a.error.unwrap().0, ErrorCode::InvalidRequest);
}

/// Three brokers and `t` with 3 partitions on all of them.
fn replicated() -> Cluster {
    let mut c = Cluster::new();
    c.start_brokers();
    let a = c.ask(
        1,
        Asker::Local(1),
        Request::CreateTopic(NewTopic {
            name: "t".into(),
            partitions: 3,
            replication_factor: 3,
            configs: BTreeMap::new(),
        }),
    );
    assert_eq!(a.error, None);
    c
}

fn holds_nothing(c: &Cluster, node: NodeId) {
    for n in &c.nodes {
        let img = n.image();
        assert!(img.brokers[&node].fenced, "node {node} fenced");
        for p in 0..3 {
            let s = img.partition("t", p).unwrap();
            assert_ne!(s.leader, node, "t-{p}: {s:?}");
            assert!(!s.isr.contains(&node), "t-{p}: {s:?}");
        }
    }
}

#[test]
fn evidence_that_a_broker_died_fences_it_in_the_same_tick_and_is_then_dropped() {
    let mut c = replicated();
    let now = c.now_ms;
    // Evidence for an incarnation that is not the registered one (stale): nothing happens.
    let effects = c.node(1).peer_gone(3, 999, now);
    assert!(c.handle(effects, true).is_empty());
    assert!(c.node(1).gone().is_empty());
    // Node 2's process (incarnation 102) died: no virtual time passes.
    let effects = c.node(1).peer_gone(2, 102, now);
    c.handle(effects, false);
    holds_nothing(&c, 2);
    for n in 1..=3 {
        assert!(
            c.node(n).gone().is_empty(),
            "the fence settles the evidence"
        );
    }
    assert!(!c.nodes[0].image().brokers[&3].fenced);
}

#[test]
fn a_new_controller_fences_an_evidenced_broker_at_once_not_after_a_fresh_session() {
    let mut c = replicated();
    let now = c.now_ms;
    // Node 1 leads the quorum and dies; nodes 2 and 3 hold the evidence.
    for n in [2, 3] {
        let effects = c.node(n).peer_gone(1, 101, now);
        assert!(c.handle(effects, true).is_empty(), "not the controller");
        assert_eq!(c.node(n).gone().get(&1), Some(&101));
    }
    c.lead(2);
    let effects = c.node(2).tick(now + 1);
    c.handle(effects, false);
    holds_nothing(&c, 1);
}

#[test]
fn a_tripwire_that_reaches_the_same_process_again_cancels_the_evidence() {
    let mut c = replicated();
    let now = c.now_ms;
    let effects = c.node(2).peer_gone(1, 101, now);
    c.handle(effects, true);
    c.node(2).peer_up(1, 101);
    assert!(c.node(2).gone().is_empty());
    c.lead(2);
    let effects = c.node(2).tick(now + 1);
    assert!(
        c.handle(effects, true).is_empty(),
        "a live broker keeps its session"
    );
    assert!(!c.nodes[1].image().brokers[&1].fenced);
}
