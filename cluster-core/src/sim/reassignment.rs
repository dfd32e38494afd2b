//! Partition reassignment (KIP-455) in the simulated cluster: the controller's decisions and
//! the image's rule that a replica leaves only once every target is in sync.

use super::*;
use crate::image::PartitionState;
use crate::records::{PartitionChange, Replica};

fn nodes(p: &PartitionState) -> Vec<NodeId> {
    p.replicas.iter().map(|r| r.node).collect()
}

fn state(s: &Sim) -> PartitionState {
    s.image().partition("t", 0).expect("t-0").clone()
}

/// A cluster of four with `t`-0 on three of them: (sim, its replicas, the fourth node).
fn four_nodes_rf3() -> (Sim, Vec<NodeId>, NodeId) {
    let mut s = Sim::started(4);
    s.create("t", 1, 3).unwrap();
    let p = state(&s);
    let r = nodes(&p);
    let spare = (1..=4).find(|n| !r.contains(n)).unwrap();
    assert_eq!(p.leader, r[0], "placement puts the leader first");
    (s, r, spare)
}

fn reassign(s: &mut Sim, target: Option<&[NodeId]>) -> Result<Vec<Applied>, Refusal> {
    let records = s
        .controller
        .alter_reassignment(s.image(), "t", 0, target, true, &shard_of)?;
    Ok(s.commit(records))
}

/// Move `t`-0 to `target`.
fn move_to(s: &mut Sim, target: &[NodeId]) -> Result<Vec<Applied>, Refusal> {
    reassign(s, Some(target))
}

/// Cancel `t`-0's move.
fn cancel(s: &mut Sim) -> Result<Vec<Applied>, Refusal> {
    reassign(s, None)
}

/// The leader's AlterPartition for `isr`, committed.
fn alter_isr(s: &mut Sim, isr: Vec<NodeId>) -> Vec<Applied> {
    let p = state(s);
    let req = AlterPartition {
        node_id: p.leader,
        topic: "t".into(),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
    };
    let records = s.controller.alter_partition(s.image(), &req).unwrap();
    s.commit(records)
}

fn refused(r: Result<Vec<Applied>, Refusal>) -> ErrorCode {
    r.expect_err("refused").code
}

#[test]
fn a_move_widens_the_replicas_then_completes_when_the_new_replica_is_in_sync() {
    let (mut s, r, d) = four_nodes_rf3();
    let before = state(&s);
    let target = vec![r[1], r[2], d];
    assert_eq!(move_to(&mut s, &target).unwrap(), vec![Applied::Done]);
    let wide = state(&s);
    assert_eq!(nodes(&wide), vec![r[1], r[2], d, r[0]]);
    assert_eq!(
        (wide.adding.clone(), wide.removing.clone()),
        (vec![d], vec![r[0]])
    );
    assert_eq!(
        (wide.leader, wide.isr.clone()),
        (before.leader, before.isr.clone())
    );
    assert_eq!(wide.leader_epoch, before.leader_epoch);
    assert_eq!(wide.partition_epoch, before.partition_epoch + 1);
    // The new replica keeps a shard of its node; kept replicas keep theirs.
    assert_eq!(wide.shard_on(r[1]), before.shard_on(r[1]));
    assert!(wide.shard_on(d).unwrap() < 2);
    // Asked again (a retried request): nothing more.
    assert_eq!(move_to(&mut s, &target).unwrap(), vec![]);

    // The leader adds the new replica to the ISR: the same change completes the move, and
    // the removed leader hands leadership to the first target in sync.
    let mut isr = wide.isr.clone();
    isr.push(d);
    assert_eq!(alter_isr(&mut s, isr), vec![Applied::Done]);
    let done = state(&s);
    assert_eq!(nodes(&done), target);
    assert!(!done.reassigning());
    assert!(!done.isr.contains(&r[0]) && done.isr.contains(&d));
    assert_eq!(done.leader, r[1]);
    assert_eq!(done.leader_epoch, before.leader_epoch + 1, "one bump");
    assert_eq!(done.partition_epoch, wide.partition_epoch + 1);
}

#[test]
fn a_reorder_or_a_shrink_to_replicas_in_sync_completes_at_once() {
    let (mut s, r, _) = four_nodes_rf3();
    let before = state(&s);
    // Reorder: one change, no new leader epoch (leadership does not move).
    let reordered = vec![r[2], r[0], r[1]];
    assert_eq!(move_to(&mut s, &reordered).unwrap(), vec![Applied::Done]);
    let p = state(&s);
    assert_eq!(nodes(&p), reordered);
    assert!(!p.reassigning());
    assert_eq!(
        (p.leader, p.leader_epoch),
        (before.leader, before.leader_epoch)
    );
    // Shrink to two in-sync replicas without the leader: widen and complete in one entry.
    let shrunk = vec![r[2], r[1]];
    assert_eq!(
        move_to(&mut s, &shrunk).unwrap(),
        vec![Applied::Done, Applied::Done]
    );
    let p = state(&s);
    assert_eq!(nodes(&p), shrunk);
    assert!(!p.reassigning() && !p.isr.contains(&r[0]));
    assert_eq!(p.leader, r[2]);
    assert_eq!(p.leader_epoch, before.leader_epoch + 1);
}

#[test]
fn a_shrink_waits_for_a_target_out_of_the_isr() {
    let (mut s, r, _) = four_nodes_rf3();
    assert_eq!(alter_isr(&mut s, vec![r[0], r[1]]), vec![Applied::Done]);
    // Target [r1, r2]: r2 is out of sync, so r0 stays until it is back.
    assert_eq!(move_to(&mut s, &[r[1], r[2]]).unwrap(), vec![Applied::Done]);
    let p = state(&s);
    assert_eq!((p.adding.clone(), p.removing.clone()), (vec![], vec![r[0]]));
    assert_eq!(p.leader, r[0]);
    assert_eq!(
        alter_isr(&mut s, vec![r[0], r[1], r[2]]),
        vec![Applied::Done]
    );
    let p = state(&s);
    assert_eq!(nodes(&p), vec![r[1], r[2]]);
    assert_eq!(p.isr, vec![r[1], r[2]]);
    assert_eq!(p.leader, r[1]);
}

#[test]
fn a_new_target_replaces_the_one_in_flight_and_a_cancel_restores_the_original() {
    let (mut s, r, d) = four_nodes_rf3();
    let before = state(&s);
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    // Back to the original set as a *new target*: computed from the replicas before the
    // move (as KRaft does), so d, added and no target any more, is simply dropped.
    assert_eq!(move_to(&mut s, &r).unwrap(), vec![Applied::Done]);
    let p = state(&s);
    assert_eq!(nodes(&p), r);
    assert!(!p.reassigning());
    assert_eq!(p.isr, before.isr);

    // Cancel: replicas minus the added ones (in the current order, as KRaft reverts).
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    assert_eq!(cancel(&mut s).unwrap(), vec![Applied::Done]);
    let p = state(&s);
    assert_eq!(nodes(&p), vec![r[1], r[2], r[0]]);
    assert!(!p.reassigning());
    assert_eq!(
        (p.leader, p.isr.clone()),
        (before.leader, before.isr.clone())
    );
    // Nothing in flight any more.
    assert_eq!(refused(cancel(&mut s)), ErrorCode::NoReassignmentInProgress);
}

#[test]
fn a_cancel_that_would_empty_the_isr_is_refused() {
    let (mut s, r, d) = four_nodes_rf3();
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    let p = state(&s);
    let id = *s.image().names.get("t").unwrap();
    // A hand-made state where only the added replica is in sync (and leads).
    let only_d = MetadataRecord::PartitionChange(PartitionChange {
        leader: Some(d),
        isr: Some(vec![d]),
        ..PartitionChange::new(id, 0, p.partition_epoch)
    });
    assert_eq!(s.commit(vec![only_d]), vec![Applied::Done]);
    assert_eq!(refused(cancel(&mut s)), ErrorCode::InvalidReplicaAssignment);
}

#[test]
fn bad_targets_are_refused_with_kafkas_errors() {
    let (mut s, r, _) = four_nodes_rf3();
    assert_eq!(
        refused(move_to(&mut s, &[])),
        ErrorCode::InvalidReplicaAssignment
    );
    assert_eq!(
        refused(move_to(&mut s, &[r[0], r[0]])),
        ErrorCode::InvalidReplicaAssignment
    );
    assert_eq!(
        refused(move_to(&mut s, &[r[0], 99])),
        ErrorCode::InvalidReplicaAssignment
    );
    // KIP-860: the replica count may not change unless allowed.
    let kept = s
        .controller
        .alter_reassignment(s.image(), "t", 0, Some(&[r[0], r[1]][..]), false, &shard_of)
        .expect_err("refused");
    assert_eq!(kept.code, ErrorCode::InvalidReplicationFactor);
    assert_eq!(
        kept.message,
        "The replication factor is changed from 3 to 2"
    );
    let unknown = s
        .controller
        .alter_reassignment(s.image(), "nope", 0, Some(&[r[0]][..]), true, &shard_of)
        .expect_err("refused");
    assert_eq!(unknown.code, ErrorCode::UnknownTopicOrPartition);
    assert_eq!(state(&s).partition_epoch, 0, "nothing written");
}

#[test]
fn the_image_refuses_a_replica_removed_before_every_target_is_in_sync() {
    let (mut s, r, d) = four_nodes_rf3();
    let id = *s.image().names.get("t").unwrap();
    let p = state(&s);
    let shard = |n: NodeId| Replica {
        node: n,
        shard: p.shard_on(n).unwrap_or(0),
    };
    // Outside a reassignment, no replica may leave.
    let drop = MetadataRecord::PartitionChange(PartitionChange {
        isr: Some(vec![r[0], r[1]]),
        replicas: Some(vec![shard(r[0]), shard(r[1])]),
        ..PartitionChange::new(id, 0, p.partition_epoch)
    });
    assert!(matches!(s.commit(vec![drop])[0], Applied::Rejected(..)));
    // Mid-move, a completion while the new replica is out of sync.
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    let p = state(&s);
    let early = MetadataRecord::PartitionChange(PartitionChange {
        leader: Some(r[1]),
        isr: Some(vec![r[1], r[2]]),
        replicas: Some(vec![
            shard(r[1]),
            shard(r[2]),
            Replica { node: d, shard: 0 },
        ]),
        adding: Some(vec![]),
        removing: Some(vec![]),
        ..PartitionChange::new(id, 0, p.partition_epoch)
    });
    assert!(matches!(s.commit(vec![early])[0], Applied::Rejected(..)));
    assert_eq!(state(&s), p);
}

#[test]
fn a_snapshot_mid_move_restores_equal_and_the_move_completes_later() {
    let (mut s, r, d) = four_nodes_rf3();
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    let snapshot = s.image().to_snapshot();
    let restored = Image::from_snapshot(s.image().applied_offset, &snapshot).unwrap();
    assert_eq!(restored.digest(), s.image().digest());
    assert_eq!(restored.partition("t", 0), s.image().partition("t", 0));
    let mut isr = state(&s).isr;
    isr.push(d);
    alter_isr(&mut s, isr);
    assert_eq!(nodes(&state(&s)), vec![r[1], r[2], d]);
}

#[test]
fn a_removed_leader_fenced_mid_move_hands_over_and_the_move_completes() {
    let (mut s, r, d) = four_nodes_rf3();
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    s.alive.remove(&r[0]);
    s.advance(SESSION_MS + 2 * HEARTBEAT_MS);
    let p = state(&s);
    assert!(s.image().brokers[&r[0]].fenced);
    assert_eq!(p.leader, r[1], "the first replica in sync and usable");
    assert!(p.reassigning(), "d is not in sync yet");
    let mut isr = p.isr.clone();
    isr.push(d);
    assert_eq!(alter_isr(&mut s, isr), vec![Applied::Done]);
    let p = state(&s);
    assert_eq!(nodes(&p), vec![r[1], r[2], d]);
    assert!(!p.reassigning() && !p.isr.contains(&r[0]));
}

#[test]
fn the_repair_pass_completes_a_move_whose_isr_already_allows_it() {
    let (mut s, r, d) = four_nodes_rf3();
    move_to(&mut s, &[r[1], r[2], d]).unwrap();
    let p = state(&s);
    let id = *s.image().names.get("t").unwrap();
    // An ISR change that did not complete it (as if computed before the move began).
    let mut isr = p.isr.clone();
    isr.push(d);
    let grow = MetadataRecord::PartitionChange(PartitionChange {
        isr: Some(isr),
        ..PartitionChange::new(id, 0, p.partition_epoch)
    });
    assert_eq!(s.commit(vec![grow]), vec![Applied::Done]);
    assert!(state(&s).reassigning());
    s.advance(HEARTBEAT_MS);
    let p = state(&s);
    assert!(!p.reassigning());
    assert_eq!(nodes(&p), vec![r[1], r[2], d]);
    assert_eq!(p.leader, r[1]);
}

#[test]
fn a_move_decided_before_a_racing_isr_change_is_rejected_whole() {
    // Shrink [r0, r1, r2] to [r0, r1]: widen and complete in one entry, computed at epoch E.
    let (mut s, r, _) = four_nodes_rf3();
    let records = s
        .controller
        .alter_reassignment(s.image(), "t", 0, Some(&[r[0], r[1]][..]), true, &shard_of)
        .unwrap();
    assert_eq!(records.len(), 2);
    // Before it commits, the leader drops the lagging r1 from the ISR (epoch E -> E + 1).
    assert_eq!(alter_isr(&mut s, vec![r[0], r[2]]), vec![Applied::Done]);
    let before = state(&s);
    // The widen is stale; the completion matches the new epoch but was computed from the
    // widen's state (its ISR holds r1): it must not apply and put r1 back in sync.
    let outcomes = s.commit(records);
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Applied::Rejected(ErrorCode::InvalidUpdateVersion, _))),
        "{outcomes:?}"
    );
    assert_eq!(state(&s), before);
    assert_eq!(state(&s).isr, vec![r[0], r[2]]);
}
