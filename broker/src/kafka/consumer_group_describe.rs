//! ConsumerGroupDescribe (key 69, KIP-848): a consumer group's epochs, assignor and members
//! with their current and target assignments. A classic group (or none) is GROUP_ID_NOT_FOUND,
//! as in Kafka: the admin client then describes it with DescribeGroups.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use strand_wire::kafka::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::authorized;
use crate::group::consumer::{Assignment, TopicId};
use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

fn to_wire(a: &Assignment, names: &BTreeMap<TopicId, String>) -> WireAssignment {
    let mut w = WireAssignment::default();
    w.topic_partitions = a
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
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
    w
}

pub async fn handle(
    node: &Rc<Node>,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let names = super::consumer_group_heartbeat::topic_names(node);
    let mut r = ConsumerGroupDescribeResponse::default();
    for id in req.group_ids {
        let group = id.0.as_str().to_string();
        let mut d = DescribedGroup::default();
        d.group_id = id;
        d.authorized_operations = if req.include_authorized_operations {
            authorized::GROUP
        } else {
            i32::MIN
        };
        let req = GroupRequest::ConsumerDescribe {
            group: group.clone(),
        };
        match node.group_request(&group, req).await {
            GroupResponse::ConsumerDescribed(Some((state, g))) => {
                d.group_state = StrBytes::from_static_str(state);
                d.group_epoch = g.epoch;
                d.assignment_epoch = g.target_epoch;
                d.assignor_name = StrBytes::from_string(g.assignor.clone());
                let empty = Assignment::new();
                d.members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut w = Member::default();
                        w.member_id = StrBytes::from_string(m.id.clone());
                        w.instance_id = m.instance_id.clone().map(StrBytes::from_string);
                        w.rack_id = m.rack_id.clone().map(StrBytes::from_string);
                        w.member_epoch = m.epoch;
                        w.client_id = StrBytes::from_string(m.client_id.clone());
                        w.client_host = StrBytes::from_string(m.client_host.clone());
                        w.subscribed_topic_names = m
                            .subscribed_names
                            .iter()
                            .map(|n| TopicName(StrBytes::from_string(n.clone())))
                            .collect();
                        w.subscribed_topic_regex =
                            m.subscribed_regex.clone().map(StrBytes::from_string);
                        w.assignment = to_wire(&m.assigned, &names);
                        w.target_assignment =
                            to_wire(g.target.get(&m.id).unwrap_or(&empty), &names);
                        // 1: a member of the consumer protocol (0 would be classic).
                        w.member_type = 1;
                        w
                    })
                    .collect();
            }
            GroupResponse::ConsumerDescribed(None) => {
                d.error_code = ErrorCode::GroupIdNotFound.code();
                d.error_message = Some(StrBytes::from_string(format!(
                    "Group {group} not found or is not a consumer group."
                )));
            }
            GroupResponse::Error(e) => d.error_code = e.code(),
            _ => d.error_code = ErrorCode::UnknownServerError.code(),
        }
        r.groups.push(d);
    }
    r
}
