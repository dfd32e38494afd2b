//! ListGroups (key 16): every group on every shard, with its state.

use std::rc::Rc;

use strand_wire::kafka::messages::list_groups_response::ListedGroup;
use strand_wire::kafka::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use strand_wire::kafka::protocol::StrBytes;

use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: ListGroupsRequest) -> ListGroupsResponse {
    let filter: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.as_str().to_string())
        .collect();
    let mut r = ListGroupsResponse::default();
    for (id, protocol_type, state) in node.list_groups().await {
        if !filter.is_empty() && !filter.contains(&state) {
            continue;
        }
        let mut g = ListedGroup::default();
        g.group_id = GroupId(StrBytes::from_string(id));
        g.protocol_type = StrBytes::from_string(protocol_type);
        g.group_state = StrBytes::from_string(state);
        r.groups.push(g);
    }
    r
}
