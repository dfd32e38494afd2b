//! CreatePartitions (key 37): grow a topic's partition count, through the controller; the
//! owning shards open the new partitions. (Manual replica assignments are refused: one node.)

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
        if t.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
            r.error_code = ErrorCode::InvalidRequest.code();
            r.error_message = Some(StrBytes::from_static_str(
                "replica assignments are not supported",
            ));
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
        for (slot, outcome) in slots.into_iter().zip(outcomes) {
            if let Err((code, message)) = outcome {
                response.results[slot].error_code = code.code();
                response.results[slot].error_message = Some(StrBytes::from_string(message));
            }
        }
    }
    response
}
