//! One compaction pass over a partition's closed segments, as blocking I/O (the partition runs
//! it on a low-priority thread of its own, see `PartitionLog::clean`), and the crash-safe swap
//! of the cleaned segments into place.
//!
//! A pass (decisions in [`super::compaction`]):
//! 1. reads the dirty segments and fills the key map (stopping early at a segment boundary if
//!    the map reaches `limits::CLEANER_KEYS_MAX`);
//! 2. for each group of neighbouring segments, writes the surviving batches with O_DIRECT to
//!    `{base}.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`), fdatasyncs them;
//! 3. swaps the groups in: writes the manifest `cleaner.swap` (each group's bases) and syncs
//!    the directory — from this instant the new set is the truth — then deletes the replaced
//!    segments, renames the `.cleaned` files over `{base}.*`, syncs, and deletes the manifest.
//!
//! Recovery ([`recover_swaps`], run before anything else opens the directory) finishes any
//! swap whose manifest exists and deletes `.cleaned` files without one. So a crash at any
//! point leaves the old set or the new set, never a mix: the test suite stops a pass after
//! each step ([`CleanStep`]) and kills the broker mid-pass.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use strand_wire::batch::HEADER_BYTES;
use strand_wire::records::{retain, Retained};
use strand_wire::BatchHeader;

use super::compaction::{CleanPlan, Decider, KeyMap};
use super::dma::{align_up, open_for_direct_reads, read_direct, AlignedBuf};
use super::recovery::{remove_segment_files, sync_dir, write_index_files};
use super::scan::{scan_batches, Stop};
use super::segment::{index_file_name, log_file_name, time_index_file_name, SegmentState};
use super::txn::BatchFate;
use super::types::{BatchMeta, LogConfig, Offset};
use crate::limits;

pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Where a test may stop a pass, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleanStep {
    /// After the `.cleaned` files are written and synced.
    CleanedWritten,
    /// After the manifest is durable.
    ManifestWritten,
    /// After the replaced segments are deleted, before the renames.
    OldDeleted,
    /// After the renames, before the manifest is deleted.
    Renamed,
}

/// Everything a pass needs, owned (it runs on another thread).
pub struct CleanJob {
    pub dir: std::path::PathBuf,
    pub config: LogConfig,
    pub plan: CleanPlan,
    /// The closed segments below `plan.upper`, oldest first (a snapshot).
    pub segments: Vec<SegmentState>,
    /// The active segment's base when the pass was planned: a group ending there keeps an
    /// empty batch at its end (see [`run`]).
    pub active_base: Offset,
    pub now_ms: i64,
    /// `log.cleaner.io.max.bytes.per.second` (read + written); `None` = unthrottled.
    pub io_bytes_per_sec: Option<u64>,
    /// Test hook: stop after this step as if the process died there.
    pub stop_after: Option<CleanStep>,
    /// The partition's transactions when the pass was planned (which batches are committed,
    /// aborted or still open).
    pub txns: super::txn::PartitionTxns,
}

/// One group swapped in: the bases it replaced, the new segment, a reader for it.
pub struct Swapped {
    pub replaced: Vec<Offset>,
    pub segment: SegmentState,
    pub reader: File,
}

/// What a pass did.
pub struct CleanOutcome {
    pub swapped: Vec<Swapped>,
    /// Where the next pass's dirty part starts.
    pub upper: Offset,
    pub keys: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    /// When the earliest tombstone kept by this pass may go (`None`: none kept).
    pub tombstone_due_ms: Option<i64>,
    /// Batches whose records could not be read: kept as they are, logged.
    pub unreadable_batches: u64,
}

/// Runs a whole pass. Blocking.
pub fn run(job: CleanJob) -> io::Result<CleanOutcome> {
    let mut throttle = Throttle::new(job.io_bytes_per_sec);
    let seg = |base: Offset| {
        job.segments
            .iter()
            .find(|s| s.base == base)
            .ok_or_else(|| io::Error::other(format!("segment {base} is not in the snapshot")))
    };

    // 1. The key map over the dirty segments.
    let mut map = KeyMap::default();
    let mut upper = job.plan.upper;
    let mut unreadable = 0u64;
    for &base in &job.plan.dirty {
        if map.len() >= limits::CLEANER_KEYS_MAX {
            upper = base;
            break;
        }
        let s = seg(base)?;
        for_each_batch(&job.dir, s, &mut throttle, |batch, h| {
            if job.txns.fate(h) == BatchFate::Plain {
                let Some(plain) = readable(&job.dir, batch, h) else {
                    unreadable += 1;
                    return Ok(());
                };
                for r in strand_wire::records::records(&plain).map_err(io::Error::other)? {
                    if let Some(key) = r.key {
                        map.insert(key, Offset(h.base_offset + r.offset_delta));
                    }
                }
            }
            Ok(())
        })?;
    }

    // 2 + 3. Rewrite and swap each group below `upper`.
    let decider = Decider::new(&map, job.now_ms, job.config.delete_retention_ms);
    let mut out = CleanOutcome {
        swapped: Vec::new(),
        upper,
        keys: map.len(),
        bytes_before: 0,
        bytes_after: 0,
        records_removed: 0,
        tombstone_due_ms: None,
        unreadable_batches: unreadable,
    };
    let mut prepared: Vec<(Vec<Offset>, SegmentState)> = Vec::new();
    for group in &job.plan.groups {
        let group: Vec<Offset> = group.iter().copied().filter(|&b| b < upper).collect();
        let Some(&base) = group.first() else { break };
        let last = seg(*group.last().expect("non-empty"))?;
        let cleaned_path = job
            .dir
            .join(format!("{}{CLEANED_SUFFIX}", log_file_name(base)));
        let mut writer = DirectWriter::create(&cleaned_path)?;
        let mut cleaned = SegmentState::new(base);
        let mut changed = group.len() > 1;
        // A group that ends where the active segment starts keeps its last batch's header
        // (records removed) if compaction empties it: consumers at the tail then move past the
        // removed offsets to the log end (a fetch there returns that empty batch), and the
        // segment visibly ends at its last offset. Elsewhere such gaps are skipped by reads.
        let tail_marker = last.next == job.active_base;
        for &b in &group {
            let s = seg(b)?;
            out.bytes_before += s.size_bytes;
            let mut written = 0u64;
            for_each_batch(&job.dir, s, &mut throttle, |batch, h| {
                let group_end = h.last_offset() + 1 == last.next.0;
                if h.records_count == 0 && !h.is_control() && !(tail_marker && group_end) {
                    // An empty batch left by an earlier pass, no longer at the tail.
                    changed = true;
                    return Ok(());
                }
                let fate = job.txns.fate(h);
                let kept: Option<std::borrow::Cow<'_, [u8]>> = if fate == BatchFate::Whole {
                    Some(batch.into())
                } else if fate == BatchFate::Aborted {
                    out.records_removed += h.records_count.max(0) as u64;
                    changed = true;
                    // Like an emptied batch: its header stays only at the tail before the
                    // active segment (the abort marker after it keeps the offsets moving).
                    (tail_marker && group_end).then(|| strand_wire::records::emptied(batch).into())
                } else if let Some(plain) = readable_quiet(batch, h) {
                    let before = h.records_count.max(0) as u64;
                    // Compressed batches are filtered decompressed and written back with their
                    // codec.
                    match retain(&plain, |r| decider.keep(h, r)).map_err(io::Error::other)? {
                        Retained::All => {
                            note_tombstones(&plain, h, &job.config, &mut out.tombstone_due_ms);
                            Some(batch.into())
                        }
                        Retained::None if tail_marker && group_end => {
                            out.records_removed += before;
                            changed = true;
                            Some(strand_wire::records::emptied(batch).into())
                        }
                        Retained::None => {
                            out.records_removed += before;
                            changed = true;
                            None
                        }
                        Retained::Some(v) => {
                            let after = BatchHeader::parse(&v).map_or(0, |h| h.records_count);
                            out.records_removed += before - after.max(0) as u64;
                            changed = true;
                            note_tombstones(&v, h, &job.config, &mut out.tombstone_due_ms);
                            let codec = h.compression().map_err(io::Error::other)?;
                            Some(
                                strand_wire::compression::compress_batch(&v, codec)
                                    .map_err(io::Error::other)?
                                    .into(),
                            )
                        }
                    }
                } else {
                    // A batch whose records cannot be read (logged in step 1) stays as it is:
                    // nothing is removed that the cleaner cannot see.
                    Some(batch.into())
                };
                if let Some(bytes) = kept {
                    let header = BatchHeader::parse(&bytes).map_err(io::Error::other)?;
                    let meta = BatchMeta::from_header(&header);
                    cleaned.record_batch(
                        &meta,
                        cleaned.size_bytes,
                        job.config.index_interval_bytes,
                    );
                    writer.write(&bytes)?;
                    written += bytes.len() as u64;
                }
                Ok(())
            })?;
            throttle.account(written);
        }
        if !changed {
            drop(writer);
            fs::remove_file(&cleaned_path)?;
            out.bytes_after += cleaned.size_bytes;
            continue;
        }
        writer.finish(cleaned.size_bytes)?;
        // The cleaned segment covers exactly the offsets of the group (gaps are fine).
        cleaned.next = last.next;
        write_index_files(&job.dir, &cleaned, CLEANED_SUFFIX)?;
        out.bytes_after += cleaned.size_bytes;
        prepared.push((group, cleaned));
    }
    if prepared.is_empty() {
        return Ok(out);
    }
    // Every cleaned file is synced; one directory sync makes their names durable, one manifest
    // commits all groups at once, and the swap needs two more directory syncs: few journal
    // commits per pass however many groups it rewrote.
    sync_dir(&job.dir)?;
    stop_if(&job, CleanStep::CleanedWritten)?;
    let groups: Vec<Vec<Offset>> = prepared.iter().map(|(g, _)| g.clone()).collect();
    write_manifest(&job.dir, &groups)?;
    stop_if(&job, CleanStep::ManifestWritten)?;
    complete_swap(&job.dir, &groups, job.stop_after)?;
    for (group, cleaned) in prepared {
        let reader = open_for_direct_reads(&job.dir.join(log_file_name(cleaned.base)))?;
        out.swapped.push(Swapped {
            replaced: group,
            segment: cleaned,
            reader,
        });
    }
    Ok(out)
}

fn stop_if(job: &CleanJob, step: CleanStep) -> io::Result<()> {
    if job.stop_after == Some(step) {
        return Err(io::Error::other(format!("injected crash after {step:?}")));
    }
    Ok(())
}

/// The batch with its records readable in place (itself, or decompressed within
/// `limits::PRODUCE_DECOMPRESSED_BYTES_MAX`), or `None` — with a warning — for a batch whose
/// records do not decode: a poison batch written before produce validated records, or by
/// hand. The pass goes on without it instead of failing every 15 s forever.
fn readable<'a>(
    dir: &Path,
    batch: &'a [u8],
    h: &BatchHeader,
) -> Option<std::borrow::Cow<'a, [u8]>> {
    match plain_batch(batch, h) {
        Ok(plain) => Some(plain),
        Err(e) => {
            tracing::warn!(
                dir = %dir.display(),
                offset = h.base_offset,
                error = %e,
                "cleaner: batch records unreadable; kept as is, its keys not compacted"
            );
            None
        }
    }
}

/// [`readable`] without the warning (step 2 meets the batches step 1 already reported).
fn readable_quiet<'a>(batch: &'a [u8], h: &BatchHeader) -> Option<std::borrow::Cow<'a, [u8]>> {
    plain_batch(batch, h).ok()
}

/// The batch with its records readable in place: itself, or decompressed (bounded).
fn plain_batch<'a>(batch: &'a [u8], h: &BatchHeader) -> io::Result<std::borrow::Cow<'a, [u8]>> {
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let plain: std::borrow::Cow<'a, [u8]> = if h.attributes & 0x7 == 0 {
        batch.into()
    } else {
        let codec = h.compression().map_err(|e| invalid(e.to_string()))?;
        let end = h.total_len().min(batch.len());
        let body = strand_wire::compression::decompress_bounded(
            codec,
            &batch[HEADER_BYTES.min(end)..end],
            limits::PRODUCE_DECOMPRESSED_BYTES_MAX,
        )
        .map_err(|e| invalid(e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
        out.extend_from_slice(&batch[..HEADER_BYTES]);
        out.extend_from_slice(&body);
        strand_wire::compression::reseal_plain(&mut out);
        out.into()
    };
    strand_wire::records::records(&plain).map_err(|e| invalid(e.to_string()))?;
    Ok(plain)
}

/// Tracks when the earliest kept tombstone's `delete.retention.ms` runs out. `plain`: the kept
/// batch, uncompressed (the pass has it decompressed already).
fn note_tombstones(plain: &[u8], h: &BatchHeader, config: &LogConfig, due: &mut Option<i64>) {
    let Ok(recs) = strand_wire::records::records(plain) else {
        return;
    };
    if recs.iter().any(|r| r.key.is_some() && r.is_tombstone()) {
        let t = h
            .max_timestamp_ms
            .saturating_add(config.delete_retention_ms.max(0))
            .saturating_add(1);
        *due = Some(due.map_or(t, |d| d.min(t)));
    }
}

/// Calls `f` with every batch of a closed segment, CRC-checked, in order.
fn for_each_batch(
    dir: &Path,
    seg: &SegmentState,
    throttle: &mut Throttle,
    mut f: impl FnMut(&[u8], &BatchHeader) -> io::Result<()>,
) -> io::Result<()> {
    let file = open_for_direct_reads(&dir.join(log_file_name(seg.base)))?;
    let mut pos = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    while pos < seg.size_bytes {
        let len = (limits::READ_BYTES_MAX).min(seg.size_bytes - pos) as usize;
        let chunk = read_direct(&file, pos, len)?;
        if chunk.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "segment {} ends before its size {}",
                    seg.base, seg.size_bytes
                ),
            ));
        }
        pos += chunk.len() as u64;
        throttle.account(chunk.len() as u64);
        carry.extend_from_slice(&chunk);
        let scan = scan_batches(&carry, Offset(i64::MIN));
        for (meta, at) in &scan.batches {
            let at = *at as usize;
            let batch = &carry[at..at + meta.bytes as usize];
            let h = BatchHeader::parse(batch).map_err(io::Error::other)?;
            f(batch, &h)?;
        }
        match scan.stop {
            None | Some(Stop::Torn { .. }) => {}
            Some(stop) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("segment {}: {stop:?}; not cleaning it", seg.base),
                ))
            }
        }
        carry.drain(..scan.valid_bytes as usize);
    }
    if !carry.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("segment {} ends inside a batch", seg.base),
        ));
    }
    Ok(())
}

/// Writes a file sequentially with O_DIRECT through one aligned buffer.
struct DirectWriter {
    file: File,
    buf: AlignedBuf,
    filled: usize,
    written: u64,
}

impl DirectWriter {
    fn create(path: &Path) -> io::Result<DirectWriter> {
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        Ok(DirectWriter {
            file,
            buf: AlignedBuf::zeroed(limits::WRITE_CHUNK_BYTES),
            filled: 0,
            written: 0,
        })
    }

    fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let cap = self.buf.as_mut_slice().len();
            let n = data.len().min(cap - self.filled);
            self.buf.as_mut_slice()[self.filled..self.filled + n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
            if self.filled == cap {
                self.file
                    .write_all_at(self.buf.as_mut_slice(), self.written)?;
                self.written += cap as u64;
                self.filled = 0;
            }
        }
        Ok(())
    }

    /// Writes the last partial block (zero-padded), trims the file to `len`, fdatasyncs.
    fn finish(mut self, len: u64) -> io::Result<()> {
        if self.filled > 0 {
            let padded = align_up(self.filled as u64) as usize;
            self.buf.as_mut_slice()[self.filled..padded].fill(0);
            self.file
                .write_all_at(&self.buf.as_mut_slice()[..padded], self.written)?;
        }
        self.file.set_len(len)?;
        self.file.sync_all()
    }
}

/// The swap manifest: one line per group, its bases (the first names the cleaned segment).
const MANIFEST_FILE: &str = "cleaner.swap";

/// Makes a pass's swap durable: from now on recovery completes it.
fn write_manifest(dir: &Path, groups: &[Vec<Offset>]) -> io::Result<()> {
    let text: String = groups
        .iter()
        .map(|g| {
            let bases: Vec<String> = g.iter().map(|b| b.0.to_string()).collect();
            format!("{}\n", bases.join(" "))
        })
        .collect();
    let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
    fs::write(&tmp, text)?;
    File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, dir.join(MANIFEST_FILE))?;
    sync_dir(dir)
}

/// Finishes a swap (idempotent: recovery may run it again after a crash).
fn complete_swap(
    dir: &Path,
    groups: &[Vec<Offset>],
    stop_after: Option<CleanStep>,
) -> io::Result<()> {
    for group in groups {
        for &b in group.iter().skip(1) {
            remove_segment_files(dir, b)?;
        }
    }
    sync_dir(dir)?;
    if stop_after == Some(CleanStep::OldDeleted) {
        return Err(io::Error::other("injected crash after OldDeleted"));
    }
    for group in groups {
        let Some(&base) = group.first() else { continue };
        // A merged segment's `.txnindex` covered only its first part: removed, so the next
        // open scans the segment for its transactions (the in-memory state is unchanged:
        // transactional batches are kept whole).
        if group.len() > 1 {
            match fs::remove_file(dir.join(super::segment::txn_index_file_name(base))) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        // The log last: while `{base}.log` is still the old file, the manifest is still there
        // to finish the job (and the old file's new index would not match its size).
        for name in [
            index_file_name(base),
            time_index_file_name(base),
            log_file_name(base),
        ] {
            let cleaned = dir.join(format!("{name}{CLEANED_SUFFIX}"));
            match fs::rename(&cleaned, dir.join(&name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    sync_dir(dir)?;
    if stop_after == Some(CleanStep::Renamed) {
        return Err(io::Error::other("injected crash after Renamed"));
    }
    fs::remove_file(dir.join(MANIFEST_FILE))?;
    sync_dir(dir)
}

/// Recovery's first step: finish a swap whose manifest exists, delete `.cleaned` leftovers.
/// Returns how many groups it swapped in.
pub fn recover_swaps(dir: &Path) -> io::Result<usize> {
    let manifest = dir.join(MANIFEST_FILE);
    let mut finished = 0;
    match fs::read_to_string(&manifest) {
        Ok(text) => {
            let groups: Vec<Vec<Offset>> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    l.split_whitespace()
                        .map(|b| b.parse::<i64>().map(Offset))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("{MANIFEST_FILE}: {e}"))
                })?;
            tracing::warn!(dir = %dir.display(), groups = groups.len(), "finishing a compaction swap interrupted by a crash");
            complete_swap(dir, &groups, None)?;
            finished = groups.len();
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(CLEANED_SUFFIX) {
            match fs::remove_file(dir.join(&name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    Ok(finished)
}

const CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// The cleaner's progress in a partition: where the dirty part starts, and when a kept
/// tombstone falls due. Missing or unreadable = never cleaned.
pub fn read_checkpoint(dir: &Path) -> (Offset, Option<i64>) {
    let Ok(text) = fs::read_to_string(dir.join(CHECKPOINT_FILE)) else {
        return (Offset(0), None);
    };
    let mut it = text.split_whitespace().map(str::parse::<i64>);
    match (it.next(), it.next()) {
        (Some(Ok(first_dirty)), Some(Ok(due))) => {
            (Offset(first_dirty), (due != i64::MIN).then_some(due))
        }
        _ => (Offset(0), None),
    }
}

/// Saves the checkpoint (tmp + fsync + rename). Losing it only repeats work.
pub fn write_checkpoint(
    dir: &Path,
    first_dirty: Offset,
    tombstone_due_ms: Option<i64>,
) -> io::Result<()> {
    let tmp = dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    let text = format!(
        "{} {}\n",
        first_dirty.0,
        tombstone_due_ms.unwrap_or(i64::MIN)
    );
    fs::write(&tmp, text)?;
    File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, dir.join(CHECKPOINT_FILE))?;
    sync_dir(dir)
}

/// `log.cleaner.io.max.bytes.per.second`: sleeps the pass to stay under a byte rate.
struct Throttle {
    bytes_per_sec: Option<u64>,
    start: Instant,
    bytes: u64,
}

impl Throttle {
    fn new(bytes_per_sec: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_sec,
            start: Instant::now(),
            bytes: 0,
        }
    }

    fn account(&mut self, bytes: u64) {
        let Some(rate) = self.bytes_per_sec.filter(|&r| r > 0) else {
            return;
        };
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        if let Some(wait) = due.checked_sub(self.start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
