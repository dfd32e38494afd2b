//! ConsumerGroupHeartbeat (key 68, KIP-848): joins, keeps alive and reconciles a member of a
//! consumer group whose assignment the broker computes (`group.protocol=consumer`). Topics
//! travel by id; the coordinator sees them as the catalog has them now (internal topics left
//! out). The state machine is `group::consumer`.

use std::rc::Rc;

use strand_wire::kafka::messages::consumer_group_heartbeat_request::TopicPartitions as OwnedTopic;
use strand_wire::kafka::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use strand_wire::kafka::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, RequestHeader,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::group::consumer::{self, Assignment, Heartbeat, TopicsView};
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

/// The topics a consumer group may be assigned: every non-internal topic.
pub fn topics_view(node: &Node) -> TopicsView {
    let catalog = node.catalog();
    TopicsView {
        by_name: catalog
            .topics
            .iter()
            .filter(|(name, _)| !super::is_internal_topic(name))
            .filter_map(|(name, t)| Some((name.clone(), (t.id.parse().ok()?, t.partitions))))
            .collect(),
    }
}

/// Topic names by id (every non-internal topic).
pub fn topic_names(
    node: &Node,
) -> std::collections::BTreeMap<crate::group::consumer::TopicId, String> {
    topics_view(node)
        .by_name
        .into_iter()
        .map(|(name, (id, _))| (id, name))
        .collect()
}

fn owned(list: Vec<OwnedTopic>) -> Assignment {
    let mut a = Assignment::new();
    for t in list {
        a.entry(t.topic_id).or_default().extend(t.partitions);
    }
    a
}

fn to_wire(a: Assignment) -> WireAssignment {
    let mut w = WireAssignment::default();
    w.topic_partitions = a
        .into_iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(id, ps)| {
            let mut t = TopicPartitions::default();
            t.topic_id = id;
            t.partitions = ps.into_iter().collect();
            t
        })
        .collect();
    w
}

pub async fn handle(
    node: &Rc<Node>,
    header: &RequestHeader,
    client_host: &str,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
) -> ConsumerGroupHeartbeatResponse {
    let group = req.group_id.0.as_str().to_string();
    let mut hb = Heartbeat {
        member_id: req.member_id.as_str().to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.as_str().to_string()),
        rack_id: req.rack_id.map(|s| s.as_str().to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_names: req
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|t| t.0.as_str().to_string()).collect()),
        subscribed_regex: req.subscribed_topic_regex.map(|s| s.as_str().to_string()),
        server_assignor: req.server_assignor.map(|s| s.as_str().to_string()),
        owned: req.topic_partitions.map(owned),
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        client_host: format!("/{client_host}"),
    };
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.member_epoch = -1;
    let fail = |mut r: ConsumerGroupHeartbeatResponse, code: ErrorCode, msg: String| {
        r.error_code = code.code();
        r.error_message = Some(StrBytes::from_string(msg));
        r
    };
    if group.is_empty() {
        return fail(
            r,
            ErrorCode::InvalidRequest,
            "GroupId can't be empty.".into(),
        );
    }
    if let Err((code, msg)) = consumer::validate(&hb, version) {
        return fail(r, code, msg);
    }
    if let Some(a) = &hb.server_assignor {
        if !node.config().group_consumer_assignors.contains(a) {
            return fail(
                r,
                ErrorCode::UnsupportedAssignor,
                format!("ServerAssignor {a} is not supported (group.consumer.assignors)."),
            );
        }
    }
    if hb.member_epoch == 0 && hb.member_id.is_empty() {
        // v0: the broker names the member.
        hb.member_id = uuid::Uuid::new_v4().to_string();
    }
    let request = GroupRequest::ConsumerHeartbeat {
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
                r.assignment = h.assignment.map(to_wire);
            }
        }
        GroupResponse::Error(e) => r.error_code = e.code(),
        _ => r.error_code = ErrorCode::UnknownServerError.code(),
    }
    r
}
