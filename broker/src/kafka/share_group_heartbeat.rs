//! ShareGroupHeartbeat (key 76, KIP-932): joins, keeps alive and assigns a member of a share
//! group. Share-group members may share partitions; the state machine is `group::share`.

use std::rc::Rc;

use strand_wire::kafka::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use strand_wire::kafka::messages::{
    RequestHeader, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::consumer_group_heartbeat::topics_view;
use crate::group::share::Heartbeat;
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    header: &RequestHeader,
    client_host: &str,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let group = req.group_id.0.as_str().to_string();
    let mut r = ShareGroupHeartbeatResponse::default();
    r.member_epoch = -1;
    if group.is_empty() {
        r.error_code = ErrorCode::InvalidRequest.code();
        r.error_message = Some(StrBytes::from_static_str("GroupId can't be empty."));
        return r;
    }
    let hb = Heartbeat {
        member_id: req.member_id.as_str().to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|s| s.as_str().to_string()),
        subscribed: req
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|t| t.0.as_str().to_string()).collect()),
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        client_host: format!("/{client_host}"),
    };
    let request = GroupRequest::ShareHeartbeat {
        group: group.clone(),
        heartbeat: Box::new(hb),
        topics: topics_view(node),
    };
    match node.group_request(&group, request).await {
        GroupResponse::ConsumerHeartbeat(h) => {
            r.error_code = h.error.code();
            r.error_message = h.message.map(StrBytes::from_string);
            if h.error == ErrorCode::None {
                r.member_id = Some(StrBytes::from_string(h.member_id));
                r.member_epoch = h.member_epoch;
                r.heartbeat_interval_ms = h.heartbeat_interval_ms;
                r.assignment = h.assignment.map(|a| {
                    let mut w = Assignment::default();
                    w.topic_partitions = a
                        .into_iter()
                        .map(|(id, ps)| {
                            let mut t = TopicPartitions::default();
                            t.topic_id = id;
                            t.partitions = ps.into_iter().collect();
                            t
                        })
                        .collect();
                    w
                });
            }
        }
        GroupResponse::Error(e) => r.error_code = e.code(),
        _ => r.error_code = ErrorCode::UnknownServerError.code(),
    }
    r
}
