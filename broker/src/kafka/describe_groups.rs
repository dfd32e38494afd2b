//! DescribeGroups (key 15): state, protocol and members (with their metadata and assignment
//! bytes, which tools decode) of each group. An unknown group is Dead with no members; from
//! v6 on it also carries GROUP_ID_NOT_FOUND, as in Kafka 4.x.

use std::rc::Rc;

use strand_wire::kafka::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use strand_wire::kafka::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut r = DescribeGroupsResponse::default();
    for gid in req.groups {
        let id = gid.0.as_str().to_string();
        let mut g = DescribedGroup::default();
        g.group_id = gid;
        match node
            .group_request(&id, GroupRequest::Describe { group: id.clone() })
            .await
        {
            GroupResponse::Described(Some(s)) => {
                if req.include_authorized_operations {
                    g.authorized_operations = super::authorized::GROUP;
                }
                g.group_state = StrBytes::from_static_str(s.state);
                g.protocol_type = StrBytes::from_string(s.protocol_type);
                g.protocol_data = StrBytes::from_string(s.protocol);
                g.members = s
                    .members
                    .into_iter()
                    .map(|(mid, iid, client, host, md, assignment)| {
                        let mut m = DescribedGroupMember::default();
                        m.member_id = StrBytes::from_string(mid);
                        m.group_instance_id = iid.map(StrBytes::from_string);
                        m.client_id = StrBytes::from_string(client);
                        m.client_host = StrBytes::from_string(host);
                        m.member_metadata = md;
                        m.member_assignment = assignment;
                        m
                    })
                    .collect();
            }
            // Not coordinated here (NOT_COORDINATOR), or still loading: the client retries.
            GroupResponse::Error(code) => g.error_code = code.code(),
            _ => {
                // Kafka describes an unknown group as Dead with no members.
                g.group_state = StrBytes::from_static_str("Dead");
                if version >= 6 {
                    g.error_code = ErrorCode::GroupIdNotFound.code();
                    g.error_message = Some(StrBytes::from_string(format!("Group {id} not found.")));
                }
            }
        }
        r.groups.push(g);
    }
    r
}
