//! Broker configuration: embedded defaults, then a TOML file, then `STRAND_*` environment
//! variables and command-line flags (the last two are applied by the CLI).
//!
//! Log settings use Kafka's broker config names (`log.segment.bytes`, `log.retention.ms`, ...);
//! topics override them with the topic-level names (`segment.bytes`, `retention.ms`, ...).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::storage::{CleanupPolicy, LogConfig};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";
pub const DEFAULT_DATA_DIR: &str = "./strand-data";
/// `idle.poll.time.us` by default: measured in #16 (README, "idle polling").
pub const IDLE_POLL_TIME_US_DEFAULT: u64 = 0;
/// Redpanda's admin API port.
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9644";

#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    /// `HOST:PORT` to accept Kafka clients on.
    pub listen: String,
    /// Where partitions live (`<data_dir>/<topic>-<partition>/`).
    pub data_dir: PathBuf,
    /// `admin.listen`: `HOST:PORT` of the admin HTTP API (`admin_http`); empty: off.
    pub admin_listen: String,
    /// `metrics.enabled`: shards count what `GET /metrics` shows (`metrics`); off, they count
    /// nothing (the scrape answers zeros) — for measuring what counting costs.
    pub metrics_enabled: bool,
    /// `metrics.partition.series.max`: partitions, and (group, partition) pairs, with series
    /// of their own in `GET /metrics` (the first by name; the rest counted). 0 drops the
    /// topic and partition labels: only shard- and node-level series remain.
    pub metrics_partition_series_max: u32,
    /// Shards (one pinned executor per core); `None` = every online core.
    pub cores: Option<usize>,
    /// Defaults for every partition's log.
    pub log: LogConfig,
    /// `log.retention.check.interval.ms`: how often retention runs.
    pub retention_check_interval_ms: u64,
    /// `auto.create.topics.enable`: Metadata requests create unknown topics.
    pub auto_create_topics: bool,
    /// `num.partitions`: partitions of auto-created topics (and CreateTopics with -1).
    pub num_partitions: i32,
    /// `offsets.retention.minutes`: committed offsets of empty groups expire after this.
    pub offsets_retention_minutes: i64,
    /// `group.initial.rebalance.delay.ms`: the first join of an empty group waits this long
    /// for more members, so a group starting up rebalances once, not once per member.
    pub group_initial_rebalance_delay_ms: i64,
    /// `group.max.size`: members a group may have (GROUP_MAX_SIZE_REACHED beyond).
    pub group_max_size: i32,
    /// `group.consumer.session.timeout.ms`: a KIP-848 member not heard from for this long
    /// is removed and its partitions reassigned (the broker decides; clients cannot).
    pub group_consumer_session_timeout_ms: i64,
    /// `group.consumer.heartbeat.interval.ms`: how often KIP-848 members heartbeat.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: server-side assignors (`uniform`, `range`; Kafka's class
    /// names accepted), the first the default.
    pub group_consumer_assignors: Vec<String>,
    /// `group.consumer.max.size`: members a KIP-848 group may have.
    pub group_consumer_max_size: i32,
    /// `group.share.session.timeout.ms`: a share-group member not heard from for this long
    /// is removed.
    pub group_share_session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms`.
    pub group_share_heartbeat_interval_ms: i32,
    /// `group.share.max.size`: members a share group may have (Kafka's default, 200).
    pub group_share_max_size: i32,
    /// `connections.max.idle.ms`: a connection with no request in flight and nothing read
    /// for this long is closed (Kafka's default, 10 minutes).
    pub connections_max_idle_ms: i64,
    /// `fetch.max.bytes`: the most a fetch response carries, whatever the client asks
    /// (Kafka's default, 55 MiB; the first batch still goes out whole).
    pub fetch_max_bytes: i32,
    /// `max.incremental.fetch.session.cache.slots`: KIP-227 fetch sessions the node keeps
    /// (split evenly over its shards; 0 turns sessions off and every fetch is answered in full).
    pub max_incremental_fetch_session_cache_slots: i32,
    /// `max.connections`: client connections in all (also kept below the open-files limit).
    pub max_connections: i32,
    /// `max.connections.per.ip`: client connections from one address.
    pub max_connections_per_ip: i32,
    /// `topic.partitions.per.shard` (Redpanda's `topic_partitions_per_shard`): the node holds
    /// at most this many partitions per shard; creating more is refused with POLICY_VIOLATION.
    pub topic_partitions_per_shard: i32,
    /// `topic.fds.per.partition` (Redpanda's `topic_fds_per_partition`): open files a
    /// partition is counted at when topics are created; partitions may take the open-files
    /// limit less what client connections may (`partitions_max`).
    pub topic_fds_per_partition: i32,
    /// `storage.min.free.bytes` (Redpanda's name): below this much free space on the data
    /// directory's filesystem, produce and new topics are refused.
    pub storage_min_free_bytes: u64,
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask
    /// for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).
    pub transaction_max_timeout_ms: i32,
    /// Log compaction, broker-wide (`log.cleaner.*`).
    pub cleaner: CleanerConfig,
    /// `offsets.topic.segment.bytes`: segment size of `__consumer_offsets` (small, so it
    /// compacts often).
    pub offsets_topic_segment_bytes: u64,
    /// `io.properties.file`: the io-properties `strand iotune` wrote; `None` = look for
    /// `<data_dir>/io-properties.toml` and use the defaults if it is not there.
    pub io_properties_file: Option<PathBuf>,
    /// `idle.poll.time.us` (Seastar's and Redpanda's `--idle-poll-time-us`): a pinned shard
    /// with nothing to do polls this long before it sleeps; 0 sleeps at once.
    pub idle_poll_time_us: u64,
    /// `overprovisioned` (Redpanda's `--overprovisioned`): this process shares its cores with
    /// other busy processes (several nodes on one host, a laptop, CI), so shards neither pin
    /// to cores nor poll (no idle polling, no polled disk I/O): a polling shard would take
    /// the core from the processes it shares it with. `strand cluster start` sets it when
    /// its nodes outnumber the cores they may use.
    pub overprovisioned: bool,
    /// Where `serve` writes its process id at start (`pid.file`; Redpanda's `pid_file`).
    pub pid_file: Option<PathBuf>,
    /// Cluster mode (`node.id` and friends, `cluster_config`); `None`: a single node.
    pub cluster: Option<crate::cluster_config::ClusterConfig>,
    /// Listeners, TLS, SASL and ACLs (`security::config`).
    pub security: crate::security::config::SecurityConfig,
}

/// Kafka's `log.cleaner.*` broker settings.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`: run compaction on topics whose `cleanup.policy` has `compact`.
    pub enable: bool,
    /// `log.cleaner.backoff.ms`: how often each shard looks for logs to clean.
    pub backoff_ms: u64,
    /// `log.cleaner.io.max.bytes.per.second`: cap on a pass's read + write rate; `None` = none.
    pub io_max_bytes_per_second: Option<u64>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            backoff_ms: 15_000,
            io_max_bytes_per_second: None,
        }
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: DEFAULT_LISTEN.to_string(),
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            admin_listen: DEFAULT_ADMIN_LISTEN.to_string(),
            metrics_enabled: true,
            metrics_partition_series_max: crate::limits::METRICS_PARTITION_SERIES_MAX as u32,
            cores: None,
            log: LogConfig::default(),
            retention_check_interval_ms: 300_000,
            auto_create_topics: true,
            num_partitions: crate::limits::DEFAULT_PARTITIONS,
            offsets_retention_minutes: 7 * 24 * 60,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_assignors: vec!["uniform".into(), "range".into()],
            group_consumer_max_size: i32::MAX,
            group_share_session_timeout_ms: 45_000,
            group_share_heartbeat_interval_ms: 5_000,
            group_share_max_size: 200,
            connections_max_idle_ms: 600_000,
            fetch_max_bytes: 57_671_680,
            max_incremental_fetch_session_cache_slots: 1_000,
            max_connections: i32::MAX,
            max_connections_per_ip: i32::MAX,
            topic_partitions_per_shard: 5_000,
            topic_fds_per_partition: 2,
            storage_min_free_bytes: 1 << 30,
            transaction_max_timeout_ms: 900_000,
            cleaner: CleanerConfig::default(),
            offsets_topic_segment_bytes: 100 << 20,
            io_properties_file: None,
            idle_poll_time_us: IDLE_POLL_TIME_US_DEFAULT,
            overprovisioned: false,
            pid_file: None,
            cluster: None,
            security: Default::default(),
        }
    }
}

/// `group.consumer.assignors`: a comma-separated list of `uniform` and `range`, or Kafka's
/// class names for them.
fn assignor_names(list: &str) -> Result<Vec<String>, ConfigError> {
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => Ok("uniform".into()),
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => Ok("range".into()),
            "uniform" | "range" => Ok(s.to_string()),
            other => Err(ConfigError(format!(
                "group.consumer.assignors: unknown assignor {other:?} (Strand has uniform and range)"
            ))),
        })
        .collect::<Result<_, _>>()?;
    if names.is_empty() {
        return Err(ConfigError(
            "group.consumer.assignors must name at least one assignor".into(),
        ));
    }
    Ok(names)
}

/// The TOML file's shape: every key optional, Kafka's names for log settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    #[serde(rename = "admin.listen")]
    pub admin_listen: Option<String>,
    #[serde(rename = "metrics.enabled")]
    pub metrics_enabled: Option<bool>,
    #[serde(rename = "metrics.partition.series.max")]
    pub metrics_partition_series_max: Option<u32>,
    pub cores: Option<usize>,
    #[serde(rename = "log.segment.bytes")]
    pub segment_bytes: Option<u64>,
    #[serde(rename = "log.roll.ms")]
    pub segment_ms: Option<u64>,
    #[serde(rename = "log.retention.ms")]
    pub retention_ms: Option<i64>,
    #[serde(rename = "log.retention.bytes")]
    pub retention_bytes: Option<i64>,
    #[serde(rename = "log.index.interval.bytes")]
    pub index_interval_bytes: Option<u32>,
    #[serde(rename = "log.flush.interval.ms")]
    pub flush_ms: Option<u64>,
    #[serde(rename = "log.flush.bytes")]
    pub flush_bytes: Option<u64>,
    #[serde(rename = "log.preallocate")]
    pub preallocate: Option<bool>,
    #[serde(rename = "log.cleanup.policy")]
    pub cleanup_policy: Option<String>,
    #[serde(rename = "log.cleaner.min.cleanable.ratio")]
    pub min_cleanable_dirty_ratio: Option<f64>,
    #[serde(rename = "log.cleaner.min.compaction.lag.ms")]
    pub min_compaction_lag_ms: Option<i64>,
    #[serde(rename = "log.cleaner.max.compaction.lag.ms")]
    pub max_compaction_lag_ms: Option<i64>,
    #[serde(rename = "log.cleaner.delete.retention.ms")]
    pub delete_retention_ms: Option<i64>,
    #[serde(rename = "log.cleaner.enable")]
    pub cleaner_enable: Option<bool>,
    #[serde(rename = "log.cleaner.backoff.ms")]
    pub cleaner_backoff_ms: Option<u64>,
    #[serde(rename = "log.cleaner.io.max.bytes.per.second")]
    pub cleaner_io_max_bytes_per_second: Option<u64>,
    #[serde(rename = "offsets.topic.segment.bytes")]
    pub offsets_topic_segment_bytes: Option<u64>,
    #[serde(rename = "log.retention.check.interval.ms")]
    pub retention_check_interval_ms: Option<u64>,
    #[serde(rename = "auto.create.topics.enable")]
    pub auto_create_topics: Option<bool>,
    #[serde(rename = "num.partitions")]
    pub num_partitions: Option<i32>,
    #[serde(rename = "offsets.retention.minutes")]
    pub offsets_retention_minutes: Option<i64>,
    #[serde(rename = "group.initial.rebalance.delay.ms")]
    pub group_initial_rebalance_delay_ms: Option<i64>,
    #[serde(rename = "group.max.size")]
    pub group_max_size: Option<i32>,
    #[serde(rename = "group.consumer.session.timeout.ms")]
    pub group_consumer_session_timeout_ms: Option<i64>,
    #[serde(rename = "group.consumer.heartbeat.interval.ms")]
    pub group_consumer_heartbeat_interval_ms: Option<i32>,
    #[serde(rename = "group.consumer.assignors")]
    pub group_consumer_assignors: Option<String>,
    #[serde(rename = "group.consumer.max.size")]
    pub group_consumer_max_size: Option<i32>,
    #[serde(rename = "group.share.session.timeout.ms")]
    pub group_share_session_timeout_ms: Option<i64>,
    #[serde(rename = "group.share.heartbeat.interval.ms")]
    pub group_share_heartbeat_interval_ms: Option<i32>,
    #[serde(rename = "group.share.max.size")]
    pub group_share_max_size: Option<i32>,
    #[serde(rename = "connections.max.idle.ms")]
    pub connections_max_idle_ms: Option<i64>,
    #[serde(rename = "fetch.max.bytes")]
    pub fetch_max_bytes: Option<i32>,
    #[serde(rename = "max.incremental.fetch.session.cache.slots")]
    pub max_incremental_fetch_session_cache_slots: Option<i32>,
    #[serde(rename = "max.connections")]
    pub max_connections: Option<i32>,
    #[serde(rename = "max.connections.per.ip")]
    pub max_connections_per_ip: Option<i32>,
    #[serde(rename = "topic.partitions.per.shard")]
    pub topic_partitions_per_shard: Option<i32>,
    #[serde(rename = "topic.fds.per.partition")]
    pub topic_fds_per_partition: Option<i32>,
    #[serde(rename = "storage.min.free.bytes")]
    pub storage_min_free_bytes: Option<u64>,
    #[serde(rename = "transaction.max.timeout.ms")]
    pub transaction_max_timeout_ms: Option<i32>,
    #[serde(rename = "io.properties.file")]
    pub io_properties_file: Option<PathBuf>,
    #[serde(rename = "idle.poll.time.us")]
    pub idle_poll_time_us: Option<u64>,
    pub overprovisioned: Option<bool>,
    #[serde(rename = "pid.file")]
    pub pid_file: Option<PathBuf>,
    #[serde(rename = "node.id")]
    pub node_id: Option<i32>,
    #[serde(rename = "controller.quorum.voters")]
    pub controller_quorum_voters: Option<String>,
    #[serde(rename = "cluster.id")]
    pub cluster_id: Option<String>,
    #[serde(rename = "advertised.listeners")]
    pub advertised_listeners: Option<String>,
    pub listeners: Option<String>,
    #[serde(rename = "listener.security.protocol.map")]
    pub listener_security_protocol_map: Option<String>,
    #[serde(rename = "ssl.keystore.type")]
    pub ssl_keystore_type: Option<String>,
    #[serde(rename = "ssl.keystore.location")]
    pub ssl_keystore_location: Option<PathBuf>,
    #[serde(rename = "ssl.keystore.key")]
    pub ssl_keystore_key: Option<String>,
    #[serde(rename = "ssl.keystore.certificate.chain")]
    pub ssl_keystore_certificate_chain: Option<String>,
    #[serde(rename = "ssl.key.password")]
    pub ssl_key_password: Option<String>,
    #[serde(rename = "ssl.truststore.type")]
    pub ssl_truststore_type: Option<String>,
    #[serde(rename = "ssl.truststore.location")]
    pub ssl_truststore_location: Option<PathBuf>,
    #[serde(rename = "ssl.truststore.certificates")]
    pub ssl_truststore_certificates: Option<String>,
    #[serde(rename = "ssl.client.auth")]
    pub ssl_client_auth: Option<String>,
    #[serde(rename = "sasl.enabled.mechanisms")]
    pub sasl_enabled_mechanisms: Option<String>,
    #[serde(rename = "super.users")]
    pub super_users: Option<String>,
    #[serde(rename = "authorizer.class.name")]
    pub authorizer_class_name: Option<String>,
    #[serde(rename = "allow.everyone.if.no.acl.found")]
    pub allow_everyone_if_no_acl_found: Option<bool>,
    #[serde(rename = "connections.max.reauth.ms")]
    pub connections_max_reauth_ms: Option<i64>,
    #[serde(rename = "connection.failed.authentication.delay.ms")]
    pub connection_failed_authentication_delay_ms: Option<u64>,
    #[serde(rename = "cluster.tls.ca.location")]
    pub cluster_tls_ca: Option<PathBuf>,
    #[serde(rename = "cluster.tls.certificate.location")]
    pub cluster_tls_certificate: Option<PathBuf>,
    #[serde(rename = "cluster.tls.key.location")]
    pub cluster_tls_key: Option<PathBuf>,
    #[serde(rename = "default.replication.factor")]
    pub default_replication_factor: Option<i16>,
    #[serde(rename = "offsets.topic.replication.factor")]
    pub offsets_topic_replication_factor: Option<i16>,
    #[serde(rename = "transaction.state.log.replication.factor")]
    pub transaction_state_log_replication_factor: Option<i16>,
    #[serde(rename = "transaction.state.log.min.isr")]
    pub transaction_state_log_min_isr: Option<i16>,
    #[serde(rename = "broker.session.timeout.ms")]
    pub broker_session_timeout_ms: Option<u64>,
    #[serde(rename = "broker.heartbeat.interval.ms")]
    pub broker_heartbeat_interval_ms: Option<u64>,
    #[serde(rename = "controller.quorum.election.timeout.ms")]
    pub controller_quorum_election_timeout_ms: Option<u64>,
    #[serde(rename = "replica.lag.time.max.ms")]
    pub replica_lag_time_max_ms: Option<u64>,
    #[serde(rename = "cluster.liveness.tripwire")]
    pub cluster_liveness_tripwire: Option<bool>,
}

#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl BrokerConfig {
    /// Defaults overlaid with the TOML file at `path`, if given.
    pub fn load(path: Option<&Path>) -> Result<BrokerConfig, ConfigError> {
        let mut config = BrokerConfig::default();
        if let Some(path) = path {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
            let file: FileConfig = toml::from_str(&text)
                .map_err(|e| ConfigError(format!("bad config {}: {e}", path.display())))?;
            config.apply(file)?;
        }
        config.validate()?;
        Ok(config)
    }

    pub fn apply(&mut self, f: FileConfig) -> Result<(), ConfigError> {
        let log = &mut self.log;
        macro_rules! set {
            ($dst:expr, $src:expr) => {
                if let Some(v) = $src {
                    $dst = v;
                }
            };
        }
        set!(self.listen, f.listen);
        set!(self.idle_poll_time_us, f.idle_poll_time_us);
        set!(self.overprovisioned, f.overprovisioned);
        set!(self.data_dir, f.data_dir);
        if f.cores.is_some() {
            self.cores = f.cores;
        }
        if f.io_properties_file.is_some() {
            self.io_properties_file = f.io_properties_file;
        }
        if f.pid_file.is_some() {
            self.pid_file = f.pid_file;
        }
        set!(log.segment_bytes, f.segment_bytes);
        set!(log.segment_ms, f.segment_ms);
        set!(log.retention_ms, f.retention_ms);
        set!(log.retention_bytes, f.retention_bytes);
        set!(log.index_interval_bytes, f.index_interval_bytes);
        set!(log.flush_ms, f.flush_ms);
        set!(log.flush_bytes, f.flush_bytes);
        set!(log.preallocate, f.preallocate);
        if let Some(p) = f.cleanup_policy {
            log.cleanup_policy = CleanupPolicy::parse(&p).map_err(ConfigError)?;
        }
        set!(log.min_cleanable_dirty_ratio, f.min_cleanable_dirty_ratio);
        set!(log.min_compaction_lag_ms, f.min_compaction_lag_ms);
        set!(log.max_compaction_lag_ms, f.max_compaction_lag_ms);
        set!(log.delete_retention_ms, f.delete_retention_ms);
        set!(self.cleaner.enable, f.cleaner_enable);
        set!(self.cleaner.backoff_ms, f.cleaner_backoff_ms);
        if f.cleaner_io_max_bytes_per_second.is_some() {
            self.cleaner.io_max_bytes_per_second = f.cleaner_io_max_bytes_per_second;
        }
        set!(
            self.offsets_topic_segment_bytes,
            f.offsets_topic_segment_bytes
        );
        set!(
            self.retention_check_interval_ms,
            f.retention_check_interval_ms
        );
        set!(self.auto_create_topics, f.auto_create_topics);
        set!(self.num_partitions, f.num_partitions);
        set!(self.offsets_retention_minutes, f.offsets_retention_minutes);
        set!(
            self.group_initial_rebalance_delay_ms,
            f.group_initial_rebalance_delay_ms
        );
        set!(self.group_max_size, f.group_max_size);
        set!(
            self.group_consumer_session_timeout_ms,
            f.group_consumer_session_timeout_ms
        );
        set!(
            self.group_consumer_heartbeat_interval_ms,
            f.group_consumer_heartbeat_interval_ms
        );
        if let Some(list) = f.group_consumer_assignors {
            self.group_consumer_assignors = assignor_names(&list)?;
        }
        set!(self.group_consumer_max_size, f.group_consumer_max_size);
        set!(
            self.group_share_session_timeout_ms,
            f.group_share_session_timeout_ms
        );
        set!(
            self.group_share_heartbeat_interval_ms,
            f.group_share_heartbeat_interval_ms
        );
        set!(self.group_share_max_size, f.group_share_max_size);
        set!(self.connections_max_idle_ms, f.connections_max_idle_ms);
        set!(self.fetch_max_bytes, f.fetch_max_bytes);
        set!(self.admin_listen, f.admin_listen);
        set!(self.metrics_enabled, f.metrics_enabled);
        set!(
            self.metrics_partition_series_max,
            f.metrics_partition_series_max
        );
        set!(
            self.max_incremental_fetch_session_cache_slots,
            f.max_incremental_fetch_session_cache_slots
        );
        set!(self.max_connections, f.max_connections);
        set!(self.max_connections_per_ip, f.max_connections_per_ip);
        set!(self.storage_min_free_bytes, f.storage_min_free_bytes);
        set!(
            self.topic_partitions_per_shard,
            f.topic_partitions_per_shard
        );
        set!(self.topic_fds_per_partition, f.topic_fds_per_partition);
        set!(
            self.transaction_max_timeout_ms,
            f.transaction_max_timeout_ms
        );
        // A single node's `advertised.listeners` names its listeners; a cluster node's is the
        // endpoint it registers (`cluster_config`).
        let (single_advertised, cluster_advertised) = match f.node_id {
            Some(_) => (None, f.advertised_listeners),
            None => (f.advertised_listeners, None),
        };
        crate::security::config::SecurityKeys {
            listeners: f.listeners,
            protocol_map: f.listener_security_protocol_map,
            advertised_listeners: single_advertised,
            keystore_type: f.ssl_keystore_type,
            keystore_location: f.ssl_keystore_location,
            keystore_key: f.ssl_keystore_key,
            keystore_certificate_chain: f.ssl_keystore_certificate_chain,
            key_password: f.ssl_key_password,
            truststore_type: f.ssl_truststore_type,
            truststore_location: f.ssl_truststore_location,
            truststore_certificates: f.ssl_truststore_certificates,
            client_auth: f.ssl_client_auth,
            sasl_enabled_mechanisms: f.sasl_enabled_mechanisms,
            super_users: f.super_users,
            authorizer_class_name: f.authorizer_class_name,
            allow_everyone_if_no_acl_found: f.allow_everyone_if_no_acl_found,
            connections_max_reauth_ms: f.connections_max_reauth_ms,
            failed_authentication_delay_ms: f.connection_failed_authentication_delay_ms,
        }
        .resolve(&mut self.security)
        .map_err(|e| ConfigError(e.0))?;
        if let Some(first) = self.security.listeners.as_ref().and_then(|l| l.first()) {
            // What still reads `listen` (logs, a cluster node's default endpoint) sees the first.
            self.listen = first.bind.to_string();
        }
        self.cluster = crate::cluster_config::ClusterKeys {
            node_id: f.node_id,
            voters: f.controller_quorum_voters,
            cluster_id: f.cluster_id,
            advertised_listeners: cluster_advertised,
            tls_ca: f.cluster_tls_ca,
            tls_certificate: f.cluster_tls_certificate,
            tls_key: f.cluster_tls_key,
            default_replication_factor: f.default_replication_factor,
            offsets_topic_replication_factor: f.offsets_topic_replication_factor,
            transaction_state_log_replication_factor: f.transaction_state_log_replication_factor,
            transaction_state_log_min_isr: f.transaction_state_log_min_isr,
            broker_session_timeout_ms: f.broker_session_timeout_ms,
            broker_heartbeat_interval_ms: f.broker_heartbeat_interval_ms,
            election_timeout_ms: f.controller_quorum_election_timeout_ms,
            replica_lag_time_max_ms: f.replica_lag_time_max_ms,
            liveness_tripwire: f.cluster_liveness_tripwire,
        }
        .resolve()
        .map_err(|e| ConfigError(e.0))?;
        Ok(())
    }

    /// The Kafka listeners: `listeners`, or one PLAINTEXT listener on `listen`.
    pub fn listeners(&self) -> Vec<crate::security::config::Listener> {
        if let Some(l) = &self.security.listeners {
            return l.clone();
        }
        let bind = self
            .listen
            .parse::<std::net::SocketAddr>()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 9092)));
        vec![crate::security::config::Listener {
            name: "PLAINTEXT".into(),
            protocol: crate::security::config::SecurityProtocol::Plaintext,
            bind,
            advertised: (bind.ip().to_string(), bind.port()),
        }]
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.idle_poll_time_us > 100_000 {
            return Err(ConfigError(format!(
                "idle.poll.time.us must be at most 100000 (100 ms), got {}",
                self.idle_poll_time_us
            )));
        }
        let max = crate::storage::log::SEGMENT_BYTES_MAX;
        if self.log.segment_bytes < 14 || self.log.segment_bytes > max {
            return Err(ConfigError(format!(
                "log.segment.bytes must be between 14 and {max}, got {}",
                self.log.segment_bytes
            )));
        }
        if self.num_partitions < 1 || self.num_partitions > crate::limits::PARTITIONS_PER_TOPIC_MAX
        {
            return Err(ConfigError(format!(
                "num.partitions out of range: {}",
                self.num_partitions
            )));
        }
        if !(0.0..=1.0).contains(&self.log.min_cleanable_dirty_ratio) {
            return Err(ConfigError(format!(
                "log.cleaner.min.cleanable.ratio must be between 0 and 1, got {}",
                self.log.min_cleanable_dirty_ratio
            )));
        }
        if self.offsets_topic_segment_bytes < 14 || self.offsets_topic_segment_bytes > max {
            return Err(ConfigError(format!(
                "offsets.topic.segment.bytes must be between 14 and {max}, got {}",
                self.offsets_topic_segment_bytes
            )));
        }
        if self.transaction_max_timeout_ms < 1 {
            return Err(ConfigError(format!(
                "transaction.max.timeout.ms must be positive, got {}",
                self.transaction_max_timeout_ms
            )));
        }
        if self.group_initial_rebalance_delay_ms < 0 {
            return Err(ConfigError(format!(
                "group.initial.rebalance.delay.ms must not be negative, got {}",
                self.group_initial_rebalance_delay_ms
            )));
        }
        if self.group_consumer_heartbeat_interval_ms < 1
            || i64::from(self.group_consumer_heartbeat_interval_ms)
                >= self.group_consumer_session_timeout_ms
        {
            return Err(ConfigError(format!(
                "group.consumer.heartbeat.interval.ms ({}) must be positive and below \
                 group.consumer.session.timeout.ms ({})",
                self.group_consumer_heartbeat_interval_ms, self.group_consumer_session_timeout_ms
            )));
        }
        if self.group_share_heartbeat_interval_ms < 1
            || i64::from(self.group_share_heartbeat_interval_ms)
                >= self.group_share_session_timeout_ms
            || self.group_share_max_size < 1
        {
            return Err(ConfigError(format!(
                "group.share.heartbeat.interval.ms ({}) must be positive and below \
                 group.share.session.timeout.ms ({}); group.share.max.size ({}) at least 1",
                self.group_share_heartbeat_interval_ms,
                self.group_share_session_timeout_ms,
                self.group_share_max_size
            )));
        }
        if self.group_consumer_max_size < 1 {
            return Err(ConfigError(format!(
                "group.consumer.max.size must be at least 1, got {}",
                self.group_consumer_max_size
            )));
        }
        if self.group_max_size < 1 {
            return Err(ConfigError(format!(
                "group.max.size must be at least 1, got {}",
                self.group_max_size
            )));
        }
        if self.connections_max_idle_ms < 1 {
            return Err(ConfigError(format!(
                "connections.max.idle.ms must be positive, got {}",
                self.connections_max_idle_ms
            )));
        }
        if self.max_connections < 1 || self.max_connections_per_ip < 1 {
            return Err(ConfigError(format!(
                "max.connections ({}) and max.connections.per.ip ({}) must be at least 1",
                self.max_connections, self.max_connections_per_ip
            )));
        }
        if self.topic_fds_per_partition < 1 {
            return Err(ConfigError(format!(
                "topic.fds.per.partition must be at least 1, got {}",
                self.topic_fds_per_partition
            )));
        }
        if self.topic_partitions_per_shard < 1 {
            return Err(ConfigError(format!(
                "topic.partitions.per.shard must be at least 1, got {}",
                self.topic_partitions_per_shard
            )));
        }
        if self.fetch_max_bytes < 1024 {
            return Err(ConfigError(format!(
                "fetch.max.bytes must be at least 1024, got {}",
                self.fetch_max_bytes
            )));
        }
        if self.max_incremental_fetch_session_cache_slots < 0 {
            return Err(ConfigError(format!(
                "max.incremental.fetch.session.cache.slots must be at least 0, got {}",
                self.max_incremental_fetch_session_cache_slots
            )));
        }
        if self.cores == Some(0) {
            return Err(ConfigError("cores must be at least 1".into()));
        }
        if !self.admin_listen.is_empty()
            && self.admin_listen.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(ConfigError(format!(
                "admin.listen must be HOST:PORT or empty (off), got {:?}",
                self.admin_listen
            )));
        }
        self.security
            .validate(&self.listeners())
            .map_err(|e| ConfigError(e.0))?;
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(ConfigError(format!(
                "listen must be HOST:PORT, got {:?}",
                self.listen
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_overrides_defaults_with_kafka_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("strand.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:19092\"\n\"log.segment.bytes\" = 1048576\n\"log.retention.ms\" = -1\n\
             \"io.properties.file\" = \"/etc/strand/io.toml\"\n",
        )
        .expect("write");
        let c = BrokerConfig::load(Some(&path)).expect("loads");
        assert_eq!(c.listen, "127.0.0.1:19092");
        assert_eq!(c.log.segment_bytes, 1 << 20);
        assert_eq!(c.log.retention_ms, -1);
        assert_eq!(c.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(
            c.io_properties_file,
            Some(PathBuf::from("/etc/strand/io.toml"))
        );
        assert_eq!(BrokerConfig::default().io_properties_file, None);

        std::fs::write(
            &path,
            "\"log.cleanup.policy\" = \"compact,delete\"\n\"log.cleaner.backoff.ms\" = 50\n\"num.partitions\" = 3\n\"offsets.retention.minutes\" = 5\n\"auto.create.topics.enable\" = false\n",
        )
        .expect("write");
        let c = BrokerConfig::load(Some(&path)).expect("loads");
        assert_eq!(
            c.log.cleanup_policy,
            CleanupPolicy {
                compact: true,
                delete: true
            }
        );
        assert_eq!(c.cleaner.backoff_ms, 50);
        assert_eq!((c.num_partitions, c.offsets_retention_minutes), (3, 5));
        assert!(!c.auto_create_topics);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("strand.toml");
        std::fs::write(&path, "lisen = \"x\"\n").expect("write");
        assert!(BrokerConfig::load(Some(&path)).is_err());
        std::fs::write(&path, "\"log.segment.bytes\" = 1\n").expect("write");
        assert!(BrokerConfig::load(Some(&path)).is_err());
        std::fs::write(&path, "\"log.cleanup.policy\" = \"shred\"\n").expect("write");
        assert!(BrokerConfig::load(Some(&path)).is_err());
        std::fs::write(&path, "\"log.cleaner.min.cleanable.ratio\" = 1.5\n").expect("write");
        assert!(BrokerConfig::load(Some(&path)).is_err());
        std::fs::write(&path, "\"idle.poll.time.us\" = 100001\n").expect("write");
        let e = BrokerConfig::load(Some(&path))
            .and_then(|c| c.validate().map(|()| c))
            .expect_err("above 100 ms");
        assert!(e.0.contains("idle.poll.time.us"), "{}", e.0);
        std::fs::write(&path, "\"idle.poll.time.us\" = 200\n").expect("write");
        let c = BrokerConfig::load(Some(&path)).expect("loads");
        assert_eq!(c.idle_poll_time_us, 200);
        assert_eq!(BrokerConfig::default().idle_poll_time_us, 0);
    }
}
