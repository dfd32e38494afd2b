//! Partition reassignment (KIP-455) as the broker asks it: each partition's move (or cancel)
//! goes to the controller (`controller/reassign.rs` decides), up to
//! CONTROLLER_CALLS_IN_FLIGHT at once; the answer comes once this node applied it. The
//! reassignments in flight are read from this node's view.

use strand_cluster_core::controller_rpc::Request;
use strand_cluster_core::records::NodeId;
use strand_wire::ErrorCode;

use super::cluster::{ask_partition_change, bounded_in_flight};
use super::Node;
use crate::catalog::OpResult;

/// One partition asked to move: `(topic, partition, target)`; `None` cancels.
pub type Move = (String, i32, Option<Vec<NodeId>>);

/// A reassignment in flight, as ListPartitionReassignments reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ongoing {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<NodeId>,
    pub adding: Vec<NodeId>,
    pub removing: Vec<NodeId>,
}

impl Node {
    /// AlterPartitionReassignments for each move, in order. On a single node the only
    /// replica is node 0: a move to `[0]` has nothing to do, any other target is
    /// INVALID_REPLICA_ASSIGNMENT, and nothing is ever in flight to cancel.
    pub async fn reassign(
        &self,
        moves: Vec<Move>,
        allow_replication_factor_change: bool,
    ) -> Vec<OpResult> {
        let Some(handle) = self.shared.cluster.clone() else {
            let catalog = self.catalog();
            let me = self.node_id();
            return moves
                .into_iter()
                .map(|(topic, partition, target)| {
                    let known = catalog
                        .topics
                        .get(&topic)
                        .is_some_and(|t| (0..t.partitions).contains(&partition));
                    match target {
                        _ if !known => Err((
                            ErrorCode::UnknownTopicOrPartition,
                            "This server does not host this topic-partition.".to_string(),
                        )),
                        None => Err((
                            ErrorCode::NoReassignmentInProgress,
                            format!("No reassignment is in progress for {topic}-{partition}."),
                        )),
                        Some(t) if t == [me] => Ok(()),
                        Some(t) => Err((
                            ErrorCode::InvalidReplicaAssignment,
                            format!("a single node holds every replica: {t:?} is not [{me}]"),
                        )),
                    }
                })
                .collect();
        };
        let calls = moves.into_iter().map(|(topic, partition, target)| {
            let what = format!("{topic}-{partition}");
            let req = Request::AlterReassignment {
                topic,
                partition,
                target,
                allow_replication_factor_change,
            };
            ask_partition_change(handle.clone(), what, req)
        });
        bounded_in_flight(calls).await
    }

    /// The reassignments in flight by this node's view, of `topics` (`None`: every topic;
    /// unknown topics are left out, as KRaft does). Empty on a single node.
    pub fn reassignments(&self, topics: Option<&[(String, Vec<i32>)]>) -> Vec<Ongoing> {
        let Some(view) = self.view() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, t) in &view.topics {
            // A topic named twice: the partitions of every entry.
            let wanted: Option<Vec<i32>> = match topics {
                None => None,
                Some(list) => {
                    let named: Vec<i32> = list
                        .iter()
                        .filter(|(n, _)| n == name)
                        .flat_map(|(_, ps)| ps.iter().copied())
                        .collect();
                    if !list.iter().any(|(n, _)| n == name) {
                        continue;
                    }
                    Some(named)
                }
            };
            for (i, p) in t.partitions.iter().enumerate() {
                let partition = i as i32;
                if wanted.as_ref().is_some_and(|w| !w.contains(&partition)) {
                    continue;
                }
                if p.adding.is_empty() && p.removing.is_empty() {
                    continue;
                }
                out.push(Ongoing {
                    topic: name.clone(),
                    partition,
                    replicas: p.replicas.iter().map(|r| r.node).collect(),
                    adding: p.adding.clone(),
                    removing: p.removing.clone(),
                });
            }
        }
        out
    }
}
