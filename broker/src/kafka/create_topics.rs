//! CreateTopics (key 19): through the controller (shard 0). Replication factor must be 1 (or
//! -1, "the default") on a single node.

use std::rc::Rc;

use strand_wire::kafka::messages::create_topics_response::CreatableTopicResult;
use strand_wire::kafka::messages::{CreateTopicsRequest, CreateTopicsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::catalog::{CatalogOp, NewTopic};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results: Vec<CreatableTopicResult> = Vec::new();
    let mut to_create = Vec::new();
    for t in req.topics {
        let mut r = CreatableTopicResult::default();
        r.name = t.name.clone();
        let partitions = if t.num_partitions == -1 {
            node.config().num_partitions
        } else {
            t.num_partitions
        };
        r.num_partitions = partitions;
        r.replication_factor = 1;
        if !matches!(t.replication_factor, -1 | 1) {
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
