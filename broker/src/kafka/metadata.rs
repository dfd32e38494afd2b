//! Metadata (key 3): brokers, topics, partitions and leaders. Unknown topics are created when
//! the client allows it and `auto.create.topics.enable` is on (Kafka's default).

use std::rc::Rc;
use std::time::{Duration, Instant};

use strand_wire::kafka::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use strand_wire::kafka::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::brokers::{brokers, controller_id, placement};
use super::{authorized, is_internal_topic};
use crate::catalog::{CatalogOp, NewTopic};
use crate::limits::{METADATA_AWAIT_NEW_LEADER_MS, METADATA_AWAIT_NEW_LEADER_POLL_MS};
use crate::node::Node;
use tracing::debug;

/// Cluster mode: while a requested partition's leader is a peer this node just saw die
/// (`cluster::peers_down`), wait a moment for the controller's fence to name the next one —
/// it acts on the same evidence, milliseconds later. A client asks for metadata the moment
/// its connection to the dead leader breaks; answered with the dead leader, or with none,
/// librdkafka waits for its next periodic refresh (up to 1 s) before asking again.
async fn await_new_leaders(node: &Rc<Node>, requested: Option<&[String]>) {
    let Some(h) = &node.shared.cluster else {
        return;
    };
    let deadline = Instant::now() + Duration::from_millis(METADATA_AWAIT_NEW_LEADER_MS);
    loop {
        let hidden = h.peers_down.hidden();
        if hidden.is_empty() || Instant::now() >= deadline {
            return;
        }
        let catalog = node.catalog();
        let Some(view) = catalog.cluster.as_ref() else {
            return;
        };
        let led_by_hidden = |t: &crate::cluster::view::TopicView| {
            t.partitions.iter().any(|p| hidden.contains(&p.leader))
        };
        let waiting = match requested {
            Some(names) => names
                .iter()
                .filter_map(|n| view.topics.get(n))
                .any(led_by_hidden),
            None => view.topics.values().any(led_by_hidden),
        };
        if !waiting {
            return;
        }
        glommio::timer::sleep(Duration::from_millis(METADATA_AWAIT_NEW_LEADER_POLL_MS)).await;
    }
}

pub async fn handle(node: &Rc<Node>, req: MetadataRequest, version: i16) -> MetadataResponse {
    // v0 sends an empty list to mean "all topics"; v1+ sends null for that. v10+ may name a
    // topic by id alone (KIP-848 clients resolve assigned topic ids so).
    let mut unknown_ids = Vec::new();
    let requested: Option<Vec<String>> = match req.topics {
        Some(t) if !(version == 0 && t.is_empty()) => {
            let catalog = node.catalog();
            Some(
                t.into_iter()
                    .filter_map(|t| match t.name {
                        // A topic named by id: the Java client sends an empty name with it.
                        Some(n) if !n.0.is_empty() || t.topic_id.is_nil() => {
                            Some(n.0.as_str().to_string())
                        }
                        _ => {
                            let id = t.topic_id.to_string();
                            let found = catalog
                                .topics
                                .iter()
                                .find(|(_, m)| m.id == id)
                                .map(|(n, _)| n.clone());
                            if found.is_none() {
                                unknown_ids.push(t.topic_id);
                            }
                            found
                        }
                    })
                    .collect(),
            )
        }
        _ => None,
    };
    // Decoded below v4 as true (the field came in v4); `authorize` clears it without CREATE.
    let allow_create = req.allow_auto_topic_creation;
    // Topics auto-creation left for a later request: LEADER_NOT_AVAILABLE, which clients retry.
    let mut deferred = std::collections::HashSet::new();
    if let Some(names) = &requested {
        let catalog = node.catalog();
        let missing: Vec<NewTopic> = names
            .iter()
            .filter(|n| !catalog.topics.contains_key(*n))
            .filter(|n| crate::catalog::validate_topic_name(n).is_ok())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|n| NewTopic {
                name: n.clone(),
                partitions: node.config().num_partitions,
                replication_factor: -1,
                configs: Default::default(),
            })
            .collect();
        if allow_create && node.config().auto_create_topics && !missing.is_empty() {
            let sizes: Vec<i32> = missing.iter().map(|t| t.partitions).collect();
            let admitted = node
                .shared
                .auto_create
                .admit(crate::runtime::clock::now_ms(), &sizes);
            deferred = missing[admitted..].iter().map(|t| t.name.clone()).collect();
            if admitted < missing.len() {
                debug!(
                    admitted,
                    deferred = deferred.len(),
                    "topic auto-creation limited (per request and per second)"
                );
            }
            let mut missing = missing;
            missing.truncate(admitted);
            if !missing.is_empty() && node.shared.cluster.is_some() {
                // In a cluster the controller may be far (or being elected): create in the
                // background and answer LEADER_NOT_AVAILABLE now, which clients retry — as
                // Kafka answers a first auto-creating Metadata request.
                deferred.extend(missing.iter().map(|t| t.name.clone()));
                let node = Rc::clone(node);
                glommio::spawn_local(async move {
                    node.change_catalog(CatalogOp::Create(missing), false).await;
                })
                .detach();
            } else if !missing.is_empty() {
                node.change_catalog(CatalogOp::Create(missing), false).await;
            }
        }
    }
    await_new_leaders(node, requested.as_deref()).await;
    let catalog = node.catalog();
    let mut r = MetadataResponse::default();
    r.brokers = brokers(node, &catalog)
        .into_iter()
        .map(|b| {
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(b.id);
            broker.host = StrBytes::from_string(b.host);
            broker.port = b.port;
            broker.rack = b.rack.map(StrBytes::from_string);
            broker
        })
        .collect();
    r.cluster_id = Some(StrBytes::from_string(node.shared.cluster_id.clone()));
    r.controller_id = BrokerId(controller_id(node, &catalog));
    if req.include_cluster_authorized_operations && (8..=10).contains(&version) {
        r.cluster_authorized_operations = authorized::CLUSTER;
    }
    // Leaders whose process this node just saw die and that no fence has replaced within
    // the wait above: no leader (LEADER_NOT_AVAILABLE), so clients keep asking.
    let hidden = node
        .shared
        .cluster
        .as_ref()
        .map(|h| h.peers_down.hidden())
        .unwrap_or_default();
    let names: Vec<String> = requested.unwrap_or_else(|| catalog.topics.keys().cloned().collect());
    for name in names {
        let mut t = MetadataResponseTopic::default();
        t.name = Some(TopicName(StrBytes::from_string(name.clone())));
        t.is_internal = is_internal_topic(&name);
        match catalog.topics.get(&name) {
            None => {
                t.error_code = if crate::catalog::validate_topic_name(&name).is_err() {
                    ErrorCode::InvalidTopicException.code()
                } else if deferred.contains(&name) {
                    ErrorCode::LeaderNotAvailable.code()
                } else {
                    ErrorCode::UnknownTopicOrPartition.code()
                };
            }
            // A cluster node that has not caught up with the metadata log since it started
            // names no leaders (its image may be from before a restart): clients retry.
            Some(_) if catalog.cluster.as_ref().is_some_and(|v| !v.caught_up) => {
                t.error_code = ErrorCode::LeaderNotAvailable.code();
            }
            Some(meta) => {
                t.topic_id = meta.id.parse().unwrap_or_default();
                if req.include_topic_authorized_operations {
                    t.topic_authorized_operations = authorized::TOPIC;
                }
                t.partitions = (0..meta.partitions)
                    .map(|p| {
                        let mut at = placement(node, &catalog, &name, p);
                        if hidden.contains(&at.leader) {
                            at.leader = -1;
                        }
                        let mut part = MetadataResponsePartition::default();
                        part.partition_index = p;
                        if at.leader < 0 {
                            part.error_code = ErrorCode::LeaderNotAvailable.code();
                        }
                        part.leader_id = BrokerId(at.leader);
                        part.leader_epoch = at.leader_epoch;
                        part.replica_nodes = at.replicas.into_iter().map(BrokerId).collect();
                        part.isr_nodes = at.isr.into_iter().map(BrokerId).collect();
                        part
                    })
                    .collect();
            }
        }
        r.topics.push(t);
    }
    for id in unknown_ids {
        let mut t = MetadataResponseTopic::default();
        t.topic_id = id;
        t.error_code = ErrorCode::UnknownTopicId.code();
        r.topics.push(t);
    }
    r
}
