//! AlterPartitionReassignments (key 45, what `kafka-reassign-partitions --execute` and
//! `--cancel` send, KIP-455): each partition's new replica list (`null`: cancel the move in
//! flight) goes to the controller, which widens the replica set at once and completes the
//! move when every target is in sync. v1 (KIP-860) carries
//! `allow_replication_factor_change`, echoed back. A partition named twice in one request
//! is INVALID_REQUEST for both, and nothing is asked for it.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use strand_wire::kafka::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::catalog::OpResult;
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    let allow = version < 1 || req.allow_replication_factor_change;
    let mut named: BTreeMap<(String, i32), usize> = BTreeMap::new();
    let mut asked = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let key = (t.name.0.as_str().to_string(), p.partition_index);
            *named.entry(key.clone()).or_default() += 1;
            let target = p
                .replicas
                .as_ref()
                .map(|r| r.iter().map(|b| b.0).collect::<Vec<i32>>());
            asked.push((key, target));
        }
    }
    let moves: Vec<_> = asked
        .iter()
        .filter(|(key, _)| named[key] == 1)
        .map(|((topic, partition), target)| (topic.clone(), *partition, target.clone()))
        .collect();
    let mut outcomes = node.reassign(moves, allow).await.into_iter();
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for (key, _) in asked {
        let outcome: OpResult = if named[&key] == 1 {
            outcomes.next().unwrap_or(Ok(()))
        } else {
            Err((
                ErrorCode::InvalidRequest,
                format!("{}-{} is named more than once", key.0, key.1),
            ))
        };
        let mut p = ReassignablePartitionResponse::default();
        p.partition_index = key.1;
        if let Err((code, message)) = outcome {
            p.error_code = code.code();
            p.error_message = Some(StrBytes::from_string(message));
        }
        by_topic.entry(key.0).or_default().push(p);
    }
    let mut r = AlterPartitionReassignmentsResponse::default();
    r.allow_replication_factor_change = allow;
    for (topic, partitions) in by_topic {
        let mut t = ReassignableTopicResponse::default();
        t.name = TopicName(StrBytes::from_string(topic));
        t.partitions = partitions;
        r.responses.push(t);
    }
    r
}
