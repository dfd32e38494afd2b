//! Deterministic runs of one share-partition.

use super::*;

fn limits() -> Limits {
    Limits {
        lock_ms: 1_000,
        delivery_count_limit: 3,
        max_record_locks: 100,
    }
}

fn batch(first: i64, last: i64) -> (i64, i64, bool) {
    (first, last, false)
}

#[test]
fn members_share_the_records_and_accepts_move_the_start() {
    let mut sp = SharePartition::starting_at(0);
    let l = limits();
    let (a, _) = sp.acquire("a", &[batch(0, 3), batch(4, 9)], 4, &l, 0);
    assert_eq!(a, vec![(0, 3, 1)]);
    // b reads from the first available offset: 4.
    assert_eq!(sp.first_available(), 4);
    let (b, _) = sp.acquire("b", &[batch(0, 9)], 100, &l, 0);
    assert_eq!(b, vec![(4, 9, 1)]);
    // b may not acknowledge a's records.
    assert_eq!(
        sp.acknowledge("b", 0, 0, AckType::Accept, &l),
        Err(ErrorCode::InvalidRecordState)
    );
    sp.acknowledge("a", 0, 3, AckType::Accept, &l).unwrap();
    assert_eq!(sp.start, 4);
    sp.acknowledge("b", 4, 9, AckType::Accept, &l).unwrap();
    assert_eq!((sp.start, sp.next), (10, 10));
}

#[test]
fn released_and_expired_records_come_back_with_a_higher_delivery_count() {
    let mut sp = SharePartition::starting_at(0);
    let l = limits();
    sp.acquire("a", &[batch(0, 4)], 100, &l, 0);
    sp.acknowledge("a", 0, 1, AckType::Release, &l).unwrap();
    let (again, _) = sp.acquire("b", &[batch(0, 4)], 100, &l, 10);
    assert_eq!(again, vec![(0, 1, 2)]);
    // a's lock on 2..4 expires (a was killed).
    assert!(sp.expire_locks(&l, 999).is_empty());
    let changes = sp.expire_locks(&l, 1_000);
    assert_eq!(changes.len(), 1);
    let (redelivered, _) = sp.acquire("b", &[batch(0, 4)], 100, &l, 1_001);
    assert_eq!(redelivered, vec![(2, 4, 2)]);
}

#[test]
fn records_over_the_delivery_count_limit_are_archived() {
    let mut sp = SharePartition::starting_at(0);
    let l = limits();
    for round in 1..=3 {
        let (got, _) = sp.acquire("a", &[batch(0, 0)], 100, &l, 0);
        assert_eq!(got, vec![(0, 0, round)]);
        sp.acknowledge("a", 0, 0, AckType::Release, &l).unwrap();
    }
    // Released a third time at the limit: archived, the start moves on.
    assert_eq!(sp.state_of(0), None);
    assert_eq!(sp.start, 1);
    let (got, _) = sp.acquire("a", &[batch(0, 0)], 100, &l, 0);
    assert!(got.is_empty());
}

#[test]
fn rejected_records_are_archived_and_never_redelivered() {
    let mut sp = SharePartition::starting_at(0);
    let l = limits();
    sp.acquire("a", &[batch(0, 2)], 100, &l, 0);
    sp.acknowledge("a", 1, 1, AckType::Reject, &l).unwrap();
    assert_eq!(sp.state_of(1).unwrap().state, RecordState::Archived);
    sp.release_member("a", &l);
    let (got, _) = sp.acquire("b", &[batch(0, 2)], 100, &l, 0);
    assert_eq!(got, vec![(0, 0, 2), (2, 2, 2)]);
}

#[test]
fn control_records_are_done_without_delivery_and_locks_are_bounded() {
    let mut sp = SharePartition::starting_at(0);
    let l = Limits {
        max_record_locks: 3,
        ..limits()
    };
    let (got, _) = sp.acquire(
        "a",
        &[batch(0, 1), (2, 2, true), batch(3, 4), batch(5, 9)],
        100,
        &l,
        0,
    );
    // Whole batches: 0..1, then 3..4 (the limit is reached inside it), not 5..9.
    assert_eq!(got, vec![(0, 1, 1), (3, 4, 1)]);
    let (none, _) = sp.acquire("b", &[batch(5, 9)], 100, &l, 0);
    assert!(none.is_empty(), "no lock left");
}

/// What a restart replays: done records stay done, acquired ones come back available with
/// the count they had.
#[test]
fn the_persisted_changes_rebuild_the_state() {
    let mut sp = SharePartition::starting_at(5);
    let l = limits();
    let mut log = Vec::new();
    let (_, c) = sp.acquire("a", &[batch(5, 14)], 100, &l, 0);
    log.extend(c);
    log.extend(sp.acknowledge("a", 5, 7, AckType::Accept, &l).unwrap());
    log.extend(sp.acknowledge("a", 9, 9, AckType::Reject, &l).unwrap());
    let mut back = SharePartition::starting_at(5);
    for c in &log {
        back.apply(c);
    }
    assert_eq!((back.start, back.next), (8, 15));
    assert_eq!(back.state_of(9).unwrap().state, RecordState::Archived);
    let (got, _) = back.acquire("b", &[batch(5, 14)], 100, &l, 0);
    assert_eq!(got, vec![(8, 8, 2), (10, 14, 2)]);
    // A snapshot replays to the same state (once nobody holds anything).
    back.release_member("b", &l);
    let mut again = SharePartition::starting_at(back.start);
    for c in back.snapshot() {
        again.apply(&c);
    }
    assert_eq!(again.snapshot(), back.snapshot());
    assert_eq!(again.first_available(), 8);
}
