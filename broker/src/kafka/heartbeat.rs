//! Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use std::rc::Rc;

use strand_wire::kafka::messages::{HeartbeatRequest, HeartbeatResponse};
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: HeartbeatRequest) -> HeartbeatResponse {
    let group = req.group_id.0.as_str().to_string();
    let request = GroupRequest::Heartbeat {
        group: group.clone(),
        member: req.member_id.as_str().to_string(),
        instance: req.group_instance_id.map(|s| s.as_str().to_string()),
        generation: req.generation_id,
    };
    let mut r = HeartbeatResponse::default();
    r.error_code = match node.group_request(&group, request).await {
        GroupResponse::Error(e) => e.code(),
        _ => ErrorCode::UnknownServerError.code(),
    };
    r
}
