//! `GET /metrics` on the node side: each shard's counters (`crate::metrics`) and the gauges
//! of the partitions it owns, gathered from every shard at once.

use std::collections::HashMap;

use futures_channel::oneshot;

use super::{Node, ShardMsg};
use crate::metrics::cluster::ClusterGauges;
use crate::metrics::expose::{GroupOffset, PartitionGauges, Scrape, ShardGauges};
use crate::metrics::{Hist, ShardMetrics};

/// What one shard sends for a scrape.
#[derive(Debug, Default)]
pub struct ShardScrape {
    pub counters: ShardMetrics,
    pub partitions: Vec<PartitionGauges>,
    /// (group, topic, partition, committed offset) of the groups this shard coordinates.
    pub committed: Vec<(String, String, i32, i64)>,
    pub stages: Vec<(String, &'static str, Hist)>,
    pub gauges: ShardGauges,
    /// The groups this shard coordinates (`GET /v1/groups`).
    pub groups: Vec<GroupSummary>,
}

/// A group as `GET /v1/groups` lists it.
#[derive(Debug, Default, serde::Serialize)]
pub struct GroupSummary {
    pub group: String,
    pub state: &'static str,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub members: usize,
}

impl Node {
    /// This shard's part of a scrape.
    pub(super) fn local_metrics(&self) -> ShardScrape {
        let view = self.catalog().cluster.clone();
        let alone = view.is_none();
        let partitions = self
            .partitions
            .borrow()
            .iter()
            .map(|(tp, log)| PartitionGauges {
                topic: tp.0.clone(),
                partition: tp.1,
                log_start: log.log_start().0,
                log_end: log.log_end().0,
                // Read as is: a scrape must not make this node lead anything.
                high_watermark: if alone {
                    Some(log.log_end().0)
                } else {
                    self.led_high_watermark(tp)
                },
                size_bytes: log.size_bytes(),
                segments: log.segment_count() as u64,
                ..self.led_replication(view.as_deref(), tp)
            })
            .collect();
        let groups = self
            .groups
            .borrow()
            .coordinator
            .groups
            .values()
            .map(|g| GroupSummary {
                group: g.id.clone(),
                state: g.state.name(),
                generation: g.generation,
                protocol_type: g.protocol_type.clone(),
                protocol: g.protocol.clone(),
                members: g.members.len(),
            })
            .collect();
        let committed = self
            .groups
            .borrow()
            .coordinator
            .groups
            .values()
            .flat_map(|g| {
                g.offsets
                    .iter()
                    .map(|((t, p), c)| (g.id.clone(), t.clone(), *p, c.offset))
            })
            .collect();
        let kib = |s: &glommio::sync::Semaphore, max_bytes: usize| {
            ((max_bytes >> 10) as u64).saturating_sub(s.available()) << 10
        };
        let gauges = ShardGauges {
            produce_memory_bytes: kib(
                &self.produce_memory,
                crate::limits::SHARD_PRODUCE_MEMORY_BYTES,
            ),
            connection_memory_bytes: kib(
                &self.connection_memory,
                crate::limits::SHARD_CONNECTION_MEMORY_BYTES,
            ),
            cache_bytes: crate::storage::shard_cache::shard_cache().used_bytes() as u64,
        };
        ShardScrape {
            counters: crate::metrics::snapshot(),
            partitions,
            committed,
            stages: self.stages.borrow().exported(),
            gauges,
            groups,
        }
    }

    /// The replication part of `tp`'s gauges, where this node leads it in a cluster.
    fn led_replication(
        &self,
        view: Option<&crate::cluster::view::ClusterView>,
        tp: &crate::storage::TopicPartition,
    ) -> PartitionGauges {
        let mut g = PartitionGauges::default();
        let Some((me, p)) =
            view.and_then(|v| Some((v.me, v.partition(&tp.0, tp.1).filter(|p| p.leader == v.me)?)))
        else {
            return g;
        };
        g.replicas = Some(p.replicas.len() as i64);
        g.isr = Some(p.isr.len() as i64);
        let followers = p.replicas.iter().map(|r| r.node).filter(|&n| n != me);
        g.follower_lag = self.led_follower_lags(tp, followers);
        g
    }

    /// The cluster's gauges as this node sees them (`None` alone).
    async fn cluster_gauges(&self) -> Option<ClusterGauges> {
        let view = self.catalog().cluster.clone()?;
        let mut c = ClusterGauges {
            node_id: view.me,
            controller_id: view.controller.map_or(-1, i64::from),
            metadata_applied_offset: view.applied_offset,
            caught_up: view.caught_up,
            ..Default::default()
        };
        for b in view.brokers.values() {
            if b.fenced {
                c.brokers_fenced += 1;
            } else {
                c.brokers_unfenced += 1;
            }
        }
        let catalog = self.catalog();
        for (name, t) in &view.topics {
            let min_isr = catalog
                .topics
                .get(name)
                .map_or(1, |t| t.min_insync_replicas());
            for p in &t.partitions {
                if p.leader < 0 {
                    c.offline += 1;
                } else if p.leader == view.me {
                    c.led_partitions += 1;
                    c.under_replicated += u64::from(p.isr.len() < p.replicas.len());
                    c.under_min_isr += u64::from(p.isr.len() < min_isr.min(p.replicas.len()));
                }
            }
        }
        if let Some(status) = match &self.shared.cluster {
            Some(h) => h.status().await,
            None => None,
        } {
            let q = &status.quorum;
            c.controller_active = q.is_leader;
            c.quorum_term = q.term;
            c.quorum_commit_index = q.commit_index;
            c.quorum_last_index = q.last_index;
            // raft-rs ids are node ids + 1 (0 is raft's "none").
            c.voter_lag = q
                .voters
                .iter()
                .map(|v| {
                    (
                        v.id as i32 - 1,
                        q.last_index.saturating_sub(v.matched_index),
                    )
                })
                .collect();
        }
        Some(c)
    }

    /// Every shard's part, asked of all at once, by shard.
    pub async fn gather_shards(&self) -> Vec<ShardScrape> {
        let asked: Vec<_> = (0..self.shards())
            .filter(|&s| s != self.shard)
            .map(|shard| {
                let (reply, rx) = oneshot::channel();
                self.send(shard, ShardMsg::Metrics { reply });
                (shard, rx)
            })
            .collect();
        let mut parts: Vec<ShardScrape> = (0..self.shards()).map(|_| Default::default()).collect();
        parts[self.shard] = self.local_metrics();
        for (shard, rx) in asked {
            if let Ok(p) = crate::runtime::wake::cross(rx).await {
                parts[shard] = p;
            }
        }
        parts
    }

    /// A scrape: every shard's part; partitions sorted and cut at
    /// `metrics.partition.series.max`.
    pub async fn all_metrics(&self) -> Scrape {
        let parts = self.gather_shards().await;
        let mut partitions: Vec<PartitionGauges> = Vec::new();
        let mut committed = Vec::new();
        let mut shards = Vec::with_capacity(parts.len());
        let mut shard_gauges = Vec::with_capacity(parts.len());
        let mut stages: Vec<(String, &'static str, Hist)> = Vec::new();
        for p in parts {
            shards.push(p.counters);
            shard_gauges.push(p.gauges);
            partitions.extend(p.partitions);
            committed.extend(p.committed);
            for (api, stage, h) in p.stages {
                match stages.iter_mut().find(|(a, s, _)| *a == api && *s == stage) {
                    Some((_, _, all)) => all.merge(&h),
                    None => stages.push((api, stage, h)),
                }
            }
        }
        let mut group_offsets = group_offsets(&partitions, committed);
        let group_max = self.config().metrics_partition_series_max as usize;
        let group_left_out = group_offsets.len().saturating_sub(group_max) as u64;
        group_offsets.truncate(group_max);
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let max = self.config().metrics_partition_series_max as usize;
        let left_out = partitions.len().saturating_sub(max) as u64;
        partitions.truncate(max);
        Scrape {
            shards,
            partitions,
            partitions_left_out: left_out,
            group_offsets,
            group_offsets_left_out: group_left_out,
            stages,
            shard_gauges,
            cluster: self.cluster_gauges().await,
        }
    }
}

/// Each committed offset with its lag: the partition's high watermark (where this node
/// knows it) less the offset; sorted by (group, topic, partition).
pub fn group_offsets(
    partitions: &[PartitionGauges],
    committed: Vec<(String, String, i32, i64)>,
) -> Vec<GroupOffset> {
    let hw: HashMap<(&str, i32), i64> = partitions
        .iter()
        .filter_map(|p| Some(((p.topic.as_str(), p.partition), p.high_watermark?)))
        .collect();
    let mut out: Vec<GroupOffset> = committed
        .into_iter()
        .map(|(group, topic, partition, offset)| GroupOffset {
            lag: hw
                .get(&(topic.as_str(), partition))
                .map(|&end| (end - offset).max(0)),
            group,
            topic,
            partition,
            committed: offset,
        })
        .collect();
    out.sort_by(|a, b| (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition)));
    out
}
