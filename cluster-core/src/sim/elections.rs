//! KIP-460 elections (ElectLeaders) on the simulated cluster.

use super::*;
use crate::controller::Election;

fn elect(s: &Sim, topic: &str, election: Election) -> Result<Vec<MetadataRecord>, Refusal> {
    s.controller.elect_leader(s.image(), topic, 0, election)
}

fn code(r: Result<Vec<MetadataRecord>, Refusal>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}

/// The partition's leader asks for `isr` (as its AlterPartition would).
fn set_isr(s: &mut Sim, topic: &str, isr: Vec<NodeId>) {
    let p = s.image().partition(topic, 0).unwrap().clone();
    let req = AlterPartition {
        node_id: p.leader,
        topic: topic.into(),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        isr,
    };
    let records = s.controller.alter_partition(s.image(), &req).unwrap();
    assert!(s.commit(records).iter().all(|a| *a == Applied::Done));
}

#[test]
fn a_preferred_election_moves_leadership_back_once_the_first_replica_is_in_sync() {
    let mut s = Sim::started(3);
    s.create("p", 1, 3).unwrap();
    let first = s.image().partition("p", 0).unwrap().clone();
    let preferred = first.replicas[0].node;
    assert_eq!(first.leader, preferred);
    assert_eq!(
        code(elect(&s, "p", Election::Preferred)),
        Some(ErrorCode::ElectionNotNeeded)
    );
    // The preferred replica's node dies: leadership moves on, it leaves the ISR.
    s.alive.remove(&preferred);
    s.advance(SESSION_MS + HEARTBEAT_MS);
    assert_eq!(
        code(elect(&s, "p", Election::Preferred)),
        Some(ErrorCode::PreferredLeaderNotAvailable),
        "fenced and out of sync"
    );
    // Back, but not in sync yet (only the leader's AlterPartition puts it back).
    s.start(preferred, 77).unwrap();
    let moved = s.image().partition("p", 0).unwrap().clone();
    assert_ne!(moved.leader, preferred);
    assert!(!moved.isr.contains(&preferred));
    assert_eq!(
        code(elect(&s, "p", Election::Preferred)),
        Some(ErrorCode::PreferredLeaderNotAvailable),
        "not in sync"
    );
    let mut isr = moved.isr.clone();
    isr.push(preferred);
    set_isr(&mut s, "p", isr.clone());
    let records = elect(&s, "p", Election::Preferred).unwrap();
    assert_eq!(s.commit(records), vec![Applied::Done]);
    let back = s.image().partition("p", 0).unwrap().clone();
    assert_eq!(back.leader, preferred);
    assert_eq!(back.isr, isr, "the ISR is unchanged");
    assert_eq!(back.leader_epoch, moved.leader_epoch + 1);
    assert_eq!(
        code(elect(&s, "p", Election::Preferred)),
        Some(ErrorCode::ElectionNotNeeded),
        "asked again"
    );
    // A tick leaves the elected leader where it is.
    s.advance(5 * HEARTBEAT_MS);
    assert_eq!(s.image().partition("p", 0).unwrap().leader, preferred);
}

#[test]
fn an_election_computed_before_another_change_is_rejected_at_apply() {
    let mut s = Sim::started(3);
    s.create("p", 1, 3).unwrap();
    let p = s.image().partition("p", 0).unwrap().clone();
    let preferred = p.replicas[0].node;
    // Controlled shutdown of the preferred leader, then it restarts and rejoins the ISR.
    s.alive.remove(&preferred);
    s.advance(SESSION_MS + HEARTBEAT_MS);
    s.start(preferred, 78).unwrap();
    let mut isr = s.image().partition("p", 0).unwrap().isr.clone();
    isr.push(preferred);
    set_isr(&mut s, "p", isr);
    let stale = elect(&s, "p", Election::Preferred).unwrap();
    // Meanwhile the leader drops the third replica from the ISR: the election's partition
    // epoch is stale, and every node rejects it the same way.
    let now = s.image().partition("p", 0).unwrap().clone();
    let shrunk: Vec<NodeId> = now
        .isr
        .iter()
        .copied()
        .filter(|n| *n == now.leader || *n == preferred)
        .collect();
    assert_eq!(shrunk.len(), 2);
    set_isr(&mut s, "p", shrunk);
    assert!(matches!(
        s.commit(stale)[0],
        Applied::Rejected(ErrorCode::InvalidUpdateVersion, _)
    ));
    // Asked afresh, it applies.
    let records = elect(&s, "p", Election::Preferred).unwrap();
    assert_eq!(s.commit(records), vec![Applied::Done]);
    assert_eq!(s.image().partition("p", 0).unwrap().leader, preferred);
}

#[test]
fn an_unclean_election_leads_a_leaderless_partition_from_outside_the_isr() {
    let mut s = Sim::started(3);
    s.create("u", 1, 2).unwrap();
    let p = s.image().partition("u", 0).unwrap().clone();
    let (a, b) = (p.replicas[0].node, p.replicas[1].node);
    assert_eq!(
        code(elect(&s, "u", Election::Unclean)),
        Some(ErrorCode::ElectionNotNeeded),
        "led"
    );
    // b dies (leaves the ISR), then a dies (the last ISR member stays): no leader.
    s.alive.remove(&b);
    s.advance(SESSION_MS + HEARTBEAT_MS);
    s.alive.remove(&a);
    s.advance(SESSION_MS + HEARTBEAT_MS);
    let down = s.image().partition("u", 0).unwrap().clone();
    assert_eq!((down.leader, down.isr.clone()), (NO_LEADER, vec![a]));
    assert_eq!(
        code(elect(&s, "u", Election::Unclean)),
        Some(ErrorCode::EligibleLeadersNotAvailable)
    );
    // b comes back: not in the ISR, so it does not lead by itself.
    s.start(b, 79).unwrap();
    assert_eq!(s.image().partition("u", 0).unwrap().leader, NO_LEADER);
    assert_eq!(
        code(elect(&s, "u", Election::Preferred)),
        Some(ErrorCode::PreferredLeaderNotAvailable)
    );
    let records = elect(&s, "u", Election::Unclean).unwrap();
    assert_eq!(s.commit(records), vec![Applied::Done]);
    let up = s.image().partition("u", 0).unwrap().clone();
    assert_eq!((up.leader, up.isr.clone()), (b, vec![b]));
    assert_eq!(up.leader_epoch, down.leader_epoch + 1);
    assert_eq!(
        code(
            s.controller
                .elect_leader(s.image(), "u", 1, Election::Unclean)
        ),
        Some(ErrorCode::UnknownTopicOrPartition)
    );
    assert_eq!(
        code(
            s.controller
                .elect_leader(s.image(), "none", 0, Election::Preferred)
        ),
        Some(ErrorCode::UnknownTopicOrPartition)
    );
}
