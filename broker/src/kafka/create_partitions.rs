//! CreatePartitions (key 37): grow a topic's partition count, through the controller; the
//! owning shards open the new partitions. Manual replica assignments (one per new partition)
//! are validated like CreateTopics': on one node, those naming only this node are honoured.
//! Internal topics keep their partition count (INVALID_REQUEST).

use std::rc::Rc;

use strand_wire::kafka::messages::create_partitions_response::CreatePartitionsTopicResult;
use strand_wire::kafka::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::catalog::CatalogOp;
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    let mut counts = Vec::new();
    let mut slots = Vec::new();
    for t in req.topics {
        let mut r = CreatePartitionsTopicResult::default();
        r.name = t.name.clone();
        let current = node
            .catalog()
            .topics
            .get(t.name.0.as_str())
            .map_or(0, |m| m.partitions);
        let bad = t.assignments.as_ref().and_then(|a| {
            if a.len() as i32 != t.count - current {
                return Some(format!(
                    "{} assignments for {} new partitions",
                    a.len(),
                    t.count - current
                ));
            }
            a.iter().enumerate().find_map(|(i, a)| {
                let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
                super::create_topics::check_replicas(current + i as i32, &ids).err()
            })
        });
        if super::is_internal_topic(t.name.0.as_str()) {
            // Groups and transactional ids are hashed onto these partitions by count.
            r.error_code = ErrorCode::InvalidRequest.code();
            r.error_message = Some(StrBytes::from_static_str(
                "the partition count of an internal topic cannot change",
            ));
        } else if let Some(message) = bad.filter(|_| current > 0) {
            r.error_code = ErrorCode::InvalidReplicaAssignment.code();
            r.error_message = Some(StrBytes::from_string(message));
        } else {
            slots.push(response.results.len());
            counts.push((t.name.0.as_str().to_string(), t.count));
        }
        response.results.push(r);
    }
    if !counts.is_empty() {
        let outcomes = node
            .change_catalog(CatalogOp::CreatePartitions(counts), req.validate_only)
            .await;
        super::fill_errors(
            &mut response.results,
            slots,
            outcomes,
            |r, code, message| {
                r.error_code = code;
                r.error_message = Some(message);
            },
        );
    }
    response
}
