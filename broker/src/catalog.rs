//! The topic catalog: which topics exist, their ids, partition counts and configs.
//!
//! Shard 0 is the controller: it alone changes the catalog, persists it to
//! `<data_dir>/topics.toml` (write to `.tmp`, fsync, rename), and hands every shard an
//! immutable snapshot (`Arc<Catalog>`). Shards read their snapshot without locks.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::LogConfig;

pub const CATALOG_FILE: &str = "topics.toml";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    #[serde(default)]
    pub topics: BTreeMap<String, TopicMeta>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Kafka topic id (UUID), as Metadata v10+ reports it.
    pub id: String,
    pub partitions: i32,
    /// Topic-level overrides, by Kafka's names (`retention.ms`, `segment.bytes`, ...).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// Topic configs Strand understands, with how they map onto `LogConfig`.
pub const TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "flush.ms",
    "flush.bytes",
    "min.insync.replicas",
    "max.message.bytes",
    "write.caching",
    "index.interval.bytes",
];

/// Why a topic name or config is refused (Kafka's INVALID_TOPIC_EXCEPTION / INVALID_CONFIG).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > 249 {
        return Err("topic names are at most 249 characters".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "topic name {name:?} may only contain [a-zA-Z0-9._-]"
        ));
    }
    Ok(())
}

pub fn validate_config(key: &str, value: &str) -> Result<(), String> {
    if !TOPIC_CONFIGS.contains(&key) {
        return Err(format!("unknown topic config {key}"));
    }
    let numeric = !matches!(key, "cleanup.policy" | "write.caching");
    if numeric && value.parse::<i64>().is_err() {
        return Err(format!("{key} must be an integer, got {value:?}"));
    }
    if key == "write.caching" && !matches!(value, "true" | "false") {
        return Err("write.caching must be true or false".into());
    }
    Ok(())
}

impl TopicMeta {
    /// The log settings for this topic: broker defaults overridden by topic configs.
    pub fn log_config(&self, defaults: &LogConfig) -> LogConfig {
        let mut c = defaults.clone();
        let get = |k: &str| self.configs.get(k).and_then(|v| v.parse::<i64>().ok());
        if let Some(v) = get("retention.ms") {
            c.retention_ms = v;
        }
        if let Some(v) = get("retention.bytes") {
            c.retention_bytes = v;
        }
        if let Some(v) = get("segment.bytes") {
            c.segment_bytes = (v.max(14) as u64).min(crate::storage::log::SEGMENT_BYTES_MAX);
        }
        if let Some(v) = get("segment.ms") {
            c.segment_ms = v.max(1) as u64;
        }
        if let Some(v) = get("flush.ms") {
            c.flush_ms = v.max(1) as u64;
        }
        if let Some(v) = get("flush.bytes") {
            c.flush_bytes = v.max(1) as u64;
        }
        if let Some(v) = get("index.interval.bytes") {
            c.index_interval_bytes = v.clamp(1, i64::from(u32::MAX)) as u32;
        }
        c
    }

    /// Redpanda's `write.caching`: `false` (default) fsyncs before acknowledging `acks=all`.
    pub fn write_caching(&self) -> bool {
        self.configs
            .get("write.caching")
            .is_some_and(|v| v == "true")
    }

    /// `max.message.bytes`: the largest batch a producer may send (Kafka's default).
    pub fn max_message_bytes(&self) -> usize {
        self.configs
            .get("max.message.bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_048_588)
    }
}

impl Catalog {
    pub fn load(data_dir: &Path) -> io::Result<Catalog> {
        match std::fs::read_to_string(data_dir.join(CATALOG_FILE)) {
            Ok(text) => toml::from_str(&text).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{CATALOG_FILE}: {e}"))
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Catalog::default()),
            Err(e) => Err(e),
        }
    }

    pub fn save(&self, data_dir: &Path) -> io::Result<()> {
        let text = toml::to_string(self).map_err(io::Error::other)?;
        let tmp = data_dir.join(format!("{CATALOG_FILE}.tmp"));
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, data_dir.join(CATALOG_FILE))?;
        crate::storage::recovery::sync_dir(data_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_configs_are_checked() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        assert!(validate_topic_name("bad name").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_config("retention.ms", "1000").is_ok());
        assert!(validate_config("retention.ms", "soon").is_err());
        assert!(validate_config("nope", "1").is_err());
    }

    #[test]
    fn round_trips_through_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = Catalog::default();
        c.topics.insert(
            "t".into(),
            TopicMeta {
                id: uuid::Uuid::new_v4().to_string(),
                partitions: 3,
                configs: [("retention.ms".to_string(), "5".to_string())].into(),
            },
        );
        c.save(dir.path()).expect("save");
        assert_eq!(Catalog::load(dir.path()).expect("load"), c);
        assert_eq!(
            c.topics["t"].log_config(&LogConfig::default()).retention_ms,
            5
        );
    }
}
