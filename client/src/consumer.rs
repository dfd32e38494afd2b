//! The consumer: partitions are assigned explicitly (from the earliest, latest or committed
//! offset, or a given one) or by a consumer group (`subscribe`, see [`crate::group`]), fetched
//! from each leader with the next fetch already in flight while the caller handles the last
//! one, and committed for the group (as a member, or outside any generation with `assign`).

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;
use futures_channel::oneshot;
use strand_wire::batch::{peek_total_len, BatchHeader};
use strand_wire::kafka::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use strand_wire::kafka::messages::{FetchRequest, RequestKind, ResponseKind, TopicName};
use strand_wire::kafka::protocol::StrBytes;

use crate::admin::OffsetSpec;
use crate::cluster::Cluster;
use crate::error::ClientError;
use crate::group::Membership;

/// One consumed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// Where an assigned partition starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    Earliest,
    Latest,
    Offset(i64),
    /// The group's committed offset, else the earliest.
    Committed,
}

/// Consumer settings, by the Java client's names.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// `group.id`: where `commit` and `StartAt::Committed` go.
    pub group: Option<String>,
    /// `fetch.max.wait.ms`
    pub max_wait_ms: i32,
    /// `max.partition.fetch.bytes`
    pub partition_max_bytes: i32,
    /// `isolation.level`: 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group: None,
            max_wait_ms: 500,
            partition_max_bytes: 1 << 20,
            isolation_level: 0,
        }
    }
}

type FetchReply = oneshot::Receiver<Result<ResponseKind, ClientError>>;
/// (topic, partition) and the offset a fetch asked for.
type Position = ((String, i32), i64);
/// A [`Position`] borrowed from `Consumer::positions`.
type PositionRef<'a> = (&'a (String, i32), i64);

/// A KIP-227 fetch session with one leader: after a full fetch the leader remembers the
/// partitions and offsets, so the next fetches name only the partitions whose offset moved,
/// and answers list only partitions with news (1,000 partitions cost two of them, not 1,000).
#[derive(Default)]
struct FetchSession {
    /// 0: none yet (the next fetch is full and asks for one).
    id: i32,
    /// The epoch of the next request; 0 = full (closing `id`, if set, and opening a new one).
    epoch: i32,
    /// The offsets the leader holds for the session's partitions (after a sessionless fetch:
    /// the offsets it was asked for). Sorted like `Consumer::positions`, so finding what moved
    /// is one merged walk of the two, not a hash per partition per fetch.
    held: BTreeMap<(String, i32), i64>,
}

impl FetchSession {
    /// Starts over with a full fetch (after an error, a seek, or a lost answer).
    fn reset(&mut self) {
        self.epoch = 0;
        self.held.clear();
    }
}

/// A fetch in flight: what it told the session. The offset each answered partition was
/// fetched at is then the session's `held` one.
struct InFlight {
    /// The partitions the request named (all of them when full).
    listed: Vec<Position>,
    forgotten: Vec<(String, i32)>,
    full: bool,
}

pub struct Consumer {
    cluster: Cluster,
    config: ConsumerConfig,
    /// Next offset to fetch, per assigned partition.
    positions: BTreeMap<(String, i32), i64>,
    /// End offsets (high watermarks) seen in the last fetches.
    high_watermarks: BTreeMap<(String, i32), i64>,
    ready: VecDeque<Record>,
    /// Fetches in flight, per leader.
    in_flight: HashMap<i32, (FetchReply, InFlight)>,
    /// Fetch sessions, per leader.
    sessions: HashMap<i32, FetchSession>,
    /// With `subscribe`: the topics and the group membership.
    subscription: Vec<String>,
    membership: Option<Membership>,
}

impl Consumer {
    pub fn new(cluster: Cluster, config: ConsumerConfig) -> Consumer {
        Consumer {
            cluster,
            config,
            positions: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            ready: VecDeque::new(),
            in_flight: HashMap::new(),
            sessions: HashMap::new(),
            subscription: Vec::new(),
            membership: None,
        }
    }

    /// Joins the consumer's group subscribed to `topics` (classic protocol, range assignor);
    /// the assigned partitions start at the group's committed offsets (else the earliest, or
    /// the latest with `from_latest`). Rebalances are followed in `poll`.
    pub async fn subscribe(&mut self, topics: &[&str]) -> Result<(), ClientError> {
        if self.config.group.is_none() {
            return Err(ClientError::Invalid(
                "subscribe needs a group (--group / group.id)".into(),
            ));
        }
        for t in topics {
            self.cluster.topic(t).await?;
        }
        self.subscription = topics.iter().map(|t| t.to_string()).collect();
        self.rejoin(None).await
    }

    async fn rejoin(&mut self, member_id: Option<String>) -> Result<(), ClientError> {
        let group = self.config.group.clone().unwrap_or_default();
        let (membership, assignment) =
            Membership::join(&self.cluster, &group, &self.subscription, member_id).await?;
        self.positions.clear();
        self.drop_in_flight();
        self.ready.clear();
        self.membership = Some(membership);
        for (topic, parts) in assignment {
            self.assign(&topic, Some(&parts), StartAt::Committed)
                .await?;
        }
        Ok(())
    }

    /// The partitions assigned now (by `assign`, or by the group with `subscribe`).
    pub fn assignment(&self) -> Vec<(String, i32)> {
        self.positions.keys().cloned().collect()
    }

    /// Commits the positions and leaves the group (with `subscribe`).
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.config.group.is_some() {
            self.commit().await?;
        }
        if let Some(m) = self.membership.take() {
            m.leave().await?;
        }
        Ok(())
    }

    /// Assigns `partitions` of `topic` (`None`: all of them), starting at `start`.
    pub async fn assign(
        &mut self,
        topic: &str,
        partitions: Option<&[i32]>,
        start: StartAt,
    ) -> Result<(), ClientError> {
        let info = self.cluster.topic(topic).await?;
        let all: Vec<i32> = (0..info.leaders.len() as i32).collect();
        let chosen: Vec<i32> = partitions.map_or(all.clone(), <[i32]>::to_vec);
        if let Some(bad) = chosen.iter().find(|p| !all.contains(p)) {
            return Err(ClientError::Invalid(format!(
                "topic {topic:?} has no partition {bad} (it has {})",
                all.len()
            )));
        }
        let earliest = self
            .cluster
            .list_offsets(topic, OffsetSpec::Earliest)
            .await?;
        let latest = self.cluster.list_offsets(topic, OffsetSpec::Latest).await?;
        let committed = match (&self.config.group, start) {
            (Some(g), StartAt::Committed) => self.cluster.committed(g, Some(topic)).await?,
            _ => BTreeMap::new(),
        };
        for p in chosen {
            let i = p as usize;
            let at = match start {
                StartAt::Earliest => earliest[i],
                StartAt::Latest => latest[i],
                StartAt::Offset(o) => o,
                StartAt::Committed => committed
                    .get(&(topic.to_string(), p))
                    .copied()
                    .unwrap_or(earliest[i]),
            };
            self.positions.insert((topic.to_string(), p), at);
            self.high_watermarks
                .insert((topic.to_string(), p), latest[i]);
        }
        Ok(())
    }

    /// Moves an assigned partition's position.
    pub fn seek(&mut self, topic: &str, partition: i32, offset: i64) {
        self.drop_in_flight();
        self.ready
            .retain(|r| !(r.topic == topic && r.partition == partition));
        self.positions
            .insert((topic.to_string(), partition), offset);
    }

    /// Forgets the fetches in flight; their sessions start over (the leader may or may not
    /// have moved their epochs on).
    fn drop_in_flight(&mut self) {
        for leader in self.in_flight.keys() {
            if let Some(s) = self.sessions.get_mut(leader) {
                s.reset();
            }
        }
        self.in_flight.clear();
    }

    pub fn positions(&self) -> &BTreeMap<(String, i32), i64> {
        &self.positions
    }

    /// Whether every assigned partition's position has reached the end seen last.
    pub fn at_end(&self) -> bool {
        self.positions
            .iter()
            .all(|(tp, pos)| self.high_watermarks.get(tp).is_some_and(|hw| pos >= hw))
    }

    /// The next records (waiting up to `fetch.max.wait.ms` for some). Empty: nothing new.
    pub async fn poll(&mut self) -> Result<Vec<Record>, ClientError> {
        if self
            .membership
            .as_ref()
            .is_some_and(Membership::needs_rejoin)
        {
            // Rebalance: commit what was consumed (best effort: the generation may be over),
            // then join again as the same member.
            let _ = self.commit().await;
            let old = self.membership.take().map(|m| {
                m.retire();
                m.member_id.clone()
            });
            self.rejoin(old).await?;
        }
        if self.ready.is_empty() {
            self.start_fetches().await?;
            let leaders: Vec<i32> = self.in_flight.keys().copied().collect();
            for leader in leaders {
                let Some((reply, fetch)) = self.in_flight.remove(&leader) else {
                    continue;
                };
                let outcome = match reply.await {
                    Ok(Ok(answer)) => self.absorb(leader, answer, &fetch),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(ClientError::Io(std::io::Error::other("connection closed"))),
                };
                if let Err(e) = outcome {
                    self.sessions.entry(leader).or_default().reset();
                    return Err(e);
                }
            }
            // Pipelining: the next fetches go out before the caller handles these records.
            self.start_fetches().await?;
        }
        Ok(self.ready.drain(..).collect())
    }

    /// Commits the current positions for the consumer's group.
    pub async fn commit(&self) -> Result<(), ClientError> {
        let group = self.config.group.as_deref().ok_or_else(|| {
            ClientError::Invalid("commit needs a group (--group / group.id)".into())
        })?;
        match &self.membership {
            Some(m) => m.commit(&self.cluster, &self.positions).await,
            None => self.cluster.commit(group, &self.positions).await,
        }
    }

    /// Commits the current positions without waiting (Kafka's `commitAsync`): the commit runs
    /// in the background and `on_done` gets its outcome.
    pub fn commit_async(&self, on_done: impl FnOnce(Result<(), ClientError>) + 'static) {
        let (cluster, positions) = (self.cluster.clone(), self.positions.clone());
        let group = self.config.group.clone();
        let member = self
            .membership
            .as_ref()
            .map(|m| (m.generation, m.member_id.clone()));
        glommio::spawn_local(async move {
            let result = match (group, member) {
                (None, _) => Err(ClientError::Invalid(
                    "commit needs a group (--group / group.id)".into(),
                )),
                (Some(g), Some((generation, member))) => {
                    cluster.commit_as(&g, generation, &member, &positions).await
                }
                (Some(g), None) => cluster.commit(&g, &positions).await,
            };
            on_done(result);
        })
        .detach();
    }

    async fn start_fetches(&mut self) -> Result<(), ClientError> {
        // Per partition and fetch, only comparisons: no hashing or allocation (with 1,000
        // partitions and a fetch per produced batch, this loop was a fifth of a client core).
        let mut by_leader: BTreeMap<i32, Vec<PositionRef>> = BTreeMap::new();
        let mut topic: Option<(&str, Vec<i32>)> = None;
        for (tp, &pos) in &self.positions {
            if topic.as_ref().is_none_or(|(t, _)| *t != tp.0.as_str()) {
                topic = Some((tp.0.as_str(), self.cluster.leaders(&tp.0).await?));
            }
            let leaders = topic.as_ref().map_or(&[][..], |(_, l)| l.as_slice());
            let leader = leaders.get(tp.1 as usize).copied().unwrap_or(-1);
            if !self.in_flight.contains_key(&leader) {
                by_leader.entry(leader).or_default().push((tp, pos));
            }
        }
        for (leader, parts) in by_leader {
            let session = self.sessions.entry(leader).or_default();
            let full = session.epoch == 0;
            let mut listed: Vec<Position> = Vec::new();
            let mut forgotten: Vec<(String, i32)> = Vec::new();
            if full {
                listed = parts
                    .iter()
                    .map(|(tp, pos)| ((*tp).clone(), *pos))
                    .collect();
            } else {
                // Both sorted by (topic, partition): one merged walk.
                let mut held = session.held.iter().peekable();
                for &(tp, pos) in &parts {
                    while let Some((h, _)) = held.next_if(|(h, _)| *h < tp) {
                        forgotten.push(h.clone());
                    }
                    match held.next_if(|(h, _)| *h == tp) {
                        Some((_, &at)) if at == pos => {}
                        _ => listed.push((tp.clone(), pos)),
                    }
                }
                forgotten.extend(held.map(|(h, _)| h.clone()));
            }
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for ((t, p), pos) in &listed {
                let mut fp = FetchPartition::default();
                fp.partition = *p;
                fp.current_leader_epoch = -1;
                fp.fetch_offset = *pos;
                fp.last_fetched_epoch = -1;
                fp.log_start_offset = -1;
                fp.partition_max_bytes = self.config.partition_max_bytes;
                topics.entry(t.as_str()).or_default().push(fp);
            }
            let mut gone: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for (t, p) in &forgotten {
                gone.entry(t.as_str()).or_default().push(*p);
            }
            let mut req = FetchRequest::default();
            req.replica_id = strand_wire::kafka::messages::BrokerId(-1);
            req.max_wait_ms = self.config.max_wait_ms;
            req.min_bytes = 1;
            req.max_bytes = 64 << 20;
            req.isolation_level = self.config.isolation_level;
            req.session_id = session.id;
            req.session_epoch = session.epoch;
            req.topics = topics
                .into_iter()
                .map(|(t, ps)| {
                    let mut ft = FetchTopic::default();
                    ft.topic = TopicName(StrBytes::from_string(t.to_string()));
                    ft.partitions = ps;
                    ft
                })
                .collect();
            req.forgotten_topics_data = gone
                .into_iter()
                .map(|(t, ps)| {
                    let mut ft = ForgottenTopic::default();
                    ft.topic = TopicName(StrBytes::from_string(t.to_string()));
                    ft.partitions = ps;
                    ft
                })
                .collect();
            let conn = self.cluster.broker(leader).await?;
            let reply = conn
                .start(RequestKind::Fetch(req), true)?
                .ok_or_else(|| ClientError::Protocol("no response expected".into()))?;
            self.in_flight.insert(
                leader,
                (
                    reply,
                    InFlight {
                        listed,
                        forgotten,
                        full,
                    },
                ),
            );
        }
        Ok(())
    }

    /// Takes in a fetch's answer: records, high watermarks, and the session's progress.
    fn absorb(
        &mut self,
        leader: i32,
        answer: ResponseKind,
        fetch: &InFlight,
    ) -> Result<(), ClientError> {
        let ResponseKind::Fetch(r) = answer else {
            return Err(ClientError::Protocol("unexpected Fetch answer".into()));
        };
        let session = self.sessions.entry(leader).or_default();
        // FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH: the leader lost or moved
        // on from the session (a restart, eviction); the next fetch is full.
        if r.error_code == 70 || r.error_code == 71 {
            if r.error_code == 70 {
                session.id = 0; // gone: nothing to close
            }
            // With 71 the id is kept: the next (full) fetch closes that session, as the Java
            // client does, rather than leaving it in the leader's cache until evicted.
            session.reset();
            return Ok(());
        }
        ClientError::check(r.error_code, Some("Fetch"))?;
        if fetch.full {
            session.id = r.session_id;
            session.epoch = if r.session_id == 0 { 0 } else { 1 };
            session.held = fetch.listed.iter().cloned().collect();
            debug_assert_eq!(session.held.len(), fetch.listed.len());
        } else {
            session.epoch = if session.epoch == i32::MAX {
                1
            } else {
                session.epoch + 1
            };
            for (tp, pos) in &fetch.listed {
                session.held.insert(tp.clone(), *pos);
            }
            for tp in &fetch.forgotten {
                session.held.remove(tp);
            }
        }
        // Per partition answered: no allocation unless a partition is new or has records (a
        // 1,000-partition fetch without a session mostly answers "nothing new").
        for t in r.responses {
            let mut tp = (t.topic.0.to_string(), 0);
            for p in t.partitions {
                tp.1 = p.partition_index;
                let Some(&fetched_at) = session.held.get(&tp) else {
                    continue; // not asked for
                };
                if self.positions.get(&tp) != Some(&fetched_at) {
                    continue; // seeked meanwhile
                }
                ClientError::check(p.error_code, Some(&format!("{}-{}", tp.0, tp.1)))?;
                match self.high_watermarks.get_mut(&tp) {
                    Some(hw) => *hw = p.high_watermark,
                    None => {
                        self.high_watermarks.insert(tp.clone(), p.high_watermark);
                    }
                }
                if p.records.as_ref().is_none_or(|r| r.is_empty()) {
                    continue;
                }
                let aborted: Vec<(i64, i64)> = if self.config.isolation_level == 1 {
                    p.aborted_transactions
                        .iter()
                        .flatten()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect()
                } else {
                    Vec::new()
                };
                let next = decode_records(
                    &tp,
                    fetched_at,
                    p.records.as_ref(),
                    aborted,
                    &mut self.ready,
                )?;
                if let Some(position) = self.positions.get_mut(&tp) {
                    *position = next;
                }
            }
        }
        Ok(())
    }
}

/// Appends the records at or after `from` to `out`; returns the next offset to fetch.
/// `aborted`: (producer id, first offset) of aborted transactions (read_committed): their
/// batches are skipped up to the producer's next control batch, as Kafka's clients do.
pub(crate) fn decode_records(
    tp: &(String, i32),
    from: i64,
    records: Option<&Bytes>,
    mut aborted: Vec<(i64, i64)>,
    out: &mut VecDeque<Record>,
) -> Result<i64, ClientError> {
    let Some(mut rest) = records.cloned() else {
        return Ok(from);
    };
    aborted.sort_by_key(|a| std::cmp::Reverse(a.1));
    let mut aborting: Vec<i64> = Vec::new();
    let mut next = from;
    while let Some(len) = peek_total_len(&rest) {
        if len > rest.len() {
            break; // a partial batch at the end of the response
        }
        let batch = rest.split_to(len);
        let h = strand_wire::batch::validate(&batch)
            .map_err(|e| ClientError::Protocol(format!("{}-{}: bad batch: {e}", tp.0, tp.1)))?;
        next = next.max(h.last_offset() + 1);
        while aborted.last().is_some_and(|a| a.1 <= h.last_offset()) {
            if let Some((pid, _)) = aborted.pop() {
                aborting.push(pid);
            }
        }
        if h.is_control() {
            // A commit or abort marker ends the producer's transaction.
            aborting.retain(|&pid| pid != h.producer_id);
            continue;
        }
        if h.is_transactional() && aborting.contains(&h.producer_id) {
            continue;
        }
        let batch = if h.attributes & 0x7 != 0 {
            Bytes::from(
                strand_wire::compression::decompress_batch(&batch)
                    .map_err(|e| ClientError::Protocol(format!("{}-{}: {e}", tp.0, tp.1)))?,
            )
        } else {
            batch
        };
        let log_append_time = h.attributes & 0x8 != 0;
        for r in strand_wire::records::records(&batch)
            .map_err(|e| ClientError::Protocol(format!("{}-{}: {e}", tp.0, tp.1)))?
        {
            let offset = h.base_offset + r.offset_delta;
            if offset < from {
                continue;
            }
            out.push_back(Record {
                topic: tp.0.clone(),
                partition: tp.1,
                offset,
                timestamp_ms: timestamp(&h, r.timestamp_delta, log_append_time),
                key: r.key.map(|k| batch.slice_ref(k)),
                value: r.value.map(|v| batch.slice_ref(v)),
            });
        }
    }
    Ok(next)
}

fn timestamp(h: &BatchHeader, delta: i64, log_append_time: bool) -> i64 {
    if log_append_time {
        h.max_timestamp_ms
    } else {
        h.base_timestamp_ms + delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_wire::builder::BatchBuilder;

    fn batch(base: i64, pid: i64, attributes: u16, value: &[u8]) -> Vec<u8> {
        let mut b = BatchBuilder::new(0).producer(pid, 0, 0);
        b.push(Some(b"k"), value, 0);
        let mut v = b.finish();
        strand_wire::batch::set_base_offset(&mut v, base);
        v[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = strand_wire::batch::compute_crc(&v);
        v[17..21].copy_from_slice(&crc.to_be_bytes());
        v
    }

    #[test]
    fn read_committed_skips_aborted_transactions() {
        let mut all = Vec::new();
        all.extend(batch(0, 7, 0x10, b"aborted")); // transactional, pid 7
        all.extend(batch(1, 8, 0x10, b"committed")); // transactional, pid 8
        all.extend(batch(2, 7, 0x30, b"")); // pid 7's abort marker (control)
        all.extend(batch(3, 8, 0x30, b"")); // pid 8's commit marker
        all.extend(batch(4, 7, 0x10, b"later")); // pid 7's next transaction
        let bytes = Bytes::from(all);
        let tp = ("t".to_string(), 0);
        let mut out = VecDeque::new();
        let next = decode_records(&tp, 0, Some(&bytes), vec![(7, 0)], &mut out).expect("decode");
        let values: Vec<&[u8]> = out.iter().filter_map(|r| r.value.as_deref()).collect();
        assert_eq!(values, vec![&b"committed"[..], &b"later"[..]]);
        assert_eq!(next, 5);
        let mut out = VecDeque::new();
        decode_records(&tp, 0, Some(&bytes), vec![], &mut out).expect("decode");
        assert_eq!(out.len(), 3, "read_uncommitted sees the aborted record too");
    }
}
