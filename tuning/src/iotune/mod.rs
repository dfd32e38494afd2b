//! `strand iotune`: measure the data disk, derive io-properties, write the file.
//!
//! Steps, each on scratch files in `<data-dir>/.iotune-<pid>/` (removed at the end, also on
//! error):
//! 1. a short warm-up write (not reported);
//! 2. sequential O_DIRECT writes at each block size x queue depth ([`Plan`]), each to a fresh
//!    preallocated file without a final fdatasync — the way fio measures, so the numbers can
//!    be checked against it (`tests/tune.rs` does) — in several rounds, medians kept;
//! 3. fdatasync latency after a 16 KiB write, preallocated vs growing file ([`fsync`]);
//! 4. random 4 KiB reads at QD32 over a file it wrote;
//! 5. [`derive`] picks the sizes; the file is written atomically ([`IoProperties`]).

pub mod derive;
pub mod fsync;
pub mod ring;

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::host::Host;
use crate::props::{IoProperties, Measured, SeqPoint};
use fsync::SyncLatency;
use ring::SeqWrite;

/// What to measure, and for how long.
#[derive(Clone, Debug)]
pub struct Plan {
    pub name: &'static str,
    pub block_sizes_bytes: Vec<usize>,
    pub queue_depths: Vec<u32>,
    /// Size of each sequential-write file (a fresh, preallocated one per combination).
    pub file_bytes: u64,
    /// Each combination stops after this long even if its file is not full.
    pub time_limit: Duration,
    /// Passes over all combinations; each reports the median (a VM disk is noisy).
    pub rounds: usize,
    pub warmup_bytes: u64,
    pub sync_samples: usize,
    pub read_file_bytes: u64,
    pub read_time: Duration,
}

impl Plan {
    /// Every combination four times, ~55 s on this VM's disk (2.4 GB/s): each write is a
    /// fresh 1 GiB file or 1 s, whichever ends first.
    pub fn full() -> Plan {
        Plan {
            name: "full",
            block_sizes_bytes: vec![64 << 10, 256 << 10, 1 << 20, 4 << 20],
            queue_depths: vec![1, 4, 8, 32],
            file_bytes: 1 << 30,
            time_limit: Duration::from_secs(1),
            rounds: 4,
            warmup_bytes: 256 << 20,
            sync_samples: 200,
            read_file_bytes: 512 << 20,
            read_time: Duration::from_secs(3),
        }
    }

    /// The same combinations, briefly (~5-10 s): for smoke tests, not for production sizing.
    pub fn quick() -> Plan {
        Plan {
            name: "quick",
            file_bytes: 256 << 20,
            time_limit: Duration::from_millis(300),
            rounds: 1,
            warmup_bytes: 32 << 20,
            sync_samples: 40,
            read_file_bytes: 64 << 20,
            read_time: Duration::from_millis(500),
            ..Plan::full()
        }
    }
}

/// What a run measured and derived.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub props: IoProperties,
    pub out: PathBuf,
    pub table: String,
}

/// Scratch directory, removed with everything in it when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the plan on `data_dir` (created if missing), writes the io-properties to `out`, and
/// reports progress lines through `progress` as it goes.
pub fn run(
    data_dir: &Path,
    out: &Path,
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
) -> io::Result<Outcome> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| io::Error::new(e.kind(), format!("create {}: {e}", data_dir.display())))?;
    let scratch = Scratch(data_dir.join(format!(".iotune-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| io::Error::new(e.kind(), format!("create {}: {e}", scratch.0.display())))?;
    let file = scratch.0.join("seq");
    let host = Host::probe(Path::new("/"), data_dir);
    let disk = crate::disk::data_disk(&host)
        .map(|d| d.describe(&host))
        .unwrap_or_else(|why| format!("unknown ({why})"));
    progress(&format!(
        "iotune ({} plan): {} on {disk}",
        plan.name,
        data_dir.display()
    ));

    let warm = SeqWrite {
        block_bytes: 1 << 20,
        queue_depth: 8,
        file_bytes: plan.warmup_bytes,
        time_limit: Some(plan.time_limit),
    };
    ring::seq_write(&file, &warm)?;
    remove(&file)?;

    let points = sequential_writes(&file, plan, progress)?;

    let mut sync = Vec::new();
    for preallocated in [true, false] {
        let l = fsync::sync_latency(&file, preallocated, plan.sync_samples)?;
        remove(&file)?;
        progress(&format!(
            "  fdatasync ({}) p50 {} ms, p99 {} ms",
            if preallocated {
                "preallocated"
            } else {
                "growing"
            },
            ms(l.p50_us),
            ms(l.p99_us)
        ));
        sync.push(l);
    }

    let fill = SeqWrite {
        block_bytes: 1 << 20,
        queue_depth: 8,
        file_bytes: plan.read_file_bytes,
        time_limit: None,
    };
    ring::seq_write(&file, &fill)?;
    let reads = ring::random_read(&file, plan.read_file_bytes, 4096, 32, plan.read_time)?;
    remove(&file)?;
    let iops = reads.ops_per_s().round() as u64;
    progress(&format!("  random 4 KiB read x QD32  {iops} IOPS"));

    let derived = derive::derive(&points)
        .ok_or_else(|| io::Error::other("no sequential write measurements"))?;
    let mut props = IoProperties::new(derived.write_chunk_bytes, derived.write_behind_depth);
    props.measured = Some(Measured {
        date_utc: utc_now(),
        host: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        disk,
        data_dir: host.data_dir.display().to_string(),
        mode: plan.name.to_string(),
        peak_write_mb_per_s: derived.peak.mb_per_s,
        peak_write_block_bytes: derived.peak.block_bytes,
        peak_write_queue_depth: derived.peak.queue_depth,
        fdatasync_preallocated_p50_us: sync[0].p50_us,
        fdatasync_preallocated_p99_us: sync[0].p99_us,
        fdatasync_growing_p50_us: sync[1].p50_us,
        fdatasync_growing_p99_us: sync[1].p99_us,
        read_4k_qd32_iops: iops,
        seq_write: points.clone(),
    });
    props.write_atomic(out)?;
    drop(scratch);
    let table = table(plan, &points, &sync, iops, &derived, out);
    Ok(Outcome {
        props,
        out: out.to_path_buf(),
        table,
    })
}

/// Every block size x queue depth, `plan.rounds` times, each a fresh file; the median of
/// each combination. Each round starts at a different place in the list, so a drift in the
/// disk's speed during the run (a virtual disk's host cache filling or draining) does not
/// always favour the same combinations.
fn sequential_writes(
    file: &Path,
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
) -> io::Result<Vec<SeqPoint>> {
    let combos: Vec<(usize, u32)> = plan
        .block_sizes_bytes
        .iter()
        .flat_map(|&b| plan.queue_depths.iter().map(move |&q| (b, q)))
        .collect();
    let rounds = plan.rounds.max(1);
    let mut rates = vec![Vec::with_capacity(rounds); combos.len()];
    for round in 0..rounds {
        let started = Instant::now();
        let shift = round * combos.len() / rounds;
        for k in 0..combos.len() {
            let i = (k + shift) % combos.len();
            let (block_bytes, queue_depth) = combos[i];
            let job = SeqWrite {
                block_bytes,
                queue_depth,
                file_bytes: plan.file_bytes,
                time_limit: Some(plan.time_limit),
            };
            let t = ring::seq_write(file, &job)?;
            remove(file)?;
            rates[i].push(t.mb_per_s());
        }
        let (lo, hi) = rates
            .iter()
            .filter_map(|r| r.last())
            .fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        progress(&format!(
            "  round {}/{rounds}: {} sequential writes, {lo:.0}-{hi:.0} MB/s ({:.1} s)",
            round + 1,
            combos.len(),
            started.elapsed().as_secs_f64()
        ));
    }
    Ok(combos
        .iter()
        .zip(rates)
        .map(|(&(block, qd), r)| SeqPoint {
            block_bytes: block as u64,
            queue_depth: qd,
            mb_per_s: (median(r) * 10.0).round() / 10.0,
        })
        .collect())
}

/// The middle value (the mean of the middle two for an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn remove(path: &Path) -> io::Result<()> {
    std::fs::remove_file(path)
        .map_err(|e| io::Error::new(e.kind(), format!("remove {}: {e}", path.display())))
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// `65536` -> `64 KiB`, `1048576` -> `1 MiB`.
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.trailing_zeros() >= 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

fn table(
    plan: &Plan,
    points: &[SeqPoint],
    sync: &[SyncLatency],
    iops: u64,
    d: &derive::Derived,
    out: &Path,
) -> String {
    let mut s = String::from(
        "sequential O_DIRECT write, MB/s (fresh preallocated file, no final fsync, as fio)\n",
    );
    if plan.rounds > 1 {
        s = s.replace(" as fio)", &format!(" as fio; median of {})", plan.rounds));
    }
    s.push_str(&format!("{:<10}", "block"));
    for qd in &plan.queue_depths {
        s.push_str(&format!("{:>9}", format!("QD{qd}")));
    }
    s.push('\n');
    for &block in &plan.block_sizes_bytes {
        s.push_str(&format!("{:<10}", size_label(block as u64)));
        for &qd in &plan.queue_depths {
            let rate = points
                .iter()
                .find(|p| p.block_bytes == block as u64 && p.queue_depth == qd)
                .map_or(0.0, |p| p.mb_per_s);
            s.push_str(&format!("{rate:>9.0}"));
        }
        s.push('\n');
    }
    s.push_str(&format!(
        "\n{:<40} {:>8} {:>8} {:>8}\n",
        "fdatasync after a 16 KiB write (ms)", "p50", "p99", "max"
    ));
    for (name, l) in [("preallocated file", &sync[0]), ("growing file", &sync[1])] {
        s.push_str(&format!(
            "{:<40} {:>8} {:>8} {:>8}\n",
            name,
            ms(l.p50_us),
            ms(l.p99_us),
            ms(l.max_us)
        ));
    }
    s.push_str(&format!("\nrandom 4 KiB reads, QD32: {iops} IOPS\n\n"));
    s.push_str(&format!(
        "write_chunk_bytes  = {} ({}: smallest block within 90% of the peak at QD <= {}; peak {:.0} MB/s at {} x QD{})\n",
        d.write_chunk_bytes,
        size_label(d.write_chunk_bytes),
        derive::CHUNK_DEPTH_MAX,
        d.peak.mb_per_s,
        size_label(d.peak.block_bytes),
        d.peak.queue_depth
    ));
    s.push_str(&format!(
        "write_behind_depth = {} (smallest queue depth within 90% of the best at {}, {:.0} MB/s)\n",
        d.write_behind_depth,
        size_label(d.write_chunk_bytes),
        d.best_at_chunk_mb_per_s
    ));
    s.push_str(&format!("wrote {}\n", out.display()));
    s
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_labels() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_798_691_412), "2026-12-31T04:30:12Z");
        assert_eq!(size_label(64 << 10), "64 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn quick_run_writes_a_clamped_file_and_cleans_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("io-properties.toml");
        let mut plan = Plan::quick();
        plan.block_sizes_bytes = vec![64 << 10, 1 << 20];
        plan.queue_depths = vec![1, 8];
        plan.file_bytes = 32 << 20;
        plan.time_limit = Duration::from_millis(100);
        plan.warmup_bytes = 8 << 20;
        plan.sync_samples = 5;
        plan.read_file_bytes = 8 << 20;
        plan.read_time = Duration::from_millis(100);
        let mut lines = Vec::new();
        let o = run(dir.path(), &out, &plan, &mut |l| lines.push(l.to_string())).expect("iotune");
        let loaded = IoProperties::load(&out).expect("file written");
        assert_eq!(loaded, o.props);
        assert!(
            loaded.sizes().clamped.is_empty(),
            "derived sizes are within the clamps"
        );
        assert_eq!(lines.len(), 1 + 1 + 2 + 1, "{lines:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
        assert_eq!(left.len(), 1, "only the io-properties file remains");
        assert!(o.table.contains("wrote "), "{}", o.table);
    }
}
