//! The cluster settings of `strand serve`, by Kafka's names where Kafka has one. With no
//! `node.id` the process is today's single-node broker and none of this applies.
//!
//! | key | Kafka's | meaning |
//! |---|---|---|
//! | `node.id` | yes | this node's id; turns cluster mode on |
//! | `controller.quorum.voters` | yes | `1@host:port,2@host:port,3@host:port`: the metadata quorum's voters and their cluster (UDP, QUIC) addresses; every node is a voter for now (broker-only nodes come later), so it must list `node.id` |
//! | `cluster.id` | `kafka-storage format -t` | the cluster's id: checked against the data directory and at registration |
//! | `advertised.listeners` | yes | `PLAINTEXT://host:port` or `host:port` clients are told to use (default: `listen`) |
//! | `cluster.tls.ca.location`, `cluster.tls.certificate.location`, `cluster.tls.key.location` | no | PEM files for the cluster transport's mutual TLS (`strand cluster certs` writes a development set) |
//! | `default.replication.factor` | yes | for CreateTopics with -1 and auto-created topics (Kafka's 1; INVALID_REPLICATION_FACTOR above the live brokers) |
//! | `broker.session.timeout.ms` | yes | a broker without heartbeats for this long is fenced (Kafka's 9000) |
//! | `broker.heartbeat.interval.ms` | yes | how often a broker heartbeats (Kafka's 2000) |
//! | `controller.quorum.election.timeout.ms` | yes | raft election timeout (Kafka's 1000) |
//! | `replica.lag.time.max.ms` | yes | an in-sync follower not caught up for this long leaves the ISR (Kafka's 30000) |
//! | `cluster.liveness.tripwire` | no | `true` (default): a node whose process died (its tripwire connection closed and its cluster port refuses, `cluster::tripwire`) is fenced at once, not after `broker.session.timeout.ms`; `false`: Kafka's behaviour exactly |

use std::net::SocketAddr;
use std::path::PathBuf;

/// A refused setting, naming the key (the config module wraps it).
#[derive(Debug)]
pub struct ConfigError(pub String);

/// Cluster mode's settings (present only when `node.id` is set).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    pub node_id: i32,
    /// Every voter and its cluster (UDP) address, in the order given.
    pub voters: Vec<(i32, SocketAddr)>,
    pub cluster_id: String,
    /// `(host, port)` clients are told to use; `None`: the client listener's address.
    pub advertised: Option<(String, u16)>,
    pub tls_ca: PathBuf,
    pub tls_certificate: PathBuf,
    pub tls_key: PathBuf,
    pub default_replication_factor: i16,
    /// Replicas of `__consumer_offsets` and `__transaction_state` (Kafka's
    /// `offsets.topic.replication.factor` / `transaction.state.log.replication.factor`, 3),
    /// capped at the brokers registered when the topics are created.
    pub offsets_topic_replication_factor: i16,
    pub transaction_state_log_replication_factor: i16,
    /// `min.insync.replicas` of `__transaction_state` (Kafka's `transaction.state.log.min.isr`,
    /// 2), capped at its replication factor.
    pub transaction_state_log_min_isr: i16,
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub election_timeout_ms: u64,
    pub replica_lag_time_max_ms: u64,
    /// `cluster.liveness.tripwire`.
    pub liveness_tripwire: bool,
}

/// The cluster keys of the config file, as read (all optional).
#[derive(Debug, Default)]
pub struct ClusterKeys {
    pub node_id: Option<i32>,
    pub voters: Option<String>,
    pub cluster_id: Option<String>,
    pub advertised_listeners: Option<String>,
    pub tls_ca: Option<PathBuf>,
    pub tls_certificate: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub default_replication_factor: Option<i16>,
    pub offsets_topic_replication_factor: Option<i16>,
    pub transaction_state_log_replication_factor: Option<i16>,
    pub transaction_state_log_min_isr: Option<i16>,
    pub broker_session_timeout_ms: Option<u64>,
    pub broker_heartbeat_interval_ms: Option<u64>,
    pub election_timeout_ms: Option<u64>,
    pub replica_lag_time_max_ms: Option<u64>,
    pub liveness_tripwire: Option<bool>,
}

fn err(msg: String) -> ConfigError {
    ConfigError(msg)
}

/// Parses `1@host:port,2@host:port` (ids unique, addresses resolvable now).
pub fn parse_voters(text: &str) -> Result<Vec<(i32, SocketAddr)>, ConfigError> {
    let mut voters: Vec<(i32, SocketAddr)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, addr) = item.split_once('@').ok_or_else(|| {
            err(format!(
                "controller.quorum.voters: {item:?} is not ID@HOST:PORT"
            ))
        })?;
        let id: i32 = id.trim().parse().map_err(|_| {
            err(format!(
                "controller.quorum.voters: node id {id:?} is not a number"
            ))
        })?;
        if id < 0 || voters.iter().any(|(v, _)| *v == id) {
            return Err(err(format!(
                "controller.quorum.voters: node id {id} is negative or repeated"
            )));
        }
        let addr = std::net::ToSocketAddrs::to_socket_addrs(addr.trim())
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                err(format!(
                    "controller.quorum.voters: cannot resolve {addr:?} (HOST:PORT)"
                ))
            })?;
        voters.push((id, addr));
    }
    if voters.is_empty() {
        return Err(err("controller.quorum.voters lists no voter".into()));
    }
    Ok(voters)
}

/// Parses `advertised.listeners`: one `PLAINTEXT://host:port` (or `host:port`).
pub fn parse_advertised(text: &str) -> Result<(String, u16), ConfigError> {
    let first = text.split(',').next().unwrap_or("").trim();
    let addr = match first.split_once("://") {
        Some((proto, rest)) if proto.eq_ignore_ascii_case("PLAINTEXT") => rest,
        Some((proto, _)) => {
            return Err(err(format!(
                "advertised.listeners: only PLAINTEXT listeners exist so far, got {proto}"
            )))
        }
        None => first,
    };
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| err(format!("advertised.listeners: {addr:?} is not HOST:PORT")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| err(format!("advertised.listeners: bad port in {addr:?}")))?;
    if host.is_empty() {
        return Err(err(format!("advertised.listeners: no host in {addr:?}")));
    }
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

impl ClusterKeys {
    /// `None` when `node.id` is absent (single node: then no other cluster key may be set).
    pub fn resolve(self) -> Result<Option<ClusterConfig>, ConfigError> {
        let Some(node_id) = self.node_id else {
            let stray = [
                ("controller.quorum.voters", self.voters.is_some()),
                ("cluster.id", self.cluster_id.is_some()),
                ("cluster.tls.ca.location", self.tls_ca.is_some()),
            ];
            if let Some((name, _)) = stray.iter().find(|(_, set)| *set) {
                return Err(err(format!(
                    "{name} is set but node.id is not: set node.id to run as a cluster node"
                )));
            }
            return Ok(None);
        };
        let need = |v: Option<PathBuf>, name: &str| {
            v.ok_or_else(|| {
                err(format!(
                    "node.id is set, so {name} is needed (`strand cluster certs` writes a development set)"
                ))
            })
        };
        let voters = parse_voters(self.voters.as_deref().ok_or_else(|| {
            err("node.id is set, so controller.quorum.voters is needed (ID@HOST:PORT,...)".into())
        })?)?;
        if !voters.iter().any(|(v, _)| *v == node_id) {
            return Err(err(format!(
                "node.id {node_id} is not among controller.quorum.voters: every node is a voter for now"
            )));
        }
        let cluster_id = self
            .cluster_id
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| {
                err("node.id is set, so cluster.id is needed (the same on every node)".into())
            })?;
        let advertised = self
            .advertised_listeners
            .as_deref()
            .map(parse_advertised)
            .transpose()?;
        let c = ClusterConfig {
            node_id,
            voters,
            cluster_id,
            advertised,
            tls_ca: need(self.tls_ca, "cluster.tls.ca.location")?,
            tls_certificate: need(self.tls_certificate, "cluster.tls.certificate.location")?,
            tls_key: need(self.tls_key, "cluster.tls.key.location")?,
            default_replication_factor: self.default_replication_factor.unwrap_or(1),
            offsets_topic_replication_factor: self.offsets_topic_replication_factor.unwrap_or(3),
            transaction_state_log_replication_factor: self
                .transaction_state_log_replication_factor
                .unwrap_or(3),
            transaction_state_log_min_isr: self.transaction_state_log_min_isr.unwrap_or(2),
            broker_session_timeout_ms: self.broker_session_timeout_ms.unwrap_or(9_000),
            broker_heartbeat_interval_ms: self.broker_heartbeat_interval_ms.unwrap_or(2_000),
            election_timeout_ms: self.election_timeout_ms.unwrap_or(1_000),
            replica_lag_time_max_ms: self
                .replica_lag_time_max_ms
                .unwrap_or(crate::limits::REPLICA_LAG_TIME_MAX_MS),
            liveness_tripwire: self.liveness_tripwire.unwrap_or(true),
        };
        if node_id < 0 {
            return Err(err(format!("node.id must not be negative, got {node_id}")));
        }
        if c.cluster_id.len() > 64
            || !c
                .cluster_id
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
        {
            return Err(err(format!(
                "cluster.id must be 1-64 characters of A-Z, a-z, 0-9, '-', '_', '.', got {:?}",
                c.cluster_id
            )));
        }
        if c.default_replication_factor < 1 {
            return Err(err(format!(
                "default.replication.factor must be at least 1, got {}",
                c.default_replication_factor
            )));
        }
        for (key, value) in [
            (
                "offsets.topic.replication.factor",
                c.offsets_topic_replication_factor,
            ),
            (
                "transaction.state.log.replication.factor",
                c.transaction_state_log_replication_factor,
            ),
            (
                "transaction.state.log.min.isr",
                c.transaction_state_log_min_isr,
            ),
        ] {
            if value < 1 {
                return Err(err(format!("{key} must be at least 1, got {value}")));
            }
        }
        if c.broker_heartbeat_interval_ms == 0
            || c.broker_session_timeout_ms < 2 * c.broker_heartbeat_interval_ms
        {
            return Err(err(format!(
                "broker.session.timeout.ms ({}) must be at least twice broker.heartbeat.interval.ms ({}, > 0)",
                c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms
            )));
        }
        if !(100..=60_000).contains(&c.election_timeout_ms) {
            return Err(err(format!(
                "controller.quorum.election.timeout.ms must be between 100 and 60000, got {}",
                c.election_timeout_ms
            )));
        }
        // Above the followers' fetch wait, or an idle follower parked at the leader would
        // look lagging (Kafka requires replica.fetch.wait.max.ms below it too).
        let lag_min_ms = 2 * crate::limits::REPLICA_FETCH_WAIT_MS;
        if !(lag_min_ms..=3_600_000).contains(&c.replica_lag_time_max_ms) {
            return Err(err(format!(
                "replica.lag.time.max.ms must be between {lag_min_ms} and 3600000, got {}",
                c.replica_lag_time_max_ms
            )));
        }
        Ok(Some(c))
    }
}

impl ClusterConfig {
    /// This node's cluster (UDP) address, from the voters list.
    pub fn cluster_addr(&self) -> SocketAddr {
        self.voters
            .iter()
            .find(|(v, _)| *v == self.node_id)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| unreachable!("resolve() checked node.id is a voter"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ClusterKeys {
        ClusterKeys {
            node_id: Some(2),
            voters: Some("1@127.0.0.1:19001, 2@127.0.0.1:19002,3@127.0.0.1:19003".into()),
            cluster_id: Some("c1".into()),
            tls_ca: Some("ca.pem".into()),
            tls_certificate: Some("node-2.pem".into()),
            tls_key: Some("node-2.key".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_full_set_resolves_with_kafkas_defaults() {
        let c = keys().resolve().expect("valid").expect("cluster mode");
        assert_eq!(c.node_id, 2);
        assert_eq!(c.voters.len(), 3);
        assert_eq!(c.cluster_addr(), "127.0.0.1:19002".parse().expect("addr"));
        assert_eq!(
            (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms),
            (9_000, 2_000)
        );
        assert_eq!(ClusterKeys::default().resolve().expect("single"), None);
    }

    #[test]
    fn mistakes_are_named() {
        let cases: Vec<(ClusterKeys, &str)> = vec![
            (
                ClusterKeys {
                    node_id: Some(9),
                    ..keys()
                },
                "not among controller.quorum.voters",
            ),
            (
                ClusterKeys {
                    voters: Some("1@127.0.0.1:1,1@127.0.0.1:2".into()),
                    ..keys()
                },
                "repeated",
            ),
            (
                ClusterKeys {
                    voters: Some("one@127.0.0.1:1".into()),
                    ..keys()
                },
                "not a number",
            ),
            (
                ClusterKeys {
                    cluster_id: None,
                    ..keys()
                },
                "cluster.id is needed",
            ),
            (
                ClusterKeys {
                    tls_key: None,
                    ..keys()
                },
                "cluster.tls.key.location",
            ),
            (
                ClusterKeys {
                    node_id: None,
                    ..keys()
                },
                "node.id is not",
            ),
            (
                ClusterKeys {
                    broker_session_timeout_ms: Some(1000),
                    ..keys()
                },
                "at least twice",
            ),
            (
                ClusterKeys {
                    replica_lag_time_max_ms: Some(10),
                    ..keys()
                },
                "replica.lag.time.max.ms",
            ),
        ];
        for (k, want) in cases {
            let e = k.resolve().expect_err(want);
            assert!(e.0.contains(want), "{} should mention {want}", e.0);
        }
    }

    #[test]
    fn advertised_listeners_take_kafkas_form() {
        assert_eq!(
            parse_advertised("PLAINTEXT://broker-1:9092").expect("ok"),
            ("broker-1".to_string(), 9092)
        );
        assert_eq!(
            parse_advertised("10.0.0.1:19092").expect("ok"),
            ("10.0.0.1".to_string(), 19092)
        );
        assert!(parse_advertised("SASL_SSL://h:1").is_err());
        assert!(parse_advertised("h").is_err());
    }
}
