//! Partition replication between nodes (#18, in progress): followers pull from leaders, as
//! Kafka's do. A follower's shard runs one fetcher task per partition it follows; each fetch
//! names the follower's log end (everything below it is held) and the epoch of its last batch,
//! and goes over the cluster link (`BrokerRequest::ReplicaFetch`) to the leader's shard, which
//! answers whole batches as its log holds them, or — when the follower's log went past where
//! its last epoch ended on the leader (KIP-595's diverging epoch) — where to truncate
//! (`replication::epoch_cache::truncation`, KIP-101/279). The follower appends with
//! `append_replica`, which keeps the leader's offsets, epochs and bytes.
//!
//! The leader counts a fetch's offset (once it is known not to diverge) toward the high
//! watermark and the ISR (`replica_leader`), and answers its high watermark, which the follower
//! keeps for when it leads. Not yet (see `docs/design/replication-plan.md`): a persisted
//! follower high watermark; replica traffic goes through the controller executor's link rather
//! than a stream per shard pair, and the records are copied into the message.

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

/// A partition this shard follows: the leader and epoch its fetcher follows, and which
/// fetcher it is (a fetcher whose entry changed or went away stops; a partition re-created
/// under the same name gets a new fetcher even with the same leader and epoch).
pub(super) struct Following {
    leader: i32,
    epoch: i32,
    generation: u64,
}

/// Fetchers started on this shard so far (each one's `Following::generation`).
static FETCHERS_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Node {
    /// After a catalog change: start a fetcher for every local partition led by another node
    /// (or led anew at another epoch); the entries of the others go, so their fetchers stop.
    pub(super) fn follow_leaders(self: &Rc<Self>) {
        let Some(view) = self.catalog().cluster.clone() else {
            return;
        };
        // Any partition with several replicas needs it (ISR changes), preview or not.
        self.start_replication_ticker();
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
                    let generation =
                        FETCHERS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    followers.insert(
                        tp.clone(),
                        Following {
                            leader,
                            epoch: leader_epoch,
                            generation,
                        },
                    );
                    started.push((tp, leader, leader_epoch, generation));
                }
            }
            followers.retain(|tp, _| keep.contains(tp));
        }
        for (tp, leader, epoch, generation) in started {
            let me = Rc::clone(self);
            glommio::spawn_local(async move { me.follow(tp, leader, epoch, generation).await })
                .detach();
        }
    }

    /// Whether fetcher `generation` still follows `leader` at `epoch` for `tp`: its registry
    /// entry is its own and the view this shard serves says so too (the registry is updated
    /// after a catalog change has been applied; meanwhile the view may already make this node
    /// the leader, and a fetcher must never write to a log clients write to).
    fn still_following(
        &self,
        tp: &TopicPartition,
        leader: i32,
        epoch: i32,
        generation: u64,
    ) -> bool {
        let mine = self
            .followers
            .borrow()
            .get(tp)
            .is_some_and(|f| f.generation == generation);
        mine && self
            .catalog()
            .cluster
            .as_ref()
            .and_then(|v| v.partition(&tp.0, tp.1))
            .is_some_and(|p| (p.leader, p.leader_epoch) == (leader, epoch))
    }

    /// One partition's fetcher: fetch, append (or truncate), repeat, until the partition is
    /// led by someone else or at another epoch (a new fetcher takes over) or goes away.
    async fn follow(self: Rc<Self>, tp: TopicPartition, leader: i32, epoch: i32, generation: u64) {
        self.fetch_loop(&tp, leader, epoch, generation).await;
        // Gone for good unless a newer fetcher took the entry over: a later catalog change
        // may start another.
        let mut followers = self.followers.borrow_mut();
        if followers
            .get(&tp)
            .is_some_and(|f| f.generation == generation)
        {
            followers.remove(&tp);
        }
    }

    async fn fetch_loop(&self, tp: &TopicPartition, leader: i32, epoch: i32, generation: u64) {
        let Some(handle) = self.shared.cluster.clone() else {
            return;
        };
        info!(topic = %tp.0, partition = tp.1, leader, epoch, "following the leader");
        let backoff = Duration::from_millis(limits::REPLICA_FETCH_BACKOFF_MS);
        let mut became_follower = false;
        while self.still_following(tp, leader, epoch, generation) {
            let Some(log) = self.local(tp) else { return };
            if !became_follower {
                log.become_follower();
                became_follower = true;
            }
            let offset = log.log_end().0;
            let req = BrokerRequest::ReplicaFetch {
                topic: tp.0.clone(),
                partition: tp.1,
                replica: handle.node_id,
                leader_epoch: epoch,
                offset,
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
            // The answer is for this fetcher's log as it was asked about, or it is dropped.
            let current = self.local(tp);
            let same_log = current.as_ref().is_some_and(|l| l.is_same(&log));
            if !self.still_following(tp, leader, epoch, generation)
                || !same_log
                || log.log_end().0 != offset
            {
                continue;
            }
            if data.diverging.is_none() && data.log_start > offset {
                // Kafka's truncateFullyAndStartAt: this log is emptied and starts again where
                // the leader's does (the leader no longer has what lies between) — at the
                // base of the batch holding the leader's log start, which DeleteRecords may
                // have put inside a batch; then the log start moves up to the leader's.
                let base = split_batches(&data.records)
                    .first()
                    .map_or(data.log_start, |(h, _, _)| {
                        h.base_offset.min(data.log_start)
                    });
                info!(topic = %tp.0, partition = tp.1, leader, log_end = offset, leader_log_start = data.log_start, base, "behind the leader's log start: starting again there");
                let leader_start = data.log_start;
                let restarted = match log.restart_at(Offset(base)).await {
                    Ok(()) => self.apply_fetched(tp, &log, data).await,
                    Err(e) => Err(e.to_string()),
                };
                let started = match restarted {
                    Ok(_) if leader_start > base => log
                        .delete_records(Offset(leader_start))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string()),
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                };
                if let Err(e) = started {
                    warn!(topic = %tp.0, partition = tp.1, error = %e, "could not start the log again at the leader's log start");
                    glommio::timer::sleep(backoff).await;
                }
                continue;
            }
            match self.apply_fetched(tp, &log, data).await {
                Ok(true) => {}
                // A truncation that cut nothing: the leader's answer does not move this log;
                // ask again later rather than at once.
                Ok(false) => glommio::timer::sleep(backoff).await,
                Err(e) => {
                    warn!(topic = %tp.0, partition = tp.1, leader, error = %e, "replica fetch not applied");
                    glommio::timer::sleep(backoff).await;
                }
            }
        }
    }

    /// Appends what the leader sent, or truncates where the logs diverged. `Ok(false)`: a
    /// truncation that cut nothing.
    async fn apply_fetched(
        &self,
        tp: &TopicPartition,
        log: &crate::storage::PartitionLog,
        data: ReplicaData,
    ) -> Result<bool, String> {
        // This replica's own high watermark (what it knew before this answer) bounds a
        // truncation when the leader knows no epoch of it.
        let hw = log.replica_high_watermark();
        if let Some(leader_answer) = data.diverging {
            let end = log.log_end().0;
            let cut = truncation(&log.epoch_cache(), end, hw, leader_answer);
            if cut.offset >= end {
                return Ok(false);
            }
            info!(
                topic = %tp.0, partition = tp.1, ?leader_answer, to = cut.offset,
                "truncating where this replica's log diverged from the leader's"
            );
            log.truncate_to(Offset(cut.offset))
                .await
                .map_err(|e| e.to_string())?;
            return Ok(true);
        }
        for (_, start, end) in split_batches(&data.records) {
            let batch = BytesMut::from(&data.records[start..end]);
            log.append_replica(batch, crate::runtime::clock::now_ms())
                .await
                .map_err(|e| e.to_string())?;
        }
        log.set_replica_high_watermark(data.high_watermark.min(log.log_end().0));
        Ok(true)
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
        if fetch.leader_epoch < 0 {
            return Err(ErrorCode::InvalidRequest);
        }
        self.check_leader_epoch(&tp.0, tp.1, fetch.leader_epoch)?;
        // The epoch this node leads starts here now if nothing was appended in it yet: the
        // divergence check below needs it in the cache (as Kafka's leader records it when it
        // becomes leader).
        self.lead_epoch(tp, &log).await?;
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
            high_watermark: self.visible_end(tp, log).unwrap_or(log.log_end()).0,
            log_start: log.log_start().0,
            diverging: None,
            records: Vec::new(),
        };
        // A diverging follower's offset says nothing about what it holds in common with this
        // log: it does not count for the high watermark (as in Kafka).
        if fetch.last_epoch >= 0 {
            let (epoch, end) = log.end_offset_for(fetch.last_epoch);
            if epoch != fetch.last_epoch || end < fetch.offset {
                return Ok(ReplicaData {
                    diverging: Some((epoch, end)),
                    ..answer(&log)
                });
            }
        }
        let mut offset = Offset(fetch.offset);
        if offset > log.log_end() {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        if offset < log.log_start() {
            // The follower starts again at the log start: it gets the batches from there (the
            // first may begin below it) and counts for nothing until it fetches on.
            offset = log.log_start();
        } else {
            self.follower_fetched(tp, &log, fetch.replica, fetch.offset);
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
