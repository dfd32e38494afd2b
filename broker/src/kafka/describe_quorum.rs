//! DescribeQuorum (key 55, what `kafka-metadata-quorum describe --status|--replication`
//! asks): the metadata quorum as this node's voter sees it — the leader, its term as the
//! leader epoch, the commit index as the high watermark, and every voter with the last log
//! index known to be on it (known on the leader; -1 when this node does not lead). Versions
//! 0-2 (v2 adds each voter's endpoint, named `CONTROLLER`). Only `__cluster_metadata`
//! partition 0 exists; a single node has no quorum (INVALID_REQUEST, named).

use strand_wire::kafka::messages::describe_quorum_response::{
    Listener, Node as QuorumNode, PartitionData, ReplicaState, TopicData,
};
use strand_wire::kafka::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::Node;

const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle(
    node: &Node,
    req: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let mut r = DescribeQuorumResponse::default();
    let status = match &node.shared.cluster {
        Some(h) => h.status().await,
        None => None,
    };
    let Some(status) = status else {
        r.error_code = ErrorCode::InvalidRequest.code();
        if version >= 2 {
            r.error_message = Some(StrBytes::from_static_str(
                "this broker runs alone (no node.id): there is no metadata quorum",
            ));
        }
        return r;
    };
    let q = &status.quorum;
    for t in req.topics {
        let mut topic = TopicData::default();
        topic.topic_name = t.topic_name.clone();
        for p in t.partitions {
            let mut part = PartitionData::default();
            part.partition_index = p.partition_index;
            if t.topic_name.0.as_str() != METADATA_TOPIC || p.partition_index != 0 {
                part.error_code = ErrorCode::UnknownTopicOrPartition.code();
                topic.partitions.push(part);
                continue;
            }
            // raft ids are node id + 1 (0: none).
            part.leader_id = BrokerId(i32::try_from(q.leader_id as i64 - 1).unwrap_or(-1));
            part.leader_epoch = i32::try_from(q.term).unwrap_or(i32::MAX);
            part.high_watermark = i64::try_from(q.commit_index).unwrap_or(i64::MAX);
            part.current_voters = status
                .voters
                .iter()
                .map(|(id, _)| {
                    let matched = q
                        .voters
                        .iter()
                        .find(|v| v.id == *id as u64 + 1)
                        .map_or(-1, |v| i64::try_from(v.matched_index).unwrap_or(i64::MAX));
                    let mut v = ReplicaState::default();
                    v.replica_id = BrokerId(*id);
                    v.log_end_offset = matched;
                    v.last_fetch_timestamp = -1;
                    v.last_caught_up_timestamp = -1;
                    v
                })
                .collect();
            topic.partitions.push(part);
        }
        r.topics.push(topic);
    }
    if version >= 2 {
        r.nodes = status
            .voters
            .iter()
            .map(|(id, addr)| {
                let mut l = Listener::default();
                l.name = StrBytes::from_static_str("CONTROLLER");
                l.host = StrBytes::from_string(addr.ip().to_string());
                l.port = addr.port();
                let mut n = QuorumNode::default();
                n.node_id = BrokerId(*id);
                n.listeners = vec![l];
                n
            })
            .collect();
    }
    r
}
