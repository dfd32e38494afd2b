//! Crash-test child: appends durable batches to one partition directory and prints a line per
//! acknowledged batch, `ACK <seq> <base_offset> <last_offset>`, only after the fdatasync that
//! covers it. The crash test kills it with SIGKILL at random points and checks every
//! acknowledged batch survives byte for byte.
//!
//! Usage: `strand-log-writer DIR [WRITERS]` — WRITERS concurrent durable appenders (default 4).
//! Batch `seq` is `strand_broker::testkit::crash_batch(seq)`.

use std::io::Write;
use std::path::PathBuf;

use glommio::{LocalExecutorBuilder, Placement};
use strand_broker::storage::{LogConfig, PartitionLog, StorageOptions};
use strand_broker::testkit::{crash_batch, crash_log_config};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: strand-log-writer DIR [WRITERS]");
        std::process::exit(2);
    };
    let writers: u64 = args.next().and_then(|w| w.parse().ok()).unwrap_or(4);
    let result = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move { run(dir, writers, crash_log_config()).await })
        .map_err(|e| e.to_string())
        .and_then(|h| h.join().map_err(|e| e.to_string()));
    if let Err(e) = result {
        eprintln!("strand-log-writer: {e}");
        std::process::exit(1);
    }
}

async fn run(dir: PathBuf, writers: u64, config: LogConfig) {
    let (log, report) = match PartitionLog::open(dir, config, StorageOptions::default()).await {
        Ok(x) => x,
        Err(e) => {
            eprintln!("open failed: {e}");
            std::process::exit(1);
        }
    };
    println!("OPEN {} {}", log.log_end(), report.truncated_bytes);
    let _ = std::io::stdout().flush();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let log = log.clone();
        tasks.push(glommio::spawn_local(async move {
            // Sequence numbers are unique per run start (nanos) so batches differ across runs.
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64)
                * 16;
            for i in 0.. {
                let seq = start + w + i * writers;
                let batch = crash_batch(seq);
                match log
                    .append_durable(bytes::BytesMut::from(&batch[..]), 0)
                    .await
                {
                    Ok(m) => {
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "ACK {seq} {} {}", m.base_offset, m.last_offset);
                        let _ = out.flush();
                    }
                    Err(e) => {
                        eprintln!("append failed: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await;
    }
}
