//! The admin API's JSON views of what this node holds (`GET /v1/partitions`,
//! `GET /v1/groups`), gathered from every shard as a scrape is (`metrics_probe`), without
//! the series limits: a view is asked for, not scraped every second.

use serde_json::{json, Value};

use super::metrics_probe::group_offsets;
use super::Node;

impl Node {
    /// Every partition with a replica on this node (or only `topic`'s), sorted: offsets,
    /// size, segments, the shard that owns it, and in a cluster its leader, replicas and ISR
    /// as this node's view has them, and where this node leads it, each follower's lag.
    pub async fn partitions_view(&self, topic: Option<&str>) -> Value {
        let view = self.catalog().cluster.clone();
        let mut rows = Vec::new();
        for (shard, part) in self.gather_shards().await.into_iter().enumerate() {
            for p in part.partitions {
                if topic.is_some_and(|t| t != p.topic) {
                    continue;
                }
                let placed = view
                    .as_ref()
                    .and_then(|v| v.partition(&p.topic, p.partition));
                let mut row = json!({
                    "topic": p.topic,
                    "partition": p.partition,
                    "shard": shard,
                    "log_start_offset": p.log_start,
                    "log_end_offset": p.log_end,
                    "high_watermark": p.high_watermark,
                    "size_bytes": p.size_bytes,
                    "segments": p.segments,
                });
                if let Some(placed) = placed {
                    row["leader"] = json!(placed.leader);
                    row["leader_epoch"] = json!(placed.leader_epoch);
                    row["replicas"] =
                        json!(placed.replicas.iter().map(|r| r.node).collect::<Vec<_>>());
                    row["isr"] = json!(placed.isr);
                    row["follower_lag_records"] = p
                        .follower_lag
                        .iter()
                        .map(|(node, lag)| (node.to_string(), json!(lag)))
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                }
                rows.push(((p.topic.clone(), p.partition), row));
            }
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        json!({
            "node_id": view.as_ref().map(|v| v.me),
            "partitions": rows.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
        })
    }

    /// Every group this node coordinates: state, generation, protocol, members, and each
    /// committed offset with its lag (where this node knows the partition's high watermark).
    pub async fn groups_view(&self) -> Value {
        let parts = self.gather_shards().await;
        let partitions: Vec<_> = parts.iter().flat_map(|p| p.partitions.clone()).collect();
        let committed = parts.iter().flat_map(|p| p.committed.clone()).collect();
        let offsets = group_offsets(&partitions, committed);
        let mut groups: Vec<_> = parts.into_iter().flat_map(|p| p.groups).collect();
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        let mut by_group: std::collections::HashMap<&str, Vec<Value>> = Default::default();
        for o in &offsets {
            by_group.entry(o.group.as_str()).or_default().push(json!({
                "topic": o.topic,
                "partition": o.partition,
                "committed_offset": o.committed,
                "lag": o.lag,
            }));
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|g| {
                let mine = by_group.remove(g.group.as_str()).unwrap_or_default();
                let mut v = serde_json::to_value(&g).unwrap_or(Value::Null);
                v["offsets"] = mine.into();
                v
            })
            .collect();
        json!({ "groups": groups })
    }
}
