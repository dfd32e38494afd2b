//! ElectLeaders (key 43, what `kafka-leader-election` sends, KIP-460): move each named
//! partition's leadership to its preferred replica (the first of its replica list), or
//! give a leaderless partition a leader even from outside the ISR (unclean). Each partition
//! is asked of the controller. `topic_partitions: null` means every partition: those
//! already as asked (preferred replica leading; for unclean, any leader) are left out, as
//! Kafka leaves out its ELECTION_NOT_NEEDED answers, so only the ones that need an election
//! reach the controller. v0 has no election type (preferred) and no top-level error.

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_cluster_core::controller::Election;
use strand_wire::kafka::messages::elect_leaders_response::{
    PartitionResult, ReplicaElectionResult,
};
use strand_wire::kafka::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let mut r = ElectLeadersResponse::default();
    let code = if version == 0 { 0 } else { req.election_type };
    let Some(election) = Election::from_code(code) else {
        // Only v1+ carries a type, and a top-level error.
        r.error_code = ErrorCode::InvalidRequest.code();
        return r;
    };
    let every = req.topic_partitions.is_none();
    let partitions: Vec<(String, i32)> = match req.topic_partitions {
        Some(topics) => {
            // A partition named twice is elected once (Kafka collects them in a set).
            let mut seen = std::collections::BTreeSet::new();
            topics
                .into_iter()
                .flat_map(|t| {
                    let name = t.topic.0.as_str().to_string();
                    t.partitions.into_iter().map(move |p| (name.clone(), p))
                })
                .filter(|tp| seen.insert(tp.clone()))
                .collect()
        }
        None => needing_election(node, election),
    };
    let outcomes = node.elect_leaders(partitions.clone(), election).await;
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, partition), outcome) in partitions.into_iter().zip(outcomes) {
        if every && matches!(&outcome, Err((ErrorCode::ElectionNotNeeded, _))) {
            continue; // led as asked meanwhile (this node's view was behind): left out
        }
        let mut p = PartitionResult::default();
        p.partition_id = partition;
        if let Err((code, message)) = outcome {
            p.error_code = code.code();
            p.error_message = Some(StrBytes::from_string(message));
        }
        by_topic.entry(topic).or_default().push(p);
    }
    for (topic, partition_result) in by_topic {
        let mut t = ReplicaElectionResult::default();
        t.topic = TopicName(StrBytes::from_string(topic));
        t.partition_result = partition_result;
        r.replica_election_results.push(t);
    }
    r
}

/// Every partition of the cluster that is not led as `election` wants, by this node's view
/// (none on a single node, where the only replica always leads).
fn needing_election(node: &Node, election: Election) -> Vec<(String, i32)> {
    let Some(view) = node.view() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, t) in &view.topics {
        for (i, p) in t.partitions.iter().enumerate() {
            let needed = match election {
                Election::Preferred => p.replicas.first().is_some_and(|r| r.node != p.leader),
                Election::Unclean => p.leader == strand_cluster_core::records::NO_LEADER,
            };
            if needed {
                out.push((name.clone(), i as i32));
            }
        }
    }
    out
}
