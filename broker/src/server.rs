//! The broker process: data directory, shards, per-shard partitions and listener.
//!
//! Each shard binds its own listener on the same address (glommio sets SO_REUSEPORT, so the
//! kernel spreads connections over shards), opens the partitions it owns, and runs retention
//! for them. The Kafka request handlers arrive with issue 3; until then a connection gets its
//! first frame read, a log line naming the API, and a close.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_lite::AsyncReadExt;
use glommio::net::{TcpListener, TcpStream};
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::limits;
use crate::shard::{run_shards, shard_for};
use crate::storage::{PartitionLog, StorageOptions};

/// Version of the on-disk layout; written to `<data_dir>/strand.meta`.
pub const DATA_FORMAT_VERSION: u32 = 1;
const META_FILE: &str = "strand.meta";

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Creates the data directory or checks its format version.
pub fn prepare_data_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let meta = dir.join(META_FILE);
    match std::fs::read_to_string(&meta) {
        Ok(text) => {
            let version = text
                .lines()
                .find_map(|l| l.strip_prefix("format_version = "))
                .and_then(|v| v.trim().parse::<u32>().ok());
            if version != Some(DATA_FORMAT_VERSION) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} says format {version:?}; this strand reads format {DATA_FORMAT_VERSION}",
                        meta.display()
                    ),
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::write(&meta, format!("format_version = {DATA_FORMAT_VERSION}\n"))?;
            crate::storage::recovery::sync_dir(dir)
        }
        Err(e) => Err(e),
    }
}

/// Splits a partition directory name `topic-N` into its parts.
pub fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    let (topic, p) = name.rsplit_once('-')?;
    let p: i32 = p.parse().ok()?;
    (!topic.is_empty() && p >= 0).then(|| (topic.to_string(), p))
}

type Partitions = Rc<RefCell<BTreeMap<(String, i32), PartitionLog>>>;

/// Runs the broker until the process is stopped.
pub fn serve(config: BrokerConfig) -> io::Result<()> {
    prepare_data_dir(&config.data_dir)?;
    info!(listen = %config.listen, data_dir = %config.data_dir.display(), "starting strand");
    run_shards(Arc::new(config), shard_main)
}

async fn shard_main(id: usize, shards: usize, config: Arc<BrokerConfig>) -> io::Result<()> {
    let partitions: Partitions = Rc::new(RefCell::new(BTreeMap::new()));
    let mut owned = Vec::new();
    for entry in std::fs::read_dir(&config.data_dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((topic, p)) = parse_partition_dir(&name) {
            if shard_for(&topic, p, shards) == id {
                owned.push((topic, p, entry.path()));
            }
        }
    }
    for (topic, p, path) in owned {
        let (log, report) =
            PartitionLog::open(path, config.log.clone(), StorageOptions::default()).await?;
        info!(shard = id, topic, partition = p, end = %log.log_end(), ?report, "partition opened");
        partitions.borrow_mut().insert((topic, p), log);
    }
    spawn_retention(Rc::clone(&partitions), config.retention_check_interval_ms);

    let listener = TcpListener::bind(config.listen.as_str())
        .map_err(|e| io::Error::other(format!("cannot listen on {}: {e}", config.listen)))?;
    info!(shard = id, addr = %config.listen, "listening");
    let live = Rc::new(RefCell::new(0usize));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(shard = id, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if *live.borrow() >= limits::CONNECTIONS_PER_SHARD_MAX {
            warn!(shard = id, "too many connections; refusing one");
            continue;
        }
        *live.borrow_mut() += 1;
        let live = Rc::clone(&live);
        glommio::spawn_local(async move {
            if let Err(e) = placeholder_connection(stream).await {
                warn!(error = %e, "connection ended with an error");
            }
            *live.borrow_mut() -= 1;
        })
        .detach();
    }
}

fn spawn_retention(partitions: Partitions, interval_ms: u64) {
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_millis(interval_ms.max(1))).await;
            let logs: Vec<PartitionLog> = partitions.borrow().values().cloned().collect();
            for log in logs {
                match log.enforce_retention(now_ms()).await {
                    Ok(0) => {}
                    Ok(n) => info!(dir = %log.dir().display(), deleted = n, "retention"),
                    Err(e) => warn!(dir = %log.dir().display(), error = %e, "retention failed"),
                }
            }
        }
    })
    .detach();
}

/// Reads one Kafka request header, says the API is not served yet, and closes.
async fn placeholder_connection(mut stream: TcpStream) -> io::Result<()> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = i32::from_be_bytes(len);
    if len < 8 || len as usize > limits::FRAME_BYTES_MAX {
        warn!(len, "bad frame length; closing");
        return Ok(());
    }
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).await?;
    let api_key = i16::from_be_bytes([head[0], head[1]]);
    let api_version = i16::from_be_bytes([head[2], head[3]]);
    warn!(
        api_key,
        api_version, "Kafka API not served yet (arrives with the Kafka front end); closing"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_parse() {
        assert_eq!(parse_partition_dir("orders-3"), Some(("orders".into(), 3)));
        assert_eq!(
            parse_partition_dir("my-topic-12"),
            Some(("my-topic".into(), 12))
        );
        assert_eq!(parse_partition_dir("orders"), None);
        assert_eq!(parse_partition_dir("-1"), None);
    }

    #[test]
    fn data_dir_version_is_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        prepare_data_dir(dir.path()).expect("fresh");
        prepare_data_dir(dir.path()).expect("same version");
        std::fs::write(dir.path().join(META_FILE), "format_version = 99\n").expect("write");
        assert!(prepare_data_dir(dir.path()).is_err());
    }
}
