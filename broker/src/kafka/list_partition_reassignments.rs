//! ListPartitionReassignments (key 46, what `kafka-reassign-partitions --list` and
//! `--verify` send, KIP-455): the moves in flight by this node's view of the metadata log —
//! each partition's replicas with the ones being added and removed. `topics: null` lists
//! every move; named topics this node does not know are left out (as KRaft does). Before
//! this node has caught up with the metadata log its view may be stale: NOT_CONTROLLER,
//! which the admin client retries.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use strand_wire::kafka::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::Node;

pub fn handle(
    node: &Rc<Node>,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut r = ListPartitionReassignmentsResponse::default();
    if node.view().is_some_and(|v| !v.caught_up) {
        r.error_code = ErrorCode::NotController.code();
        r.error_message = Some(StrBytes::from_static_str(
            "this broker has not caught up with the metadata log yet",
        ));
        return r;
    }
    let topics: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.as_str().to_string(), t.partition_indexes))
            .collect()
    });
    let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut by_topic: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for o in node.reassignments(topics.as_deref()) {
        let mut p = OngoingPartitionReassignment::default();
        p.partition_index = o.partition;
        p.replicas = ids(o.replicas);
        p.adding_replicas = ids(o.adding);
        p.removing_replicas = ids(o.removing);
        by_topic.entry(o.topic).or_default().push(p);
    }
    for (topic, partitions) in by_topic {
        let mut t = OngoingTopicReassignment::default();
        t.name = TopicName(StrBytes::from_string(topic));
        t.partitions = partitions;
        r.topics.push(t);
    }
    r
}
