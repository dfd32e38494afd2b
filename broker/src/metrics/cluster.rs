//! The cluster's series in a scrape (#20), from this node's view of the metadata image and
//! its quorum state. Kafka's conventions: a broker counts the under-replicated partitions it
//! leads (summed over brokers: the cluster's), while offline partitions and the controller's
//! state are the same on every node that caught up (take the `max` across nodes).

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// This node's cluster gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterGauges {
    pub node_id: i32,
    /// The quorum leader (the active controller) is this node.
    pub controller_active: bool,
    /// The active controller as this node knows it (-1: none known).
    pub controller_id: i64,
    pub quorum_term: u64,
    pub quorum_commit_index: u64,
    pub quorum_last_index: u64,
    /// The metadata log offset this node's view reflects.
    pub metadata_applied_offset: u64,
    /// On the active controller: each voter's entries behind the leader's last index.
    pub voter_lag: Vec<(i32, u64)>,
    /// Whether this node's view has caught up with the metadata log since it started.
    pub caught_up: bool,
    pub brokers_unfenced: u64,
    pub brokers_fenced: u64,
    /// Partitions this node leads, and of those, with fewer in-sync replicas than replicas
    /// and with fewer than `min.insync.replicas`.
    pub led_partitions: u64,
    pub under_replicated: u64,
    pub under_min_isr: u64,
    /// Partitions without a leader in this node's view (all topics).
    pub offline: u64,
}

fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    labels: &[(&str, String)],
    v: i64,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    m.encode_family(&labels)?.encode_gauge(&v)
}

/// Writes `c`'s series, each labelled with the node id.
pub fn encode(enc: &mut DescriptorEncoder, c: &ClusterGauges) -> Result<(), fmt::Error> {
    let node = [("node", c.node_id.to_string())];
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for (name, help, v) in [
        (
            "controller_active",
            "1 on the active controller (the metadata quorum's leader)",
            i64::from(c.controller_active),
        ),
        (
            "controller_id",
            "The active controller as this node knows it (-1: none)",
            c.controller_id,
        ),
        (
            "quorum_term",
            "The metadata quorum's term",
            as_i64(c.quorum_term),
        ),
        (
            "quorum_commit_index",
            "Metadata log entries committed",
            as_i64(c.quorum_commit_index),
        ),
        (
            "quorum_last_index",
            "Metadata log entries held here",
            as_i64(c.quorum_last_index),
        ),
        (
            "metadata_applied_offset",
            "The metadata log offset this node's view reflects",
            as_i64(c.metadata_applied_offset),
        ),
        (
            "metadata_caught_up",
            "1 once this node's view caught up with the metadata log since it started",
            i64::from(c.caught_up),
        ),
        (
            "cluster_brokers_unfenced",
            "Registered brokers not fenced, in this node's view",
            as_i64(c.brokers_unfenced),
        ),
        (
            "cluster_brokers_fenced",
            "Registered brokers fenced, in this node's view",
            as_i64(c.brokers_fenced),
        ),
        (
            "leader_partitions",
            "Partitions this node leads",
            as_i64(c.led_partitions),
        ),
        (
            "under_replicated_partitions",
            "Partitions this node leads with fewer in-sync replicas than replicas",
            as_i64(c.under_replicated),
        ),
        (
            "under_min_isr_partitions",
            "Partitions this node leads with fewer in-sync replicas than min.insync.replicas",
            as_i64(c.under_min_isr),
        ),
        (
            "offline_partitions",
            "Partitions without a leader, in this node's view",
            as_i64(c.offline),
        ),
    ] {
        gauge(enc, name, help, &node, v)?;
    }
    let mut m = enc.encode_descriptor(
        "quorum_voter_lag",
        "On the active controller: metadata log entries each voter is behind its last index",
        None,
        MetricType::Gauge,
    )?;
    for (voter, lag) in &c.voter_lag {
        let labels = [
            ("node", c.node_id.to_string()),
            ("voter", voter.to_string()),
        ];
        m.encode_family(&labels)?.encode_gauge(&as_i64(*lag))?;
    }
    Ok(())
}
