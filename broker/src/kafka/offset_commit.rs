//! OffsetCommit (key 8): validated against the group's generation (static members by
//! `group.instance.id`), made durable in `__consumer_offsets`, then visible to OffsetFetch.
//! Partitions of topics that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION (as Kafka)
//! and not stored; the others are committed.

use std::rc::Rc;

use strand_wire::kafka::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use strand_wire::kafka::messages::{OffsetCommitRequest, OffsetCommitResponse};
use strand_wire::ErrorCode;

use crate::node::group_service::{GroupRequest, GroupResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = req.group_id.0.as_str().to_string();
    let catalog = node.catalog();
    let exists = |topic: &str, partition: i32| {
        catalog
            .topics
            .get(topic)
            .is_some_and(|t| (0..t.partitions).contains(&partition))
    };
    let offsets: Vec<_> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    (t.name.0.as_str().to_string(), p.partition_index),
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata
                        .as_ref()
                        .map(|m| m.as_str().to_string()),
                )
            })
        })
        .filter(|((topic, partition), ..)| exists(topic, *partition))
        .collect();
    let request = GroupRequest::Commit {
        group: group.clone(),
        member: req.member_id.as_str().to_string(),
        instance: req
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string()),
        generation: req.generation_id_or_member_epoch,
        offsets,
    };
    let code = match node.group_request(&group, request).await {
        GroupResponse::Error(e) => e,
        _ => ErrorCode::UnknownServerError,
    };
    let mut r = OffsetCommitResponse::default();
    r.topics = req
        .topics
        .into_iter()
        .map(|t| {
            let mut tr = OffsetCommitResponseTopic::default();
            tr.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pr = OffsetCommitResponsePartition::default();
                    pr.partition_index = p.partition_index;
                    pr.error_code = if exists(t.name.0.as_str(), p.partition_index) {
                        code.code()
                    } else {
                        ErrorCode::UnknownTopicOrPartition.code()
                    };
                    pr
                })
                .collect();
            tr.name = t.name;
            tr
        })
        .collect();
    r
}
