//! The leader's replication rules, driven by hand: fetches, appends and time.

use strand_wire::ErrorCode;

use super::epoch_cache::{truncation, EpochCache, Truncation, UNDEFINED};
use super::{Effect, PartitionLeader};

const LAG_MS: u64 = 30_000;

/// Node 1 leads replicas 1, 2, 3, all in sync, log empty, `min.insync.replicas` = `min`.
fn leader(min: usize) -> PartitionLeader {
    PartitionLeader::new(1, &[1, 2, 3], vec![1, 2, 3], 0, 0, min, LAG_MS, 0)
}

fn acked(effects: &[Effect]) -> Vec<(u64, Result<(), ErrorCode>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Acked { token, result } => Some((*token, *result)),
            _ => None,
        })
        .collect()
}

#[test]
fn once_told_the_leader_counts_its_written_end_not_its_log_end() {
    let mut l = leader(2);
    l.written(0);
    assert!(acked(&l.appended(10, Some(1))).is_empty());
    l.fetched(2, 10, 1, true);
    l.fetched(3, 10, 1, true);
    assert_eq!(
        l.high_watermark(),
        0,
        "the followers have it; the leader only queued it"
    );
    assert_eq!(l.written(6), vec![Effect::HighWatermark(6)]);
    let e = l.written(10);
    assert_eq!(e[0], Effect::HighWatermark(10));
    assert_eq!(acked(&e), vec![(1, Ok(()))]);
    // Never past the log end, never back.
    l.written(50);
    l.written(3);
    assert_eq!(l.high_watermark(), 10);
    l.appended(12, None);
    l.fetched(2, 12, 2, true);
    l.fetched(3, 12, 2, true);
    assert_eq!(l.high_watermark(), 10, "written was capped at 10 then");
    l.written(12);
    assert_eq!(l.high_watermark(), 12);
    // A new leader alone in its ISR, its log written up to 4 of 10: told `written` first,
    // its watermark stops at 4.
    let mut alone = PartitionLeader::new(1, &[1, 2], vec![1], 10, 0, 1, LAG_MS, 0);
    alone.written(4);
    alone.appended(10, None);
    assert_eq!(alone.high_watermark(), 4);
    assert_eq!(alone.written_end(), Some(4));
}

#[test]
fn acks_all_waits_for_every_isr_member_and_the_watermark_follows_the_slowest() {
    let mut l = leader(2);
    assert_eq!(l.admit_acks_all(), Ok(()));
    assert!(acked(&l.appended(10, Some(7))).is_empty());
    assert_eq!(l.high_watermark(), 0);
    // One follower has it: not yet (acks=all means every ISR member).
    assert!(acked(&l.fetched(2, 10, 5, true)).is_empty());
    assert_eq!(l.high_watermark(), 0);
    let e = l.fetched(3, 4, 5, true);
    assert_eq!(e, vec![Effect::HighWatermark(4)]);
    let e = l.fetched(3, 10, 6, true);
    assert_eq!(
        e,
        vec![
            Effect::HighWatermark(10),
            Effect::Acked {
                token: 7,
                result: Ok(())
            }
        ]
    );
    // Requests complete in offset order, each when its own end is covered.
    l.appended(15, Some(8));
    l.appended(20, Some(9));
    l.fetched(2, 20, 7, true);
    assert_eq!(acked(&l.fetched(3, 15, 7, true)), vec![(8, Ok(()))]);
    assert_eq!(acked(&l.fetched(3, 20, 8, true)), vec![(9, Ok(()))]);
}

#[test]
fn a_lagging_follower_leaves_the_isr_only_once_the_quorum_commits_it() {
    let mut l = leader(2);
    l.appended(10, Some(1));
    l.fetched(2, 10, 1_000, true);
    // Node 3 never fetches. Within the lag time nothing happens.
    assert!(l.tick(LAG_MS).is_empty());
    let e = l.tick(LAG_MS + 1_001);
    assert_eq!(e, vec![Effect::ProposeIsr(vec![1, 2])]);
    // Until the change is committed node 3 still counts (the maximal ISR): no ack yet.
    assert_eq!(l.high_watermark(), 0);
    assert!(l.tick(LAG_MS + 5_000).is_empty(), "one change in flight");
    let e = l.isr_committed(vec![1, 2]);
    assert_eq!(
        e,
        vec![
            Effect::HighWatermark(10),
            Effect::Acked {
                token: 1,
                result: Ok(())
            }
        ]
    );
}

#[test]
fn min_insync_replicas_refuses_before_and_fails_after_the_append() {
    let mut l = leader(2);
    l.appended(10, Some(1));
    l.isr_committed(vec![1, 2]);
    // ISR shrank to the leader alone while the request waited.
    let e = l.isr_committed(vec![1]);
    assert_eq!(
        acked(&e),
        vec![(1, Err(ErrorCode::NotEnoughReplicasAfterAppend))]
    );
    assert_eq!(l.admit_acks_all(), Err(ErrorCode::NotEnoughReplicas));
    // min.insync.replicas = 1: the leader alone suffices.
    let mut l = leader(1);
    l.isr_committed(vec![1]);
    assert_eq!(l.admit_acks_all(), Ok(()));
    assert_eq!(acked(&l.appended(3, Some(2))), vec![(2, Ok(()))]);
    // min.insync.replicas above the replica count is capped at it (Kafka's effectiveMinIsr).
    let mut l = PartitionLeader::new(1, &[1, 2], vec![1, 2], 0, 0, 3, LAG_MS, 0);
    assert_eq!(l.admit_acks_all(), Ok(()));
    // A config change applies to the next request, capped the same way.
    l.isr_committed(vec![1]);
    assert_eq!(l.admit_acks_all(), Err(ErrorCode::NotEnoughReplicas));
    l.set_min_insync_replicas(1);
    assert_eq!(l.admit_acks_all(), Ok(()));
    l.set_min_insync_replicas(7);
    assert_eq!(l.admit_acks_all(), Err(ErrorCode::NotEnoughReplicas));
}

#[test]
fn a_follower_rejoins_when_it_reaches_the_watermark_and_counts_once_proposed() {
    let mut l = leader(1);
    l.isr_committed(vec![1, 2]);
    l.appended(10, None);
    l.fetched(2, 10, 1, true);
    assert_eq!(l.high_watermark(), 10);
    // Node 3 catches up from behind: no proposal until it reaches the watermark.
    assert!(l.fetched(3, 5, 2, true).is_empty());
    assert_eq!(
        l.fetched(3, 10, 3, true),
        vec![Effect::ProposeIsr(vec![1, 2, 3])]
    );
    // Pending, it already holds the watermark back (it must have what is acknowledged).
    l.appended(12, Some(4));
    l.fetched(2, 12, 4, true);
    assert_eq!(l.high_watermark(), 10);
    l.isr_committed(vec![1, 2, 3]);
    assert_eq!(acked(&l.fetched(3, 12, 5, true)), vec![(4, Ok(()))]);
}

#[test]
fn a_fenced_follower_is_not_proposed_back_and_a_refused_expansion_releases_waiting_acks() {
    let mut l = leader(1);
    l.appended(10, None);
    l.fetched(2, 10, 1, true);
    // Node 3 stopped (controlled shutdown): the controller took it out of the ISR. A fetch
    // it sent before it stopped arrives now: it is fenced, so it does not join.
    l.isr_committed(vec![1, 2]);
    assert!(l.fetched(3, 10, 2, false).is_empty());
    l.appended(12, Some(5));
    assert_eq!(acked(&l.fetched(2, 12, 3, true)), vec![(5, Ok(()))]);
    // Proposed while still eligible, then refused: requests wait on node 3 only until then.
    assert_eq!(
        l.fetched(3, 12, 4, true),
        vec![Effect::ProposeIsr(vec![1, 2, 3])]
    );
    l.appended(14, Some(6));
    assert!(
        acked(&l.fetched(2, 14, 5, true)).is_empty(),
        "the maximal ISR holds 3"
    );
    assert_eq!(acked(&l.isr_proposal_failed()), vec![(6, Ok(()))]);
}

#[test]
fn the_watermark_never_moves_back_and_fetches_past_the_end_count_as_the_end() {
    let mut l = PartitionLeader::new(1, &[1, 2], vec![1, 2], 10, 8, 1, LAG_MS, 0);
    assert_eq!(l.high_watermark(), 8);
    assert!(
        l.fetched(2, 5, 1, true).is_empty(),
        "a stale follower does not lower it"
    );
    assert_eq!(l.high_watermark(), 8);
    assert_eq!(l.fetched(2, 99, 2, true), vec![Effect::HighWatermark(10)]);
    assert_eq!(l.follower(2).unwrap().log_end, 10);
    assert!(l.fetched(9, 10, 3, true).is_empty(), "not a replica");
}

#[test]
fn a_follower_behind_but_keeping_up_with_each_fetch_stays_in_sync() {
    let mut l = leader(1);
    // Every fetch reaches the log end as of the previous one: caught up then.
    let mut t = 0;
    for end in 1..=50 {
        t += 1_000;
        l.appended(end * 10, None);
        l.fetched(2, end * 10, t, true);
        l.fetched(3, (end - 1) * 10, t, true);
        assert!(l.tick(t).is_empty(), "at {t} ms");
    }
}

#[test]
fn epoch_cache_answers_offsets_for_leader_epoch() {
    let mut c = EpochCache::default();
    c.assign(0, 0);
    c.assign(0, 5);
    c.assign(2, 10);
    c.assign(5, 30);
    assert_eq!(c.entries(), &[(0, 0), (2, 10), (5, 30)]);
    assert_eq!(c.end_offset_for(0, 40), (0, 10));
    assert_eq!(c.end_offset_for(1, 40), (0, 10), "largest epoch <= 1");
    assert_eq!(c.end_offset_for(4, 40), (2, 30));
    assert_eq!(
        c.end_offset_for(9, 40),
        (5, 40),
        "the latest ends at the log end"
    );
    assert_eq!(EpochCache::default().end_offset_for(3, 0), UNDEFINED);
    let late = EpochCache::from_entries(vec![(4, 100)]).unwrap();
    assert_eq!(
        late.end_offset_for(2, 150),
        (2, 100),
        "older than every entry"
    );
    c.truncate_from_end(30);
    assert_eq!(c.latest(), Some((2, 10)));
    assert!(EpochCache::from_entries(vec![(3, 0), (2, 5)]).is_err());
}

fn done(offset: i64) -> Truncation {
    Truncation {
        offset,
        complete: true,
    }
}

#[test]
fn a_follower_truncates_where_its_log_left_the_leaders() {
    // Leader: epoch 1 from 0, epoch 3 from 20. Follower: epoch 1 from 0, then epoch 2 (a
    // leader whose tail was never replicated) from 15 to 25.
    let leader_cache = EpochCache::from_entries(vec![(1, 0), (3, 20)]).unwrap();
    let follower = EpochCache::from_entries(vec![(1, 0), (2, 15)]).unwrap();
    let answer = leader_cache.end_offset_for(2, 40); // the follower's latest epoch
    assert_eq!(answer, (1, 20));
    assert_eq!(truncation(&follower, 25, 10, answer), done(15));
    // Same history, follower behind: nothing to cut.
    let behind = EpochCache::from_entries(vec![(1, 0), (3, 20)]).unwrap();
    assert_eq!(
        truncation(&behind, 22, 10, leader_cache.end_offset_for(3, 40)),
        done(22)
    );
    // The leader knows no such epoch: back to the follower's high watermark.
    assert_eq!(truncation(&follower, 25, 10, UNDEFINED), done(10));
}

#[test]
fn a_follower_missing_the_leaders_epoch_asks_again_until_they_agree() {
    // KIP-279's case: leader {1:0, 3:40, 6:100}; follower {1:0, 2:60, 5:80}, log end 120.
    let leader_cache = EpochCache::from_entries(vec![(1, 0), (3, 40), (6, 100)]).unwrap();
    let mut follower = EpochCache::from_entries(vec![(1, 0), (2, 60), (5, 80)]).unwrap();
    let (mut log_end, mut rounds) = (120, 0);
    loop {
        rounds += 1;
        let latest = follower.latest().unwrap().0;
        let t = truncation(
            &follower,
            log_end,
            0,
            leader_cache.end_offset_for(latest, 130),
        );
        log_end = t.offset;
        follower.truncate_from_end(log_end);
        if t.complete {
            break;
        }
        assert!(rounds < 5, "no agreement");
    }
    // The logs share only epoch 1's first 40 offsets.
    assert_eq!((log_end, rounds), (40, 2));
    assert_eq!(follower.entries(), &[(1, 0)]);
}

#[test]
fn a_replica_added_by_a_reassignment_catches_up_and_is_proposed_into_the_isr() {
    // Replicas 1, 2 (both in sync), min.insync.replicas 3: capped at 2 until a third exists.
    let mut l = PartitionLeader::new(1, &[1, 2], vec![1, 2], 0, 0, 3, LAG_MS, 0);
    l.appended(10, None);
    l.fetched(2, 10, 1, true);
    assert_eq!(l.high_watermark(), 10);
    // Node 3 is added (outside the ISR): the watermark does not wait for it.
    assert!(l.replicas_committed(&[1, 2, 3], vec![1, 2], 2).is_empty());
    assert_eq!(
        l.admit_acks_all(),
        Err(ErrorCode::NotEnoughReplicas),
        "min ISR now 3"
    );
    l.appended(20, None);
    assert_eq!(l.fetched(2, 20, 3, true), vec![Effect::HighWatermark(20)]);
    // It copies the log: part way, nothing; at the high watermark it is proposed in.
    assert!(l.fetched(3, 5, 4, true).is_empty());
    assert_eq!(
        l.fetched(3, 20, 5, true),
        vec![Effect::ProposeIsr(vec![1, 2, 3])]
    );
    assert!(l
        .replicas_committed(&[1, 2, 3], vec![1, 2, 3], 6)
        .is_empty());
    assert_eq!(l.admit_acks_all(), Ok(()));
    assert_eq!(l.high_watermark(), 20);
}

#[test]
fn a_replica_removed_by_a_reassignment_no_longer_holds_the_watermark_back() {
    let mut l = leader(1);
    l.appended(10, Some(1));
    l.fetched(2, 10, 1, true);
    assert!(acked(&l.fetched(3, 4, 1, true)).is_empty());
    // Node 3 leaves the replicas (and the ISR): the request waiting on it completes.
    let e = l.replicas_committed(&[1, 2], vec![1, 2], 2);
    assert_eq!(
        e,
        vec![
            Effect::HighWatermark(10),
            Effect::Acked {
                token: 1,
                result: Ok(())
            }
        ]
    );
    assert!(l.follower(3).is_none());
}
