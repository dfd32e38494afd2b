//! The leader's side of replication (#18): a follower shard's `ReplicaFetchMany` names every
//! partition it follows on this shard; this shard checks each at arrival (leader and epoch,
//! replica, the topic's id, KIP-595 divergence) and counts its offset toward the high watermark and the ISR
//! (`replica_leader`), then holds the request — one listener on the shard's `appended` event,
//! which every append and every high-watermark move on the shard fires — until any partition
//! has something the follower lacks (new batches, or a high watermark other than the one it
//! last heard) or the wait is over, and answers every partition at once: whole batches as
//! the log holds them, up to the per-partition and per-answer byte caps. A replica outside
//! the ISR that the topic's leader throttle lists gets no more than the node's
//! `leader.replication.throttled.rate` has left (`throttle`, KIP-73).

use std::time::{Duration, Instant};

use strand_cluster_core::broker_rpc::{PartitionAnswer, PartitionFetch, Records, ReplicaData};
use strand_wire::ErrorCode;

use super::{Node, TopicPartition};
use crate::cluster::throttle_rates::Side;
use crate::limits;
use crate::storage::{Offset, PartitionLog};

/// What a follower asks of this shard (a `BrokerRequest::ReplicaFetchMany` routed here).
#[derive(Clone, Debug)]
pub struct ReplicaFetchMany {
    pub replica: i32,
    pub max_wait_ms: i32,
    pub response_max_bytes: i32,
    pub partitions: Vec<PartitionFetch>,
}

/// A partition that passed the arrival checks: served from `offset` of `log`.
struct Serve {
    index: usize,
    tp: TopicPartition,
    log: PartitionLog,
    offset: Offset,
}

impl Node {
    /// Answers every partition of `fetch`, in its order (see the module comment).
    pub(super) async fn replica_fetch_many_local(
        &self,
        fetch: ReplicaFetchMany,
    ) -> Vec<PartitionAnswer> {
        let wait_ms = u64::try_from(fetch.max_wait_ms)
            .unwrap_or(0)
            .min(limits::REPLICA_FETCH_WAIT_MS);
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut answers: Vec<Option<PartitionAnswer>> = vec![None; fetch.partitions.len()];
        let mut serve = Vec::with_capacity(fetch.partitions.len());
        for (index, p) in fetch.partitions.iter().enumerate() {
            let tp = (p.topic.clone(), p.partition);
            match self.replica_fetch_check(&tp, fetch.replica, p).await {
                Ok((log, offset)) => serve.push(Serve {
                    index,
                    tp,
                    log,
                    offset,
                }),
                Err(answer) => answers[index] = Some(answer),
            }
        }
        // Hold while nothing is new for any partition: answers already final (an error, a
        // divergence) go back at once with the others. A high watermark the follower has not
        // heard is news too, but it waits `REPLICA_FETCH_HW_NEWS_MS`: this very fetch's
        // offset usually moved it, and the next batch (under load, within that time) carries
        // it anyway — answering at once would cost a round trip per append.
        let mut deadline = deadline;
        let mut hw_news_seen = false;
        if answers.iter().all(Option::is_none) {
            loop {
                let listener = self.shared.appended[self.shard].listen();
                let mut hw_news = false;
                let news = serve.iter().any(|s| {
                    let p = &fetch.partitions[s.index];
                    hw_news |= self.replica_answer_hw(&s.tp, &s.log) != p.known_high_watermark;
                    // (A throttled replica over its rate gets no batches: not news.)
                    let may_read = self
                        .leader_allowance(&s.tp, fetch.replica)
                        .is_none_or(|allowed| allowed > 0);
                    // (Served from the log start: the follower must start again there.)
                    may_read && (s.offset.0 != p.offset || s.offset < s.log.log_end())
                });
                let now = Instant::now();
                if hw_news && !hw_news_seen {
                    hw_news_seen = true;
                    deadline =
                        deadline.min(now + Duration::from_millis(limits::REPLICA_FETCH_HW_NEWS_MS));
                }
                if news || now >= deadline {
                    break;
                }
                futures_lite::future::or(
                    async {
                        listener.await;
                    },
                    glommio::timer::sleep(deadline - now),
                )
                .await;
            }
        }
        // (The follower's caps, never above this node's: an answer must fit a message.)
        let mut budget = usize::try_from(fetch.response_max_bytes)
            .unwrap_or(0)
            .min(limits::REPLICA_FETCH_RESPONSE_MAX_BYTES as usize);
        let mut carried = false;
        for s in serve {
            let p = &fetch.partitions[s.index];
            // A follower sent back to the log start must get the batch holding it (it starts
            // again at that batch's base, which may lie below the log start): never cut.
            let restart = s.offset.0 != p.offset;
            // A replica outside the ISR listed in the topic's leader throttle gets at most what
            // this shard's share of `leader.replication.throttled.rate` has left (KIP-73).
            let throttled = self.leader_allowance(&s.tp, fetch.replica);
            let allowed = match throttled {
                Some(left) => usize::try_from(left).unwrap_or(0).min(budget),
                None => budget,
            };
            // (A restart always gets its first batch, throttled or not: without it the
            // follower would start again inside that batch and be refused forever.)
            let allowed = if restart { allowed.max(1) } else { allowed };
            let mut answer = self.replica_read(&s, p, allowed).await;
            if let Ok(d) = &mut answer {
                // Only the answer's first batches may go past the budget (a batch is whole):
                // past it later, the answer could outgrow a cluster message and stall every
                // partition of the session, not only this one.
                if carried && !restart && d.records.len() > budget {
                    d.records = Records::default();
                }
                carried |= !d.records.is_empty();
                budget = budget.saturating_sub(d.records.len());
                if throttled.is_some() {
                    self.throttle_spend(Side::Leader, d.records.len());
                }
            }
            answers[s.index] = Some(answer);
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(ErrorCode::UnknownServerError)))
            .collect()
    }

    /// The arrival checks of one partition: refused unless this node leads it at the
    /// follower's epoch and the follower holds a replica; a follower whose last epoch ends
    /// earlier here than its log does is told where (KIP-595). Otherwise the log and the
    /// offset to serve from, the follower's offset counted (unless below the log start).
    async fn replica_fetch_check(
        &self,
        tp: &TopicPartition,
        replica: i32,
        p: &PartitionFetch,
    ) -> Result<(PartitionLog, Offset), PartitionAnswer> {
        let log = self.led(tp).map_err(Err)?;
        if p.leader_epoch < 0 || p.offset < 0 || p.max_bytes <= 0 {
            return Err(Err(ErrorCode::InvalidRequest));
        }
        self.check_leader_epoch(&tp.0, tp.1, p.leader_epoch)
            .map_err(Err)?;
        // The epoch this node leads starts here now if nothing was appended in it yet: the
        // divergence check below needs it in the cache (as Kafka's leader records it when it
        // becomes leader).
        self.lead_epoch(tp, &log).await.map_err(Err)?;
        let view = self.catalog().cluster.clone();
        let same_topic = view
            .as_ref()
            .and_then(|v| v.topics.get(&tp.0))
            .is_some_and(|t| t.id == p.topic_id);
        if !same_topic {
            // The follower's topic of this name is another incarnation (deleted and
            // re-created): nothing here is its to copy.
            return Err(Err(ErrorCode::UnknownTopicOrPartition));
        }
        let is_replica = view
            .as_ref()
            .and_then(|v| v.partition(&tp.0, tp.1))
            .is_some_and(|v| v.replicas.iter().any(|r| r.node == replica));
        if !is_replica {
            return Err(Err(ErrorCode::NotLeaderOrFollower));
        }
        // A diverging follower's offset says nothing about what it holds in common with this
        // log: it does not count for the high watermark (as in Kafka).
        if p.last_epoch >= 0 {
            let (epoch, end) = log.end_offset_for(p.last_epoch);
            if epoch != p.last_epoch || end < p.offset {
                return Err(Ok(ReplicaData {
                    diverging: Some((epoch, end)),
                    ..self.replica_header(tp, &log)
                }));
            }
        }
        let offset = Offset(p.offset);
        if offset > log.log_end() {
            return Err(Err(ErrorCode::OffsetOutOfRange));
        }
        if offset < log.log_start() {
            // The follower starts again at the log start: it gets the batches from there (the
            // first may begin below it) and counts for nothing until it fetches on.
            return Ok((log.clone(), log.log_start()));
        }
        self.follower_fetched(tp, &log, replica, p.offset);
        Ok((log, offset))
    }

    /// Whole batches of `s` from its offset, at most `min(max_bytes, budget)` past the first
    /// (none once the answer's budget is spent: the follower hears the high watermark and
    /// asks again). Leadership is checked again: the request may have waited.
    async fn replica_read(&self, s: &Serve, p: &PartitionFetch, budget: usize) -> PartitionAnswer {
        let still = self.led(&s.tp).is_ok_and(|l| l.is_same(&s.log))
            && self
                .check_leader_epoch(&s.tp.0, s.tp.1, p.leader_epoch)
                .is_ok();
        if !still {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let mut data = self.replica_header(&s.tp, &s.log);
        let max_bytes = usize::try_from(p.max_bytes)
            .unwrap_or(1)
            .min(limits::REPLICA_FETCH_MAX_BYTES as usize)
            .min(budget);
        if max_bytes == 0 || s.offset >= s.log.log_end() {
            return Ok(data);
        }
        let read = s.log.read(s.offset, max_bytes).await.map_err(|e| match e {
            crate::storage::ReadError::OutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            crate::storage::ReadError::Io(_) => ErrorCode::KafkaStorageError,
        })?;
        // The log's own buffers: they go out as the message's chunks, not copied.
        data.records = Records(read.batches);
        Ok(data)
    }

    /// An answer's high watermark and log start, with no records.
    fn replica_header(&self, tp: &TopicPartition, log: &PartitionLog) -> ReplicaData {
        ReplicaData {
            high_watermark: self.replica_answer_hw(tp, log),
            log_start: log.log_start().0,
            diverging: None,
            records: Records::default(),
        }
    }

    /// The high watermark a follower is told: the replicated one, or the log end when the
    /// partition has no replication state here.
    fn replica_answer_hw(&self, tp: &TopicPartition, log: &PartitionLog) -> i64 {
        self.visible_end(tp, log).unwrap_or(log.log_end()).0
    }
}
