//! The metadata quorum's durable store: raft-rs's `Storage` over three files in one
//! directory. The one module of this crate that touches the disk (std::fs, blocking: the
//! driver runs the quorum on a helper thread, never on a shard's executor).
//!
//! - `quorum.log`: frames `[u32 len][u32 crc32c(payload)][payload: raft Entry, protobuf]`,
//!   appended and fdatasynced before `append` returns. Entries that conflict with new ones
//!   (a new leader's log) are cut off by truncating the file at their frame.
//! - `quorum.state`: term, vote, commit and the voter set, CRC-checked, replaced atomically
//!   (write a temporary file, fdatasync, rename, fsync the directory) whenever the term or
//!   the vote changes — before the vote is sent. The commit index alone is not synced: a
//!   restarted voter learns it again from the leader.
//! - `quorum.snapshot`: the last snapshot (metadata + the image's records), CRC-checked,
//!   replaced atomically; the log is then rewritten without the entries it covers.
//!
//! Recovery reads the log up to the first frame that is short, over-long or fails its CRC
//! (a torn tail from a crash mid-append: never acknowledged, because the append had not
//! returned) and truncates it there. All entries are also kept in memory: the metadata log
//! is small and compacted by snapshots.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as PbMessage;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

use crate::quorum::QuorumStore;

const LOG_FILE: &str = "quorum.log";
const STATE_FILE: &str = "quorum.state";
const SNAPSHOT_FILE: &str = "quorum.snapshot";
const STATE_MAGIC: &[u8; 4] = b"SQS1";
/// A frame longer than this is a torn or corrupt length, not an entry (metadata records are
/// small; raft batches at most 1 MiB per message).
const FRAME_BYTES_MAX: u32 = 64 << 20;

pub struct FileStore {
    dir: PathBuf,
    inner: RefCell<Inner>,
}

struct Inner {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    /// The entries after the snapshot, in index order, and each one's frame offset.
    entries: Vec<Entry>,
    offsets: Vec<u64>,
    log: File,
    log_bytes: u64,
}

fn other(e: impl std::fmt::Display) -> raft::Error {
    raft::Error::Store(StorageError::Other(Box::new(io::Error::other(
        e.to_string(),
    ))))
}

impl FileStore {
    /// Opens (or creates, with `voters` as the founding voter set) the store in `dir`.
    /// Returns the store and how many bytes of a torn log tail were cut off.
    pub fn open(dir: &Path, voters: &[u64]) -> io::Result<(FileStore, u64)> {
        fs::create_dir_all(dir)?;
        let (hard_state, conf_state) = match read_framed(&dir.join(STATE_FILE))? {
            Some(bytes) => decode_state(&bytes)?,
            None => {
                let cs = ConfState::from((voters.to_vec(), vec![]));
                write_atomic(dir, STATE_FILE, &encode_state(&HardState::default(), &cs))?;
                (HardState::default(), cs)
            }
        };
        let snapshot = match read_framed(&dir.join(SNAPSHOT_FILE))? {
            Some(bytes) => Snapshot::parse_from_bytes(&bytes).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("quorum snapshot: {e}"))
            })?,
            None => Snapshot::default(),
        };
        let path = dir.join(LOG_FILE);
        let mut log = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        log.read_to_end(&mut bytes)?;
        let (snap_index, snap_term) = (snapshot.get_metadata().index, snapshot.get_metadata().term);
        let (mut entries, mut offsets, mut good) = (Vec::new(), Vec::new(), 0usize);
        let mut term_at_snapshot = None;
        while let Some((entry, next)) = frame_at(&bytes, good) {
            let expected = entries.last().map_or(0, |e: &Entry| e.index + 1);
            if entry.index == 0 || (expected != 0 && entry.index != expected) {
                break; // a zeroed or non-contiguous frame: treat as a torn tail
            }
            if entry.index == snap_index {
                term_at_snapshot = Some(entry.term);
            }
            if entry.index > snap_index {
                entries.push(entry);
                offsets.push(good as u64);
            }
            good = next;
        }
        let cut = (bytes.len() - good) as u64;
        if cut > 0 {
            log.set_len(good as u64)?;
            log.sync_data()?;
        }
        // A crash inside apply_snapshot can leave entries of a history the snapshot replaced:
        // keep the entries after the snapshot only if they continue it.
        let continues = entries
            .first()
            .is_none_or(|e: &Entry| e.index == snap_index + 1)
            && term_at_snapshot.is_none_or(|t| t == snap_term);
        let diverged = snap_index > 0 && !continues;
        // The commit index is not synced on every change; it is at least the snapshot's.
        let mut hard_state = hard_state;
        hard_state.commit = hard_state.commit.max(snap_index);
        let store = FileStore {
            dir: dir.to_path_buf(),
            inner: RefCell::new(Inner {
                hard_state,
                conf_state,
                snapshot,
                entries,
                offsets,
                log,
                log_bytes: good as u64,
            }),
        };
        if diverged {
            let mut inner = store.inner.borrow_mut();
            store.rewrite_log(&mut inner, Vec::new())?;
        }
        Ok((store, cut))
    }

    /// Saves a snapshot of the state machine at `index` (applied, committed) and drops the
    /// log entries it covers.
    pub fn save_snapshot(&self, index: u64, data: Vec<u8>) -> raft::Result<()> {
        let term = self.term(index)?;
        let mut inner = self.inner.borrow_mut();
        let mut snap = Snapshot {
            data: data.into(),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(inner.conf_state.clone());
        let bytes = snap.write_to_bytes().map_err(other)?;
        write_atomic(&self.dir, SNAPSHOT_FILE, &bytes).map_err(other)?;
        inner.snapshot = snap;
        inner.hard_state.commit = inner.hard_state.commit.max(index);
        let state = encode_state(&inner.hard_state, &inner.conf_state);
        write_atomic(&self.dir, STATE_FILE, &state).map_err(other)?;
        let keep_from = inner.entries.iter().position(|e| e.index > index);
        let kept: Vec<Entry> = match keep_from {
            Some(i) => inner.entries[i..].to_vec(),
            None => Vec::new(),
        };
        self.rewrite_log(&mut inner, kept).map_err(other)
    }

    /// Replaces the log file with exactly `entries` (atomically).
    fn rewrite_log(&self, inner: &mut Inner, entries: Vec<Entry>) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(entries.len());
        for e in &entries {
            offsets.push(buf.len() as u64);
            push_frame(&mut buf, e)?;
        }
        write_atomic(&self.dir, LOG_FILE, &buf)?;
        inner.log = OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.dir.join(LOG_FILE))?;
        inner.log_bytes = buf.len() as u64;
        inner.entries = entries;
        inner.offsets = offsets;
        Ok(())
    }
}

impl Inner {
    fn first_index(&self) -> u64 {
        self.entries
            .first()
            .map_or(self.snapshot.get_metadata().index + 1, |e| e.index)
    }

    fn last_index(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot.get_metadata().index, |e| e.index)
    }
}

impl Storage for FileStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let inner = self.inner.borrow();
        Ok(RaftState::new(
            inner.hard_state.clone(),
            inner.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let inner = self.inner.borrow();
        if low < inner.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > inner.last_index() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let first = inner.first_index();
        let mut v = inner.entries[(low - first) as usize..(high - first) as usize].to_vec();
        raft::util::limit_size(&mut v, max_size.into());
        Ok(v)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let inner = self.inner.borrow();
        let meta = inner.snapshot.get_metadata();
        if idx == meta.index {
            return Ok(meta.term);
        }
        if idx < inner.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > inner.last_index() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(inner.entries[(idx - inner.first_index()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.inner.borrow().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.inner.borrow().last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let inner = self.inner.borrow();
        let snap = &inner.snapshot;
        if snap.get_metadata().index == 0 || snap.get_metadata().index < request_index {
            // The driver makes one from the image and calls save_snapshot; raft-rs retries.
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(snap.clone())
    }
}

impl QuorumStore for FileStore {
    fn stored_snapshot(&self) -> Option<Snapshot> {
        let inner = self.inner.borrow();
        (inner.snapshot.get_metadata().index > 0).then(|| inner.snapshot.clone())
    }

    fn append(&self, entries: &[Entry]) -> raft::Result<()> {
        let Some(head) = entries.first() else {
            return Ok(());
        };
        let mut inner = self.inner.borrow_mut();
        let (first, last) = (inner.first_index(), inner.last_index());
        if head.index < first || head.index > last + 1 {
            return Err(other(format!(
                "quorum append at {} outside [{first}, {}]",
                head.index,
                last + 1
            )));
        }
        if head.index <= last {
            // A new leader's entries replace ours from here on.
            let at = (head.index - first) as usize;
            let cut_to = inner.offsets[at];
            inner.log.set_len(cut_to).map_err(other)?;
            inner.log.sync_data().map_err(other)?;
            inner.log_bytes = cut_to;
            inner.entries.truncate(at);
            inner.offsets.truncate(at);
        }
        let mut buf = Vec::new();
        let mut offsets = Vec::with_capacity(entries.len());
        for e in entries {
            offsets.push(inner.log_bytes + buf.len() as u64);
            push_frame(&mut buf, e).map_err(other)?;
        }
        inner.log.write_all(&buf).map_err(other)?;
        inner.log.sync_data().map_err(other)?;
        inner.log_bytes += buf.len() as u64;
        inner.entries.extend_from_slice(entries);
        inner.offsets.extend(offsets);
        Ok(())
    }

    fn set_hard_state(&self, hs: &HardState) -> raft::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let durable = hs.term != inner.hard_state.term || hs.vote != inner.hard_state.vote;
        inner.hard_state = hs.clone();
        if durable {
            let bytes = encode_state(&inner.hard_state, &inner.conf_state);
            write_atomic(&self.dir, STATE_FILE, &bytes).map_err(other)?;
        }
        Ok(())
    }

    fn set_commit(&self, commit: u64) -> raft::Result<()> {
        self.inner.borrow_mut().hard_state.commit = commit;
        Ok(())
    }

    fn apply_snapshot(&self, snapshot: &Snapshot) -> raft::Result<()> {
        let mut inner = self.inner.borrow_mut();
        let meta = snapshot.get_metadata();
        if meta.index < inner.first_index().saturating_sub(1) {
            return Err(raft::Error::Store(StorageError::SnapshotOutOfDate));
        }
        let bytes = snapshot.write_to_bytes().map_err(other)?;
        write_atomic(&self.dir, SNAPSHOT_FILE, &bytes).map_err(other)?;
        inner.snapshot = snapshot.clone();
        inner.hard_state.term = inner.hard_state.term.max(meta.term);
        inner.hard_state.commit = meta.index;
        inner.conf_state = meta.get_conf_state().clone();
        let state = encode_state(&inner.hard_state, &inner.conf_state);
        write_atomic(&self.dir, STATE_FILE, &state).map_err(other)?;
        self.rewrite_log(&mut inner, Vec::new()).map_err(other)
    }
}

fn push_frame(buf: &mut Vec<u8>, e: &Entry) -> io::Result<()> {
    let payload = e
        .write_to_bytes()
        .map_err(|err| io::Error::other(format!("encode entry: {err}")))?;
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    buf.extend_from_slice(&payload);
    Ok(())
}

/// The entry framed at `at` and where the next frame starts, if the frame is whole and valid.
fn frame_at(bytes: &[u8], at: usize) -> Option<(Entry, usize)> {
    let head = bytes.get(at..at + 8)?;
    let len = u32::from_le_bytes(head[0..4].try_into().ok()?);
    let crc = u32::from_le_bytes(head[4..8].try_into().ok()?);
    if len > FRAME_BYTES_MAX {
        return None;
    }
    let payload = bytes.get(at + 8..at + 8 + len as usize)?;
    if crc32c::crc32c(payload) != crc {
        return None;
    }
    let entry = Entry::parse_from_bytes(payload).ok()?;
    Some((entry, at + 8 + len as usize))
}

fn encode_state(hs: &HardState, cs: &ConfState) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(STATE_MAGIC);
    for v in [hs.term, hs.vote, hs.commit] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for ids in [&cs.voters, &cs.learners] {
        b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in ids.iter() {
            b.extend_from_slice(&id.to_le_bytes());
        }
    }
    b
}

fn decode_state(b: &[u8]) -> io::Result<(HardState, ConfState)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "quorum.state is malformed");
    let mut r = b.strip_prefix(STATE_MAGIC.as_slice()).ok_or_else(bad)?;
    let u64_at = |r: &mut &[u8]| -> io::Result<u64> {
        let (head, rest) = r.split_at_checked(8).ok_or_else(bad)?;
        *r = rest;
        Ok(u64::from_le_bytes(head.try_into().map_err(|_| bad())?))
    };
    let hs = HardState {
        term: u64_at(&mut r)?,
        vote: u64_at(&mut r)?,
        commit: u64_at(&mut r)?,
        ..Default::default()
    };
    let mut lists = Vec::new();
    for _ in 0..2 {
        let (head, rest) = r.split_at_checked(4).ok_or_else(bad)?;
        r = rest;
        let n = u32::from_le_bytes(head.try_into().map_err(|_| bad())?);
        if n > 1024 {
            return Err(bad());
        }
        let mut ids = Vec::with_capacity(n as usize);
        for _ in 0..n {
            ids.push(u64_at(&mut r)?);
        }
        lists.push(ids);
    }
    let learners = lists.pop().unwrap_or_default();
    let voters = lists.pop().unwrap_or_default();
    Ok((hs, ConfState::from((voters, learners))))
}

/// Reads a whole-file frame `[u32 len][u32 crc][payload]`; `None` if the file does not exist.
fn read_framed(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} fails its length or CRC check", path.display()),
        )
    };
    let head = bytes.get(..8).ok_or_else(bad)?;
    let len = u32::from_le_bytes(head[0..4].try_into().map_err(|_| bad())?) as usize;
    let crc = u32::from_le_bytes(head[4..8].try_into().map_err(|_| bad())?);
    let payload = bytes.get(8..8 + len).ok_or_else(bad)?;
    if crc32c::crc32c(payload) != crc || bytes.len() != 8 + len {
        return Err(bad());
    }
    Ok(Some(payload.to_vec()))
}

/// Writes `payload` framed to `dir/name` atomically: temporary file, fdatasync, rename,
/// fsync of the directory. (The log file is written unframed: it is frames already.)
fn write_atomic(dir: &Path, name: &str, payload: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        if name == LOG_FILE {
            f.write_all(payload)?;
        } else {
            f.write_all(&(payload.len() as u32).to_le_bytes())?;
            f.write_all(&crc32c::crc32c(payload).to_le_bytes())?;
            f.write_all(payload)?;
        }
        f.sync_data()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quorum::{discard_logger, Quorum, QuorumConfig};

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            data: data.to_vec().into(),
            ..Default::default()
        }
    }

    fn datas(s: &FileStore) -> Vec<(u64, u64, Vec<u8>)> {
        let (lo, hi) = (s.first_index().unwrap(), s.last_index().unwrap() + 1);
        s.entries(lo, hi, None, GetEntriesContext::empty(false))
            .unwrap()
            .into_iter()
            .map(|e| (e.index, e.term, e.data.to_vec()))
            .collect()
    }

    #[test]
    fn entries_and_votes_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (s, cut) = FileStore::open(dir.path(), &[1, 2, 3]).unwrap();
        assert_eq!(cut, 0);
        assert_eq!(s.initial_state().unwrap().conf_state.voters, vec![1, 2, 3]);
        s.append(&[entry(1, 1, b"a"), entry(2, 1, b"b")]).unwrap();
        let hs = HardState {
            term: 2,
            vote: 3,
            commit: 2,
            ..Default::default()
        };
        s.set_hard_state(&hs).unwrap();
        drop(s);
        let (s, cut) = FileStore::open(dir.path(), &[9]).unwrap();
        assert_eq!(cut, 0);
        let st = s.initial_state().unwrap();
        assert_eq!((st.hard_state.term, st.hard_state.vote), (2, 3));
        assert_eq!(
            st.conf_state.voters,
            vec![1, 2, 3],
            "the founding voters, not the new list"
        );
        assert_eq!(
            datas(&s),
            vec![(1, 1, b"a".to_vec()), (2, 1, b"b".to_vec())]
        );
    }

    #[test]
    fn a_torn_tail_is_cut_off_at_the_last_whole_frame() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = FileStore::open(dir.path(), &[1]).unwrap();
        s.append(&[
            entry(1, 1, b"one"),
            entry(2, 1, b"two"),
            entry(3, 1, b"three"),
        ])
        .unwrap();
        drop(s);
        let path = dir.path().join(LOG_FILE);
        let len = fs::metadata(&path).unwrap().len();
        // A crash in the middle of the third frame...
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let (s, cut) = FileStore::open(dir.path(), &[1]).unwrap();
        assert!(cut > 0);
        assert_eq!(datas(&s).len(), 2);
        // ...or a frame whose bytes were damaged: cut there too.
        s.append(&[entry(3, 1, b"three")]).unwrap();
        drop(s);
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let (s, cut) = FileStore::open(dir.path(), &[1]).unwrap();
        assert!(cut > 0);
        assert_eq!(
            datas(&s).iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn a_new_leaders_entries_replace_the_conflicting_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = FileStore::open(dir.path(), &[1]).unwrap();
        let old: Vec<Entry> = (1..=5).map(|i| entry(i, 1, b"old")).collect();
        s.append(&old).unwrap();
        s.append(&[entry(3, 2, b"new"), entry(4, 2, b"new")])
            .unwrap();
        let want = vec![
            (1, 1, b"old".to_vec()),
            (2, 1, b"old".to_vec()),
            (3, 2, b"new".to_vec()),
            (4, 2, b"new".to_vec()),
        ];
        assert_eq!(datas(&s), want);
        assert!(
            s.append(&[entry(9, 2, b"gap")]).is_err(),
            "a gap is refused"
        );
        drop(s);
        let (s, _) = FileStore::open(dir.path(), &[1]).unwrap();
        assert_eq!(datas(&s), want);
    }

    #[test]
    fn a_snapshot_compacts_the_log_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = FileStore::open(dir.path(), &[1]).unwrap();
        let es: Vec<Entry> = (1..=6).map(|i| entry(i, 1, b"x")).collect();
        s.append(&es).unwrap();
        assert!(s.snapshot(0, 0).is_err(), "no snapshot yet");
        s.save_snapshot(4, b"image@4".to_vec()).unwrap();
        assert_eq!(s.first_index().unwrap(), 5);
        assert_eq!(s.term(4).unwrap(), 1);
        assert!(matches!(
            s.entries(2, 5, None, GetEntriesContext::empty(false)),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        drop(s);
        let (s, _) = FileStore::open(dir.path(), &[1]).unwrap();
        assert_eq!(s.first_index().unwrap(), 5);
        assert_eq!(s.last_index().unwrap(), 6);
        let snap = s.snapshot(0, 0).unwrap();
        assert_eq!(snap.get_metadata().index, 4);
        assert_eq!(&snap.data[..], b"image@4");
    }

    const CFG: QuorumConfig = QuorumConfig {
        tick_ms: 100,
        election_ticks: 10,
        heartbeat_ticks: 2,
    };

    /// A one-voter quorum over `dir` that has elected itself and committed
    /// the entries 0..10; returns it with everything it committed.
    fn lone_voter_with_ten_entries(
        dir: &Path,
        logger: &slog::Logger,
    ) -> (Quorum<FileStore>, Vec<(u64, Vec<u8>)>) {
        let (store, _) = FileStore::open(dir, &[1]).unwrap();
        let mut q = Quorum::new(1, store, CFG, logger).unwrap();
        let mut committed = Vec::new();
        for _ in 0..40 {
            q.tick();
            committed.extend(q.poll().unwrap().committed);
            if q.leadership().is_leader {
                break;
            }
        }
        assert!(q.leadership().is_leader, "a lone voter elects itself");
        for i in 0..10u8 {
            q.propose(vec![i]).unwrap();
            committed.extend(q.poll().unwrap().committed);
        }
        (q, committed)
    }

    #[test]
    fn a_single_voter_quorum_replays_its_committed_log_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CFG;
        let logger = discard_logger();
        let (q, committed) = lone_voter_with_ten_entries(dir.path(), &logger);
        assert_eq!(
            committed.iter().map(|(_, d)| d[0]).collect::<Vec<_>>(),
            (0..10).collect::<Vec<u8>>()
        );
        drop(q);
        let (store, cut) = FileStore::open(dir.path(), &[1]).unwrap();
        assert_eq!(cut, 0);
        let mut q = Quorum::new(1, store, cfg, &logger).unwrap();
        let mut replay = Vec::new();
        for _ in 0..40 {
            q.tick();
            replay.extend(q.poll().unwrap().committed);
            if q.leadership().is_leader && replay.len() >= 10 {
                break;
            }
        }
        assert_eq!(replay, committed, "the same entries at the same indexes");
    }

    #[test]
    fn a_voter_restarted_after_a_snapshot_starts_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CFG;
        let logger = discard_logger();
        let (q, committed) = lone_voter_with_ten_entries(dir.path(), &logger);
        let (last, _) = *committed.last().unwrap();
        q.store().save_snapshot(last, b"image".to_vec()).unwrap();
        drop(q);
        let (store, _) = FileStore::open(dir.path(), &[1]).unwrap();
        let mut q = Quorum::new(1, store, cfg, &logger).unwrap();
        let first = q.poll().unwrap();
        assert_eq!(first.snapshot, Some((last, b"image".to_vec())));
        let mut after = first.committed;
        for _ in 0..40 {
            q.tick();
            after.extend(q.poll().unwrap().committed);
            if q.leadership().is_leader {
                break;
            }
        }
        assert!(
            after.iter().all(|(i, _)| *i > last),
            "nothing before the snapshot again"
        );
        q.propose(vec![99]).unwrap();
        let more = q.poll().unwrap().committed;
        assert_eq!(more.last().map(|(_, d)| d.clone()), Some(vec![99]));
    }
}
