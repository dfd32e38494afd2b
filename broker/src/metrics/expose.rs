//! A scrape in Prometheus's text format (`GET /metrics`), written by prometheus-client's
//! encoder from what the shards sent: one collector, the counters as they are (each shard
//! its own series, `shard` label), latency histograms added up over the shards (labels: the
//! API), partition gauges for at most `metrics.partition.series.max` partitions.
//! Series that are still zero are left out.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::{Hist, ShardMetrics, API_KEYS, CONNECTION_CLOSED, HIST_BUCKETS};

/// The Content-Type of the answer.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One partition's gauges, from its shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionGauges {
    pub topic: String,
    pub partition: i32,
    pub log_start: i64,
    pub log_end: i64,
    /// Known where this node leads the partition, or runs alone.
    pub high_watermark: Option<i64>,
    pub size_bytes: u64,
    pub segments: u64,
    /// Where this node leads the partition in a cluster: its replicas and in-sync replicas,
    /// and each follower's records behind the leader's log end (replication lag).
    pub replicas: Option<i64>,
    pub isr: Option<i64>,
    pub follower_lag: Vec<(i32, i64)>,
}

/// One shard's memory occupancy, in bytes: what is drawn from its budgets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardGauges {
    /// Produce requests' batches in flight (`limits::SHARD_PRODUCE_MEMORY_BYTES`).
    pub produce_memory_bytes: u64,
    /// Large request frames and queued replies (`limits::SHARD_CONNECTION_MEMORY_BYTES`).
    pub connection_memory_bytes: u64,
    /// The partitions' hot-tail caches (`limits::SHARD_CACHE_BYTES`).
    pub cache_bytes: u64,
}

/// A group's committed offset for one partition, and its lag: the partition's high watermark
/// less the offset, where this node knows the high watermark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub lag: Option<i64>,
}

/// Everything one scrape shows.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// By shard.
    pub shards: Vec<ShardMetrics>,
    /// Sorted by (topic, partition); at most the limit.
    pub partitions: Vec<PartitionGauges>,
    /// Partitions past the limit, without series of their own.
    pub partitions_left_out: u64,
    /// Sorted by (group, topic, partition); at most `metrics.partition.series.max`.
    pub group_offsets: Vec<GroupOffset>,
    /// Group offsets past that limit.
    pub group_offsets_left_out: u64,
    /// Request stages (`stages`), all shards: (api, stage, histogram).
    pub stages: Vec<(String, &'static str, Hist)>,
    /// By shard.
    pub shard_gauges: Vec<ShardGauges>,
    /// A cluster node's series; `None` alone.
    pub cluster: Option<super::cluster::ClusterGauges>,
}

/// The scrape as the text body of `GET /metrics`.
pub fn encode(scrape: Scrape) -> String {
    let mut registry = Registry::with_prefix("strand");
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    match prometheus_client::encoding::prometheus_text::encode(&mut out, &registry) {
        Ok(()) => out,
        // Writing to a String does not fail; a collector's error is a bug shown plainly.
        Err(e) => format!("# encoding failed: {e}\n"),
    }
}

/// The `api` label of a per-API slot (`metrics::api_slot`): Kafka's name of the API.
pub fn api_name(slot: usize) -> String {
    if slot + 1 == API_KEYS {
        return "other".into();
    }
    i16::try_from(slot)
        .ok()
        .and_then(|k| strand_wire::kafka::messages::ApiKey::try_from(k).ok())
        .map_or_else(|| format!("api_{slot}"), |k| format!("{k:?}"))
}

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`), as its clients print them.
fn error_name(code: i16) -> String {
    if code == CONNECTION_CLOSED {
        return "CONNECTION_CLOSED".into();
    }
    let Some(known) = strand_wire::ErrorCode::from_code(code) else {
        return format!("CODE_{code}");
    };
    let camel = format!("{known:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn histogram(
    enc: &mut prometheus_client::encoding::MetricEncoder,
    h: &Hist,
) -> Result<(), fmt::Error> {
    let buckets: Vec<(f64, u64)> = (0..HIST_BUCKETS)
        .map(|i| (Hist::upper_bound_s(i), h.buckets[i]))
        .collect();
    enc.encode_histogram::<NoLabelSet>(h.sum_us as f64 / 1e6, h.count, &buckets, None)
}

/// A counter per shard, skipping zeros.
fn per_shard(
    enc: &mut DescriptorEncoder,
    shards: &[ShardMetrics],
    name: &str,
    help: &str,
    value: impl Fn(&ShardMetrics) -> u64,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (shard, s) in shards.iter().enumerate() {
        let v = value(s);
        if v > 0 {
            let labels = [("shard", shard.to_string())];
            m.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
    }
    Ok(())
}

/// A gauge per partition.
fn per_partition(
    enc: &mut DescriptorEncoder,
    parts: &[PartitionGauges],
    name: &str,
    help: &str,
    value: impl Fn(&PartitionGauges) -> Option<i64>,
) -> Result<(), fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for p in parts {
        if let Some(v) = value(p) {
            let labels = [
                ("topic", p.topic.clone()),
                ("partition", p.partition.to_string()),
            ];
            m.encode_family(&labels)?.encode_gauge(&v)?;
        }
    }
    Ok(())
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let shards = &self.shards;
        {
            let mut m = enc.encode_descriptor(
                "kafka_requests",
                "Kafka requests received, by API",
                None,
                MetricType::Counter,
            )?;
            for (shard, s) in shards.iter().enumerate() {
                for (slot, &v) in s.requests.iter().enumerate().filter(|(_, v)| **v > 0) {
                    let labels = [("shard", shard.to_string()), ("api", api_name(slot))];
                    m.encode_family(&labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
                }
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "kafka_request_errors",
                "Errors answered: per partition for Produce and Fetch; CONNECTION_CLOSED for \
                 a request that closed its connection (undecodable, unsupported version)",
                None,
                MetricType::Counter,
            )?;
            for (shard, s) in shards.iter().enumerate() {
                let mut errors: Vec<_> = s.errors.iter().collect();
                errors.sort();
                for (&(api, code), &v) in errors {
                    let slot = usize::try_from(api)
                        .unwrap_or(API_KEYS - 1)
                        .min(API_KEYS - 1);
                    let labels = [
                        ("shard", shard.to_string()),
                        ("api", api_name(slot)),
                        ("error", error_name(code)),
                    ];
                    m.encode_family(&labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
                }
            }
        }
        {
            let mut all = ShardMetrics::default();
            for s in shards {
                all.merge(s);
            }
            let mut m = enc.encode_descriptor(
                "kafka_request_latency",
                "Kafka request latency, from the request read to the response written \
                 (all shards; acks=0 produces have none)",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (slot, h) in all.latency.iter().enumerate().filter(|(_, h)| h.count > 0) {
                let labels = [("api", api_name(slot))];
                histogram(&mut m.encode_family(&labels)?, h)?;
            }
        }
        per_shard(
            &mut enc,
            shards,
            "bytes_in",
            "Record batch bytes produced",
            |s| s.bytes_in,
        )?;
        per_shard(&mut enc, shards, "records_in", "Records produced", |s| {
            s.records_in
        })?;
        per_shard(&mut enc, shards, "bytes_out", "Record bytes fetched", |s| {
            s.bytes_out
        })?;
        per_shard(
            &mut enc,
            shards,
            "connections_accepted",
            "Kafka connections accepted",
            |s| s.connections_accepted,
        )?;
        per_shard(
            &mut enc,
            shards,
            "connections_closed",
            "Kafka connections closed",
            |s| s.connections_closed,
        )?;
        for (name, help, get) in [
            (
                "tls_handshake_failures",
                "TLS handshakes on Kafka listeners that failed or timed out",
                (|s: &ShardMetrics| s.tls_handshake_failures) as fn(&ShardMetrics) -> u64,
            ),
            (
                "sasl_authentications",
                "SASL authentications that succeeded",
                |s: &ShardMetrics| s.sasl_authentications,
            ),
            (
                "sasl_authentication_failures",
                "SASL authentications that failed (SASL_AUTHENTICATION_FAILED)",
                |s: &ShardMetrics| s.sasl_authentication_failures,
            ),
        ] {
            per_shard(&mut enc, shards, name, help, get)?;
        }
        {
            let mut m = enc.encode_descriptor(
                "connections_active",
                "Kafka connections open",
                None,
                MetricType::Gauge,
            )?;
            for (shard, s) in shards.iter().enumerate() {
                let open = s.connections_accepted.saturating_sub(s.connections_closed);
                let labels = [("shard", shard.to_string())];
                m.encode_family(&labels)?.encode_gauge(&open)?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "fsync_latency",
                "fdatasync latency of the partition logs, queueing included",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (shard, s) in shards.iter().enumerate().filter(|(_, s)| s.fsync.count > 0) {
                let labels = [("shard", shard.to_string())];
                histogram(&mut m.encode_family(&labels)?, &s.fsync)?;
            }
        }
        self.encode_storage(&mut enc)?;
        let parts = &self.partitions;
        per_partition(
            &mut enc,
            parts,
            "partition_log_start_offset",
            "First offset",
            |p| Some(p.log_start),
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_log_end_offset",
            "Log end offset",
            |p| Some(p.log_end),
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_high_watermark",
            "High watermark (where this node leads the partition, or runs alone)",
            |p| p.high_watermark,
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_size_bytes",
            "Bytes on disk",
            |p| i64::try_from(p.size_bytes).ok(),
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_segments",
            "Segment files",
            |p| i64::try_from(p.segments).ok(),
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_replicas",
            "Replicas (partitions this node leads in a cluster)",
            |p| p.replicas,
        )?;
        per_partition(
            &mut enc,
            parts,
            "partition_isr_size",
            "In-sync replicas (partitions this node leads in a cluster)",
            |p| p.isr,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "partition_replication_lag_records",
                "Records a follower is behind the leader's log end (partitions this node leads)",
                None,
                MetricType::Gauge,
            )?;
            for p in parts {
                for (replica, lag) in &p.follower_lag {
                    let labels = [
                        ("topic", p.topic.clone()),
                        ("partition", p.partition.to_string()),
                        ("replica", replica.to_string()),
                    ];
                    m.encode_family(&labels)?.encode_gauge(lag)?;
                }
            }
        }
        for (name, help, value) in [
            (
                "group_committed_offset",
                "A consumer group's committed offset (groups this node coordinates)",
                (|g: &GroupOffset| Some(g.committed)) as fn(&GroupOffset) -> Option<i64>,
            ),
            (
                "group_lag",
                "Records past a group's committed offset: high watermark less the offset \
                 (where this node knows the high watermark)",
                |g: &GroupOffset| g.lag,
            ),
        ] {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for g in &self.group_offsets {
                if let Some(v) = value(g) {
                    let labels = [
                        ("group", g.group.clone()),
                        ("topic", g.topic.clone()),
                        ("partition", g.partition.to_string()),
                    ];
                    m.encode_family(&labels)?.encode_gauge(&v)?;
                }
            }
        }
        for (name, help, v) in [
            (
                "metrics_partitions_left_out",
                "Partitions over the series limit (metrics.partition.series.max)",
                self.partitions_left_out,
            ),
            (
                "metrics_group_offsets_left_out",
                "Group offsets over the series limit (metrics.partition.series.max)",
                self.group_offsets_left_out,
            ),
        ] {
            enc.encode_descriptor(name, help, None, MetricType::Gauge)?
                .encode_gauge(&v)?;
        }
        if let Some(c) = &self.cluster {
            super::cluster::encode(&mut enc, c)?;
        }
        Ok(())
    }
}

impl Scrape {
    /// Request stages, segment writes, write-behind, the cleaner, memory budgets and
    /// cross-shard messages.
    fn encode_storage(&self, enc: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let shards = &self.shards;
        {
            let mut m = enc.encode_descriptor(
                "request_stage_latency",
                "Time in each stage of a request (all shards): queue, decode, handle, write, \
                 total by API; hop, append, fsync_wait of partitions; the shards' timer lag",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (api, stage, h) in &self.stages {
                let labels = [("api", api.clone()), ("stage", stage.to_string())];
                histogram(&mut m.encode_family(&labels)?, h)?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "segment_write_latency",
                "O_DIRECT segment write latency, ordering wait included",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (shard, s) in shards.iter().enumerate() {
                if s.dma_write.count > 0 {
                    let labels = [("shard", shard.to_string())];
                    histogram(&mut m.encode_family(&labels)?, &s.dma_write)?;
                }
            }
        }
        per_shard(enc, shards, "cleaner_passes", "Compaction passes", |s| {
            s.cleaner_passes
        })?;
        per_shard(
            enc,
            shards,
            "cleaner_bytes_read",
            "Bytes of the segments compaction passes rewrote, before",
            |s| s.cleaner_bytes_before,
        )?;
        per_shard(
            enc,
            shards,
            "cleaner_bytes_written",
            "Bytes of the segments compaction passes rewrote, after",
            |s| s.cleaner_bytes_after,
        )?;
        per_shard(
            enc,
            shards,
            "cross_shard_messages",
            "Messages sent to other shards",
            |s| s.cross_shard_messages,
        )?;
        type ShardGauge = (
            &'static str,
            &'static str,
            fn(&ShardMetrics, &ShardGauges) -> u64,
        );
        let gauges: [ShardGauge; 5] = [
            (
                "write_behind_writes",
                "Segment writes in flight (write-behind)",
                |s, _| s.dma_writes_inflight,
            ),
            (
                "write_behind_bytes",
                "Bytes of segment writes in flight (write-behind)",
                |s, _| s.dma_bytes_inflight,
            ),
            (
                "produce_memory_bytes",
                "Produce memory budget in use (limits::SHARD_PRODUCE_MEMORY_BYTES)",
                |_, g| g.produce_memory_bytes,
            ),
            (
                "connection_memory_bytes",
                "Connection memory budget in use (limits::SHARD_CONNECTION_MEMORY_BYTES)",
                |_, g| g.connection_memory_bytes,
            ),
            (
                "partition_cache_bytes",
                "Partition tail caches (limits::SHARD_CACHE_BYTES)",
                |_, g| g.cache_bytes,
            ),
        ];
        let none = ShardGauges::default();
        for (name, help, value) in gauges {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (shard, s) in shards.iter().enumerate() {
                let g = self.shard_gauges.get(shard).unwrap_or(&none);
                let labels = [("shard", shard.to_string())];
                m.encode_family(&labels)?.encode_gauge(&value(s, g))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn text_format_names_labels_and_cumulative_buckets() {
        let mut s0 = ShardMetrics::default();
        s0.request(0);
        s0.request(0);
        s0.request_done(0, Duration::from_micros(5));
        s0.request_done(0, Duration::from_micros(12));
        s0.bytes_in = 100;
        s0.error(0, 6);
        s0.error(0, 6);
        s0.error(1, crate::metrics::CONNECTION_CLOSED);
        s0.connections_accepted = 3;
        s0.connections_closed = 1;
        let mut s1 = ShardMetrics::default();
        s1.request(1);
        s1.request_done(0, Duration::from_micros(12));
        let text = encode(Scrape {
            shards: vec![s0, s1],
            partitions: vec![PartitionGauges {
                topic: "t".into(),
                partition: 3,
                log_start: 0,
                log_end: 42,
                high_watermark: Some(40),
                size_bytes: 4096,
                segments: 1,
                replicas: Some(3),
                isr: Some(2),
                follower_lag: vec![(2, 17)],
            }],
            partitions_left_out: 7,
            group_offsets: vec![GroupOffset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
                committed: 30,
                lag: Some(10),
            }],
            group_offsets_left_out: 0,
            stages: vec![("Produce".into(), "decode", {
                let mut h = Hist::default();
                h.observe(Duration::from_micros(3));
                h
            })],
            shard_gauges: vec![ShardGauges {
                produce_memory_bytes: 2048,
                ..Default::default()
            }],
            cluster: Some(crate::metrics::cluster::ClusterGauges {
                node_id: 1,
                controller_active: true,
                under_replicated: 1,
                voter_lag: vec![(2, 5)],
                ..Default::default()
            }),
        });
        for line in [
            "strand_kafka_requests_total{shard=\"0\",api=\"Produce\"} 2",
            "strand_kafka_requests_total{shard=\"1\",api=\"Fetch\"} 1",
            "strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"8e-06\"} 1",
            "strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"1.6e-05\"} 3",
            "strand_kafka_request_latency_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 3",
            "strand_kafka_request_latency_seconds_count{api=\"Produce\"} 3",
            "strand_kafka_request_latency_seconds_sum{api=\"Produce\"} 0.000029",
            "strand_bytes_in_total{shard=\"0\"} 100",
            "strand_kafka_request_errors_total{shard=\"0\",api=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 2",
            "strand_kafka_request_errors_total{shard=\"0\",api=\"Fetch\",error=\"CONNECTION_CLOSED\"} 1",
            "strand_connections_active{shard=\"0\"} 2",
            "strand_partition_log_end_offset{topic=\"t\",partition=\"3\"} 42",
            "strand_partition_high_watermark{topic=\"t\",partition=\"3\"} 40",
            "strand_metrics_partitions_left_out 7",
            "strand_group_committed_offset{group=\"g\",topic=\"t\",partition=\"3\"} 30",
            "strand_group_lag{group=\"g\",topic=\"t\",partition=\"3\"} 10",
            "strand_request_stage_latency_seconds_count{api=\"Produce\",stage=\"decode\"} 1",
            "strand_produce_memory_bytes{shard=\"0\"} 2048",
            "strand_partition_isr_size{topic=\"t\",partition=\"3\"} 2",
            "strand_partition_replication_lag_records{topic=\"t\",partition=\"3\",replica=\"2\"} 17",
            "strand_controller_active{node=\"1\"} 1",
            "strand_under_replicated_partitions{node=\"1\"} 1",
            "strand_quorum_voter_lag{node=\"1\",voter=\"2\"} 5",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        assert!(
            !text.contains("bytes_in_total{shard=\"1\"}"),
            "zeros left out"
        );
    }
}
