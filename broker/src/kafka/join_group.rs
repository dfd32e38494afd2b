//! JoinGroup (key 11): joins (or rejoins) a member; answered when the join phase ends.

use std::rc::Rc;

use strand_wire::kafka::messages::join_group_response::JoinGroupResponseMember;
use strand_wire::kafka::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use strand_wire::kafka::protocol::StrBytes;

use crate::group::Join;
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    header: &RequestHeader,
    req: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let group = req.group_id.0.as_str().to_string();
    let join = Join {
        group: group.clone(),
        member_id: req.member_id.as_str().to_string(),
        instance_id: req.group_instance_id.map(|s| s.as_str().to_string()),
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        client_host: String::new(),
        protocol_type: req.protocol_type.as_str().to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.as_str().to_string(), p.metadata))
            .collect(),
        session_timeout_ms: i64::from(req.session_timeout_ms),
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: i64::from(if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        }),
        require_known_member_id: version >= 4,
    };
    let mut r = JoinGroupResponse::default();
    match node.group_request(&group, GroupRequest::Join(join)).await {
        GroupResponse::Join(j) => {
            r.error_code = j.error.code();
            r.generation_id = j.generation;
            r.protocol_type = j.protocol_type.map(StrBytes::from_string);
            r.protocol_name = j.protocol.map(StrBytes::from_string);
            if version < 7 && r.protocol_name.is_none() {
                r.protocol_name = Some(StrBytes::default());
            }
            r.leader = StrBytes::from_string(j.leader);
            r.member_id = StrBytes::from_string(j.member_id);
            r.members = j
                .members
                .into_iter()
                .map(|(id, iid, md)| {
                    let mut m = JoinGroupResponseMember::default();
                    m.member_id = StrBytes::from_string(id);
                    m.group_instance_id = iid.map(StrBytes::from_string);
                    m.metadata = md;
                    m
                })
                .collect();
        }
        GroupResponse::Error(e) => {
            r.error_code = e.code();
            r.generation_id = -1;
        }
        _ => r.error_code = strand_wire::ErrorCode::UnknownServerError.code(),
    }
    if version < 7 {
        r.protocol_type = None;
    }
    r
}
