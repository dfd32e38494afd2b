//! SyncGroup (key 14): the leader hands in assignments; every member gets its own.

use std::rc::Rc;

use strand_wire::kafka::messages::{SyncGroupRequest, SyncGroupResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let group = req.group_id.0.as_str().to_string();
    let request = GroupRequest::Sync {
        group: group.clone(),
        member: req.member_id.as_str().to_string(),
        instance: req.group_instance_id.map(|s| s.as_str().to_string()),
        generation: req.generation_id,
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.as_str().to_string(), a.assignment))
            .collect(),
    };
    let mut r = SyncGroupResponse::default();
    match node.group_request(&group, request).await {
        GroupResponse::Sync(s) => {
            r.error_code = s.error.code();
            r.assignment = s.assignment;
            if version >= 5 {
                r.protocol_type = s.protocol_type.map(StrBytes::from_string);
                r.protocol_name = s.protocol.map(StrBytes::from_string);
            }
        }
        GroupResponse::Error(e) => r.error_code = e.code(),
        _ => r.error_code = ErrorCode::UnknownServerError.code(),
    }
    r
}
