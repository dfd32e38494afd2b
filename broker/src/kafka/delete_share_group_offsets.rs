//! DeleteShareGroupOffsets (key 92, KIP-932): forgets a share group's state for whole topics
//! — `kafka-share-groups --delete-offsets`. Only for a group without members.

use std::rc::Rc;

use strand_wire::kafka::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use strand_wire::kafka::messages::{
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::alter_share_group_offsets::refuse_if_active;
use crate::node::share_service::{ShareAnswer, ShareOp};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let group = req.group_id.0.as_str().to_string();
    let mut r = DeleteShareGroupOffsetsResponse::default();
    if let Some((code, msg)) = refuse_if_active(node, &group).await {
        r.error_code = code.code();
        r.error_message = (!msg.is_empty()).then(|| StrBytes::from_string(msg));
        return r;
    }
    let view = super::consumer_group_heartbeat::topics_view(node);
    for t in req.topics {
        let topic = t.topic_name.0.as_str().to_string();
        let mut tr = DeleteShareGroupOffsetsResponseTopic::default();
        match view.by_name.get(&topic) {
            None => tr.error_code = ErrorCode::UnknownTopicOrPartition.code(),
            Some((id, partitions)) => {
                tr.topic_id = *id;
                for p in 0..*partitions {
                    let op = ShareOp::Reset {
                        group: group.clone(),
                        tp: (topic.clone(), p),
                        offset: None,
                    };
                    if let ShareAnswer::Done(code) = node.share_op(op).await {
                        if code != ErrorCode::None {
                            tr.error_code = code.code();
                        }
                    }
                }
            }
        }
        tr.topic_name = t.topic_name;
        r.responses.push(tr);
    }
    r
}
