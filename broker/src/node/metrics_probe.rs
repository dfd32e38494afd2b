//! `GET /metrics` on the node side: each shard's counters (`crate::metrics`) and the gauges
//! of the partitions it owns, gathered from every shard at once.

use std::collections::HashMap;

use futures_channel::oneshot;

use super::{Node, ShardMsg};
use crate::metrics::expose::{GroupOffset, PartitionGauges, Scrape};
use crate::metrics::ShardMetrics;

/// What one shard sends for a scrape.
#[derive(Debug, Default)]
pub struct ShardScrape {
    pub counters: ShardMetrics,
    pub partitions: Vec<PartitionGauges>,
    /// (group, topic, partition, committed offset) of the groups this shard coordinates.
    pub committed: Vec<(String, String, i32, i64)>,
}

impl Node {
    /// This shard's part of a scrape.
    pub(super) fn local_metrics(&self) -> ShardScrape {
        let alone = self.catalog().cluster.is_none();
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
        ShardScrape {
            counters: crate::metrics::snapshot(),
            partitions,
            committed,
        }
    }

    /// Every shard's part, asked of all at once; partitions sorted and cut at
    /// `limits::METRICS_PARTITION_SERIES_MAX`.
    pub async fn all_metrics(&self) -> Scrape {
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
        let mut partitions: Vec<PartitionGauges> = Vec::new();
        let mut committed = Vec::new();
        let mut shards = Vec::with_capacity(parts.len());
        for p in parts {
            shards.push(p.counters);
            partitions.extend(p.partitions);
            committed.extend(p.committed);
        }
        let hw: HashMap<(&str, i32), i64> = partitions
            .iter()
            .filter_map(|p| Some(((p.topic.as_str(), p.partition), p.high_watermark?)))
            .collect();
        let mut group_offsets: Vec<GroupOffset> = committed
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
        group_offsets.sort_by(|a, b| {
            (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition))
        });
        let group_max = crate::limits::METRICS_GROUP_SERIES_MAX;
        let group_left_out = group_offsets.len().saturating_sub(group_max) as u64;
        group_offsets.truncate(group_max);
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let max = crate::limits::METRICS_PARTITION_SERIES_MAX;
        let left_out = partitions.len().saturating_sub(max) as u64;
        partitions.truncate(max);
        Scrape {
            shards,
            partitions,
            partitions_left_out: left_out,
            group_offsets,
            group_offsets_left_out: group_left_out,
        }
    }
}
