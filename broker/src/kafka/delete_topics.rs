//! DeleteTopics (key 20): through the controller; each shard closes and deletes the
//! partitions it owned. The internal topics cannot be deleted (INVALID_REQUEST): every
//! group's committed offsets and every transaction's state live there.

use std::rc::Rc;

use strand_wire::kafka::messages::delete_topics_response::DeletableTopicResult;
use strand_wire::kafka::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::catalog::CatalogOp;
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let names: Vec<String> = req
        .topic_names
        .iter()
        .map(|n| n.0.as_str().to_string())
        .collect();
    let (internal, deletable): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| super::is_internal_topic(n));
    let mut outcomes = node
        .change_catalog(CatalogOp::Delete(deletable.clone()), false)
        .await;
    let mut names = deletable;
    for name in internal {
        outcomes.push(Err((
            ErrorCode::InvalidRequest,
            format!("{name} is an internal topic and cannot be deleted"),
        )));
        names.push(name);
    }
    let mut response = DeleteTopicsResponse::default();
    for (name, outcome) in names.into_iter().zip(outcomes) {
        let mut r = DeletableTopicResult::default();
        r.name = Some(TopicName(StrBytes::from_string(name)));
        if let Err((code, message)) = outcome {
            r.error_code = code.code();
            r.error_message = Some(StrBytes::from_string(message));
        }
        response.responses.push(r);
    }
    response
}
