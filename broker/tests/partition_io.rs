//! The partition log with real files: O_DIRECT appends, cache and disk reads, rolls,
//! reopen from indexes, recovery from torn and corrupt tails, retention, group commit.

use std::path::Path;

use strand_broker::storage::segment::log_file_name;
use strand_broker::storage::{LogConfig, Offset, PartitionLog, StorageOptions};
use strand_broker::testkit::run_local as run;
use strand_wire::batch::{set_base_offset, BatchHeader};
use strand_wire::builder::filler_batch;

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        index_interval_bytes: 4096,
        flush_ms: 10_000,
        // The zero-fill path (not the default) is the one with more to get wrong.
        preallocate: true,
        ..LogConfig::default()
    }
}

fn tiny_cache() -> StorageOptions {
    StorageOptions {
        cache_bytes: 0,
        write_chunk_bytes: 64 << 10,
        write_behind_depth: 2,
    }
}

/// The batch that `append` stores for input `b` assigned `base`.
fn stored(b: &[u8], base: i64) -> Vec<u8> {
    let mut v = b.to_vec();
    set_base_offset(&mut v, base);
    v
}

async fn read_all(log: &PartitionLog, from: Offset) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end() {
        let r = log.read(next, 100_000).await.expect("read");
        assert!(!r.batches.is_empty(), "no progress at {next}");
        for b in r.batches {
            let h = BatchHeader::parse(&b).expect("header");
            next = Offset(h.last_offset() + 1);
            out.push(b.to_vec());
        }
    }
    out
}

#[test]
fn appends_read_back_from_cache_and_disk_across_rolls_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let mut expected = Vec::new();
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            for i in 0..200u32 {
                let b = filler_batch(
                    1 + (i % 7) as usize,
                    100 + i as usize * 13,
                    1_000 + i as i64,
                    i as u8,
                );
                let meta = log
                    .append(bytes::BytesMut::from(&b[..]), 0)
                    .await
                    .expect("append");
                expected.push(stored(&b, meta.base_offset.0));
            }
            assert!(log.segment_count() > 3, "rolled: {}", log.segment_count());
            log.flush().await.expect("flush");
            assert_eq!(read_all(&log, Offset(0)).await, expected, "disk reads");
            log.close().await.expect("close");
        }
        let (log, report) =
            PartitionLog::open(path.clone(), small_config(), StorageOptions::default())
                .await
                .expect("reopen");
        assert_eq!(
            report.scanned, 1,
            "only the active segment is scanned: {report:?}"
        );
        assert_eq!(report.truncated_bytes, 0);
        assert_eq!(read_all(&log, Offset(0)).await, expected, "after reopen");
        // Reads from the middle start at the batch holding the offset.
        let mid = log.read(Offset(301), 1).await.expect("read");
        let h = BatchHeader::parse(&mid.batches[0]).expect("header");
        assert!(h.base_offset <= 301 && 301 <= h.last_offset());
        // Appends continue with the next offset.
        let end = log.log_end();
        let meta = log
            .append(bytes::BytesMut::from(&filler_batch(2, 10, 5, 0)[..]), 0)
            .await
            .expect("append");
        assert_eq!(meta.base_offset, end);
        assert!(
            log.read(Offset(end.0 + 5), 10).await.is_err(),
            "past the end is out of range"
        );
    });
}

#[test]
fn offset_for_time_finds_the_first_newer_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path, small_config(), tiny_cache())
            .await
            .expect("open");
        for i in 0..100i64 {
            log.append(
                bytes::BytesMut::from(&filler_batch(2, 2000, 10_000 + i * 10, 0)[..]),
                0,
            )
            .await
            .expect("append");
        }
        log.flush().await.expect("flush");
        assert_eq!(
            log.offset_for_time(0).await.expect("t"),
            Some((Offset(0), 10_000))
        );
        assert_eq!(
            log.offset_for_time(10_505).await.expect("t"),
            Some((Offset(102), 10_510))
        );
        assert_eq!(log.offset_for_time(99_999).await.expect("t"), None);
    });
}

fn last_segment(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

#[test]
fn recovery_truncates_a_torn_tail_and_a_bit_flipped_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let batch = filler_batch(4, 1000, 7, 1);
        let len = batch.len() as u64;
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            for _ in 0..10 {
                log.append_durable(bytes::BytesMut::from(&batch[..]), 0)
                    .await
                    .expect("append");
            }
        }
        // Tear the last batch: cut the file in its middle (as a crash mid-write leaves it).
        let seg = last_segment(&path);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .expect("open seg");
        f.set_len(9 * len + len / 2).expect("tear");
        drop(f);
        {
            let (log, report) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("reopen");
            assert_eq!(log.log_end(), Offset(36), "nine whole batches remain");
            assert_eq!(report.truncated_bytes, len / 2);
            assert_eq!(read_all(&log, Offset(0)).await.len(), 9);
            log.close().await.expect("close");
        }
        // Flip one bit inside batch 6 (0-based 5): it and everything after are dropped.
        let seg = last_segment(&path);
        let mut bytes = std::fs::read(&seg).expect("read");
        bytes[(5 * len + 200) as usize] ^= 0x04;
        std::fs::write(&seg, &bytes).expect("write");
        let (log, report) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        assert_eq!(log.log_end(), Offset(20));
        assert!(report.truncated_bytes >= len);
        let all = read_all(&log, Offset(0)).await;
        assert_eq!(all.len(), 5);
        assert!(
            all.iter().all(|b| strand_wire::batch::validate(b).is_ok()),
            "no corrupt batch served"
        );
        let meta = log
            .append_durable(bytes::BytesMut::from(&batch[..]), 0)
            .await
            .expect("append after recovery");
        assert_eq!(
            meta.base_offset,
            Offset(20),
            "offsets continue from the truncation point"
        );
    });
}

#[test]
fn damaged_index_is_rebuilt_and_missing_index_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let mut expected = Vec::new();
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            for i in 0..100 {
                let b = filler_batch(3, 3000, i, 0);
                let m = log
                    .append(bytes::BytesMut::from(&b[..]), 0)
                    .await
                    .expect("append");
                expected.push(stored(&b, m.base_offset.0));
            }
            log.close().await.expect("close");
        }
        let first_index = path.join(log_file_name(Offset(0)).replace(".log", ".index"));
        let mut idx = std::fs::read(&first_index).expect("index exists");
        let n = idx.len();
        idx[n - 1] ^= 0xff;
        std::fs::write(&first_index, idx).expect("damage");
        std::fs::remove_file(path.join(log_file_name(Offset(0)).replace(".log", ".timeindex")))
            .expect("remove");
        let (log, report) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        assert_eq!(
            report.scanned, 2,
            "damaged segment + active one: {report:?}"
        );
        assert_eq!(read_all(&log, Offset(0)).await, expected);
    });
}

#[test]
fn retention_by_bytes_deletes_old_segment_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let mut config = small_config();
        config.retention_bytes = 600 << 10;
        let (log, _) = PartitionLog::open(path.clone(), config, tiny_cache())
            .await
            .expect("open");
        for _ in 0..600 {
            log.append(bytes::BytesMut::from(&filler_batch(1, 4000, 0, 0)[..]), 0)
                .await
                .expect("append");
        }
        let before = log.segment_count();
        let deleted = log.enforce_retention(0).await.expect("retention");
        assert!(deleted > 0 && log.segment_count() == before - deleted);
        assert!(log.size_bytes() <= (600 << 10) + (256 << 10));
        let files = std::fs::read_dir(&path).expect("dir").filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log"))
        });
        assert_eq!(files.count(), log.segment_count());
        let start = log.log_start();
        assert!(start > Offset(0));
        assert!(
            log.read(Offset(0), 10).await.is_err(),
            "deleted offsets are out of range"
        );
        assert!(!log.read(start, 10).await.expect("read").batches.is_empty());
    });
}

#[test]
fn concurrent_durable_appends_share_fdatasyncs_and_all_survive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("open");
        let mut tasks = Vec::new();
        for w in 0..4u8 {
            let log = log.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut offsets = Vec::new();
                for i in 0..50 {
                    let b = filler_batch(2, 500 + i, 0, w);
                    let m = log
                        .append_durable(bytes::BytesMut::from(&b[..]), 0)
                        .await
                        .expect("durable");
                    assert!(log.durable_offset() > m.last_offset);
                    offsets.push(m.base_offset);
                }
                offsets
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await);
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 200);
        drop(log);
        let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        assert_eq!(log.log_end(), Offset(400));
    });
}

#[test]
fn an_empty_segment_left_by_an_interrupted_roll_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    run(move || async move {
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            for _ in 0..5 {
                log.append_durable(bytes::BytesMut::from(&filler_batch(2, 100, 0, 0)[..]), 0)
                    .await
                    .expect("append");
            }
        }
        // The roll created the next segment at offset 12, but offsets 10..12 never reached disk.
        std::fs::write(path.join(log_file_name(Offset(12))), vec![0u8; 8192]).expect("write");
        let (log, report) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        assert_eq!(report.dropped_segments, 1);
        assert_eq!(log.log_end(), Offset(10));
        assert_eq!(
            log.append(bytes::BytesMut::from(&filler_batch(1, 10, 0, 0)[..]), 0)
                .await
                .expect("append")
                .base_offset,
            Offset(10)
        );
    });
}

#[test]
fn idempotent_producer_state_survives_reopen() {
    use strand_broker::storage::AppendError;
    use strand_wire::builder::BatchBuilder;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    let batch = |seq: i32| {
        let mut b = BatchBuilder::new(0).producer(42, 3, seq);
        b.push(None, b"a", 0);
        b.push(None, b"b", 0);
        b.finish()
    };
    run(move || async move {
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            for seq in [0, 2, 4] {
                log.append_durable(bytes::BytesMut::from(&batch(seq)[..]), 0)
                    .await
                    .expect("append");
            }
            match log.append(bytes::BytesMut::from(&batch(2)[..]), 0).await {
                Err(AppendError::Duplicate(o)) => assert_eq!(o, Offset(2)),
                other => panic!("expected a duplicate, got {other:?}"),
            }
            assert!(matches!(
                log.append(bytes::BytesMut::from(&batch(9)[..]), 0).await,
                Err(AppendError::OutOfOrderSequence { expected: 6 })
            ));
        }
        let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        match log.append(bytes::BytesMut::from(&batch(4)[..]), 0).await {
            Err(AppendError::Duplicate(o)) => {
                assert_eq!(o, Offset(4), "duplicate found after restart")
            }
            other => panic!("expected a duplicate after reopen, got {other:?}"),
        }
        assert_eq!(
            log.append(bytes::BytesMut::from(&batch(6)[..]), 0)
                .await
                .expect("next")
                .base_offset,
            Offset(6)
        );
    });
}

/// A transaction marker older than the producer's epoch on the partition, or from an older
/// coordinator than its last marker (one replaced since, late), is refused: it would end a
/// newer transaction still open. Still so after a reopen (the epochs are rebuilt from the log).
#[test]
fn a_stale_transaction_marker_is_refused() {
    use strand_broker::storage::AppendError;
    use strand_wire::builder::{control_batch, BatchBuilder};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    let data = |epoch: i16, sequence: i32| {
        let mut b = BatchBuilder::new(0)
            .producer(42, epoch, sequence)
            .transactional();
        b.push(None, b"a", 0);
        b.finish()
    };
    let marker = |epoch: i16, coordinator_epoch: i32, commit: bool| {
        bytes::BytesMut::from(&control_batch(42, epoch, commit, coordinator_epoch, 0)[..])
    };
    run(move || async move {
        {
            let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
                .await
                .expect("open");
            log.append_durable(bytes::BytesMut::from(&data(0, 0)[..]), 0)
                .await
                .expect("data, epoch 0");
            log.append_durable(marker(1, 0, false), 0)
                .await
                .expect("abort at a bumped epoch");
            let open = log
                .append_durable(bytes::BytesMut::from(&data(1, 0)[..]), 0)
                .await
                .expect("data, epoch 1")
                .base_offset;
            assert_eq!(log.last_stable(), open, "epoch 1's transaction is open");
            assert!(matches!(
                log.append_durable(marker(0, 0, true), 0).await,
                Err(AppendError::Fenced)
            ));
            assert_eq!(log.last_stable(), open, "still open after the stale marker");
        }
        let (log, _) = PartitionLog::open(path.clone(), small_config(), tiny_cache())
            .await
            .expect("reopen");
        let open = log.last_stable();
        assert!(matches!(
            log.append_durable(marker(0, 0, false), 0).await,
            Err(AppendError::Fenced)
        ));
        assert_eq!(log.last_stable(), open);
        log.append_durable(marker(1, 3, true), 0)
            .await
            .expect("the current epoch's marker, coordinator epoch 3");
        assert_eq!(log.last_stable(), log.log_end());
        // The next transaction of epoch 1 (transaction version 1 keeps the epoch), then a
        // late marker of epoch 1 from the coordinator before (epoch 2): refused, the
        // transaction stays open. The partition learnt coordinator epoch 3 from the marker.
        let open = log
            .append_durable(bytes::BytesMut::from(&data(1, 1)[..]), 0)
            .await
            .expect("data, epoch 1 again")
            .base_offset;
        assert!(matches!(
            log.append_durable(marker(1, 2, false), 0).await,
            Err(AppendError::CoordinatorFenced)
        ));
        assert_eq!(log.last_stable(), open);
    });
}

/// Zero-filling ahead (`storage::prefill`): while a segment is written its file holds zeros
/// past the appends, never over them; a reopen without a close (a crash) finds every durable
/// batch and trims the zeros; a close trims the file to its batches.
#[test]
fn zero_filled_segments_keep_every_batch_and_trim_their_zeros() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t-0");
    let config = LogConfig {
        segment_bytes: 64 << 20,
        ..small_config()
    };
    run(move || async move {
        let mut expected = Vec::new();
        {
            let (log, _) = PartitionLog::open(path.clone(), config.clone(), tiny_cache())
                .await
                .expect("open");
            // ~6 MiB in batches of 1-40 KiB: across the 1, 1, 2 and 4 MiB fill steps.
            let mut i = 0u32;
            let mut bytes = 0usize;
            while bytes < 6 << 20 {
                let b = filler_batch(
                    1 + (i % 5) as usize,
                    1_000 + (i as usize * 7_919) % 40_000,
                    0,
                    i as u8,
                );
                bytes += b.len();
                let meta = if i.is_multiple_of(3) {
                    log.append_durable(bytes::BytesMut::from(&b[..]), 0).await
                } else {
                    log.append(bytes::BytesMut::from(&b[..]), 0).await
                }
                .expect("append");
                expected.push(stored(&b, meta.base_offset.0));
                i += 1;
            }
            log.flush().await.expect("flush");
            let on_disk = std::fs::metadata(last_segment(&path)).expect("stat").len();
            assert!(
                on_disk >= bytes as u64,
                "file {on_disk} B holds the {bytes} B appended"
            );
            assert_eq!(
                read_all(&log, Offset(0)).await,
                expected,
                "reads before the crash"
            );
            drop(log); // no close: the zeros stay, as after kill -9
        }
        let (log, _) = PartitionLog::open(path.clone(), config.clone(), tiny_cache())
            .await
            .expect("reopen");
        assert_eq!(
            read_all(&log, Offset(0)).await,
            expected,
            "reads after the crash"
        );
        log.close().await.expect("close");
        let on_disk = std::fs::metadata(last_segment(&path)).expect("stat").len();
        let batches: usize = expected.iter().map(|b| b.len()).sum();
        assert_eq!(
            on_disk, batches as u64,
            "a closed segment is trimmed to its batches"
        );
    });
}
