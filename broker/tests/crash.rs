//! Crash test: a child appends durable batches and reports each acknowledgement; it gets
//! SIGKILL at random points (25 cycles). After each kill the partition is reopened (recovery)
//! and every acknowledged batch must read back byte-identical, every served batch must pass
//! its CRC, offsets must be contiguous, and the next run's offsets must keep increasing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use glommio::{LocalExecutorBuilder, Placement};
use rand::Rng;
use strand_broker::storage::{Offset, PartitionLog, StorageOptions};
use strand_broker::testkit::{crash_batch, crash_log_config};
use strand_wire::batch::{set_base_offset, validate};

const CYCLES: usize = 25;

#[derive(Debug, Clone, Copy)]
struct Ack {
    seq: u64,
    base: i64,
    last: i64,
}

/// Runs the child for `run_ms`, kills it with SIGKILL, returns the complete ACK lines.
fn run_child(dir: &Path, run_ms: u64) -> Vec<Ack> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strand-log-writer"))
        .arg(dir)
        .arg("4")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn strand-log-writer");
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut r = BufReader::new(stdout);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            // A line cut by the kill has no newline: it was never fully acknowledged.
            if line.ends_with(b"\n") {
                let text = String::from_utf8_lossy(&line);
                let f: Vec<&str> = text.split_whitespace().collect();
                if f.len() == 4 && f[0] == "ACK" {
                    acks.push(Ack {
                        seq: f[1].parse().expect("seq"),
                        base: f[2].parse().expect("base"),
                        last: f[3].parse().expect("last"),
                    });
                }
            }
            line.clear();
        }
        acks
    });
    std::thread::sleep(Duration::from_millis(run_ms));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    reader.join().expect("reader")
}

/// Opens the partition (running recovery) and returns every stored batch with its base.
fn read_back(dir: PathBuf) -> (Vec<(i64, Vec<u8>)>, i64, u64) {
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let (log, report) =
                PartitionLog::open(dir, crash_log_config(), StorageOptions::default())
                    .await
                    .expect("recovery opens the log");
            let mut out = Vec::new();
            let mut next = log.log_start();
            while next < log.log_end() {
                let r = log.read(next, 1 << 20).await.expect("read");
                assert!(
                    !r.batches.is_empty(),
                    "empty read at {next} below the log end"
                );
                for b in r.batches {
                    let h = validate(&b).expect("every served batch passes its CRC");
                    assert_eq!(h.base_offset, next.0, "offsets are contiguous");
                    next = Offset(h.last_offset() + 1);
                    out.push((h.base_offset, b.to_vec()));
                }
            }
            let end = log.log_end().0;
            log.close().await.expect("close");
            (out, end, report.truncated_bytes)
        })
        .expect("executor")
        .join()
        .expect("read back")
}

/// Simulates what a power cut can leave and a SIGKILL cannot (O_DIRECT block writes finish
/// even when the process dies): part of a batch past the last whole one in the newest segment.
fn inject_torn_write(dir: &Path, rng: &mut impl Rng) {
    use std::os::unix::fs::FileExt;
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let last = logs.pop().expect("a segment");
    let base = strand_broker::storage::segment::parse_log_file_name(
        &last.file_name().expect("name").to_string_lossy(),
    )
    .expect("segment name");
    let (seg, _) = strand_broker::storage::recovery::scan_segment(&last, base, 4096).expect("scan");
    let torn = crash_batch(rng.gen());
    // At least through the batch length field (bytes 8..12, never zero): the first 8 bytes
    // are a zero base offset, and a cut inside them wrote zeros over zeros — a torn write
    // nobody could see (one CI run failed "every injected torn write must be truncated" so).
    let cut = rng.gen_range(12..torn.len());
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .expect("open");
    f.write_all_at(&torn[..cut], seg.size_bytes)
        .expect("write torn batch");
}

#[test]
fn acknowledged_durable_appends_survive_sigkill() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("crash-0");
    let mut rng = rand::thread_rng();
    let mut all_acks: Vec<Ack> = Vec::new();
    let mut prev_end = 0i64;
    let mut total_killed_mid_run = 0;
    let mut torn_tails = 0;
    for cycle in 0..CYCLES {
        let acks = run_child(&dir, rng.gen_range(150..600));
        if let Some(first) = acks.iter().map(|a| a.base).min() {
            assert!(
                first >= prev_end,
                "cycle {cycle}: offsets went back ({first} < {prev_end})"
            );
        }
        total_killed_mid_run += usize::from(!acks.is_empty());
        all_acks.extend(acks);
        if cycle % 3 == 2 {
            inject_torn_write(&dir, &mut rng);
        }
        let (stored, end, truncated) = read_back(dir.clone());
        torn_tails += usize::from(truncated > 0);
        let by_base: std::collections::HashMap<i64, &Vec<u8>> =
            stored.iter().map(|(b, v)| (*b, v)).collect();
        for a in &all_acks {
            let mut want = crash_batch(a.seq);
            set_base_offset(&mut want, a.base);
            let got = by_base.get(&a.base).unwrap_or_else(|| {
                panic!(
                    "cycle {cycle}: acknowledged batch seq {} at {} lost",
                    a.seq, a.base
                )
            });
            assert_eq!(**got, want, "cycle {cycle}: batch at {} differs", a.base);
            assert!(a.last < end);
        }
        prev_end = end;
        eprintln!(
            "cycle {cycle}: {} acks so far, log end {end}, torn tail truncated: {truncated} bytes",
            all_acks.len()
        );
    }
    assert!(
        total_killed_mid_run >= CYCLES / 2,
        "the child must be killed while appending"
    );
    assert!(
        torn_tails >= CYCLES / 3,
        "every injected torn write must be truncated"
    );
    assert!(
        all_acks.len() > 100,
        "too few acknowledgements to mean anything"
    );
    eprintln!("crash test: {CYCLES} kills, {} acknowledged batches all intact, {torn_tails} torn tails truncated", all_acks.len());
}
