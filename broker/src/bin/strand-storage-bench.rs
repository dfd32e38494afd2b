//! Storage benchmark: the partition log against the raw disk, in one run, on one disk.
//!
//! Phases (each in a fresh directory under `--dir`, deleted afterwards):
//! 1. raw O_DIRECT sequential write: 1 MiB writes, 8 in flight, preallocated file, final
//!    fdatasync included: the disk's streaming limit through io_uring;
//! 2. `PartitionLog::append` (buffered flush: `flush.ms`/`flush.bytes` schedule) with batches of
//!    16 and 256 records of 1 KiB, final flush included, as bytes/s and as a ratio of (1);
//! 3. durable latency, in interleaved blocks so the machine's noise hits all contenders alike:
//!    raw O_DIRECT write of one batch + fdatasync (1 writer; also fdatasync alone), the same
//!    with 4 concurrent writers, and `PartitionLog::append_durable` from 4 concurrent writers
//!    (group commit).
//!
//! With `--io-properties FILE` (from `strand iotune`), phase 3 also runs a log with the
//! `StorageOptions` from that file, interleaved with the default-options log, and prints its
//! row next to the defaults' with the ratio of their p99s.
//!
//! `--check` exits 1 unless buffered appends reach 70% of (1) and the durable p99 is at most
//! 2x the raw durable write's p99 (and, with `--io-properties`, the measured options' p99 is at
//! most 1.1x the defaults'). The stricter ratio against fdatasync alone is printed too.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Parser;
use glommio::io::{DmaFile, OpenOptions};
use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use strand_broker::storage::dma::fdatasync_pooled;
use strand_broker::storage::{LogConfig, PartitionLog, StorageOptions};
use strand_wire::builder::filler_batch;

#[derive(Parser, Clone)]
#[command(about = "Partition log vs raw O_DIRECT disk, in one run")]
struct Args {
    /// Scratch directory on the disk to measure (default: ./.bench-out/storage).
    #[arg(long, default_value = ".bench-out/storage")]
    dir: PathBuf,
    /// Bytes written per throughput phase, in MiB.
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Durable operations per latency phase.
    #[arg(long, default_value_t = 2000)]
    ops: usize,
    /// Concurrent durable writers in phase 4.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Exit 1 if the targets are missed.
    #[arg(long)]
    check: bool,
    /// io-properties file (`strand iotune`): also run the durable phase with its options.
    #[arg(long)]
    io_properties: Option<PathBuf>,
}

const RECORD_BYTES: usize = 1024;
const BATCH_RECORDS: [usize; 2] = [16, 256];
const RAW_BLOCK: usize = 1 << 20;
const RAW_DEPTH: u64 = 8;

fn main() {
    let args = Args::parse();
    let result = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(strand_broker::limits::EXECUTOR_IO_MEMORY_BYTES)
        .spawn(move || async move { run(args).await })
        .expect("executor")
        .join();
    match result {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => std::process::exit(1),
        Ok(Err(e)) => {
            eprintln!("strand-storage-bench: {e}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("strand-storage-bench: {e}");
            std::process::exit(2);
        }
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn gio<T>(e: glommio::GlommioError<T>) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

async fn open_raw(path: &Path, prealloc: u64) -> std::io::Result<Rc<DmaFile>> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .dma_open(path)
        .await
        .map_err(gio)?;
    f.pre_allocate(prealloc, false).await.map_err(gio)?;
    Ok(Rc::new(f))
}

async fn raw_sequential(dir: &Path, bytes: u64) -> std::io::Result<f64> {
    let path = dir.join("raw-seq");
    let file = open_raw(&path, bytes).await?;
    let blocks = bytes / RAW_BLOCK as u64;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for lane in 0..RAW_DEPTH {
        let file = Rc::clone(&file);
        tasks.push(glommio::spawn_local(async move {
            let mut i = lane;
            while i < blocks {
                let mut buf = file.alloc_dma_buffer(RAW_BLOCK);
                buf.as_bytes_mut().fill(i as u8);
                file.write_at(buf, i * RAW_BLOCK as u64)
                    .await
                    .map_err(gio)?;
                i += RAW_DEPTH;
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    for t in tasks {
        t.await?;
    }
    file.fdatasync().await.map_err(gio)?;
    let rate = mbps(blocks * RAW_BLOCK as u64, start.elapsed());
    std::fs::remove_file(&path)?;
    Ok(rate)
}

fn bench_config() -> LogConfig {
    LogConfig {
        retention_ms: -1,
        ..LogConfig::default()
    }
}

async fn log_buffered(dir: &Path, records: usize, bytes: u64) -> std::io::Result<(f64, usize)> {
    let path = dir.join(format!("buffered-{records}"));
    let (log, _) =
        PartitionLog::open(path.clone(), bench_config(), StorageOptions::default()).await?;
    let batch = filler_batch(records, RECORD_BYTES, 0, 7);
    let n = (bytes / batch.len() as u64).max(1);
    let start = Instant::now();
    for _ in 0..n {
        log.append(bytes::BytesMut::from(&batch[..]), 0)
            .await
            .map_err(std::io::Error::other)?;
    }
    log.flush().await?;
    let rate = mbps(n * batch.len() as u64, start.elapsed());
    log.close().await?;
    drop(log);
    std::fs::remove_dir_all(&path)?;
    Ok((rate, batch.len()))
}

/// Sequential O_DIRECT writes + fdatasync on a preallocated file, as a durable log would do
/// with no log around it. Positions are handed out in order, so concurrent writers append.
struct RawDurable {
    file: Rc<DmaFile>,
    block: usize,
    next: std::cell::Cell<u64>,
}

impl RawDurable {
    async fn op(&self, i: usize) -> std::io::Result<(u64, u64)> {
        let mut buf = self.file.alloc_dma_buffer(self.block);
        buf.as_bytes_mut().fill(i as u8);
        let pos = self.next.get();
        self.next.set(pos + self.block as u64);
        let t0 = Instant::now();
        self.file.write_at(buf, pos).await.map_err(gio)?;
        let t1 = Instant::now();
        fdatasync_pooled(std::os::fd::AsRawFd::as_raw_fd(&*self.file)).await?;
        let t2 = Instant::now();
        Ok((
            (t2 - t0).as_micros().max(1) as u64,
            (t2 - t1).as_micros().max(1) as u64,
        ))
    }
}

struct Durable {
    sync_only: Histogram<u64>,
    raw1: Histogram<u64>,
    raw_n: Histogram<u64>,
    log_n: Histogram<u64>,
    /// The same as `log_n` with the io-properties' options, when given.
    log_measured: Option<Histogram<u64>>,
}

/// `writers` tasks each doing `ops` durable appends of `batch` to `log`, latencies recorded
/// into the histogram `pick` selects.
async fn durable_appends(
    log: &PartitionLog,
    batch: &Rc<Vec<u8>>,
    writers: usize,
    ops: usize,
    out: &Rc<RefCell<Durable>>,
    pick: fn(&mut Durable) -> Option<&mut Histogram<u64>>,
) -> std::io::Result<()> {
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let (log, batch, out) = (log.clone(), Rc::clone(batch), Rc::clone(out));
        tasks.push(glommio::spawn_local(async move {
            for _ in 0..ops {
                let t0 = Instant::now();
                log.append_durable(bytes::BytesMut::from(&batch[..]), 0)
                    .await
                    .map_err(std::io::Error::other)?;
                if let Some(h) = pick(&mut out.borrow_mut()) {
                    h.record(t0.elapsed().as_micros().max(1) as u64).ok();
                }
            }
            Ok::<(), std::io::Error>(())
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// Interleaves short blocks of each contender (raw x1, raw xN, log xN, and the log with the
/// measured options if given) so the machine's noise lands on all of them alike.
async fn durable(
    dir: &Path,
    records: usize,
    ops: usize,
    writers: usize,
    measured: Option<&StorageOptions>,
) -> std::io::Result<Durable> {
    const REPS: usize = 10;
    let batch = Rc::new(filler_batch(records, RECORD_BYTES, 0, 9));
    let block = strand_broker::storage::dma::align_up(batch.len() as u64) as usize;
    let raw_path = dir.join("raw-durable");
    let raw = Rc::new(RawDurable {
        file: open_raw(&raw_path, (block * ops * 2) as u64 + (1 << 20)).await?,
        block,
        next: std::cell::Cell::new(0),
    });
    let log_path = dir.join(format!("durable-{records}"));
    let (log, _) =
        PartitionLog::open(log_path.clone(), bench_config(), StorageOptions::default()).await?;
    let measured_path = dir.join(format!("durable-{records}-measured"));
    let measured_log = match measured {
        Some(options) => Some(
            PartitionLog::open(measured_path.clone(), bench_config(), options.clone())
                .await?
                .0,
        ),
        None => None,
    };
    let out = Rc::new(RefCell::new(Durable {
        sync_only: hist(),
        raw1: hist(),
        raw_n: hist(),
        log_n: hist(),
        log_measured: measured.map(|_| hist()),
    }));
    let per_rep = (ops / REPS).max(writers);
    for rep in 0..REPS {
        for i in 0..per_rep {
            let (ws, s) = raw.op(i).await?;
            let mut o = out.borrow_mut();
            o.raw1.record(ws).ok();
            o.sync_only.record(s).ok();
        }
        let mut tasks = Vec::new();
        for _ in 0..writers {
            let (raw, out) = (Rc::clone(&raw), Rc::clone(&out));
            tasks.push(glommio::spawn_local(async move {
                for i in 0..per_rep / writers {
                    let (ws, _) = raw.op(i).await?;
                    out.borrow_mut().raw_n.record(ws).ok();
                }
                Ok::<(), std::io::Error>(())
            }));
        }
        for t in tasks {
            t.await?;
        }
        // With io-properties, the two logs take turns going first: whichever follows the raw
        // contenders inherits their journal state.
        let n = per_rep / writers;
        let measured_first = rep % 2 == 1 && measured_log.is_some();
        for turn in 0..2 {
            if (turn == 0) != measured_first {
                durable_appends(&log, &batch, writers, n, &out, |d| Some(&mut d.log_n)).await?;
            } else if let Some(m) = &measured_log {
                durable_appends(m, &batch, writers, n, &out, |d| d.log_measured.as_mut()).await?;
            }
        }
    }
    if let Some(m) = measured_log {
        m.close().await?;
        drop(m);
        std::fs::remove_dir_all(&measured_path)?;
    }
    log.close().await?;
    drop(log);
    std::fs::remove_dir_all(&log_path)?;
    std::fs::remove_file(&raw_path)?;
    Rc::try_unwrap(out)
        .map(RefCell::into_inner)
        .map_err(|_| std::io::Error::other("still shared"))
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

async fn run(args: Args) -> std::io::Result<bool> {
    std::fs::create_dir_all(&args.dir)?;
    let bytes = args.mib << 20;
    println!(
        "strand-storage-bench: dir {} ({} MiB per throughput phase, {} durable ops per phase)",
        args.dir.display(),
        args.mib,
        args.ops
    );
    let measured = match &args.io_properties {
        Some(path) => {
            let props = strand_tuning::IoProperties::load(path)?;
            let (options, clamped) = strand_broker::host::storage_options_from(&props);
            let d = StorageOptions::default();
            println!(
                "io-properties {}: write chunk {} KiB, write-behind {} (defaults: {} KiB, {}){}",
                path.display(),
                options.write_chunk_bytes >> 10,
                options.write_behind_depth,
                d.write_chunk_bytes >> 10,
                d.write_behind_depth,
                if clamped.is_empty() {
                    String::new()
                } else {
                    format!("; clamped: {}", clamped.join(", "))
                }
            );
            Some(options)
        }
        None => None,
    };
    let raw = raw_sequential(&args.dir, bytes).await?;
    let mut ok = true;
    println!();
    println!("{:<46} {:>10} {:>10}", "throughput", "MB/s", "vs raw");
    println!(
        "{:<46} {:>10.0} {:>10}",
        format!("raw O_DIRECT seq write (1 MiB x QD{RAW_DEPTH})"),
        raw,
        "1.00"
    );
    for records in BATCH_RECORDS {
        let (rate, len) = log_buffered(&args.dir, records, bytes).await?;
        let ratio = rate / raw;
        ok &= ratio >= 0.70;
        println!(
            "{:<46} {:>10.0} {:>10.2}",
            format!("log append, buffered flush, {} KiB batches", len / 1024),
            rate,
            ratio
        );
    }
    let (mut durable_ok, mut strict_ok, mut measured_ok) = (true, true, true);
    let mut ratios = Vec::new();
    println!();
    println!(
        "{:<46} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "durable latency (ms)", "p50", "p99", "p99.9", "max", "p99/sync", "p99/raw1"
    );
    for records in BATCH_RECORDS {
        let batch_len = filler_batch(records, RECORD_BYTES, 0, 0).len();
        let d = durable(
            &args.dir,
            records,
            args.ops,
            args.writers,
            measured.as_ref(),
        )
        .await?;
        let kib = batch_len / 1024;
        let w = args.writers;
        let sync_p99 = d.sync_only.value_at_quantile(0.99).max(1) as f64;
        let raw1_p99 = d.raw1.value_at_quantile(0.99).max(1) as f64;
        let mut rows = vec![
            (
                format!("raw fdatasync alone, after {kib} KiB write"),
                &d.sync_only,
            ),
            (
                format!("raw write {kib} KiB + fdatasync, 1 writer"),
                &d.raw1,
            ),
            (
                format!("raw write {kib} KiB + fdatasync, {w} writers"),
                &d.raw_n,
            ),
            (
                format!("log append_durable {kib} KiB, {w} writers"),
                &d.log_n,
            ),
        ];
        if let Some(h) = &d.log_measured {
            rows.push((
                format!("log append_durable {kib} KiB, {w} writers, iotune"),
                h,
            ));
        }
        for (name, h) in rows {
            let p99 = h.value_at_quantile(0.99) as f64;
            println!(
                "{:<46} {:>8} {:>8} {:>8} {:>8} {:>8.2}x {:>8.2}x",
                name,
                ms(h.value_at_quantile(0.50)),
                ms(h.value_at_quantile(0.99)),
                ms(h.value_at_quantile(0.999)),
                ms(h.max()),
                p99 / sync_p99,
                p99 / raw1_p99
            );
        }
        let log_p99 = d.log_n.value_at_quantile(0.99) as f64;
        durable_ok &= log_p99 <= 2.0 * raw1_p99;
        strict_ok &= log_p99 <= 2.0 * sync_p99;
        if let Some(h) = &d.log_measured {
            let ratio = h.value_at_quantile(0.99) as f64 / log_p99.max(1.0);
            measured_ok &= ratio <= 1.1;
            ratios.push(format!("{kib} KiB batches {ratio:.2}x"));
        }
    }
    if !ratios.is_empty() {
        println!();
        println!(
            "durable p99, io-properties / defaults: {}",
            ratios.join(", ")
        );
    }
    let verdict = |b: bool| if b { "met" } else { "MISSED" };
    println!();
    println!(
        "buffered appends >= 0.70 x raw sequential write: {}",
        verdict(ok)
    );
    println!(
        "durable p99 (x{} writers) <= 2 x raw durable write p99 (write + fdatasync, 1 writer): {}",
        args.writers,
        verdict(durable_ok)
    );
    println!(
        "durable p99 (x{} writers) <= 2 x raw fdatasync-alone p99 (strict reading): {}",
        args.writers,
        verdict(strict_ok)
    );
    if measured.is_some() {
        println!(
            "durable p99 with io-properties <= 1.1 x defaults p99: {}",
            verdict(measured_ok)
        );
    }
    Ok((ok && durable_ok && measured_ok) || !args.check)
}
