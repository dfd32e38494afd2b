//! Partition replication between nodes (#18, in progress): followers pull from leaders, as
//! Kafka's do. A follower's shard runs one fetcher task per partition it follows; each fetch
//! names the follower's log end (everything below it is held) and the epoch of its last batch,
//! and goes over the cluster link (`BrokerRequest::ReplicaFetch`) to the leader's shard, which
//! answers whole batches as its log holds them, or — when the follower's log went past where
//! its last epoch ended on the leader (KIP-595's diverging epoch) — where to truncate
//! (`replication::epoch_cache::truncation`, KIP-101/279). The follower appends with
//! `append_replica`, which keeps the leader's offsets, epochs and bytes.
//!
//! Not yet (see `docs/design/replication-plan.md`): the leader's high watermark over the ISR
//! (it answers its log end), `acks=all` waiting for the ISR, ISR changes (AlterPartition), a
//! persisted follower high watermark; replica traffic goes through the controller executor's
//! link rather than a stream per shard pair, and the records are copied into the message.

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use strand_cluster_core::broker_rpc::{BrokerRequest, ReplicaData};
use strand_cluster_core::replication::epoch_cache::truncation;
use strand_wire::ErrorCode;
use tracing::{debug, info, warn};

use super::{Node, TopicPartition};
use crate::limits;
use crate::storage::scan::split_batches;
use crate::storage::Offset;

/// What a follower asks (a `BrokerRequest::ReplicaFetch` on its way to the leader's shard).
#[derive(Clone, Copy, Debug)]
pub struct ReplicaFetchArgs {
    pub replica: i32,
    pub leader_epoch: i32,
    pub offset: i64,
    pub last_epoch: i32,
    pub max_bytes: i32,
}

/// A partition this shard follows: the leader and epoch its fetcher follows (a fetcher whose
/// entry changed or went away stops), and the leader's last high watermark.
pub(super) struct Following {
    leader: i32,
    epoch: i32,
    high_watermark: std::cell::Cell<i64>,
}

impl Node {
    /// After a catalog change: start a fetcher for every local partition led by another node
    /// (or led anew at another epoch); the entries of the others go, so their fetchers stop.
    pub(super) fn follow_leaders(self: &Rc<Self>) {
        let Some(view) = self.catalog().cluster.clone() else {
            return;
        };
        // Runs after every catalog change: a partition this node leads (every one, without
        // replication) costs a lookup, nothing is copied for it.
        let followed: Vec<(TopicPartition, i32, i32)> = self
            .partitions
            .borrow()
            .keys()
            .filter_map(|tp| {
                let p = view.partition(&tp.0, tp.1)?;
                (p.leader != view.me && p.leader >= 0)
                    .then(|| (tp.clone(), p.leader, p.leader_epoch))
            })
            .collect();
        if followed.is_empty() && self.followers.borrow().is_empty() {
            return;
        }
        let mut started = Vec::new();
        {
            let mut followers = self.followers.borrow_mut();
            let mut keep = std::collections::HashSet::new();
            for (tp, leader, leader_epoch) in followed {
                keep.insert(tp.clone());
                let same = followers
                    .get(&tp)
                    .is_some_and(|f| (f.leader, f.epoch) == (leader, leader_epoch));
                if !same {
                    followers.insert(
                        tp.clone(),
                        Following {
                            leader,
                            epoch: leader_epoch,
                            high_watermark: std::cell::Cell::new(0),
                        },
                    );
                    started.push((tp, leader, leader_epoch));
                }
            }
            followers.retain(|tp, _| keep.contains(tp));
        }
        for (tp, leader, epoch) in started {
            let me = Rc::clone(self);
            glommio::spawn_local(async move { me.follow(tp, leader, epoch).await }).detach();
        }
    }

    fn still_following(&self, tp: &TopicPartition, leader: i32, epoch: i32) -> bool {
        self.followers
            .borrow()
            .get(tp)
            .is_some_and(|f| (f.leader, f.epoch) == (leader, epoch))
    }

    /// One partition's fetcher: fetch, append (or truncate), repeat, until the partition is
    /// led by someone else or at another epoch (a new fetcher takes over) or goes away.
    async fn follow(self: Rc<Self>, tp: TopicPartition, leader: i32, epoch: i32) {
        let Some(handle) = self.shared.cluster.clone() else {
            return;
        };
        if let Some(log) = self.local(&tp) {
            log.become_follower();
        }
        info!(topic = %tp.0, partition = tp.1, leader, epoch, "following the leader");
        let backoff = Duration::from_millis(limits::REPLICA_FETCH_BACKOFF_MS);
        while self.still_following(&tp, leader, epoch) {
            let Some(log) = self.local(&tp) else { return };
            let req = BrokerRequest::ReplicaFetch {
                topic: tp.0.clone(),
                partition: tp.1,
                replica: handle.node_id,
                leader_epoch: epoch,
                offset: log.log_end().0,
                last_epoch: log.epoch_cache().latest().map_or(-1, |(e, _)| e),
                max_bytes: limits::REPLICA_FETCH_MAX_BYTES,
            };
            let data = match handle.ask_broker_answer(leader, req).await {
                Ok(answer) => answer.replica,
                Err(code) => {
                    debug!(topic = %tp.0, partition = tp.1, leader, ?code, "replica fetch failed");
                    None
                }
            };
            let Some(data) = data else {
                glommio::timer::sleep(backoff).await;
                continue;
            };
            if !self.still_following(&tp, leader, epoch) {
                return;
            }
            if let Err(e) = self.apply_fetched(&tp, &log, data).await {
                warn!(topic = %tp.0, partition = tp.1, leader, error = %e, "replica fetch not applied");
                glommio::timer::sleep(backoff).await;
            }
        }
    }

    /// Appends what the leader sent, or truncates where the logs diverged.
    async fn apply_fetched(
        &self,
        tp: &TopicPartition,
        log: &crate::storage::PartitionLog,
        data: ReplicaData,
    ) -> Result<(), String> {
        if let Some(f) = self.followers.borrow().get(tp) {
            f.high_watermark.set(data.high_watermark);
        }
        if let Some(leader_answer) = data.diverging {
            let hw = self
                .followers
                .borrow()
                .get(tp)
                .map_or(0, |f| f.high_watermark.get());
            let cut = truncation(&log.epoch_cache(), log.log_end().0, hw, leader_answer);
            info!(
                topic = %tp.0, partition = tp.1, ?leader_answer, to = cut.offset,
                "truncating where this replica's log diverged from the leader's"
            );
            log.truncate_to(Offset(cut.offset))
                .await
                .map_err(|e| e.to_string())?;
            return Ok(());
        }
        for (_, start, end) in split_batches(&data.records) {
            let batch = BytesMut::from(&data.records[start..end]);
            log.append_replica(batch, crate::runtime::clock::now_ms())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The leader's side of a follower's fetch: refused unless this node leads the partition
    /// at the follower's epoch and the follower holds a replica; a follower whose last epoch
    /// ends earlier here than its log does is told where (KIP-595); otherwise whole batches
    /// from its offset, waiting up to `REPLICA_FETCH_WAIT_MS` for something new.
    pub(super) async fn replica_fetch_local(
        &self,
        tp: &TopicPartition,
        fetch: ReplicaFetchArgs,
    ) -> Result<ReplicaData, ErrorCode> {
        let log = self.led(tp)?;
        self.check_leader_epoch(&tp.0, tp.1, fetch.leader_epoch)?;
        let is_replica = self
            .catalog()
            .cluster
            .as_ref()
            .and_then(|v| v.partition(&tp.0, tp.1))
            .is_some_and(|p| p.replicas.iter().any(|r| r.node == fetch.replica));
        if !is_replica {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let answer = |log: &crate::storage::PartitionLog| ReplicaData {
            high_watermark: log.log_end().0,
            log_start: log.log_start().0,
            diverging: None,
            records: Vec::new(),
        };
        if fetch.last_epoch >= 0 {
            let (epoch, end) = log.end_offset_for(fetch.last_epoch);
            if epoch != fetch.last_epoch || end < fetch.offset {
                return Ok(ReplicaData {
                    diverging: Some((epoch, end)),
                    ..answer(&log)
                });
            }
        }
        let offset = Offset(fetch.offset);
        if offset < log.log_start() || offset > log.log_end() {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if offset == log.log_end() {
            let appended = log.appended();
            if offset == log.log_end() {
                futures_lite::future::or(
                    async {
                        appended.await;
                    },
                    glommio::timer::sleep(Duration::from_millis(limits::REPLICA_FETCH_WAIT_MS)),
                )
                .await;
            }
        }
        let read = log
            .read(offset, fetch.max_bytes.max(1) as usize)
            .await
            .map_err(|e| match e {
                crate::storage::ReadError::OutOfRange { .. } => ErrorCode::OffsetOutOfRange,
                crate::storage::ReadError::Io(_) => ErrorCode::KafkaStorageError,
            })?;
        let mut data = answer(&log);
        for b in &read.batches {
            data.records.extend_from_slice(b);
        }
        Ok(data)
    }
}
