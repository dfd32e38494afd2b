//! DescribeShareGroupOffsets (key 90, KIP-932): each share-partition's start offset (SPSO) —
//! `kafka-share-groups --describe`. Without a topic list: every partition the group has
//! state for; with one: -1 where it has none.

use std::rc::Rc;

use strand_wire::kafka::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use strand_wire::kafka::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::share_service::{ShareAnswer, ShareOp};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let view = super::consumer_group_heartbeat::topics_view(node);
    let mut r = DescribeShareGroupOffsetsResponse::default();
    for g in req.groups {
        let group = g.group_id.0.as_str().to_string();
        let all = g.topics.is_none();
        let wanted: Vec<(String, Vec<i32>)> = match g.topics {
            Some(ts) => ts
                .into_iter()
                .map(|t| (t.topic_name.0.as_str().to_string(), t.partitions))
                .collect(),
            None => view
                .by_name
                .iter()
                .map(|(n, (_, p))| (n.clone(), (0..*p).collect()))
                .collect(),
        };
        let mut gr = DescribeShareGroupOffsetsResponseGroup::default();
        gr.group_id = g.group_id;
        for (topic, partitions) in wanted {
            let mut t = DescribeShareGroupOffsetsResponseTopic::default();
            t.topic_name = TopicName(StrBytes::from_string(topic.clone()));
            t.topic_id = view
                .by_name
                .get(&topic)
                .map(|(id, _)| *id)
                .unwrap_or_default();
            for p in partitions {
                let mut pr = DescribeShareGroupOffsetsResponsePartition::default();
                pr.partition_index = p;
                pr.start_offset = -1;
                pr.leader_epoch = -1;
                if !view.by_name.contains_key(&topic) {
                    pr.error_code = ErrorCode::UnknownTopicOrPartition.code();
                    t.partitions.push(pr);
                    continue;
                }
                let op = ShareOp::Start {
                    group: group.clone(),
                    tp: (topic.clone(), p),
                };
                match node.share_op(op).await {
                    ShareAnswer::Start(Ok(Some(start))) => pr.start_offset = start,
                    ShareAnswer::Start(Ok(None)) if all => continue,
                    ShareAnswer::Start(Ok(None)) => {}
                    ShareAnswer::Start(Err(e)) | ShareAnswer::Done(e) => pr.error_code = e.code(),
                    ShareAnswer::Fetched(_) => pr.error_code = ErrorCode::UnknownServerError.code(),
                }
                t.partitions.push(pr);
            }
            if !t.partitions.is_empty() {
                gr.topics.push(t);
            }
        }
        r.groups.push(gr);
    }
    r
}
