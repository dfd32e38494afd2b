//! LeaveGroup (key 13): members leave (one in v0-2, a batch in v3+, each named by member id
//! or by `group.instance.id`); the rest rebalance.

use std::rc::Rc;

use strand_wire::kafka::messages::leave_group_response::MemberResponse;
use strand_wire::kafka::messages::{LeaveGroupRequest, LeaveGroupResponse};
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group = req.group_id.0.as_str().to_string();
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.as_str().to_string(),
                    m.group_instance_id.as_ref().map(|s| s.as_str().to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.as_str().to_string(), None)]
    };
    let mut r = LeaveGroupResponse::default();
    match node
        .group_request(
            &group,
            GroupRequest::Leave {
                group: group.clone(),
                members: members.clone(),
            },
        )
        .await
    {
        GroupResponse::Errors(errors) => {
            if version >= 3 {
                r.members = req
                    .members
                    .into_iter()
                    .zip(errors)
                    .map(|(m, e)| {
                        let mut mr = MemberResponse::default();
                        mr.member_id = m.member_id;
                        mr.group_instance_id = m.group_instance_id;
                        mr.error_code = e.code();
                        mr
                    })
                    .collect();
            } else {
                r.error_code = errors.first().copied().unwrap_or(ErrorCode::None).code();
            }
        }
        GroupResponse::Error(e) => r.error_code = e.code(),
        _ => r.error_code = ErrorCode::UnknownServerError.code(),
    }
    r
}
