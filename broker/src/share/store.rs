//! The durable form of a share-partition: an append-only file of CRC-checked entries in the
//! partition's directory, `share-<group, hex>.state`.
//!
//! Entry: `[u32 LE payload length][u32 LE crc32c of payload][payload]`. Payloads: `S` +
//! start offset (i64 BE) — the state starts over there; `C` + first, last (i64 BE), state
//! (u8), delivery count (i16 BE) — a [`Change`]. Replay applies them in order; a torn or
//! corrupt tail (a crash mid-write) ends the replay and is cut off. Acquisitions are written
//! without waiting for the disk (losing one only means a record is redelivered with a lower
//! count); acknowledgements are fdatasynced before they are answered, and with them everything
//! written before. When the file passes `limits::SHARE_STATE_FILE_BYTES_MAX` it is rewritten
//! as a snapshot (written aside, synced, renamed over).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::partition::{Change, SharePartition};

const HEADER_BYTES: usize = 8;

fn entry(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

pub fn encode_start(start: i64, out: &mut Vec<u8>) {
    let mut p = vec![b'S'];
    p.extend_from_slice(&start.to_be_bytes());
    entry(&p, out);
}

pub fn encode_change(c: &Change, out: &mut Vec<u8>) {
    let mut p = vec![b'C'];
    p.extend_from_slice(&c.first.to_be_bytes());
    p.extend_from_slice(&c.last.to_be_bytes());
    p.push(c.state);
    p.extend_from_slice(&c.delivery_count.to_be_bytes());
    entry(&p, out);
}

/// Replays `bytes` into a share-partition. Returns it (if the file began with a start
/// entry) and the length of the valid prefix.
pub fn decode(bytes: &[u8]) -> (Option<SharePartition>, usize) {
    let mut sp: Option<SharePartition> = None;
    let mut at = 0usize;
    while bytes.len() - at >= HEADER_BYTES {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let crc = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let Ok(len) = usize::try_from(len) else {
            break;
        };
        let body = at + HEADER_BYTES;
        if len == 0 || bytes.len() - body < len {
            break;
        }
        let p = &bytes[body..body + len];
        if crc32c::crc32c(p) != crc {
            break;
        }
        let i64_at = |o: usize| {
            p.get(o..o + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        match (p[0], p.len()) {
            (b'S', 9) => {
                if let Some(start) = i64_at(1) {
                    sp = Some(SharePartition::starting_at(start));
                }
            }
            (b'C', 20) => {
                if let (Some(first), Some(last), Some(s)) = (i64_at(1), i64_at(9), sp.as_mut()) {
                    if first <= last && last - first <= crate::limits::SHARE_ACK_BATCH_OFFSETS_MAX {
                        s.apply(&Change {
                            first,
                            last,
                            state: p[17],
                            delivery_count: i16::from_be_bytes([p[18], p[19]]),
                        });
                    }
                }
            }
            _ => break,
        }
        at = body + len;
    }
    (sp, at)
}

/// The file name of `group`'s state for the partition in `dir`.
pub fn path_for(dir: &Path, group: &str) -> PathBuf {
    let hex: String = group.bytes().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("share-{hex}.state"))
}

pub struct ShareFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl ShareFile {
    /// Opens `path` and replays it (cutting a torn tail), if it exists.
    pub fn open(path: &Path) -> io::Result<Option<(ShareFile, SharePartition)>> {
        let mut file = match OpenOptions::new().read(true).append(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (sp, valid) = decode(&bytes);
        let Some(sp) = sp else {
            return Ok(None);
        };
        if valid < bytes.len() {
            file.set_len(valid as u64)?;
        }
        let f = ShareFile {
            path: path.to_path_buf(),
            file,
            len: valid as u64,
        };
        Ok(Some((f, sp)))
    }

    /// Writes `sp` as a new file at `path` (aside first, then renamed over), synced.
    pub fn create(path: &Path, sp: &SharePartition) -> io::Result<ShareFile> {
        let mut bytes = Vec::new();
        encode_start(sp.start, &mut bytes);
        for c in sp.snapshot() {
            encode_change(&c, &mut bytes);
        }
        let aside = path.with_extension("state.new");
        {
            let mut f = File::create(&aside)?;
            f.write_all(&bytes)?;
            f.sync_data()?;
        }
        std::fs::rename(&aside, path)?;
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(ShareFile {
            path: path.to_path_buf(),
            file,
            len: bytes.len() as u64,
        })
    }

    /// Appends changes (to the page cache: `sync` makes them durable).
    pub fn append(&mut self, changes: &[Change]) -> io::Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for c in changes {
            encode_change(c, &mut bytes);
        }
        self.file.write_all(&bytes)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// A handle to fdatasync with (its own descriptor: the file may be rewritten meanwhile).
    pub fn sync_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Rewrites the file as a snapshot of `sp` once it has grown past the limit.
    pub fn maybe_compact(&mut self, sp: &SharePartition) -> io::Result<()> {
        if self.len <= crate::limits::SHARE_STATE_FILE_BYTES_MAX {
            return Ok(());
        }
        *self = ShareFile::create(&self.path, sp)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::partition::{AckType, Limits};
    use super::*;

    #[test]
    fn a_file_replays_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path_for(dir.path(), "g");
        let l = Limits::default();
        let mut sp = SharePartition::starting_at(0);
        let mut f = ShareFile::create(&path, &sp).expect("create");
        let (_, c) = sp.acquire("a", &[(0, 9, false)], 100, &l, 0);
        f.append(&c).expect("append");
        let c = sp.acknowledge("a", 0, 4, AckType::Accept, &l).expect("ack");
        f.append(&c).expect("append");
        drop(f);
        // A torn entry at the end.
        let mut raw = std::fs::read(&path).expect("read");
        raw.extend_from_slice(&[20, 0, 0, 0, 1, 2, 3]);
        std::fs::write(&path, &raw).expect("write");
        let (f, back) = ShareFile::open(&path).expect("open").expect("state");
        assert_eq!(back.start, 5);
        assert_eq!(
            back.first_available(),
            5,
            "acquired records come back available"
        );
        assert_eq!(back.state_of(5).map(|r| r.delivery_count), Some(1));
        assert_eq!(f.len as usize, raw.len() - 7);
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), f.len);
    }

    #[test]
    fn garbage_is_not_a_state() {
        assert_eq!(decode(b"\x05\0\0\0garbage!!").0, None);
        let mut bytes = Vec::new();
        encode_start(7, &mut bytes);
        bytes[9] ^= 0xff;
        assert_eq!(decode(&bytes), (None, 0));
    }
}
