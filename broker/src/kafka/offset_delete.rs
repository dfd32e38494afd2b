//! OffsetDelete (key 47): deletes committed offsets of a group that is not consuming them.

use std::rc::Rc;

use strand_wire::kafka::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use strand_wire::kafka::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = req.group_id.0.as_str().to_string();
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.as_str().to_string(), p.partition_index))
        })
        .collect();
    let code = match node
        .group_request(
            &group,
            GroupRequest::DeleteOffsets {
                group: group.clone(),
                partitions,
            },
        )
        .await
    {
        GroupResponse::Error(e) => e,
        _ => ErrorCode::UnknownServerError,
    };
    let mut r = OffsetDeleteResponse::default();
    // Group-level problems go in the top-level error; per-partition ones (a group still
    // subscribed) on every partition, as Kafka reports them.
    let per_partition = code == ErrorCode::GroupSubscribedToTopic;
    if !per_partition {
        r.error_code = code.code();
    }
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut tr = OffsetDeleteResponseTopic::default();
            tr.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pr = OffsetDeleteResponsePartition::default();
                    pr.partition_index = p.partition_index;
                    if per_partition {
                        pr.error_code = code.code();
                    }
                    pr
                })
                .collect();
            tr.name = t.name;
            tr
        })
        .collect();
    r
}
