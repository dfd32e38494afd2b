use super::*;

const MAX_MS: i32 = 900_000;

fn claim(pid: i64, epoch: i16) -> Claim {
    Claim {
        producer_id: pid,
        epoch,
        fenced_code: ErrorCode::ProducerFenced,
    }
}

fn persisted(step: Result<Step, ErrorCode>) -> TxnMeta {
    match step {
        Ok(Step::Persist(m)) | Ok(Step::End(m)) => m,
        other => panic!("expected a state to persist, got {other:?}"),
    }
}

fn init(c: &mut Coordinator, id: &str, now: i64) -> TxnMeta {
    let mut next = 1000;
    let mut alloc = || {
        next += 1;
        Some(next)
    };
    let m = persisted(c.init(id, 60_000, MAX_MS, (-1, -1), now, &mut alloc));
    c.adopt(m.clone());
    m
}

/// A coordinator whose id "t" (producer 1001, epoch 0) has a transaction open on ("a", 0)
/// since `now`.
fn open_txn(now: i64) -> Coordinator {
    let mut c = Coordinator::default();
    init(&mut c, "t", 0);
    c.adopt(persisted(c.add_partitions(
        "t",
        claim(1001, 0),
        &[("a".into(), 0)],
        now,
    )));
    c
}

#[test]
fn init_add_commit_and_reinit_bump_the_epoch() {
    let mut c = Coordinator::default();
    let m = init(&mut c, "t", 0);
    assert_eq!(
        (m.producer_id, m.epoch, m.state),
        (1001, 0, TxnState::Empty)
    );
    let tp = ("out".to_string(), 0);
    let m = persisted(c.add_partitions("t", claim(1001, 0), std::slice::from_ref(&tp), 5));
    assert_eq!((m.state, m.start_ms), (TxnState::Ongoing, 5));
    c.adopt(m);
    assert_eq!(
        c.add_partitions("t", claim(1001, 0), std::slice::from_ref(&tp), 6),
        Ok(Step::Done),
        "already in the transaction"
    );
    let prepared = persisted(c.end("t", claim(1001, 0), true, 7));
    assert_eq!(prepared.state, TxnState::PrepareCommit);
    c.adopt(prepared.clone());
    assert_eq!(
        c.add_partitions("t", claim(1001, 0), &[tp], 8),
        Err(ErrorCode::ConcurrentTransactions)
    );
    let done = complete(&prepared, 9);
    assert!(done.partitions.is_empty());
    c.adopt(done);
    assert_eq!(
        c.end("t", claim(1001, 0), true, 10),
        Ok(Step::Done),
        "retry"
    );
    assert_eq!(
        c.end("t", claim(1001, 0), false, 10),
        Err(ErrorCode::InvalidTxnState)
    );
    let m = init(&mut c, "t", 11);
    assert_eq!((m.producer_id, m.epoch), (1001, 1));
    assert_eq!(
        c.end("t", claim(1001, 0), true, 12),
        Err(ErrorCode::ProducerFenced),
        "the old epoch is fenced"
    );
    assert_eq!(
        c.end("t", claim(7, 1), true, 12),
        Err(ErrorCode::InvalidProducerIdMapping)
    );
}

#[test]
fn init_over_an_open_transaction_aborts_it_with_a_bumped_epoch() {
    let mut c = Coordinator::default();
    init(&mut c, "t", 0);
    let m = persisted(c.add_partitions("t", claim(1001, 0), &[("a".into(), 1)], 1));
    c.adopt(m);
    let mut alloc = || Some(5);
    let step = c.init("t", 60_000, MAX_MS, (-1, -1), 2, &mut alloc);
    let Ok(Step::End(abort)) = step else {
        panic!("{step:?}")
    };
    assert_eq!((abort.state, abort.epoch), (TxnState::PrepareAbort, 1));
    assert_eq!(abort.partitions.len(), 1, "markers go to its partitions");
    c.adopt(complete(&abort, 3));
    let m = init(&mut c, "t", 4);
    assert_eq!((m.epoch, m.state), (2, TxnState::Empty));
}

#[test]
fn timeouts_abort_with_a_bump_and_the_old_epoch_may_reinit() {
    let mut c = open_txn(100);
    assert!(c.expired(60_100).is_empty());
    let expired = c.expired(60_101);
    assert_eq!(expired.len(), 1);
    assert_eq!((expired[0].epoch, expired[0].last_epoch), (1, 0));
    c.adopt(complete(&expired[0], 60_102));
    assert_eq!(
        c.end("t", claim(1001, 0), true, 60_103),
        Err(ErrorCode::ProducerFenced)
    );
    // KIP-360: the fenced producer re-initialises with its last epoch and gets the one the
    // abort was written with (Kafka's answer: a claim of the last epoch is not bumped again).
    let mut alloc = || Some(9);
    let m = persisted(c.init("t", 60_000, MAX_MS, (1001, 0), 60_104, &mut alloc));
    assert_eq!((m.producer_id, m.epoch), (1001, 1));
    assert_eq!(
        c.init("t", 60_000, MAX_MS, (1001, 7), 60_104, &mut alloc),
        Err(ErrorCode::ProducerFenced)
    );
    assert_eq!(
        c.init("t", MAX_MS + 1, MAX_MS, (-1, -1), 0, &mut alloc),
        Err(ErrorCode::InvalidTransactionTimeout)
    );
}

#[test]
fn records_round_trip_and_in_doubt_states_are_found() {
    let mut c = Coordinator::default();
    init(&mut c, "my-txn.1", 0);
    let m = persisted(c.add_partitions(
        "my-txn.1",
        claim(1001, 0),
        &[("a".into(), 0), ("__consumer_offsets".into(), 3)],
        1,
    ));
    c.adopt(m);
    let prepared = persisted(c.end("my-txn.1", claim(1001, 0), false, 2));
    let (k, v) = encode(&prepared);
    assert_eq!(decode(&k, &v), Some(prepared.clone()));
    assert_eq!(decode(&k, b"garbage"), None);
    c.adopt(prepared);
    assert_eq!(c.in_doubt().len(), 1);
    use crate::internal_topics::{txn_partition, TXN_PARTITIONS};
    assert!(txn_partition("my-txn.1") < TXN_PARTITIONS);
}

#[test]
fn a_claimed_epoch_bump_survives_a_lost_answer() {
    // KIP-360: a producer recovering from an error re-initialises with its (id, epoch); if
    // the answer is lost, its retry (the same claim) gets the same bumped epoch, not
    // PRODUCER_FENCED, and the epoch is not bumped twice.
    let mut c = Coordinator::default();
    init(&mut c, "t", 0);
    let mut alloc = || Some(9);
    let m = persisted(c.init("t", 60_000, MAX_MS, (1001, 0), 1, &mut alloc));
    assert_eq!((m.epoch, m.last_epoch), (1, 0));
    c.adopt(m);
    let m = persisted(c.init("t", 60_000, MAX_MS, (1001, 0), 2, &mut alloc));
    assert_eq!((m.producer_id, m.epoch), (1001, 1), "the retry");
    c.adopt(m);
    // Its next claim is of epoch 1: bumped again; the stale epoch 0 is now fenced.
    let m = persisted(c.init("t", 60_000, MAX_MS, (1001, 1), 3, &mut alloc));
    assert_eq!((m.epoch, m.last_epoch), (2, 1));
    c.adopt(m);
    assert_eq!(
        c.init("t", 60_000, MAX_MS, (1001, 0), 4, &mut alloc),
        Err(ErrorCode::ProducerFenced)
    );
}

#[test]
fn a_claim_over_an_open_transaction_may_retry_after_the_abort() {
    // The producer claims its epoch while its transaction is open: the coordinator aborts
    // it with a bumped epoch. If that request fails before the abort completes (a marker not
    // written yet), the producer's retry with the same claim must not be fenced.
    let mut c = open_txn(1);
    let mut alloc = || Some(9);
    let abort = persisted(c.init("t", 60_000, MAX_MS, (1001, 0), 2, &mut alloc));
    assert_eq!(
        (abort.state, abort.epoch, abort.last_epoch),
        (TxnState::PrepareAbort, 1, 0)
    );
    c.adopt(abort.clone());
    assert_eq!(
        c.init("t", 60_000, MAX_MS, (1001, 0), 3, &mut alloc),
        Err(ErrorCode::ConcurrentTransactions),
        "markers pending"
    );
    c.adopt(complete(&abort, 4));
    let m = persisted(c.init("t", 60_000, MAX_MS, (1001, 0), 5, &mut alloc));
    assert_eq!((m.producer_id, m.epoch), (1001, 1));
    // Without a claim (a new instance), the old epoch is not remembered.
    let mut c = open_txn(1);
    let abort = persisted(c.init("t", 60_000, MAX_MS, (-1, -1), 2, &mut alloc));
    assert_eq!(abort.last_epoch, -1);
    c.adopt(complete(&abort, 3));
    assert_eq!(
        c.init("t", 60_000, MAX_MS, (1001, 0), 4, &mut alloc),
        Err(ErrorCode::ProducerFenced)
    );
}
