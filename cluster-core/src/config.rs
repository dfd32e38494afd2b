//! The cluster settings by Kafka's names, parsed and checked without I/O: `node.id`,
//! `controller.quorum.voters` (`1@host:port,2@host:port,3@host:port`), the advertised client
//! and cluster endpoints, and the timeouts. A node with none of them set is today's
//! single-node broker ([`ClusterConfig::single_node`]).

use std::collections::BTreeSet;

use crate::records::{Endpoint, NodeId};

/// One voter of the metadata quorum: its node id and its cluster (QUIC) endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voter {
    pub id: NodeId,
    pub endpoint: Endpoint,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `node.id`.
    pub node_id: NodeId,
    /// `controller.quorum.voters`, sorted by id. Empty: a single node (no quorum).
    pub voters: Vec<Voter>,
    /// `broker.session.timeout.ms` (Kafka's default 9000).
    pub session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms` (Kafka's default 2000).
    pub heartbeat_interval_ms: u64,
    /// `controller.quorum.election.timeout.ms` (Kafka's default 1000).
    pub election_timeout_ms: u64,
    /// `default.replication.factor` (Kafka's default 1).
    pub default_replication_factor: i16,
}

pub const SESSION_TIMEOUT_MS_DEFAULT: u64 = 9_000;
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 2_000;
pub const ELECTION_TIMEOUT_MS_DEFAULT: u64 = 1_000;

impl ClusterConfig {
    /// Today's broker: node 0, no quorum.
    pub fn single_node() -> ClusterConfig {
        ClusterConfig {
            node_id: 0,
            voters: Vec::new(),
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            election_timeout_ms: ELECTION_TIMEOUT_MS_DEFAULT,
            default_replication_factor: 1,
        }
    }

    pub fn is_cluster(&self) -> bool {
        !self.voters.is_empty()
    }

    /// Whether this node is one of the quorum's voters (a controller candidate).
    pub fn is_voter(&self) -> bool {
        self.voters.iter().any(|v| v.id == self.node_id)
    }

    /// Checks the settings together; the message names Kafka's config keys.
    pub fn validate(&self) -> Result<(), String> {
        if self.node_id < 0 {
            return Err(format!("node.id must be >= 0 (got {})", self.node_id));
        }
        if self.is_cluster() && !self.is_voter() {
            // Brokers that are not voters come with part 2's replication; until then every
            // node of a cluster is a voter, as in a small KRaft cluster with combined roles.
            return Err(format!(
                "node.id {} is not in controller.quorum.voters ({}): every node must be a voter",
                self.node_id,
                voters_text(&self.voters)
            ));
        }
        if self.heartbeat_interval_ms == 0 || self.heartbeat_interval_ms >= self.session_timeout_ms
        {
            return Err(format!(
                "broker.heartbeat.interval.ms ({}) must be above 0 and below broker.session.timeout.ms ({})",
                self.heartbeat_interval_ms, self.session_timeout_ms
            ));
        }
        if self.election_timeout_ms < 10 {
            return Err(format!(
                "controller.quorum.election.timeout.ms must be at least 10 (got {})",
                self.election_timeout_ms
            ));
        }
        if self.default_replication_factor < 1 {
            return Err(format!(
                "default.replication.factor must be >= 1 (got {})",
                self.default_replication_factor
            ));
        }
        Ok(())
    }
}

/// Parses `controller.quorum.voters`: `id@host:port` separated by commas (spaces allowed
/// around them); ids distinct and non-negative; hosts may be IPv6 in brackets.
pub fn parse_voters(text: &str) -> Result<Vec<Voter>, String> {
    let mut voters = Vec::new();
    let mut ids = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = |why: &str| {
            format!("controller.quorum.voters: {part:?} {why} (expected id@host:port, e.g. 1@127.0.0.1:9093)")
        };
        let (id, addr) = part.split_once('@').ok_or_else(|| bad("has no '@'"))?;
        let id: NodeId = id.trim().parse().map_err(|_| bad("has no numeric id"))?;
        if id < 0 {
            return Err(bad("has a negative id"));
        }
        let endpoint = parse_endpoint(addr.trim()).map_err(|e| bad(&e))?;
        if !ids.insert(id) {
            return Err(format!(
                "controller.quorum.voters: node id {id} appears twice"
            ));
        }
        voters.push(Voter { id, endpoint });
    }
    voters.sort_by_key(|v| v.id);
    Ok(voters)
}

/// `host:port` or `[v6]:port`.
pub fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, tail) = rest
            .split_once(']')
            .ok_or_else(|| "has an unclosed '['".to_string())?;
        let port = tail
            .strip_prefix(':')
            .ok_or_else(|| "has no port".to_string())?;
        (host, port)
    } else {
        text.rsplit_once(':')
            .ok_or_else(|| "has no port".to_string())?
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("has a port {port:?} that is not a number from 1 to 65535"))?;
    if port == 0 {
        return Err("has port 0".into());
    }
    Ok(Endpoint {
        host: host.to_string(),
        port,
    })
}

fn voters_text(voters: &[Voter]) -> String {
    voters
        .iter()
        .map(|v| format!("{}@{}", v.id, v.endpoint))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_in_kafkas_format() {
        let v = parse_voters("3@127.0.0.1:9095, 1@localhost:9093,2@[::1]:9094").unwrap();
        assert_eq!(v.iter().map(|v| v.id).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(v[0].endpoint.to_string(), "localhost:9093");
        assert_eq!(v[1].endpoint.host, "::1");
        assert_eq!(v[1].endpoint.port, 9094);
        assert!(parse_voters("").unwrap().is_empty());
    }

    #[test]
    fn bad_voters_are_refused_with_a_clear_message() {
        for (text, needle) in [
            ("1:9093", "has no '@'"),
            ("x@h:1", "no numeric id"),
            ("-1@h:1", "negative id"),
            ("1@h", "has no port"),
            ("1@h:99999", "not a number from 1 to 65535"),
            ("1@:9093", "has no host"),
            ("1@[::1:9093", "unclosed"),
            ("1@a:1,1@b:2", "appears twice"),
        ] {
            let e = parse_voters(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn a_cluster_node_must_be_a_voter_and_timeouts_must_fit() {
        let mut c = ClusterConfig::single_node();
        assert!(c.validate().is_ok() && !c.is_cluster());
        c.voters = parse_voters("1@h:1,2@h:2").unwrap();
        c.node_id = 3;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("not in controller.quorum.voters"));
        c.node_id = 2;
        assert!(c.validate().is_ok() && c.is_voter());
        c.heartbeat_interval_ms = c.session_timeout_ms;
        assert!(c
            .validate()
            .unwrap_err()
            .contains("broker.heartbeat.interval.ms"));
    }
}
