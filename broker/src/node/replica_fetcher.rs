//! Partition replication between nodes (#18, in progress): followers pull from leaders, as
//! Kafka's do. A follower's shard runs one fetch session per (leader node, leader shard): one
//! long-polled `BrokerRequest::ReplicaFetchMany` at a time names every partition it follows
//! there, each with the follower's log end (everything below it is held), the epoch of its
//! last batch and the high watermark it last heard. The leader's shard (`replica_serve`)
//! answers each partition with whole batches as its log holds them, or — when the follower's
//! log went past where its last epoch ended on the leader (KIP-595's diverging epoch) — where
//! to truncate (`replication::epoch_cache::truncation`, KIP-101/279). The follower appends
//! with `append_replica`, which keeps the leader's offsets, epochs and bytes; the partitions
//! of one answer are applied concurrently (different logs), then the next request goes out
//! (it carries every partition's new offset: the leader's acks). A partition whose answer
//! failed is left out for `REPLICA_FETCH_BACKOFF_MS` (Kafka's delayed partitions); the
//! others go on.
//!
//! Not yet (see `docs/design/replication-plan.md` and `docs/design/replica-fetch-batching.md`):
//! a persisted follower high watermark; replica traffic goes through the controller
//! executor's link rather than a stream per shard pair. The leader sends its log's buffers
//! as they are (`broker_rpc::Records`); each batch is copied once here, into the append.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strand_cluster_core::broker_rpc::{
    BrokerAnswer, BrokerRequest, PartitionAnswer, PartitionFetch, ReplicaData,
};
use strand_cluster_core::replication::epoch_cache::truncation;
use tracing::{debug, info, warn};

use super::{Node, TopicPartition};
use crate::cluster::throttle_rates::Side;
use crate::limits;
use crate::storage::scan::split_batches;
use crate::storage::{Offset, PartitionLog};

/// A fetch session's key: the leader's node and the shard there that owns the partitions.
type SessionKey = (i32, u32);

/// What this shard follows: each partition's leader, and the running fetch sessions (each
/// with the event that tells it its partitions changed).
#[derive(Default)]
pub(super) struct Followers {
    partitions: HashMap<TopicPartition, Following>,
    sessions: HashMap<SessionKey, Rc<event_listener::Event>>,
}

/// A partition this shard follows: the leader, its shard and the epoch it is followed at,
/// and which following it is (a partition re-created under the same name, or led anew, gets
/// a new generation: answers asked under an older one are dropped).
struct Following {
    /// The topic's id when this following began (the log was opened for it): a topic
    /// re-created under the same name is another following, and the leader refuses an id
    /// that is not its topic's.
    topic_id: [u8; 16],
    leader: i32,
    leader_shard: u32,
    epoch: i32,
    generation: u64,
    /// Whether the log was told it follows (`become_follower`) in this generation.
    became_follower: bool,
    /// Left out of requests until then (its last answer failed).
    delayed_until: Option<Instant>,
}

/// One partition of a request in flight: what its answer is checked against.
struct Asked {
    tp: TopicPartition,
    topic_id: [u8; 16],
    epoch: i32,
    generation: u64,
    log: PartitionLog,
    offset: i64,
    /// Bytes to ask for: `REPLICA_FETCH_MAX_BYTES`, or less for a throttled replica.
    max_bytes: i32,
    /// Whether its bytes count against the follower throttle (`throttle`).
    throttled: bool,
}

/// A session's partition as `session_members` reads it: topic id, epoch, generation, and
/// when it may be asked for again.
type Member = (TopicPartition, [u8; 16], i32, u64, Option<Instant>);

/// Followings started on this shard so far (each one's `Following::generation`).
static FOLLOWINGS_STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Node {
    /// After a catalog change: follow every local partition led by another node (anew when
    /// its leader, the leader's shard or the epoch changed), in the fetch session for its
    /// leader's shard (started if there is none; told when it gains a partition); the others
    /// are no longer followed (a session left with none ends).
    pub(super) fn follow_leaders(self: &Rc<Self>) {
        let Some(view) = self.catalog().cluster.clone() else {
            return;
        };
        // Any partition with several replicas needs it (ISR changes).
        self.start_replication_ticker();
        // Runs after every catalog change: a partition this node leads (every one, without
        // replication) costs a lookup, nothing is copied for it.
        let followed: Vec<(TopicPartition, [u8; 16], i32, u32, i32)> = self
            .partitions
            .borrow()
            .keys()
            .filter_map(|tp| {
                let p = view.partition(&tp.0, tp.1)?;
                if p.leader == view.me || p.leader < 0 {
                    return None;
                }
                // The shard the leader opened it on now (the placement's `Replica.shard` is
                // from when it was placed: a node may have restarted with other cores).
                let shards = view.brokers.get(&p.leader)?.shards;
                let shard = crate::runtime::shard::shard_for(&tp.0, tp.1, shards as usize) as u32;
                let topic_id = view.topics.get(&tp.0)?.id;
                Some((tp.clone(), topic_id, p.leader, shard, p.leader_epoch))
            })
            .collect();
        if followed.is_empty() && self.followers.borrow().partitions.is_empty() {
            return;
        }
        let mut start = Vec::new();
        let mut tell = Vec::new();
        {
            let mut followers = self.followers.borrow_mut();
            let mut keep = std::collections::HashSet::new();
            for (tp, topic_id, leader, leader_shard, leader_epoch) in followed {
                keep.insert(tp.clone());
                let same = followers.partitions.get(&tp).is_some_and(|f| {
                    (f.topic_id, f.leader, f.leader_shard, f.epoch)
                        == (topic_id, leader, leader_shard, leader_epoch)
                });
                if same {
                    continue;
                }
                let generation =
                    FOLLOWINGS_STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                info!(topic = %tp.0, partition = tp.1, leader, epoch = leader_epoch, "following the leader");
                followers.partitions.insert(
                    tp,
                    Following {
                        topic_id,
                        leader,
                        leader_shard,
                        epoch: leader_epoch,
                        generation,
                        became_follower: false,
                        delayed_until: None,
                    },
                );
                let key = (leader, leader_shard);
                match followers.sessions.get(&key) {
                    Some(wake) => tell.push(Rc::clone(wake)),
                    None => {
                        let wake = Rc::new(event_listener::Event::new());
                        followers.sessions.insert(key, Rc::clone(&wake));
                        start.push((key, wake));
                    }
                }
            }
            followers.partitions.retain(|tp, _| keep.contains(tp));
        }
        for wake in tell {
            wake.notify(usize::MAX);
        }
        for (key, wake) in start {
            let me = Rc::clone(self);
            glommio::spawn_local(async move { me.fetch_session(key, wake).await }).detach();
        }
    }

    /// Whether `tp` is still followed as generation `generation` of `leader` at `epoch`: its
    /// registry entry is that one and the view this shard serves says so too (the registry is
    /// updated after a catalog change has been applied; meanwhile the view may already make
    /// this node the leader, and a fetcher must never write to a log clients write to).
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
            .partitions
            .get(tp)
            .is_some_and(|f| f.generation == generation);
        mine && self
            .catalog()
            .cluster
            .as_ref()
            .and_then(|v| v.partition(&tp.0, tp.1))
            .is_some_and(|p| (p.leader, p.leader_epoch) == (leader, epoch))
    }

    /// One fetch session: ask for every partition followed at `key` that is not delayed,
    /// apply the answer, repeat, until no partition is followed there. A partition joining
    /// (`wake`) cuts a parked request short, so it is fetched at once.
    async fn fetch_session(self: Rc<Self>, key: SessionKey, wake: Rc<event_listener::Event>) {
        let Some(handle) = self.shared.cluster.clone() else {
            self.followers.borrow_mut().sessions.remove(&key);
            return;
        };
        let backoff = Duration::from_millis(limits::REPLICA_FETCH_BACKOFF_MS);
        let mut rotation = 0usize;
        loop {
            let listener = wake.listen();
            let (asked, next_due) = match self.session_members(key, rotation) {
                Some(members) => members,
                None => {
                    let mut followers = self.followers.borrow_mut();
                    let ours = followers
                        .sessions
                        .get(&key)
                        .is_some_and(|w| Rc::ptr_eq(w, &wake));
                    let empty = !followers
                        .partitions
                        .values()
                        .any(|f| (f.leader, f.leader_shard) == key);
                    if ours && empty {
                        followers.sessions.remove(&key);
                    }
                    if !ours || empty {
                        debug!(leader = key.0, shard = key.1, "replica fetch session ends");
                        return;
                    }
                    continue;
                }
            };
            rotation = rotation.wrapping_add(1);
            // A fetch offset acknowledges everything below it: only synced offsets (written
            // ones under write caching) may be acknowledged (a tail left by a failed append,
            // or by this node's own leadership just ended, is synced first; a partition that
            // cannot be is left out a while).
            let mut ready = Vec::with_capacity(asked.len());
            for a in asked {
                if self.replicated_end(&a.tp, &a.log) < a.offset {
                    if let Err(e) = self.make_replicated(&a.tp, &a.log, Offset(a.offset)).await {
                        debug!(topic = %a.tp.0, partition = a.tp.1, error = %e, "not synced: not asked for");
                        self.delay(&a, true);
                        continue;
                    }
                }
                ready.push(a);
            }
            let asked = ready;
            if asked.is_empty() {
                let wait =
                    next_due.map_or(backoff, |due| due.saturating_duration_since(Instant::now()));
                futures_lite::future::or(
                    async {
                        listener.await;
                    },
                    glommio::timer::sleep(wait.min(backoff)),
                )
                .await;
                continue;
            }
            let req = BrokerRequest::ReplicaFetchMany {
                replica: handle.node_id,
                leader_shard: key.1,
                max_wait_ms: limits::REPLICA_FETCH_WAIT_MS as i32,
                response_max_bytes: limits::REPLICA_FETCH_RESPONSE_MAX_BYTES,
                partitions: asked
                    .iter()
                    .map(|a| PartitionFetch {
                        topic: a.tp.0.clone(),
                        topic_id: a.topic_id,
                        partition: a.tp.1,
                        leader_epoch: a.epoch,
                        offset: a.offset,
                        last_epoch: a.log.epoch_cache().latest().map_or(-1, |(e, _)| e),
                        known_high_watermark: a.log.replica_high_watermark(),
                        max_bytes: a.max_bytes,
                    })
                    .collect(),
            };
            let answer = futures_lite::future::or(
                async { Some(handle.ask_broker_answer(key.0, req).await) },
                async {
                    listener.await;
                    None
                },
            )
            .await;
            let answers = match answer {
                // A partition joined: ask again with it (this answer, if it comes, is dropped).
                None => continue,
                Some(Ok(BrokerAnswer { partitions, .. })) if partitions.len() == asked.len() => {
                    partitions
                }
                Some(Ok(a)) => {
                    warn!(
                        leader = key.0,
                        asked = asked.len(),
                        answered = a.partitions.len(),
                        "replica fetch answer does not match the request"
                    );
                    glommio::timer::sleep(backoff).await;
                    continue;
                }
                Some(Err(code)) => {
                    debug!(leader = key.0, shard = key.1, ?code, "replica fetch failed");
                    glommio::timer::sleep(backoff).await;
                    continue;
                }
            };
            // Partitions with batches, a truncation or a log start to move write to their own
            // logs: in parallel. An answer with nothing to write (the common case for a
            // quiet partition) only moves the high watermark, here and now.
            let mut writes = Vec::new();
            for (a, answer) in asked.into_iter().zip(answers) {
                if let (Ok(d), true) = (&answer, a.throttled) {
                    self.throttle_spend(Side::Follower, d.records.len());
                }
                let writes_log = answer.as_ref().is_ok_and(|d| {
                    !d.records.is_empty()
                        || d.diverging.is_some()
                        || d.log_start > a.offset
                        || d.log_start > a.log.log_start().0
                });
                if writes_log {
                    let me = Rc::clone(&self);
                    writes.push(glommio::spawn_local(async move {
                        let delay = me.apply_answer(&a, answer).await;
                        (a, delay)
                    }));
                } else {
                    let delay = self.apply_answer(&a, answer).await;
                    self.delay(&a, delay);
                }
            }
            for write in writes {
                let (a, delay) = write.await;
                self.delay(&a, delay);
            }
        }
    }

    /// The partitions of session `key` to ask for now (from a rotating start, so a capped
    /// answer does not serve the same ones first every time), and when the earliest delayed
    /// one is due; `None` when the session has no partition at all. A partition the view no
    /// longer has this node follow as registered is dropped (a later catalog change follows
    /// it again if it should be).
    fn session_members(
        &self,
        key: SessionKey,
        rotation: usize,
    ) -> Option<(Vec<Asked>, Option<Instant>)> {
        let mut members: Vec<Member> = self
            .followers
            .borrow()
            .partitions
            .iter()
            .filter(|(_, f)| (f.leader, f.leader_shard) == key)
            .map(|(tp, f)| {
                (
                    tp.clone(),
                    f.topic_id,
                    f.epoch,
                    f.generation,
                    f.delayed_until,
                )
            })
            .collect();
        if members.is_empty() {
            return None;
        }
        members.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let len = members.len();
        members.rotate_left(rotation % len);
        let now = Instant::now();
        let mut next_due: Option<Instant> = None;
        let mut asked = Vec::with_capacity(len);
        for (tp, topic_id, epoch, generation, delayed_until) in members {
            if let Some(due) = delayed_until.filter(|d| *d > now) {
                next_due = Some(next_due.map_or(due, |n| n.min(due)));
                continue;
            }
            if !self.still_following(&tp, key.0, epoch, generation) {
                let mut followers = self.followers.borrow_mut();
                if followers
                    .partitions
                    .get(&tp)
                    .is_some_and(|f| f.generation == generation)
                {
                    followers.partitions.remove(&tp);
                }
                continue;
            }
            let Some(log) = self.local(&tp) else { continue };
            if let Some(f) = self.followers.borrow_mut().partitions.get_mut(&tp) {
                if !f.became_follower {
                    log.become_follower();
                    f.became_follower = true;
                }
            }
            // A replica outside the ISR listed in the topic's follower throttle is asked for
            // with what this shard's share of `follower.replication.throttled.rate` has left,
            // and not at all while that is spent (KIP-73).
            let throttled = self.follower_allowance(&tp);
            let max_bytes = match throttled {
                Some(left) if left <= 0 => continue,
                Some(left) => left.min(i64::from(limits::REPLICA_FETCH_MAX_BYTES)) as i32,
                None => limits::REPLICA_FETCH_MAX_BYTES,
            };
            let offset = log.log_end().0;
            asked.push(Asked {
                tp,
                topic_id,
                epoch,
                generation,
                log,
                offset,
                max_bytes,
                throttled: throttled.is_some(),
            });
        }
        Some((asked, next_due))
    }

    /// Leaves `a`'s partition out of requests for `REPLICA_FETCH_BACKOFF_MS` when `delay`.
    fn delay(&self, a: &Asked, delay: bool) {
        if !delay {
            return;
        }
        if let Some(f) = self.followers.borrow_mut().partitions.get_mut(&a.tp) {
            if f.generation == a.generation {
                f.delayed_until =
                    Some(Instant::now() + Duration::from_millis(limits::REPLICA_FETCH_BACKOFF_MS));
            }
        }
    }

    /// One partition's answer: applied when it is still for this follower's log as it was
    /// asked about (else dropped); whether the partition should wait before it is asked for
    /// again (an error, or an answer that does not move the log).
    async fn apply_answer(&self, a: &Asked, answer: PartitionAnswer) -> bool {
        let data = match answer {
            Ok(data) => data,
            Err(code) => {
                debug!(topic = %a.tp.0, partition = a.tp.1, ?code, "replica fetch refused");
                return true;
            }
        };
        let leader = self
            .followers
            .borrow()
            .partitions
            .get(&a.tp)
            .map_or(-1, |f| f.leader);
        let current = self.local(&a.tp);
        let same_log = current.as_ref().is_some_and(|l| l.is_same(&a.log));
        if !self.still_following(&a.tp, leader, a.epoch, a.generation)
            || !same_log
            || a.log.log_end().0 != a.offset
        {
            return false;
        }
        let (tp, log, offset) = (&a.tp, &a.log, a.offset);
        if data.diverging.is_none() && data.log_start > offset {
            // Kafka's truncateFullyAndStartAt: this log is emptied and starts again where
            // the leader's does (the leader no longer has what lies between) — at the base of
            // the batch holding the leader's log start, which DeleteRecords may have put
            // inside a batch; then the log start moves up to the leader's.
            let base = split_batches(&data.records.contiguous())
                .first()
                .map_or(data.log_start, |(h, _, _)| {
                    h.base_offset.min(data.log_start)
                });
            info!(topic = %tp.0, partition = tp.1, leader, log_end = offset, leader_log_start = data.log_start, base, "behind the leader's log start: starting again there");
            let leader_start = data.log_start;
            let restarted = match log.restart_at(Offset(base)).await {
                Ok(()) => self.apply_fetched(tp, log, data).await,
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
                return true;
            }
            return false;
        }
        let leader_start = data.log_start;
        let diverging = data.diverging.is_some();
        let applied = self.apply_fetched(tp, log, data).await;
        // The leader's log start moved up (DeleteRecords, retention): so does this copy's,
        // as Kafka's followers do on every fetch — else records deleted on the leader would
        // be served again after a failover. Never past this replica's high watermark (as
        // Kafka): a later truncation must not have to cut below the log start; and not
        // after a truncation answer (its cut may not be complete yet).
        let to = leader_start
            .min(log.replica_high_watermark())
            .min(log.log_end().0);
        if matches!(applied, Ok(true)) && !diverging && to > log.log_start().0 {
            if let Err(e) = log.delete_records(Offset(to)).await {
                warn!(topic = %tp.0, partition = tp.1, error = %e, "could not move the log start up to the leader's");
            }
        }
        match applied {
            Ok(true) => false,
            // A truncation that cut nothing: the leader's answer does not move this log;
            // ask again later rather than at once.
            Ok(false) => true,
            Err(e) => {
                warn!(topic = %tp.0, partition = tp.1, leader, error = %e, "replica fetch not applied");
                true
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
                // No record to cut; an epoch this replica led without appending may still
                // end its cache (the leader never had it): it goes, or every fetch would ask
                // with it again.
                return log.drop_empty_epochs().await.map_err(|e| e.to_string());
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
        let records = data.records.contiguous();
        let batches = split_batches(&records);
        for (_, start, end) in &batches {
            let batch = BytesMut::from(&records[*start..*end]);
            log.append_replica(batch, crate::runtime::clock::now_ms())
                .await
                .map_err(|e| e.to_string())?;
        }
        if !batches.is_empty() {
            // The next fetch acknowledges what this one brought: only once it is synced (it
            // then outlives a power cut), or written under write caching (it outlives this
            // process; `storage/partition/written.rs`). Sync rounds are shared: the
            // partitions of one answer are applied concurrently, and each log's appends
            // since its last round share one fdatasync.
            self.make_replicated(tp, log, log.log_end())
                .await
                .map_err(|e| e.to_string())?;
        }
        log.set_replica_high_watermark(data.high_watermark.min(log.log_end().0));
        Ok(true)
    }
}
