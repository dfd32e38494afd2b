//! The host at start-up: which io-properties size the partitions' writes, and which tuning
//! checks fail (both from `strand-tuning`, the code behind `strand iotune` / `strand tune`).
//!
//! The io-properties file is `io.properties.file` (`STRAND_IO_PROPERTIES`, `--io-properties`)
//! if set — then it must exist and parse — else `<data_dir>/io-properties.toml` if it exists,
//! else the defaults in [`crate::limits`]. Values are clamped to the bounds in
//! `strand_tuning::props` and a clamp is logged. Tuning checks only warn: a badly tuned host
//! still serves, just with a worse tail.

use std::io;
use std::path::{Path, PathBuf};

use strand_tuning::props::{IoProperties, DEFAULT_FILE_NAME};
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::limits;
use crate::storage::StorageOptions;

/// The partitions' I/O sizes from io-properties (clamped); the cache keeps its default,
/// which the clamps are sized to cover.
pub fn storage_options_from(props: &IoProperties) -> (StorageOptions, Vec<String>) {
    let sizes = props.sizes();
    let options = StorageOptions {
        write_chunk_bytes: sizes.write_chunk_bytes as usize,
        write_behind_depth: sizes.write_behind_depth as usize,
        ..StorageOptions::default()
    };
    (options, sizes.clamped)
}

/// Loads the io-properties `config` points at (see the module doc) and logs what it uses.
/// Errors (an explicit file missing, any file malformed) refuse the start-up.
pub fn storage_options(config: &BrokerConfig) -> io::Result<StorageOptions> {
    let default_path = config.data_dir.join(DEFAULT_FILE_NAME);
    let path: PathBuf = match &config.io_properties_file {
        Some(p) => p.clone(),
        None if default_path.exists() => default_path,
        None => {
            info!(
                "no io-properties file; defaults: write chunk {} KiB, write-behind {} — run \
                 `strand iotune --data-dir {}` to measure the disk",
                limits::WRITE_CHUNK_BYTES >> 10,
                limits::WRITE_BEHIND_DEPTH,
                config.data_dir.display()
            );
            return Ok(StorageOptions::default());
        }
    };
    let props = IoProperties::load(&path)?;
    let (options, clamped) = storage_options_from(&props);
    for note in &clamped {
        warn!(file = %path.display(), "io-properties clamped: {note}");
    }
    let measured = props.measured.as_ref().map_or_else(
        || "no measurements".to_string(),
        |m| {
            format!(
                "measured {} ({}) on {}: peak write {:.0} MB/s, fdatasync p99 {:.3} ms",
                m.date_utc,
                m.mode,
                m.disk,
                m.peak_write_mb_per_s,
                m.fdatasync_preallocated_p99_us as f64 / 1000.0
            )
        },
    );
    info!(
        "io-properties {}: write chunk {} KiB, write-behind {} ({measured})",
        path.display(),
        options.write_chunk_bytes >> 10,
        options.write_behind_depth
    );
    Ok(options)
}

/// Runs `strand tune`'s checks against `/` and the data directory, one warning per check
/// that is not as recommended. Reads a few dozen small files; never fails.
pub fn warn_on_tuning(data_dir: &Path) {
    let report = strand_tuning::tune(&strand_tuning::Host::probe(Path::new("/"), data_dir));
    for c in report.failed() {
        warn!(
            "host tuning: {} is {}, recommended {} — `strand tune` for details",
            c.name, c.current, c.recommended
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(data_dir: &Path, file: Option<PathBuf>) -> BrokerConfig {
        BrokerConfig {
            data_dir: data_dir.to_path_buf(),
            io_properties_file: file,
            ..BrokerConfig::default()
        }
    }

    #[test]
    fn io_properties_are_found_clamped_or_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let defaults = storage_options(&config(dir.path(), None)).expect("no file: defaults");
        assert_eq!(defaults.write_chunk_bytes, limits::WRITE_CHUNK_BYTES);

        IoProperties::new(256 << 10, 8)
            .write_atomic(&dir.path().join(DEFAULT_FILE_NAME))
            .expect("write");
        let found = storage_options(&config(dir.path(), None)).expect("default path");
        assert_eq!(
            (found.write_chunk_bytes, found.write_behind_depth),
            (256 << 10, 8)
        );

        let other = dir.path().join("other.toml");
        IoProperties::new(100 << 20, 64)
            .write_atomic(&other)
            .expect("write");
        let clamped = storage_options(&config(dir.path(), Some(other.clone()))).expect("clamped");
        assert_eq!(
            (clamped.write_chunk_bytes, clamped.write_behind_depth),
            (8 << 20, 4)
        );

        std::fs::write(&other, "write_chunk_bytes = 1\n").expect("write");
        let err = storage_options(&config(dir.path(), Some(other))).expect_err("malformed");
        assert!(err.to_string().contains("bad io-properties file"), "{err}");
        let missing = dir.path().join("missing.toml");
        assert!(storage_options(&config(dir.path(), Some(missing))).is_err());
    }
}
