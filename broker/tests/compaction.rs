//! Log compaction with real files: the latest record per key survives, offsets keep their
//! values (gaps), tombstones go after `delete.retention.ms`, reads step over gaps, and a pass
//! stopped after any step (as a crash would) leaves the old or the new segment set.

use std::collections::BTreeMap;

use strand_broker::storage::cleaner::CleanStep;
use strand_broker::storage::{
    CleanOptions, CleanupPolicy, LogConfig, Offset, PartitionLog, StorageOptions,
};
use strand_broker::testkit::run_local as run;
use strand_wire::batch::BatchHeader;
use strand_wire::builder::BatchBuilder;
use strand_wire::records::records;

/// (offset, key, value) of one record; `None` value = tombstone.
type Rec = (i64, Vec<u8>, Option<Vec<u8>>);

const T0: i64 = 1_700_000_000_000;
const KEYS: u32 = 1000;
const RECORDS: u32 = 100_000;
const PER_BATCH: u32 = 100;
const DELETE_RETENTION_MS: i64 = 60_000;

fn compacted_config() -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        index_interval_bytes: 4096,
        flush_ms: 10_000,
        preallocate: false,
        cleanup_policy: CleanupPolicy::COMPACT,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..LogConfig::default()
    }
}

fn options() -> StorageOptions {
    StorageOptions {
        cache_bytes: 1 << 20,
        write_chunk_bytes: 64 << 10,
        write_behind_depth: 2,
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("key-{k:04}").into_bytes()
}

/// Writes `RECORDS` records round-robin over `KEYS` keys (value = `v{i}`), then tombstones for
/// keys 0..100, then rolls so every record is in a closed segment. Returns key -> latest
/// value (`None` = deleted).
async fn fill(log: &PartitionLog) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut latest = BTreeMap::new();
    let mut i = 0;
    while i < RECORDS {
        let mut b = BatchBuilder::new(T0);
        for _ in 0..PER_BATCH {
            let k = key(i % KEYS);
            let v = format!("v{i}-{}", "x".repeat(40)).into_bytes();
            b.push(Some(&k), &v, 0);
            latest.insert(k, Some(v));
            i += 1;
        }
        log.append(bytes::BytesMut::from(&b.finish()[..]), T0)
            .await
            .expect("append");
    }
    let mut b = BatchBuilder::new(T0);
    for k in 0..100 {
        b.push_tombstone(&key(k), 0);
        latest.insert(key(k), None);
    }
    log.append(bytes::BytesMut::from(&b.finish()[..]), T0)
        .await
        .expect("append tombstones");
    log.flush().await.expect("flush");
    assert!(log.roll_if_idle(i64::MAX).await.expect("roll"), "rolled");
    latest
}

/// Every record from offset 0, checking offsets strictly increase.
async fn read_records(log: &PartitionLog) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut next = Offset(0);
    let mut last = -1;
    while next < log.log_end() {
        let r = log.read(next, 1 << 20).await.expect("read");
        assert!(!r.batches.is_empty(), "no progress at {next}");
        for b in r.batches {
            let h = BatchHeader::parse(&b).expect("header");
            for rec in records(&b).expect("records") {
                let offset = h.base_offset + rec.offset_delta;
                assert!(offset > last, "offset {offset} after {last}");
                last = offset;
                out.push((
                    offset,
                    rec.key.expect("keyed").to_vec(),
                    rec.value.map(<[u8]>::to_vec),
                ));
            }
            next = Offset(h.last_offset() + 1);
        }
    }
    out
}

fn latest_of(recs: &[Rec]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    recs.iter()
        .map(|(_, k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn compaction_keeps_the_latest_value_per_key_then_drops_tombstones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
            .await
            .expect("open");
        let expected = fill(&log).await;
        let end = log.log_end();
        let before = log.size_bytes();

        // Within delete.retention.ms: one record per key, tombstones still there.
        let report = log
            .clean(T0 + 1000, CleanOptions::default())
            .await
            .expect("clean")
            .expect("a pass ran");
        let recs = read_records(&log).await;
        assert_eq!(recs.len(), KEYS as usize, "one record per key");
        assert_eq!(latest_of(&recs), expected);
        assert_eq!(log.log_end(), end, "the log end never moves");
        let after = log.size_bytes();
        println!(
            "compaction: {} -> {} bytes ({:.1}%), {} records removed, {} keys, {} segments rewritten",
            before,
            after,
            100.0 * after as f64 / before as f64,
            report.records_removed,
            report.keys,
            report.segments_rewritten
        );
        assert!(
            after * 20 < before,
            "disk usage shrinks: {before} -> {after}"
        );

        // Nothing dirty and no tombstone due: no pass.
        assert!(log
            .clean(T0 + 2000, CleanOptions::default())
            .await
            .expect("clean")
            .is_none());
        // After delete.retention.ms the tombstones go.
        log.clean(T0 + DELETE_RETENTION_MS + 10, CleanOptions::default())
            .await
            .expect("clean")
            .expect("tombstones due");
        let recs = read_records(&log).await;
        let live: BTreeMap<_, _> = expected
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(latest_of(&recs), live, "no tombstoned key remains");

        // Reads from inside a gap move on to the next record that exists.
        let first = recs[0].0;
        if first > 0 {
            let r = log
                .read(Offset(first - 1), 1000)
                .await
                .expect("read in gap");
            let h = BatchHeader::parse(&r.batches[0]).expect("header");
            assert!(h.last_offset() >= first);
        }

        // Reopen: the cleaned segments load from their indexes, same content.
        drop(log);
        let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
            .await
            .expect("reopen");
        assert_eq!(log.log_end(), end);
        assert_eq!(latest_of(&read_records(&log).await), live);
    });
}

#[test]
fn a_pass_stopped_at_any_step_leaves_old_or_new_segments_and_resumes() {
    for step in [
        CleanStep::CleanedWritten,
        CleanStep::ManifestWritten,
        CleanStep::OldDeleted,
        CleanStep::Renamed,
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c-0");
        run(move || async move {
            let expected;
            let end;
            {
                let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
                    .await
                    .expect("open");
                expected = fill(&log).await;
                end = log.log_end();
                let stop = CleanOptions {
                    stop_after: Some(step),
                    ..CleanOptions::default()
                };
                let err = log.clean(T0 + 1000, stop).await;
                assert!(err.is_err(), "{step:?}: the pass stops");
            }
            // "Restart": recovery finishes or discards the swap.
            let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
                .await
                .expect("reopen after the stop");
            assert_eq!(log.log_end(), end, "{step:?}");
            let recs = read_records(&log).await;
            assert_eq!(latest_of(&recs), expected, "{step:?}: nothing lost");
            let leftovers: Vec<String> = std::fs::read_dir(&path)
                .expect("ls")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
                .collect();
            assert!(leftovers.is_empty(), "{step:?}: {leftovers:?}");
            // Cleaning resumes and completes.
            log.clean(T0 + 1000, CleanOptions::default())
                .await
                .expect("clean after restart");
            let recs = read_records(&log).await;
            assert_eq!(recs.len(), KEYS as usize, "{step:?}");
            assert_eq!(latest_of(&recs), expected, "{step:?}");
        });
    }
}

#[test]
fn compressed_batches_are_compacted_and_keep_their_codec() {
    use strand_wire::batch::Compression;
    use strand_wire::compression::{compress_batch, decompress_batch};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("z-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
            .await
            .expect("open");
        let mut latest = BTreeMap::new();
        for round in 0..200u32 {
            let mut b = BatchBuilder::new(T0);
            for k in 0..50u32 {
                let v = format!("r{round}-{}", "y".repeat(200)).into_bytes();
                b.push(Some(&key(k)), &v, 0);
                latest.insert(key(k), Some(v));
            }
            let codec = if round % 2 == 0 {
                Compression::Lz4
            } else {
                Compression::Gzip
            };
            let c = compress_batch(&b.finish(), codec).expect("compress");
            log.append(bytes::BytesMut::from(&c[..]), T0)
                .await
                .expect("append");
        }
        log.flush().await.expect("flush");
        assert!(log.roll_if_idle(i64::MAX).await.expect("roll"));
        log.clean(T0 + 1000, CleanOptions::default())
            .await
            .expect("clean")
            .expect("a pass ran");
        let mut seen = BTreeMap::new();
        let mut next = Offset(0);
        while next < log.log_end() {
            let r = log.read(next, 1 << 20).await.expect("read");
            assert!(!r.batches.is_empty(), "no progress at {next}");
            for b in r.batches {
                let h = BatchHeader::parse(&b).expect("header");
                if h.records_count > 0 {
                    assert_ne!(h.attributes & 0x7, 0, "rewritten batches keep a codec");
                }
                let plain = decompress_batch(&b).expect("decompress");
                for rec in records(&plain).expect("records") {
                    seen.insert(
                        rec.key.expect("key").to_vec(),
                        rec.value.map(<[u8]>::to_vec),
                    );
                }
                next = Offset(h.last_offset() + 1);
            }
        }
        assert_eq!(seen, latest);
        assert!(
            log.size_bytes() < 20_000,
            "compacted: {} bytes",
            log.size_bytes()
        );
    });
}

#[test]
fn a_poison_batch_is_kept_as_is_and_the_other_keys_compact() {
    // A batch with a valid CRC whose records do not decode (a gzip flag on plain records), as
    // produce accepted before it validated records: the cleaner logs it, keeps it, and
    // compacts everything else instead of failing every pass.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("p-0");
    run(move || async move {
        let (log, _) = PartitionLog::open(path.clone(), compacted_config(), options())
            .await
            .expect("open");
        let batch = |k: &[u8], v: &[u8]| {
            let mut b = BatchBuilder::new(T0);
            b.push(Some(k), v, 0);
            bytes::BytesMut::from(&b.finish()[..])
        };
        let mut poison = batch(b"p", b"poison").to_vec();
        let attributes = u16::from_be_bytes([poison[21], poison[22]]) | 1;
        poison[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = strand_wire::batch::compute_crc(&poison);
        poison[17..21].copy_from_slice(&crc.to_be_bytes());
        for (k, v) in [(b"a", b"1"), (b"b", b"1")] {
            log.append(batch(k, v), T0).await.expect("append");
        }
        log.append(bytes::BytesMut::from(&poison[..]), T0)
            .await
            .expect("the log itself only checks the CRC");
        for (k, v) in [(b"a", b"2"), (b"b", b"2")] {
            log.append(batch(k, v), T0).await.expect("append");
        }
        log.flush().await.expect("flush");
        assert!(log.roll_if_idle(i64::MAX).await.expect("roll"));
        let report = log
            .clean(T0 + 1000, CleanOptions::default())
            .await
            .expect("the pass does not fail on the poison batch")
            .expect("a pass ran");
        assert_eq!(report.unreadable_batches, 1);
        assert_eq!(report.records_removed, 2, "a=1 and b=1 are gone");
        let mut seen = Vec::new();
        let r = log.read(Offset(0), 1 << 20).await.expect("read");
        for b in r.batches {
            let h = BatchHeader::parse(&b).expect("header");
            match records(&b) {
                Ok(recs) => {
                    for rec in recs {
                        seen.push((
                            h.base_offset + rec.offset_delta,
                            rec.key.map(<[u8]>::to_vec),
                        ));
                    }
                }
                Err(_) => seen.push((h.base_offset, None)),
            }
        }
        assert_eq!(
            seen,
            vec![
                (2, None),
                (3, Some(b"a".to_vec())),
                (4, Some(b"b".to_vec()))
            ],
            "the poison batch (offset 2) kept, the old values of a and b removed"
        );
        log.close().await.expect("close");
    });
}
