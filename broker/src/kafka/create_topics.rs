//! CreateTopics (key 19): through the controller (shard 0). Replication factor must be 1 (or
//! -1, "the default") on a single node. Explicit replica assignments are validated as Kafka
//! does (partitions 0..n-1, one replica count, no duplicates, only live brokers): on one node
//! an assignment naming only this node is honoured.

use std::rc::Rc;

use strand_wire::kafka::messages::create_topics_response::CreatableTopicResult;
use strand_wire::kafka::messages::{CreateTopicsRequest, CreateTopicsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::NODE_ID;
use crate::catalog::{CatalogOp, NewTopic};
use crate::node::Node;

/// Why a manual replica assignment cannot be placed (INVALID_REPLICA_ASSIGNMENT), if so.
/// `replicas` are broker ids; the live brokers are this node alone until the cluster lands.
pub fn check_replicas(partition: i32, replicas: &[i32]) -> Result<(), String> {
    if replicas.is_empty() {
        return Err(format!("partition {partition} has an empty replica list"));
    }
    for (i, b) in replicas.iter().enumerate() {
        if replicas[..i].contains(b) {
            return Err(format!("partition {partition} lists broker {b} twice"));
        }
        if *b != NODE_ID {
            return Err(format!(
                "partition {partition}: broker {b} is not a live broker (live: {NODE_ID})"
            ));
        }
    }
    Ok(())
}

/// A CreateTopics entry's explicit assignments: the partition count they imply.
fn assigned_partitions(
    t: &strand_wire::kafka::messages::create_topics_request::CreatableTopic,
) -> Result<i32, (ErrorCode, String)> {
    if t.num_partitions != -1 || t.replication_factor != -1 {
        return Err((
            ErrorCode::InvalidRequest,
            "both numPartitions or replicationFactor and replicasAssignments were set; \
             set only the assignments"
                .into(),
        ));
    }
    let invalid = |m: String| (ErrorCode::InvalidReplicaAssignment, m);
    let mut indexes: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
    indexes.sort_unstable();
    if indexes.iter().enumerate().any(|(i, p)| *p != i as i32) {
        return Err(invalid(
            "partitions must be numbered 0..n-1, each once".into(),
        ));
    }
    let count = t.assignments[0].broker_ids.len();
    for a in &t.assignments {
        if a.broker_ids.len() != count {
            return Err(invalid(
                "every partition must have the same number of replicas".into(),
            ));
        }
        let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        check_replicas(a.partition_index, &ids).map_err(invalid)?;
    }
    Ok(t.assignments.len() as i32)
}

pub async fn handle(node: &Rc<Node>, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results: Vec<CreatableTopicResult> = Vec::new();
    let mut to_create = Vec::new();
    for t in req.topics {
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        let assigned = (!t.assignments.is_empty()).then(|| {
            if node.shared.cluster.is_some() {
                // The controller places partitions itself (leaders balanced); an assignment
                // it would ignore must not look accepted.
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    "manual replica assignments are not supported in a cluster yet; give \
                     numPartitions and replicationFactor"
                        .to_string(),
                ));
            }
            assigned_partitions(&t)
        });
        let partitions = match &assigned {
            Some(Ok(n)) => *n,
            _ if t.num_partitions == -1 => node.config().num_partitions,
            _ => t.num_partitions,
        };
        r.num_partitions = partitions;
        r.replication_factor = 1;
        let replicated = node.shared.cluster.is_some();
        if replicated && t.replication_factor > 1 {
            r.replication_factor = t.replication_factor;
        } else if replicated && t.replication_factor == -1 {
            r.replication_factor = node
                .config()
                .cluster
                .as_ref()
                .map_or(1, |c| c.default_replication_factor);
        }
        if let Some(Err((code, message))) = assigned {
            r.error_code = code.code();
            r.error_message = Some(StrBytes::from_string(message));
        } else if !matches!(t.replication_factor, -1 | 1) && !replicated {
            r.error_code = ErrorCode::InvalidReplicationFactor.code();
            r.error_message = Some(StrBytes::from_string(format!(
                "replication factor {} is larger than the 1 available broker",
                t.replication_factor
            )));
        } else {
            to_create.push((
                results.len(),
                NewTopic {
                    name: t.name.0.as_str().to_string(),
                    partitions,
                    replication_factor: t.replication_factor,
                    configs: t
                        .configs
                        .into_iter()
                        .filter_map(|c| {
                            Some((c.name.as_str().to_string(), c.value?.as_str().to_string()))
                        })
                        .collect(),
                },
            ));
        }
        results.push(r);
    }
    let (indexes, topics): (Vec<usize>, Vec<NewTopic>) = to_create.into_iter().unzip();
    let outcomes = node
        .change_catalog(CatalogOp::Create(topics), req.validate_only)
        .await;
    let catalog = node.catalog();
    for (i, outcome) in indexes.into_iter().zip(outcomes) {
        let r = &mut results[i];
        match outcome {
            Ok(()) => {
                if let Some(meta) = catalog.topics.get(r.name.0.as_str()) {
                    r.topic_id = meta.id.parse().unwrap_or_default();
                }
            }
            Err((code, message)) => {
                r.error_code = code.code();
                r.error_message = Some(StrBytes::from_string(message));
            }
        }
    }
    let mut response = CreateTopicsResponse::default();
    response.topics = results;
    response
}
