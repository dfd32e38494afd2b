//! Reloading a `__consumer_offsets` partition when a shard opens it: committed offsets (last
//! commit wins), tombstones, and offsets of transactions still open (pending until their
//! marker is replayed).

use tracing::info;

use super::group_service::{parse_position, PendingOffset};
use super::Node;
use crate::group::Committed;
use crate::storage::{Offset, PartitionLog};

impl Node {
    /// Replays a `__consumer_offsets` partition into the coordinator (last commit wins).
    pub async fn replay_offsets(&self, log: &PartitionLog) {
        let partition = log
            .dir()
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('-'))
            .and_then(|(_, p)| p.parse::<i32>().ok())
            .unwrap_or(-1);
        let mut next = log.log_start();
        let mut replayed = 0usize;
        while next < log.log_end() {
            let out = match log.read(next, 8 << 20).await {
                Ok(out) if !out.batches.is_empty() => out,
                _ => break,
            };
            for b in &out.batches {
                let Ok(h) = strand_wire::BatchHeader::parse(b) else {
                    return;
                };
                next = Offset(h.last_offset() + 1);
                if h.is_control() {
                    if let Some(commit) = strand_wire::builder::marker_kind(b) {
                        self.end_txn_offsets(h.producer_id, partition, commit);
                    }
                    continue;
                }
                if h.is_transactional() {
                    self.replay_txn_offsets(b, h.producer_id, partition);
                    continue;
                }
                for (key, value) in strand_wire::builder::plain_records(b) {
                    let k: Vec<&str> = key.splitn(3, '\0').collect();
                    if k.len() == 3 && value.is_empty() {
                        let mut groups = self.groups.borrow_mut();
                        if k[1] == "*" {
                            groups.coordinator.groups.remove(k[0]);
                        } else if let Ok(p) = k[2].parse::<i32>() {
                            let _ = groups
                                .coordinator
                                .delete_offsets(k[0], &[(k[1].to_string(), p)]);
                        }
                        continue;
                    }
                    let v: Vec<&str> = value.splitn(2, '\0').collect();
                    if let (3, 2, Ok(p), Some((o, leader_epoch))) = (
                        k.len(),
                        v.len(),
                        k.get(2)
                            .map_or(Err(()), |s| s.parse::<i32>().map_err(|_| ())),
                        parse_position(v[0]),
                    ) {
                        let metadata = (!v[1].is_empty()).then(|| v[1].to_string());
                        self.groups.borrow_mut().coordinator.commit(
                            k[0],
                            vec![(
                                (k[1].to_string(), p),
                                Committed {
                                    offset: o,
                                    leader_epoch,
                                    metadata,
                                    commit_ms: h.max_timestamp_ms,
                                },
                            )],
                        );
                        replayed += 1;
                    }
                }
            }
        }
        if replayed > 0 {
            info!(shard = self.shard, replayed, "committed offsets reloaded");
        }
    }

    /// An offset commit of an open transaction, read back at start-up: pending until its
    /// marker (later in the log) is replayed.
    fn replay_txn_offsets(&self, batch: &[u8], producer_id: i64, partition: i32) {
        let mut g = self.groups.borrow_mut();
        for (key, value) in strand_wire::builder::plain_records(batch) {
            let k: Vec<&str> = key.splitn(3, '\0').collect();
            let v: Vec<&str> = value.splitn(2, '\0').collect();
            if let (3, 2, Ok(p), Some((o, leader_epoch))) =
                (k.len(), v.len(), k[2].parse::<i32>(), parse_position(v[0]))
            {
                g.pending_txn
                    .entry(producer_id)
                    .or_default()
                    .push(PendingOffset {
                        offsets_partition: partition,
                        group: k[0].to_string(),
                        tp: (k[1].to_string(), p),
                        offset: o,
                        leader_epoch,
                        metadata: (!v[1].is_empty()).then(|| v[1].to_string()),
                    });
            }
        }
    }
}
