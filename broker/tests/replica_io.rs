//! A partition log as a replica, with real files: batches appended with the leader's offsets
//! and epochs, the epoch cache on disk, truncation across segments (files, reads, producer
//! state, reopen), and reads cut at the high watermark.

use bytes::BytesMut;
use strand_broker::storage::{AppendError, LogConfig, Offset, PartitionLog, StorageOptions};
use strand_broker::testkit::run_local as run;
use strand_wire::batch::BatchHeader;
use strand_wire::builder::{filler_batch, BatchBuilder};

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        index_interval_bytes: 4096,
        flush_ms: 10_000,
        ..LogConfig::default()
    }
}

fn options() -> StorageOptions {
    StorageOptions {
        cache_bytes: 0,
        write_chunk_bytes: 64 << 10,
        write_behind_depth: 2,
    }
}

async fn read_all(log: &PartitionLog) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut next = log.log_start();
    while next < log.log_end() {
        let r = log.read(next, 100_000).await.expect("read");
        assert!(!r.batches.is_empty(), "no progress at {next}");
        for b in r.batches {
            next = Offset(BatchHeader::parse(&b).expect("header").last_offset() + 1);
            out.push(b.to_vec());
        }
    }
    out
}

fn filler(i: u32) -> BytesMut {
    BytesMut::from(
        &filler_batch(
            1 + (i % 5) as usize,
            300 + (i as usize * 7) % 900,
            i as i64,
            i as u8,
        )[..],
    )
}

#[test]
fn a_follower_keeps_the_leaders_offsets_bytes_and_epochs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lp, fp) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let (leader, _) = PartitionLog::open(lp, small_config(), options())
            .await
            .expect("open");
        leader.become_leader(0).await.expect("lead 0");
        for i in 0..40 {
            leader.append(filler(i), 0).await.expect("append");
        }
        let epoch3_start = leader.log_end();
        leader.become_leader(3).await.expect("lead 3");
        for i in 40..80 {
            leader.append(filler(i), 0).await.expect("append");
        }
        assert_eq!(
            leader.epoch_cache().entries(),
            &[(0, 0), (3, epoch3_start.0)]
        );
        let batches = read_all(&leader).await;
        for b in &batches {
            let h = BatchHeader::parse(b).expect("header");
            let want = if h.base_offset < epoch3_start.0 { 0 } else { 3 };
            assert_eq!(h.partition_leader_epoch, want, "stamped epoch");
        }
        let gap_end;
        {
            let (follower, _) = PartitionLog::open(fp.clone(), small_config(), options())
                .await
                .expect("open");
            for b in &batches {
                follower
                    .append_replica(BytesMut::from(&b[..]), 0)
                    .await
                    .expect("replica append");
            }
            // Below the log end: refused, nothing written.
            let end = follower.log_end();
            let second = BytesMut::from(&batches[1][..]);
            assert!(matches!(
                follower.append_replica(second, 0).await,
                Err(AppendError::Replica(_))
            ));
            assert_eq!(follower.log_end(), end);
            assert_eq!(follower.log_end(), leader.log_end());
            assert_eq!(
                read_all(&follower).await,
                batches,
                "same bytes, same offsets"
            );
            assert_eq!(follower.epoch_cache(), leader.epoch_cache());
            assert!(
                follower.segment_count() > 2,
                "rolled: {}",
                follower.segment_count()
            );
            // A batch no leader stamped (an older epoch than the latest): kept, no entry.
            let mut old = filler(99);
            strand_wire::batch::set_base_offset(&mut old, follower.log_end().0);
            strand_wire::batch::set_partition_leader_epoch(&mut old, 0);
            follower
                .append_replica(old, 0)
                .await
                .expect("unstamped batch");
            assert_eq!(follower.epoch_cache(), leader.epoch_cache());
            // A gap (compaction removed batches on the leader): the offsets are kept.
            let gap_at = follower.log_end().0 + 7;
            let mut after_gap = filler(98);
            strand_wire::batch::set_base_offset(&mut after_gap, gap_at);
            strand_wire::batch::set_partition_leader_epoch(&mut after_gap, 3);
            let meta = follower
                .append_replica(after_gap, 0)
                .await
                .expect("after a gap");
            assert_eq!(meta.base_offset.0, gap_at);
            gap_end = follower.log_end();
            follower.close().await.expect("close");
        }
        let (follower, _) = PartitionLog::open(fp, small_config(), options())
            .await
            .expect("reopen");
        assert_eq!(
            follower.epoch_cache(),
            leader.epoch_cache(),
            "epochs on disk"
        );
        assert_eq!(follower.end_offset_for(0), (0, epoch3_start.0));
        assert_eq!(follower.end_offset_for(2), (0, epoch3_start.0));
        assert_eq!(follower.end_offset_for(7), (3, follower.log_end().0));
        assert_eq!(follower.log_end(), gap_end);
        assert!(follower.leading_epoch().is_none());
        // A leader's epoch never goes back.
        assert!(leader.become_leader(1).await.is_err());
    });
}

#[test]
fn truncation_cuts_across_segments_and_the_log_goes_on() {
    truncation_with(options());
}

/// The same with the hot-tail cache on (the cut batches are cached and must not be served).
#[test]
fn truncation_with_the_cache_on() {
    truncation_with(StorageOptions::default());
}

fn truncation_with(options: StorageOptions) {
    let options = move || options.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    let idem = |seq: i32| {
        let mut b = BatchBuilder::new(0).producer(42, 1, seq);
        b.push(None, b"x", 0);
        b.push(None, b"y", 0);
        BytesMut::from(&b.finish()[..])
    };
    run(move || async move {
        let (log, _) = PartitionLog::open(path.clone(), small_config(), options())
            .await
            .expect("open");
        log.become_leader(0).await.expect("lead");
        for i in 0..60 {
            log.append(filler(i), 0).await.expect("append");
        }
        let keep_end = log.log_end();
        let kept = read_all(&log).await;
        log.become_leader(4).await.expect("lead 4");
        let mut seq = 0;
        for i in 60..160 {
            if i % 10 == 0 {
                log.append(idem(seq), 0).await.expect("idempotent append");
                seq += 2;
            } else {
                log.append(filler(i), 0).await.expect("append");
            }
        }
        let segments_before = log.segment_count();
        assert!(segments_before > 4, "rolled: {segments_before}");
        // Cut inside the first batch of epoch 4 (it has several records): the batch goes whole.
        let end = log
            .truncate_to(Offset(keep_end.0 + 1))
            .await
            .expect("truncate");
        assert_eq!(end, keep_end);
        assert_eq!(log.log_end(), keep_end);
        assert!(log.segment_count() < segments_before);
        assert_eq!(read_all(&log).await, kept, "what is left reads back");
        assert_eq!(log.epoch_cache().entries(), &[(0, 0)], "epoch 4 is gone");
        // The idempotent batches were cut: the producer starts again from sequence 0.
        let meta = log
            .append(idem(0), 0)
            .await
            .expect("not a duplicate any more");
        assert_eq!(meta.base_offset, keep_end);
        log.append(filler(500), 0)
            .await
            .expect("append after the cut");
        log.flush().await.expect("flush");
        let now = read_all(&log).await;
        assert_eq!(now.len(), kept.len() + 2);
        assert!(
            log.truncate_to(Offset(-1)).await.is_err(),
            "below the log start"
        );
        log.close().await.expect("close");
        drop(log);
        let (log, report) = PartitionLog::open(path, small_config(), options())
            .await
            .expect("reopen");
        assert_eq!(report.truncated_bytes, 0, "{report:?}");
        assert_eq!(read_all(&log).await, now, "the same after a reopen");
        assert_eq!(log.epoch_cache().entries(), &[(0, 0)]);
    });
}

#[test]
fn reads_for_consumers_stop_at_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path, small_config(), options())
            .await
            .expect("open");
        let mut bases = Vec::new();
        for i in 0..6 {
            bases.push(log.append(filler(i), 0).await.expect("append").base_offset);
        }
        let hw = bases[3];
        let out = log
            .read(Offset(0), 1 << 20)
            .await
            .expect("read")
            .bounded(hw);
        assert_eq!(out.batches.len(), 3);
        assert_eq!(out.log_end, hw);
        assert!(out.last_stable <= hw);
        let none = log.read(hw, 1 << 20).await.expect("read").bounded(hw);
        assert!(none.batches.is_empty());
    });
}

#[test]
fn a_cut_below_the_log_start_is_refused_and_the_log_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path, small_config(), options())
            .await
            .expect("open");
        for i in 0..10 {
            log.append(filler(i + 1), 0).await.expect("append");
        }
        // filler(1) holds offsets 0..=1, filler(2) 2..=4: a log start of 3 falls inside it.
        log.delete_records(Offset(3)).await.expect("delete records");
        assert!(log.truncate_to(Offset(3)).await.is_err());
        let end = log.log_end();
        let meta = log.append(filler(1), 0).await.expect("still appends");
        assert_eq!(meta.base_offset, end);
        log.flush().await.expect("still syncs");
    });
}

#[test]
fn a_follower_behind_the_leaders_log_start_starts_again_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lp, fp) = (dir.path().join("leader"), dir.path().join("follower"));
    run(move || async move {
        let (follower, _) = PartitionLog::open(fp.clone(), small_config(), options())
            .await
            .expect("open");
        follower.become_leader(2).await.expect("epoch");
        for i in 0..40 {
            follower.append(filler(i + 1), 0).await.expect("append");
        }
        assert!(follower.epoch_cache().latest().is_some());
        // The leader's log now starts at 500 (DeleteRecords while this replica was away).
        let (leader, _) = PartitionLog::open(lp, small_config(), options())
            .await
            .expect("open");
        leader
            .restart_at(Offset(500))
            .await
            .expect("leader starts at 500");
        for i in 0..5 {
            leader.append(filler(i + 1), 0).await.expect("append");
        }
        follower.restart_at(Offset(500)).await.expect("restart");
        assert_eq!(
            (follower.log_start(), follower.log_end()),
            (Offset(500), Offset(500))
        );
        assert!(follower.epoch_cache().latest().is_none());
        for b in read_all(&leader).await {
            follower
                .append_replica(BytesMut::from(&b[..]), 0)
                .await
                .expect("the leader's batches from its start");
        }
        follower.flush().await.expect("flush");
        let want = read_all(&leader).await;
        assert_eq!(read_all(&follower).await, want);
        drop(follower);
        let (reopened, _) = PartitionLog::open(fp, small_config(), options())
            .await
            .expect("reopen");
        assert_eq!(reopened.log_start(), Offset(500));
        assert_eq!(read_all(&reopened).await, want);
    });
}
