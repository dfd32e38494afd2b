//! ListGroups (key 16): every group on every shard, with its state and (v5+) its type
//! (`classic`, or `consumer` for KIP-848 groups). The state (v4+) and type (v5+) filters match
//! without regard to case, as in Kafka.

use std::rc::Rc;

use strand_wire::kafka::messages::list_groups_response::ListedGroup;
use strand_wire::kafka::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use strand_wire::kafka::protocol::StrBytes;

use crate::node::Node;

fn lowered(filter: &[StrBytes]) -> Vec<String> {
    filter.iter().map(|s| s.as_str().to_lowercase()).collect()
}

pub async fn handle(node: &Rc<Node>, req: ListGroupsRequest) -> ListGroupsResponse {
    let states = lowered(&req.states_filter);
    let types = lowered(&req.types_filter);
    let mut r = ListGroupsResponse::default();
    for (id, protocol_type, state, group_type) in node.list_groups().await {
        if !states.is_empty() && !states.contains(&state.to_lowercase()) {
            continue;
        }
        if !types.is_empty() && !types.iter().any(|t| t == group_type) {
            continue;
        }
        let mut g = ListedGroup::default();
        g.group_id = GroupId(StrBytes::from_string(id));
        g.protocol_type = StrBytes::from_string(protocol_type);
        g.group_state = StrBytes::from_string(state);
        g.group_type = StrBytes::from_static_str(group_type);
        r.groups.push(g);
    }
    r
}
