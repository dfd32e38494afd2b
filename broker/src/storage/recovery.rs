//! Opening a partition directory after a clean or unclean shutdown (blocking std I/O; the
//! partition runs it on glommio's blocking pool).
//!
//! - Closed segments with valid index files load without reading the `.log`.
//! - The last segment (and any segment whose index is missing, stale or damaged) is scanned
//!   batch by batch, checking every CRC-32C. The scan stops at the first torn or corrupt batch
//!   or at the zero-filled preallocated tail; the file is truncated there, so nothing past it is
//!   ever served. A damaged closed segment also drops every later segment (their offsets would
//!   no longer follow on), as Kafka does.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;

use tracing::{info, warn};

use super::index::{OffsetIndex, TimeIndex};
use super::scan::{scan_batches, Stop};
use super::segment::{
    index_file_name, log_file_name, parse_log_file_name, time_index_file_name, SegmentState,
};
use super::types::{LogConfig, Offset};

/// Bytes read per step while scanning a segment.
const SCAN_CHUNK_BYTES: usize = 8 << 20;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub scanned: usize,
    pub truncated_bytes: u64,
    pub dropped_segments: usize,
}

#[derive(Debug)]
pub struct Recovered {
    pub segments: Vec<SegmentState>,
    /// The log start offset DeleteRecords set (`log-start-offset`), or 0.
    pub log_start: Offset,
    pub report: RecoveryReport,
}

/// Recovers the partition in `dir` (created if missing).
pub fn recover(dir: &Path, config: &LogConfig) -> io::Result<Recovered> {
    fs::create_dir_all(dir)?;
    super::cleaner::recover_swaps(dir)?;
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tmp") {
            match fs::remove_file(dir.join(&*name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        } else if let Some(base) = parse_log_file_name(&name) {
            bases.push(base);
        }
    }
    bases.sort();
    let mut report = RecoveryReport::default();
    let mut segments: Vec<SegmentState> = Vec::new();
    // Whether each recovered segment's state came from a scan (its index was missing).
    let mut scanned: Vec<bool> = Vec::new();
    let count = bases.len();
    for (i, &base) in bases.iter().enumerate() {
        let last = i + 1 == count;
        let path = dir.join(log_file_name(base));
        let len = fs::metadata(&path)?.len();
        let loaded = if last {
            None
        } else {
            load_indexes(dir, base, len)
        };
        let loaded_from_scan = loaded.is_none();
        let (seg, damaged) = match loaded {
            Some(seg) => (seg, false),
            None => {
                report.scanned += 1;
                let (seg, stop) = scan_segment(&path, base, config.index_interval_bytes)?;
                if seg.size_bytes < len {
                    let cut = len - seg.size_bytes;
                    if !matches!(stop, Some(Stop::Zeros) | None) {
                        warn!(segment = %path.display(), ?stop, cut, "truncating damaged tail");
                        report.truncated_bytes += cut;
                    }
                    truncate_file(&path, seg.size_bytes)?;
                }
                if !last {
                    write_indexes(dir, &seg)?;
                }
                let damaged = matches!(stop, Some(Stop::Torn { .. } | Stop::Corrupt { .. }));
                (seg, damaged)
            }
        };
        if let Some(prev) = segments.last() {
            if seg.base < prev.next {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("segment {} overlaps segment {}", seg.base, prev.base),
                ));
            }
        }
        segments.push(seg);
        scanned.push(loaded_from_scan);
        if damaged && !last {
            for &later in &bases[i + 1..] {
                warn!(base = %later, "dropping segment after a damaged one");
                remove_segment_files(dir, later)?;
                report.dropped_segments += 1;
            }
            break;
        }
    }
    // A crash during a roll can leave the new, empty segment named after offsets the previous
    // segment never got to disk (they were not yet durable). Drop it, so the previous segment is
    // active again and offsets continue without a gap. Only when the previous segment was
    // scanned: one loaded from its index knows its true end, and a compacted segment may
    // legitimately end (its last batches cleaned away) below the next segment's base.
    if segments.len() >= 2 && scanned[segments.len() - 2] {
        let last = &segments[segments.len() - 1];
        let prev = &segments[segments.len() - 2];
        if last.is_empty() && prev.next < last.base {
            warn!(base = %last.base, prev_next = %prev.next, "dropping empty segment left by an interrupted roll");
            remove_segment_files(dir, last.base)?;
            sync_dir(dir)?;
            segments.pop();
            report.dropped_segments += 1;
        }
    }
    report.segments = segments.len();
    if report.scanned > 0 || report.truncated_bytes > 0 {
        info!(dir = %dir.display(), ?report, "recovered partition");
    }
    Ok(Recovered {
        segments,
        log_start: read_log_start(dir),
        report,
    })
}

/// The file holding the log start offset DeleteRecords moved (Kafka keeps it in
/// `log-start-offset-checkpoint`).
pub const LOG_START_FILE: &str = "log-start-offset";

fn read_log_start(dir: &Path) -> Offset {
    fs::read_to_string(dir.join(LOG_START_FILE))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map_or(Offset(0), Offset)
}

/// Persists the log start offset (tmp, fsync, rename, directory fsync).
pub fn write_log_start(dir: &Path, start: Offset) -> io::Result<()> {
    let tmp = dir.join(format!("{LOG_START_FILE}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(format!("{}\n", start.0).as_bytes())?;
    f.sync_data()?;
    fs::rename(&tmp, dir.join(LOG_START_FILE))?;
    sync_dir(dir)
}

/// Scans a `.log` file from the start; returns its state and why the scan stopped.
pub fn scan_segment(
    path: &Path,
    base: Offset,
    index_interval_bytes: u32,
) -> io::Result<(SegmentState, Option<Stop>)> {
    let mut file = File::open(path)?;
    let mut seg = SegmentState::new(base);
    let mut carry: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; SCAN_CHUNK_BYTES];
    let mut eof = false;
    loop {
        if !eof {
            let n = read_full(&mut file, &mut chunk)?;
            eof = n < chunk.len();
            carry.extend_from_slice(&chunk[..n]);
        }
        let scan = scan_batches(&carry, seg.next);
        let at = seg.size_bytes;
        for (meta, pos) in &scan.batches {
            seg.record_batch(meta, at + pos, index_interval_bytes);
        }
        carry.drain(..scan.valid_bytes as usize);
        match scan.stop {
            None if eof => return Ok((seg, None)),
            Some(Stop::Torn { .. }) if !eof => continue,
            None => continue,
            Some(Stop::Torn { position }) => {
                return Ok((
                    seg,
                    Some(Stop::Torn {
                        position: at + position,
                    }),
                ))
            }
            Some(Stop::Corrupt { position, reason }) => {
                return Ok((
                    seg,
                    Some(Stop::Corrupt {
                        position: at + position,
                        reason,
                    }),
                ))
            }
            Some(Stop::Zeros) => {
                // Zeros to the end of this chunk; only a clean end if the rest of the file is
                // zero too (out-of-order writes can leave a hole before later data).
                let rest_zero = eof || rest_is_zero(&mut file, &mut chunk)?;
                let stop = if rest_zero {
                    Stop::Zeros
                } else {
                    Stop::Torn {
                        position: seg.size_bytes,
                    }
                };
                return Ok((seg, Some(stop)));
            }
        }
    }
}

fn rest_is_zero(file: &mut File, chunk: &mut [u8]) -> io::Result<bool> {
    loop {
        let n = read_full(file, chunk)?;
        if chunk[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        if n < chunk.len() {
            return Ok(true);
        }
    }
}

fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = file.read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

fn load_indexes(dir: &Path, base: Offset, log_len: u64) -> Option<SegmentState> {
    let idx = fs::read(dir.join(index_file_name(base))).ok()?;
    let tidx = fs::read(dir.join(time_index_file_name(base))).ok()?;
    let (offset_index, next) = OffsetIndex::decode(&idx, log_len)?;
    let (time_index, max_ts) = TimeIndex::decode(&tidx, log_len)?;
    if next < base {
        return None;
    }
    Some(SegmentState::from_indexes(
        base,
        next,
        log_len,
        offset_index,
        time_index,
        max_ts,
    ))
}

/// Writes a closed segment's `.index` and `.timeindex` (write to `.tmp`, fsync, rename).
pub fn write_indexes(dir: &Path, seg: &SegmentState) -> io::Result<()> {
    write_index_files(dir, seg, "")?;
    sync_dir(dir)
}

/// [`write_indexes`] with `suffix` after the file names (the cleaner's `.cleaned` files),
/// without the directory sync (the caller syncs once for many files).
pub fn write_index_files(dir: &Path, seg: &SegmentState, suffix: &str) -> io::Result<()> {
    let files = [
        (
            format!("{}{suffix}", index_file_name(seg.base)),
            seg.offset_index.encode(seg.size_bytes, seg.next),
        ),
        (
            format!("{}{suffix}", time_index_file_name(seg.base)),
            seg.time_index.encode(seg.size_bytes, seg.max_timestamp_ms),
        ),
    ];
    for (name, bytes) in files {
        let tmp = dir.join(format!("{name}.tmp"));
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_data()?;
        fs::rename(&tmp, dir.join(&name))?;
    }
    Ok(())
}

/// Deletes a segment's files (missing ones are fine).
pub fn remove_segment_files(dir: &Path, base: Offset) -> io::Result<()> {
    for name in [
        log_file_name(base),
        index_file_name(base),
        time_index_file_name(base),
        super::segment::txn_index_file_name(base),
    ] {
        match fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// fsyncs a directory so created, renamed or removed entries are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn truncate_file(path: &Path, len: u64) -> io::Result<()> {
    let f = fs::OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}
