//! DescribeLogDirs (key 35, what `kafka-log-dirs --describe` sends, and what
//! `kafka-reassign-partitions` asks each broker for its replicas' directories): Strand has one
//! log directory, the data directory, holding every partition this node has a replica of.
//! Sizes are the bytes of each partition directory's files (with `log.preallocate` on, that
//! includes the preallocated tail of the active segment); `offset_lag` is 0 (no moves between
//! directories). v4 adds the filesystem's total and usable bytes. Measured in a blocking task
//! (directory listings and `statvfs` stay off the shard's reactor).

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use strand_wire::kafka::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use strand_wire::kafka::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let wanted: Option<BTreeMap<String, Vec<i32>>> = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.topic.0.as_str().to_string(), t.partitions))
            .collect()
    });
    let catalog = node.catalog();
    let mut hosted: Vec<(String, i32)> = Vec::new();
    for (name, t) in &catalog.topics {
        let asked = match &wanted {
            None => None,
            Some(w) => match w.get(name) {
                Some(ps) => Some(ps),
                None => continue,
            },
        };
        for p in 0..t.partitions {
            let here = catalog.cluster.as_ref().is_none_or(|v| v.hosts(name, p));
            if here && asked.is_none_or(|ps| ps.contains(&p)) {
                hosted.push((name.clone(), p));
            }
        }
    }
    let dir = node.config().data_dir.clone();
    let measured = glommio::executor()
        .spawn_blocking(move || {
            let sizes: Vec<((String, i32), i64)> = hosted
                .into_iter()
                .map(|(t, p)| {
                    let size = dir_bytes(&dir.join(format!("{t}-{p}")));
                    ((t, p), size)
                })
                .collect();
            (sizes, crate::disk_space::capacity_bytes(&dir), dir)
        })
        .await;
    let (sizes, capacity, dir) = measured;
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for ((topic, partition), size) in sizes {
        let mut p = DescribeLogDirsPartition::default();
        p.partition_index = partition;
        p.partition_size = size;
        by_topic.entry(topic).or_default().push(p);
    }
    let mut result = DescribeLogDirsResult::default();
    result.error_code = ErrorCode::None.code();
    let absolute = std::path::absolute(&dir).unwrap_or(dir);
    result.log_dir = StrBytes::from_string(absolute.display().to_string());
    let (total, usable) = capacity.unwrap_or((0, 0));
    result.total_bytes = i64::try_from(total).unwrap_or(i64::MAX);
    result.usable_bytes = i64::try_from(usable).unwrap_or(i64::MAX);
    for (topic, partitions) in by_topic {
        let mut t = DescribeLogDirsTopic::default();
        t.name = TopicName(StrBytes::from_string(topic));
        t.partitions = partitions;
        result.topics.push(t);
    }
    let mut r = DescribeLogDirsResponse::default();
    r.results = vec![result];
    r
}

/// The bytes of the files directly in `dir` (0 when it is missing).
fn dir_bytes(dir: &Path) -> i64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let bytes: u64 = entries
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    i64::try_from(bytes).unwrap_or(i64::MAX)
}
