//! AlterShareGroupOffsets (key 91, KIP-932): moves share-partitions' start offsets (their
//! in-flight state starts over) — `kafka-share-groups --reset-offsets --execute`. Only for a
//! group without members (NON_EMPTY_GROUP otherwise, as in Kafka).

use std::rc::Rc;

use strand_wire::kafka::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use strand_wire::kafka::messages::{AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::share_service::{ShareAnswer, ShareOp};
use crate::node::Node;

/// NON_EMPTY_GROUP while the share group has members; otherwise `None`.
pub async fn refuse_if_active(node: &Rc<Node>, group: &str) -> Option<(ErrorCode, String)> {
    let ask = GroupRequest::ShareDescribe {
        group: group.to_string(),
    };
    match node.group_request(group, ask).await {
        GroupResponse::ShareDescribed(Some((_, g))) if !g.members.is_empty() => Some((
            ErrorCode::NonEmptyGroup,
            format!(
                "share group {group} has {} members; stop them first",
                g.members.len()
            ),
        )),
        GroupResponse::Error(e) if e != ErrorCode::None => Some((e, String::new())),
        _ => None,
    }
}

pub async fn handle(
    node: &Rc<Node>,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let group = req.group_id.0.as_str().to_string();
    let mut r = AlterShareGroupOffsetsResponse::default();
    if let Some((code, msg)) = refuse_if_active(node, &group).await {
        r.error_code = code.code();
        r.error_message = (!msg.is_empty()).then(|| StrBytes::from_string(msg));
        return r;
    }
    let view = super::consumer_group_heartbeat::topics_view(node);
    for t in req.topics {
        let topic = t.topic_name.0.as_str().to_string();
        let mut tr = AlterShareGroupOffsetsResponseTopic::default();
        tr.topic_id = view
            .by_name
            .get(&topic)
            .map(|(id, _)| *id)
            .unwrap_or_default();
        for p in t.partitions {
            let mut pr = AlterShareGroupOffsetsResponsePartition::default();
            pr.partition_index = p.partition_index;
            pr.error_code = if view.by_name.contains_key(&topic) {
                let op = ShareOp::Reset {
                    group: group.clone(),
                    tp: (topic.clone(), p.partition_index),
                    offset: Some(p.start_offset),
                };
                match node.share_op(op).await {
                    ShareAnswer::Done(code) => code.code(),
                    _ => ErrorCode::UnknownServerError.code(),
                }
            } else {
                ErrorCode::UnknownTopicOrPartition.code()
            };
            tr.partitions.push(pr);
        }
        tr.topic_name = t.topic_name;
        r.responses.push(tr);
    }
    r
}
