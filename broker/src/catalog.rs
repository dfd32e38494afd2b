//! The topic catalog: which topics exist, their ids, partition counts and configs.
//!
//! Shard 0 is the controller: it alone changes the catalog, persists it to
//! `<data_dir>/topics.toml` (write to `.tmp`, fsync, rename), and hands every shard an
//! immutable snapshot (`Arc<Catalog>`). Shards read their snapshot without locks.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use strand_wire::ErrorCode;

use crate::dynamic_configs;
pub use crate::dynamic_configs::Resource;
use crate::storage::{CleanupPolicy, LogConfig};

fn unknown(topic: &str) -> (ErrorCode, String) {
    (
        ErrorCode::UnknownTopicOrPartition,
        format!("topic {topic} does not exist"),
    )
}

pub const CATALOG_FILE: &str = "topics.toml";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    #[serde(default)]
    pub topics: BTreeMap<String, TopicMeta>,
    /// Dynamic broker configs (IncrementalAlterConfigs on the BROKER resource): stored and
    /// described.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<String, String>,
    /// Group configs (Kafka 4.x, for KIP-848 groups): stored and described.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Cluster mode: the metadata image this catalog was made from (leaders, epochs,
    /// replicas, brokers); `None` on a single node. Never written to `topics.toml`.
    #[serde(skip)]
    pub cluster: Option<std::sync::Arc<crate::cluster::view::ClusterView>>,
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Kafka topic id (UUID), as Metadata v10+ reports it.
    pub id: String,
    pub partitions: i32,
    /// Topic-level overrides, by Kafka's names (`retention.ms`, `segment.bytes`, ...).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// Why a topic name or config is refused (Kafka's INVALID_TOPIC_EXCEPTION / INVALID_CONFIG).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > crate::limits::TOPIC_NAME_BYTES_MAX {
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

pub use crate::topic_configs::normalize as validate_config;

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
        if let Some(p) = self.configs.get("cleanup.policy") {
            c.cleanup_policy = CleanupPolicy::parse(p).unwrap_or(c.cleanup_policy);
        }
        if let Some(r) = self
            .configs
            .get("min.cleanable.dirty.ratio")
            .and_then(|v| v.parse::<f64>().ok())
        {
            c.min_cleanable_dirty_ratio = r.clamp(0.0, 1.0);
        }
        if let Some(v) = get("min.compaction.lag.ms") {
            c.min_compaction_lag_ms = v.max(0);
        }
        if let Some(v) = get("max.compaction.lag.ms") {
            c.max_compaction_lag_ms = v.max(1);
        }
        if let Some(v) = get("delete.retention.ms") {
            c.delete_retention_ms = v.max(0);
        }
        c
    }

    /// Every topic config with its effective value, and whether the topic overrides it. The
    /// configs Strand applies show the broker's defaults; the others Kafka's.
    pub fn effective_configs(&self, defaults: &LogConfig) -> Vec<(&'static str, String, bool)> {
        let c = self.log_config(defaults);
        let broker_default = |k: &str| -> Option<String> {
            Some(match k {
                "cleanup.policy" => c.cleanup_policy.to_string(),
                "min.cleanable.dirty.ratio" => c.min_cleanable_dirty_ratio.to_string(),
                "min.compaction.lag.ms" => c.min_compaction_lag_ms.to_string(),
                "max.compaction.lag.ms" => c.max_compaction_lag_ms.to_string(),
                "delete.retention.ms" => c.delete_retention_ms.to_string(),
                "retention.ms" => c.retention_ms.to_string(),
                "retention.bytes" => c.retention_bytes.to_string(),
                "segment.bytes" => c.segment_bytes.to_string(),
                "segment.ms" => c.segment_ms.to_string(),
                "flush.ms" => c.flush_ms.to_string(),
                "flush.bytes" => c.flush_bytes.to_string(),
                "index.interval.bytes" => c.index_interval_bytes.to_string(),
                _ => return None,
            })
        };
        crate::topic_configs::TOPIC_CONFIGS
            .iter()
            .map(|d| match self.configs.get(d.name) {
                Some(v) => (d.name, v.clone(), true),
                None => (
                    d.name,
                    broker_default(d.name).unwrap_or_else(|| d.default.to_string()),
                    false,
                ),
            })
            .collect()
    }

    /// `cleanup.policy` of this topic (`default` from the broker's `log.cleanup.policy`).
    pub fn cleanup_policy(&self, default: CleanupPolicy) -> CleanupPolicy {
        self.configs
            .get("cleanup.policy")
            .and_then(|p| CleanupPolicy::parse(p).ok())
            .unwrap_or(default)
    }

    /// `message.timestamp.type=LogAppendTime`: the broker stamps each batch with its clock.
    pub fn log_append_time(&self) -> bool {
        self.configs
            .get("message.timestamp.type")
            .is_some_and(|v| v.eq_ignore_ascii_case("LogAppendTime"))
    }

    /// Redpanda's `write.caching`: `false` (default) fsyncs before acknowledging `acks=all`.
    pub fn write_caching(&self) -> bool {
        self.configs
            .get("write.caching")
            .is_some_and(|v| v == "true")
    }

    /// `min.insync.replicas` (Kafka's default 1).
    pub fn min_insync_replicas(&self) -> usize {
        self.configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
    }

    /// `max.message.bytes`: the largest batch a producer may send (Kafka's default).
    pub fn max_message_bytes(&self) -> usize {
        self.configs
            .get("max.message.bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_048_588)
    }
}

pub use crate::dynamic_configs::ConfigChange;

/// A change to the catalog, as the controller receives it.
#[derive(Clone, Debug)]
pub enum CatalogOp {
    Create(Vec<NewTopic>),
    Delete(Vec<String>),
    /// Per topic: (config name, operation, value). Operations are Kafka's
    /// IncrementalAlterConfigs ones: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
    AlterConfigs(Vec<(Resource, Vec<ConfigChange>)>),
    /// The legacy AlterConfigs API: per topic, the whole new set of overrides (configs not
    /// named go back to their defaults).
    SetConfigs(Vec<(Resource, BTreeMap<String, String>)>),
    /// Per topic: the new total partition count.
    CreatePartitions(Vec<(String, i32)>),
}

/// A topic to create: name, partitions, configs.
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    /// -1: the default (`default.replication.factor` in a cluster; always 1 on one node).
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// Per item of an op: Ok, or a Kafka error code and a message for the client.
pub type OpResult = Result<(), (ErrorCode, String)>;

impl Catalog {
    /// Applies `op` (sans-IO); returns one result per item. Items that fail change nothing.
    pub fn apply(&mut self, op: &CatalogOp) -> Vec<OpResult> {
        match op {
            CatalogOp::Create(topics) => topics.iter().map(|t| self.create(t)).collect(),
            CatalogOp::Delete(names) => names
                .iter()
                .map(|n| match self.topics.remove(n) {
                    Some(_) => Ok(()),
                    None => Err(unknown(n)),
                })
                .collect(),
            CatalogOp::AlterConfigs(changes) => changes
                .iter()
                .map(|(resource, ops)| self.alter(resource, Some(ops), None))
                .collect(),
            CatalogOp::SetConfigs(sets) => sets
                .iter()
                .map(|(resource, configs)| self.alter(resource, None, Some(configs)))
                .collect(),
            CatalogOp::CreatePartitions(counts) => counts
                .iter()
                .map(|(topic, count)| {
                    let t = self.topics.get_mut(topic).ok_or_else(|| unknown(topic))?;
                    if *count <= t.partitions {
                        return Err((
                            ErrorCode::InvalidPartitions,
                            format!(
                                "topic {topic} has {} partitions; the count can only grow",
                                t.partitions
                            ),
                        ));
                    }
                    if *count > crate::limits::PARTITIONS_PER_TOPIC_MAX {
                        return Err((
                            ErrorCode::InvalidPartitions,
                            format!("{count} partitions is too many"),
                        ));
                    }
                    t.partitions = *count;
                    Ok(())
                })
                .collect(),
        }
    }

    /// Partitions of all topics.
    pub fn partition_count(&self) -> i64 {
        self.topics.values().map(|m| i64::from(m.partitions)).sum()
    }

    /// As [`Catalog::apply`], but an item that would take the catalog past `limit.0`
    /// partitions in all is refused with POLICY_VIOLATION (the items before it still apply);
    /// `limit.1` says where the limit comes from.
    pub fn apply_within(&mut self, op: &CatalogOp, limit: &(i64, String)) -> Vec<OpResult> {
        let (partitions_max, why) = (limit.0, &limit.1);
        let over = |total: i64, adds: i64| {
            Err((
                ErrorCode::PolicyViolation,
                format!(
                    "the node holds {total} partitions; {adds} more would pass its limit of \
                     {partitions_max} ({why})"
                ),
            ))
        };
        let mut total = self.partition_count();
        match op {
            CatalogOp::Create(topics) => topics
                .iter()
                .map(|t| {
                    let adds = i64::from(t.partitions.max(0));
                    if total + adds > partitions_max {
                        return over(total, adds);
                    }
                    let r = self.create(t);
                    if r.is_ok() {
                        total += adds;
                    }
                    r
                })
                .collect(),
            CatalogOp::CreatePartitions(counts) => counts
                .iter()
                .map(|(topic, count)| {
                    let now = self.topics.get(topic).map_or(0, |m| m.partitions);
                    let adds = i64::from(*count) - i64::from(now);
                    if adds > 0 && total + adds > partitions_max {
                        return over(total, adds);
                    }
                    let one = CatalogOp::CreatePartitions(vec![(topic.clone(), *count)]);
                    let r = self.apply(&one).remove(0);
                    if r.is_ok() {
                        total += adds;
                    }
                    r
                })
                .collect(),
            other => self.apply(other),
        }
    }

    fn create(&mut self, t: &NewTopic) -> OpResult {
        validate_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
        if self.topics.contains_key(&t.name) {
            return Err((
                ErrorCode::TopicAlreadyExists,
                format!("topic {} already exists", t.name),
            ));
        }
        if t.partitions < 1 || t.partitions > crate::limits::PARTITIONS_PER_TOPIC_MAX {
            return Err((
                ErrorCode::InvalidPartitions,
                format!("{} partitions is out of range", t.partitions),
            ));
        }
        let mut configs = BTreeMap::new();
        for (k, v) in &t.configs {
            let v = validate_config(k, v).map_err(|m| (ErrorCode::InvalidConfig, m))?;
            configs.insert(k.clone(), v);
        }
        let meta = TopicMeta {
            id: uuid::Uuid::new_v4().to_string(),
            partitions: t.partitions,
            configs,
        };
        self.topics.insert(t.name.clone(), meta);
        Ok(())
    }

    /// The overrides of `resource`, for reading (`None`: a topic that does not exist).
    pub fn configs_of(&self, resource: &Resource) -> Option<&BTreeMap<String, String>> {
        match resource {
            Resource::Topic(t) => self.topics.get(t).map(|m| &m.configs),
            Resource::Broker => Some(&self.broker_configs),
            Resource::Group(g) => Some(self.group_configs.get(g).unwrap_or(&EMPTY)),
        }
    }

    fn configs_mut(
        &mut self,
        resource: &Resource,
    ) -> Result<&mut BTreeMap<String, String>, (ErrorCode, String)> {
        match resource {
            Resource::Topic(t) => self
                .topics
                .get_mut(t)
                .map(|m| &mut m.configs)
                .ok_or_else(|| unknown(t)),
            Resource::Broker => Ok(&mut self.broker_configs),
            Resource::Group(g) => Ok(self.group_configs.entry(g.clone()).or_default()),
        }
    }

    /// Incremental changes, or (`ops = None`) the legacy whole-set replacement `set`.
    fn alter(
        &mut self,
        resource: &Resource,
        ops: Option<&[ConfigChange]>,
        set: Option<&BTreeMap<String, String>>,
    ) -> OpResult {
        let invalid = |m: String| (ErrorCode::InvalidConfig, m);
        let current = self
            .configs_of(resource)
            .cloned()
            .ok_or_else(|| match resource {
                Resource::Topic(t) => unknown(t),
                _ => (ErrorCode::InvalidRequest, "unknown resource".into()),
            })?;
        let next = match (ops, set) {
            (Some(ops), _) => dynamic_configs::apply(resource, &current, ops).map_err(invalid)?,
            (None, Some(set)) => {
                let mut next = BTreeMap::new();
                for (k, v) in set {
                    next.insert(
                        k.clone(),
                        dynamic_configs::validate(resource, k, v).map_err(invalid)?,
                    );
                }
                next
            }
            (None, None) => current,
        };
        *self.configs_mut(resource)? = next;
        if let Resource::Group(g) = resource {
            self.group_configs
                .retain(|name, c| name != g || !c.is_empty());
        }
        Ok(())
    }

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
        assert!(validate_config("cleanup.policy", "compact,delete").is_ok());
        assert!(validate_config("cleanup.policy", "shred").is_err());
        assert!(validate_config("min.cleanable.dirty.ratio", "0.01").is_ok());
        assert!(validate_config("min.cleanable.dirty.ratio", "2").is_err());
        assert!(validate_config("nope", "1").is_err());
    }

    #[test]
    fn ops_apply_and_refuse_as_kafka_does() {
        let mut c = Catalog::default();
        let new = |name: &str, p| NewTopic {
            name: name.into(),
            partitions: p,
            replication_factor: -1,
            configs: Default::default(),
        };
        let r = c.apply(&CatalogOp::Create(vec![
            new("a", 2),
            new("a", 2),
            new("bad name", 1),
            new("z", 0),
        ]));
        assert!(r[0].is_ok());
        assert_eq!(r[1].as_ref().unwrap_err().0, ErrorCode::TopicAlreadyExists);
        assert_eq!(
            r[2].as_ref().unwrap_err().0,
            ErrorCode::InvalidTopicException
        );
        assert_eq!(r[3].as_ref().unwrap_err().0, ErrorCode::InvalidPartitions);
        let set = vec![(
            Resource::Topic("a".to_string()),
            vec![("retention.ms".to_string(), 0i8, Some("10".to_string()))],
        )];
        assert!(c.apply(&CatalogOp::AlterConfigs(set))[0].is_ok());
        assert_eq!(c.topics["a"].configs["retention.ms"], "10");
        let bad = vec![(
            Resource::Topic("a".to_string()),
            vec![("retention.ms".to_string(), 0i8, Some("x".to_string()))],
        )];
        assert_eq!(
            c.apply(&CatalogOp::AlterConfigs(bad))[0]
                .as_ref()
                .unwrap_err()
                .0,
            ErrorCode::InvalidConfig
        );
        assert!(c.apply(&CatalogOp::CreatePartitions(vec![("a".into(), 4)]))[0].is_ok());
        assert!(c.apply(&CatalogOp::CreatePartitions(vec![("a".into(), 3)]))[0].is_err());
        assert!(c.apply(&CatalogOp::Delete(vec!["a".into(), "a".into()]))[1].is_err());
        assert!(c.topics.is_empty());
        // The partition limit refuses the item that would pass it, not the ones before.
        let new = |name: &str, partitions| NewTopic {
            name: name.into(),
            partitions,
            replication_factor: -1,
            configs: Default::default(),
        };
        let r = c.apply_within(
            &CatalogOp::Create(vec![new("b", 3), new("c", 3)]),
            &(5, "x".into()),
        );
        assert!(r[0].is_ok());
        assert_eq!(r[1].as_ref().unwrap_err().0, ErrorCode::PolicyViolation);
        let r = c.apply_within(
            &CatalogOp::CreatePartitions(vec![("b".into(), 6)]),
            &(5, "x".into()),
        );
        assert_eq!(r[0].as_ref().unwrap_err().0, ErrorCode::PolicyViolation);
        assert_eq!(c.topics.keys().collect::<Vec<_>>(), ["b"]);
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
