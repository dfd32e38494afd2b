//! DeleteGroups (key 42): removes groups without members (and their committed offsets).

use std::rc::Rc;

use strand_wire::kafka::messages::delete_groups_response::DeletableGroupResult;
use strand_wire::kafka::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut r = DeleteGroupsResponse::default();
    for gid in req.groups_names {
        let group = gid.0.as_str().to_string();
        let mut res = DeletableGroupResult::default();
        res.group_id = gid;
        res.error_code = match node
            .group_request(
                &group,
                GroupRequest::DeleteGroup {
                    group: group.clone(),
                },
            )
            .await
        {
            GroupResponse::Error(e) => e.code(),
            _ => ErrorCode::UnknownServerError.code(),
        };
        r.results.push(res);
    }
    r
}
