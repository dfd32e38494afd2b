//! The io-properties file: what `strand iotune` measured and what `strand serve` sizes its
//! writes by.
//!
//! ```toml
//! format_version = 1
//! write_chunk_bytes = 1048576   # size of one O_DIRECT segment write
//! write_behind_depth = 4        # full chunks in flight per partition
//!
//! [measured]                    # informational: the broker only logs it
//! date_utc = "2026-11-30T05:40:12Z"
//! peak_write_mb_per_s = 1871.2
//! fdatasync_preallocated_p99_us = 412
//! # ... and one [[measured.seq_write]] table per block size x queue depth
//! ```
//!
//! A file that does not parse, lacks a key the broker uses or has another `format_version`
//! is refused with an error naming the file. Values that parse but are out of bounds are
//! clamped ([`IoProperties::sizes`]) and the broker logs what it clamped.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Version of the file's layout.
pub const FORMAT_VERSION: u32 = 1;
/// Name of the file in the data directory, where `strand serve` looks when no path is given.
pub const DEFAULT_FILE_NAME: &str = "io-properties.toml";

/// Smallest write chunk: below 64 KiB every write pays a syscall-sized cost for little data.
pub const WRITE_CHUNK_BYTES_MIN: u64 = 64 << 10;
/// Largest write chunk: each partition holds one chunk being filled plus those in flight.
pub const WRITE_CHUNK_BYTES_MAX: u64 = 8 << 20;
pub const WRITE_BEHIND_DEPTH_MIN: u32 = 1;
pub const WRITE_BEHIND_DEPTH_MAX: u32 = 32;
/// Largest write-behind window (chunk x depth). Bytes not yet written can only be read from
/// the hot-tail cache, so the window must stay within the broker's per-partition cache
/// (`PARTITION_CACHE_BYTES`, 32 MiB; the broker asserts this at compile time).
pub const WRITE_BEHIND_WINDOW_BYTES_MAX: u64 = 32 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoProperties {
    pub format_version: u32,
    /// Bytes per O_DIRECT segment write (the broker's write buffer size).
    pub write_chunk_bytes: u64,
    /// Full write buffers in flight per partition before appends wait.
    pub write_behind_depth: u32,
    /// What iotune measured (informational; absent in a hand-written file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// The measurements behind the two sizes, for people reading the file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub date_utc: String,
    pub host: String,
    pub kernel: String,
    pub disk: String,
    pub data_dir: String,
    /// `full` or `quick`.
    pub mode: String,
    pub peak_write_mb_per_s: f64,
    pub peak_write_block_bytes: u64,
    pub peak_write_queue_depth: u32,
    pub fdatasync_preallocated_p50_us: u64,
    pub fdatasync_preallocated_p99_us: u64,
    pub fdatasync_growing_p50_us: u64,
    pub fdatasync_growing_p99_us: u64,
    pub read_4k_qd32_iops: u64,
    #[serde(default)]
    pub seq_write: Vec<SeqPoint>,
}

/// One sequential O_DIRECT write measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeqPoint {
    pub block_bytes: u64,
    pub queue_depth: u32,
    pub mb_per_s: f64,
}

/// The sizes the broker uses, after clamping, and a note for each value that was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub write_chunk_bytes: u64,
    pub write_behind_depth: u32,
    pub clamped: Vec<String>,
}

impl IoProperties {
    /// Properties with these sizes and no measurements.
    pub fn new(write_chunk_bytes: u64, write_behind_depth: u32) -> IoProperties {
        IoProperties {
            format_version: FORMAT_VERSION,
            write_chunk_bytes,
            write_behind_depth,
            measured: None,
        }
    }

    /// Parses a file's text; `what` names it in errors.
    pub fn parse(text: &str, what: &str) -> io::Result<IoProperties> {
        let bad = |msg: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad io-properties file {what}: {msg}"),
            )
        };
        let p: IoProperties = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if p.format_version != FORMAT_VERSION {
            return Err(bad(format!(
                "format_version {} (this strand reads {FORMAT_VERSION}; run `strand iotune` again)",
                p.format_version
            )));
        }
        Ok(p)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> io::Result<IoProperties> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read io-properties file {}: {e}", path.display()),
            )
        })?;
        IoProperties::parse(&text, &path.display().to_string())
    }

    /// The sizes clamped to sane bounds: the chunk to 64 KiB..8 MiB and down to a power of
    /// two (so a multiple of the 4 KiB block), the depth to 1..32, then the depth lowered
    /// until chunk x depth fits [`WRITE_BEHIND_WINDOW_BYTES_MAX`].
    pub fn sizes(&self) -> Sizes {
        let mut clamped = Vec::new();
        let mut chunk = self
            .write_chunk_bytes
            .clamp(WRITE_CHUNK_BYTES_MIN, WRITE_CHUNK_BYTES_MAX);
        if !chunk.is_power_of_two() {
            chunk = 1 << (63 - chunk.leading_zeros());
        }
        if chunk != self.write_chunk_bytes {
            clamped.push(format!(
                "write_chunk_bytes {} -> {chunk} (a power of two in {WRITE_CHUNK_BYTES_MIN}..={WRITE_CHUNK_BYTES_MAX})",
                self.write_chunk_bytes
            ));
        }
        let mut depth = self
            .write_behind_depth
            .clamp(WRITE_BEHIND_DEPTH_MIN, WRITE_BEHIND_DEPTH_MAX);
        if depth != self.write_behind_depth {
            clamped.push(format!(
                "write_behind_depth {} -> {depth} (in {WRITE_BEHIND_DEPTH_MIN}..={WRITE_BEHIND_DEPTH_MAX})",
                self.write_behind_depth
            ));
        }
        let window_max = (WRITE_BEHIND_WINDOW_BYTES_MAX / chunk).max(1) as u32;
        if depth > window_max {
            clamped.push(format!(
                "write_behind_depth {depth} -> {window_max} (chunk x depth <= {WRITE_BEHIND_WINDOW_BYTES_MAX} bytes, the hot-tail cache)"
            ));
            depth = window_max;
        }
        Sizes {
            write_chunk_bytes: chunk,
            write_behind_depth: depth,
            clamped,
        }
    }

    pub fn to_toml(&self) -> io::Result<String> {
        let body = toml::to_string(self).map_err(io::Error::other)?;
        Ok(format!(
            "# strand io-properties: written by `strand iotune`, read by `strand serve` at start-up.\n\
             # write_chunk_bytes and write_behind_depth size the broker's O_DIRECT segment writes;\n\
             # [measured] is informational.\n{body}"
        ))
    }

    /// Writes the file atomically: a temporary file beside it, fsynced, renamed over `path`,
    /// then the directory fsynced, so a reader sees the old file or the new one, never half.
    pub fn write_atomic(&self, path: &Path) -> io::Result<()> {
        let ctx = |e: io::Error, what: &str, p: &Path| {
            io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::other(format!("{} is not a file path", path.display())))?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let text = self.to_toml()?;
        let mut f = std::fs::File::create(&tmp).map_err(|e| ctx(e, "create", &tmp))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| ctx(e, "write", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            ctx(e, "rename to", path)
        })?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| ctx(e, "fsync directory", &dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(DEFAULT_FILE_NAME);
        let mut p = IoProperties::new(256 << 10, 8);
        p.measured = Some(Measured {
            date_utc: "2026-11-30T05:40:12Z".into(),
            peak_write_mb_per_s: 1800.5,
            seq_write: vec![SeqPoint {
                block_bytes: 1 << 20,
                queue_depth: 8,
                mb_per_s: 1800.5,
            }],
            ..Measured::default()
        });
        p.write_atomic(&path).expect("write");
        assert_eq!(IoProperties::load(&path).expect("load"), p);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
    }

    #[test]
    fn malformed_files_are_refused_with_the_file_named() {
        for text in [
            "write_chunk_bytes = \"big\"\n",
            "format_version = 1\nwrite_chunk_bytes = 1048576\n",
            "format_version = 2\nwrite_chunk_bytes = 1048576\nwrite_behind_depth = 4\n",
            "format_version = 1\nwrite_chunk_bytes = 1048576\nwrite_behind_depth = 4\nchunk = 1\n",
            "not toml at all",
        ] {
            let err = IoProperties::parse(text, "x.toml").expect_err(text);
            assert!(
                err.to_string().contains("bad io-properties file x.toml"),
                "{err}"
            );
        }
        let missing = IoProperties::load(Path::new("/nonexistent/io.toml")).expect_err("missing");
        assert!(
            missing.to_string().contains("/nonexistent/io.toml"),
            "{missing}"
        );
    }

    #[test]
    fn sizes_are_clamped_to_sane_bounds() {
        let ok = IoProperties::new(1 << 20, 4).sizes();
        assert_eq!((ok.write_chunk_bytes, ok.write_behind_depth), (1 << 20, 4));
        assert!(ok.clamped.is_empty());
        let small = IoProperties::new(4096, 0).sizes();
        assert_eq!(
            (small.write_chunk_bytes, small.write_behind_depth),
            (64 << 10, 1)
        );
        assert_eq!(small.clamped.len(), 2);
        let odd = IoProperties::new(3 << 20, 2).sizes();
        assert_eq!(
            odd.write_chunk_bytes,
            2 << 20,
            "rounded down to a power of two"
        );
        let huge = IoProperties::new(1 << 30, 1000).sizes();
        assert_eq!(huge.write_chunk_bytes, WRITE_CHUNK_BYTES_MAX);
        assert_eq!(
            huge.write_behind_depth, 4,
            "8 MiB x 4 fills the 32 MiB window"
        );
        let window = IoProperties::new(4 << 20, 32).sizes();
        assert_eq!(window.write_behind_depth, 8);
        assert_eq!(window.write_chunk_bytes % 4096, 0);
    }
}
