//! ShareGroupDescribe (key 77, KIP-932): a share group's epoch and members with their
//! assignments. A group that is not a share group is GROUP_ID_NOT_FOUND, as in Kafka.

use std::rc::Rc;

use strand_wire::kafka::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use strand_wire::kafka::messages::{
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::authorized;
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse {
    let names = super::consumer_group_heartbeat::topic_names(node);
    let mut r = ShareGroupDescribeResponse::default();
    for id in req.group_ids {
        let group = id.0.as_str().to_string();
        let mut d = DescribedGroup::default();
        d.group_id = id;
        d.authorized_operations = if req.include_authorized_operations {
            authorized::GROUP
        } else {
            i32::MIN
        };
        let ask = GroupRequest::ShareDescribe {
            group: group.clone(),
        };
        match node.group_request(&group, ask).await {
            GroupResponse::ShareDescribed(Some((state, g))) => {
                d.group_state = StrBytes::from_static_str(state);
                d.group_epoch = g.epoch;
                d.assignment_epoch = g.epoch;
                d.assignor_name = StrBytes::from_static_str("simple");
                d.members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut w = Member::default();
                        w.member_id = StrBytes::from_string(m.id.clone());
                        w.rack_id = m.rack_id.clone().map(StrBytes::from_string);
                        w.member_epoch = m.epoch;
                        w.client_id = StrBytes::from_string(m.client_id.clone());
                        w.client_host = StrBytes::from_string(m.client_host.clone());
                        w.subscribed_topic_names = m
                            .subscribed
                            .iter()
                            .map(|n| TopicName(StrBytes::from_string(n.clone())))
                            .collect();
                        let mut a = Assignment::default();
                        a.topic_partitions = m
                            .assigned
                            .iter()
                            .map(|(id, ps)| {
                                let mut t = TopicPartitions::default();
                                t.topic_id = *id;
                                t.topic_name = TopicName(StrBytes::from_string(
                                    names.get(id).cloned().unwrap_or_default(),
                                ));
                                t.partitions = ps.iter().copied().collect();
                                t
                            })
                            .collect();
                        w.assignment = a;
                        w
                    })
                    .collect();
            }
            GroupResponse::ShareDescribed(None) => {
                d.error_code = ErrorCode::GroupIdNotFound.code();
                d.error_message = Some(StrBytes::from_string(format!(
                    "Group {group} not found or is not a share group."
                )));
            }
            GroupResponse::Error(e) => d.error_code = e.code(),
            _ => d.error_code = ErrorCode::UnknownServerError.code(),
        }
        r.groups.push(d);
    }
    r
}
