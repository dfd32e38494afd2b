//! Partition reassignment (KIP-455), as KRaft's controller decides it: replicas `R`, target
//! `T`; `removing = R − T`, `adding = T − R`; the replica set becomes `T ++ removing`. That
//! first change only widens the set (leader and ISR stay): the added replicas copy the log
//! as followers. The change that puts every target in the ISR (usually the leader's
//! AlterPartition adding the last new replica) also completes the move: replicas `T`, the
//! removed ones out of the ISR, both lists cleared, a removed leader replaced from the ISR.
//! A replica therefore never leaves before every target is in sync, and the image enforces
//! the same rule at apply (`image::replicas_removed`).
//!
//! A new target replaces one in flight: it is computed from the replicas before that move
//! (`R − adding`, as KRaft does), so an added replica that is no target any more is dropped
//! again. A cancel restores `R − adding` (the ISR loses the adding replicas; if that would
//! leave it empty the cancel is refused: it would need an unclean election).

use std::collections::BTreeSet;

use strand_wire::ErrorCode;

use super::{partition_of, Controller};
use crate::image::{Image, PartitionState};
use crate::placement::{choose_leader, Refusal};
use crate::records::{MetadataRecord, NodeId, PartitionChange, Replica, TopicId, NO_LEADER};

/// The state a completed reassignment leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    pub replicas: Vec<Replica>,
    pub isr: Vec<NodeId>,
    pub leader: NodeId,
}

impl Completion {
    /// The change that applies it to `p` (at `p`'s partition epoch).
    pub(crate) fn change(&self, id: TopicId, partition: i32, p: &PartitionState) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChange {
            leader: (self.leader != p.leader).then_some(self.leader),
            isr: (self.isr != p.isr).then(|| self.isr.clone()),
            replicas: Some(self.replicas.clone()),
            adding: Some(Vec::new()),
            removing: Some(Vec::new()),
            ..PartitionChange::new(id, partition, p.partition_epoch)
        })
    }
}

/// Whether `p`'s reassignment can complete once its ISR is `isr`: the ISR without the
/// removed replicas must be non-empty and hold every target. The leader stays if it is still
/// in sync, else the first target in sync and usable leads; `None` (wait) when that would
/// leave a led partition without a leader.
pub(crate) fn try_complete(
    p: &PartitionState,
    isr: &[NodeId],
    usable: &dyn Fn(NodeId) -> bool,
) -> Option<Completion> {
    if !p.reassigning() {
        return None;
    }
    let targets = replicas_without(&p.replicas, &p.removing);
    let kept = without(isr, &p.removing);
    if kept.is_empty() || targets.iter().any(|t| !kept.contains(&t.node)) {
        return None;
    }
    let leader = if p.leader != NO_LEADER && kept.contains(&p.leader) {
        p.leader
    } else {
        choose_leader(&targets, &kept, usable)
    };
    if leader == NO_LEADER && p.leader != NO_LEADER {
        return None;
    }
    Some(Completion {
        replicas: targets,
        isr: kept,
        leader,
    })
}

/// `all` without `minus`, in `all`'s order.
fn without(all: &[NodeId], minus: &[NodeId]) -> Vec<NodeId> {
    all.iter().copied().filter(|n| !minus.contains(n)).collect()
}

/// The replicas not on a node of `minus`, in order.
fn replicas_without(replicas: &[Replica], minus: &[NodeId]) -> Vec<Replica> {
    replicas
        .iter()
        .copied()
        .filter(|r| !minus.contains(&r.node))
        .collect()
}

impl Controller {
    /// AlterPartitionReassignments for one partition: move it to `target`, or cancel the
    /// reassignment in flight (`None`). `shard_of(topic, partition, shards)` places a new
    /// replica on its node, as topic creation does.
    pub fn alter_reassignment(
        &self,
        image: &Image,
        topic: &str,
        partition: i32,
        target: Option<&[NodeId]>,
        allow_replication_factor_change: bool,
        shard_of: &dyn Fn(&str, i32, u32) -> u32,
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let (t, p) = partition_of(image, topic, partition)?;
        let at = format!("{topic}-{partition}");
        let usable = |n: NodeId| {
            !self.fencing.contains(&n) && image.brokers.get(&n).is_some_and(|b| !b.fenced)
        };
        let nodes: Vec<NodeId> = p.replicas.iter().map(|r| r.node).collect();
        let original = without(&nodes, &p.adding);
        let Some(target) = target else {
            return cancel(t.id, partition, p, &at, &usable);
        };
        check_target(image, target)?;
        if !allow_replication_factor_change && target.len() != original.len() {
            return Err(Refusal::new(
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "The replication factor is changed from {} to {}",
                    original.len(),
                    target.len()
                ),
            ));
        }
        // From the replicas before the move in flight (as KRaft does): a replica that was
        // being added and is no target any more is dropped again (and leaves the ISR).
        let removing = without(&original, target);
        let adding = without(target, &original);
        let mut replicas = Vec::with_capacity(target.len() + removing.len());
        for n in target.iter().chain(&removing) {
            let shard = match p.shard_on(*n) {
                Some(shard) => shard,
                None => {
                    let shards = image
                        .brokers
                        .get(n)
                        .map_or(1, |b| b.registration.shards.max(1));
                    shard_of(topic, partition, shards).min(shards - 1)
                }
            };
            replicas.push(Replica { node: *n, shard });
        }
        if replicas == p.replicas && adding == p.adding && removing == p.removing {
            return Ok(Vec::new()); // already moving there (a retried request)
        }
        let dropped = without(&p.adding, target);
        let isr = without(&p.isr, &dropped);
        if isr.is_empty() {
            return Err(only_added_in_sync(&at, &p.adding));
        }
        let leader = if isr.contains(&p.leader) {
            p.leader
        } else {
            choose_leader(&replicas, &isr, &usable)
        };
        let widened = PartitionState {
            replicas: replicas.clone(),
            adding: adding.clone(),
            removing: removing.clone(),
            isr: isr.clone(),
            leader,
            ..p.clone()
        };
        let mut records = vec![MetadataRecord::PartitionChange(PartitionChange {
            leader: (leader != p.leader).then_some(leader),
            isr: (isr != p.isr).then_some(isr),
            replicas: Some(replicas),
            adding: Some(adding),
            removing: Some(removing),
            ..PartitionChange::new(t.id, partition, p.partition_epoch)
        })];
        // A reorder, or a shrink whose targets are all in sync, completes at once: a second
        // change, computed from the state the first one leaves (same raft entry; if the first
        // is rejected, `Image::apply_in_entry` rejects this one too).
        let after = PartitionState {
            partition_epoch: p.partition_epoch + 1,
            ..widened
        };
        if let Some(done) = try_complete(&after, &after.isr, &usable) {
            records.push(done.change(t.id, partition, &after));
        }
        Ok(records)
    }

    /// The completion of `p`'s reassignment if its ISR already allows it (the repair pass:
    /// a completion rejected for a stale epoch, an ISR changed by fencing, a controller that
    /// took over between the two phases).
    pub(crate) fn completion_record(
        &self,
        image: &Image,
        id: TopicId,
        partition: i32,
        p: &PartitionState,
    ) -> Option<MetadataRecord> {
        let usable = |n: NodeId| {
            !self.fencing.contains(&n) && image.brokers.get(&n).is_some_and(|b| !b.fenced)
        };
        try_complete(p, &p.isr, &usable).map(|c| c.change(id, partition, p))
    }
}

/// Undoing a move in flight would leave no replica in sync: only the added ones are (it
/// would need an unclean election).
fn only_added_in_sync(at: &str, adding: &[NodeId]) -> Refusal {
    Refusal::new(
        ErrorCode::InvalidReplicaAssignment,
        format!("Unable to undo the reassignment of {at}: only the added replicas {adding:?} are in sync"),
    )
}

/// Kafka's checks of a manual assignment: non-empty, no broker twice, every broker
/// registered (a fenced one is allowed: it catches up when it returns).
fn check_target(image: &Image, target: &[NodeId]) -> Result<(), Refusal> {
    let invalid = |m: String| Err(Refusal::new(ErrorCode::InvalidReplicaAssignment, m));
    if target.is_empty() {
        return invalid("The manual partition assignment includes an empty replica list.".into());
    }
    let mut seen = BTreeSet::new();
    for n in target {
        if !seen.insert(*n) {
            return invalid(format!(
                "The manual partition assignment includes the broker {n} more than once."
            ));
        }
        if !image.brokers.contains_key(n) {
            return invalid(format!(
                "The manual partition assignment includes broker {n}, but no such broker is \
                 registered."
            ));
        }
    }
    Ok(())
}

/// Cancel: replicas back to `R − adding`, the adding replicas out of the ISR, both lists
/// cleared; a leader that was an adding replica is replaced.
fn cancel(
    id: TopicId,
    partition: i32,
    p: &PartitionState,
    at: &str,
    usable: &dyn Fn(NodeId) -> bool,
) -> Result<Vec<MetadataRecord>, Refusal> {
    if !p.reassigning() {
        return Err(Refusal::new(
            ErrorCode::NoReassignmentInProgress,
            format!("No reassignment is in progress for {at}."),
        ));
    }
    let isr = without(&p.isr, &p.adding);
    if isr.is_empty() {
        return Err(only_added_in_sync(at, &p.adding));
    }
    let replicas = replicas_without(&p.replicas, &p.adding);
    let leader = if isr.contains(&p.leader) {
        p.leader
    } else {
        choose_leader(&replicas, &isr, usable)
    };
    Ok(vec![MetadataRecord::PartitionChange(PartitionChange {
        leader: (leader != p.leader).then_some(leader),
        isr: (isr != p.isr).then_some(isr),
        replicas: (replicas != p.replicas).then_some(replicas),
        adding: Some(Vec::new()),
        removing: Some(Vec::new()),
        ..PartitionChange::new(id, partition, p.partition_epoch)
    })])
}
