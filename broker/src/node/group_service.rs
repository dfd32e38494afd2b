//! Groups on the node: which shard coordinates a group, cross-shard routing of group
//! requests, parked-request delivery, the timeout ticker, and committed offsets kept durable
//! in the internal `__consumer_offsets` topic (replayed when its partitions open).
//!
//! A group lives on the shard that owns its `__consumer_offsets` partition, so the
//! coordinator and the log its offsets are written to are on the same core.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_channel::oneshot;
use strand_wire::builder::BatchBuilder;
use strand_wire::ErrorCode;
use tracing::{debug, warn};

use super::{Node, ShardMsg};
use crate::group::{Answer, Committed, Coordinator, Join, Outcome, SyncResult, Ticket};
use crate::internal_topics::{offsets_partition, OFFSETS_TOPIC};
use crate::storage::PartitionLog;

/// How often group timeouts are checked.
const TICK_MS: u64 = 100;

/// A committed offset as requests carry it: partition, offset, leader epoch (-1 unknown),
/// metadata.
pub type OffsetEntry = ((String, i32), i64, i32, Option<String>);

/// The stored form of an offset and its leader epoch: `offset:epoch` (older records have
/// just `offset`).
pub(super) fn parse_position(s: &str) -> Option<(i64, i32)> {
    match s.split_once(':') {
        Some((o, e)) => Some((o.parse().ok()?, e.parse().ok()?)),
        None => Some((s.parse().ok()?, -1)),
    }
}

/// A group request, as sent to the coordinating shard.
#[derive(Debug)]
pub enum GroupRequest {
    Join(Join),
    Sync {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    },
    Heartbeat {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
    },
    /// Members by member id and (LeaveGroup v3+) instance id.
    Leave {
        group: String,
        members: Vec<(String, Option<String>)>,
    },
    Commit {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
        offsets: Vec<OffsetEntry>,
    },
    Fetch {
        group: String,
        partitions: Option<Vec<(String, i32)>>,
        /// v7+ `require_stable`: UNSTABLE_OFFSET_COMMIT while a transaction holds offsets
        /// of the group not yet committed.
        require_stable: bool,
        /// v9+: the KIP-848 member asking, with its epoch (STALE_MEMBER_EPOCH if old).
        member: Option<(String, i32)>,
    },
    /// TxnOffsetCommit: offsets written now, visible when the transaction commits.
    TxnCommit {
        group: String,
        member: String,
        instance: Option<String>,
        generation: i32,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<OffsetEntry>,
    },
    Describe {
        group: String,
    },
    List,
    DeleteGroup {
        group: String,
    },
    DeleteOffsets {
        group: String,
        partitions: Vec<(String, i32)>,
    },
    /// ConsumerGroupHeartbeat (KIP-848), with the topics as the catalog had them.
    ConsumerHeartbeat {
        group: String,
        heartbeat: Box<crate::group::consumer::Heartbeat>,
        topics: crate::group::consumer::TopicsView,
    },
    ConsumerDescribe {
        group: String,
    },
    /// ShareGroupHeartbeat (KIP-932).
    ShareHeartbeat {
        group: String,
        heartbeat: Box<crate::group::share::Heartbeat>,
        topics: crate::group::consumer::TopicsView,
    },
    ShareDescribe {
        group: String,
    },
}

impl GroupRequest {
    /// The group a request is about (`None` for ListGroups).
    fn group(&self) -> Option<&str> {
        match self {
            GroupRequest::Join(j) => Some(&j.group),
            GroupRequest::Sync { group, .. }
            | GroupRequest::Heartbeat { group, .. }
            | GroupRequest::Leave { group, .. }
            | GroupRequest::Commit { group, .. }
            | GroupRequest::Fetch { group, .. }
            | GroupRequest::TxnCommit { group, .. }
            | GroupRequest::Describe { group }
            | GroupRequest::DeleteGroup { group }
            | GroupRequest::DeleteOffsets { group, .. }
            | GroupRequest::ConsumerHeartbeat { group, .. }
            | GroupRequest::ConsumerDescribe { group }
            | GroupRequest::ShareHeartbeat { group, .. }
            | GroupRequest::ShareDescribe { group } => Some(group),
            GroupRequest::List => None,
        }
    }
}

#[derive(Debug)]
pub enum GroupResponse {
    Join(crate::group::JoinResult),
    Sync(SyncResult),
    Error(ErrorCode),
    Errors(Vec<ErrorCode>),
    /// Per partition: offset (-1 if none), metadata.
    Offsets(Vec<OffsetEntry>),
    Described(Option<GroupSummary>),
    /// (group, protocol type, state, group type)
    Listed(Vec<(String, String, String, &'static str)>),
    ConsumerHeartbeat(crate::group::consumer::HeartbeatResult),
    /// A consumer group's state name and a copy of it (`None`: no such consumer group).
    ConsumerDescribed(Option<(&'static str, crate::group::consumer::ConsumerGroup)>),
    /// A share group's state name and a copy of it (`None`: no such share group).
    ShareDescribed(Option<(&'static str, crate::group::share::ShareGroup)>),
}

#[derive(Debug, Clone)]
pub struct GroupSummary {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, instance id, client id, host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

/// Per-shard group state.
#[derive(Default)]
pub struct Groups {
    pub coordinator: Coordinator,
    /// Parked joins and syncs, with their group's `__consumer_offsets` partition.
    waiters: HashMap<Ticket, (i32, oneshot::Sender<Answer>)>,
    /// Offsets committed inside open transactions, by producer id: (offsets partition,
    /// group, partition, offset, metadata). Applied at the commit marker, dropped at abort.
    pub(super) pending_txn: HashMap<i64, Vec<PendingOffset>>,
}

impl Groups {
    /// Forgets every group of `__consumer_offsets` partition `partition` (this node stopped
    /// coordinating it): parked requests are dropped (answered NOT_COORDINATOR), and offsets
    /// of open transactions go too (the new coordinator replays them from the log).
    pub(crate) fn forget_partition(&mut self, partition: i32) {
        self.coordinator
            .groups
            .retain(|name, _| offsets_partition(name) != partition);
        self.waiters.retain(|_, (p, _)| *p != partition);
        for pending in self.pending_txn.values_mut() {
            pending.retain(|o| o.offsets_partition != partition);
        }
        self.pending_txn.retain(|_, pending| !pending.is_empty());
    }
}

/// An offset committed inside a transaction, waiting for its marker.
#[derive(Debug, Clone)]
pub(super) struct PendingOffset {
    pub(super) offsets_partition: i32,
    pub(super) group: String,
    pub(super) tp: (String, i32),
    pub(super) offset: i64,
    pub(super) leader_epoch: i32,
    pub(super) metadata: Option<String>,
}

fn now_ms() -> i64 {
    crate::runtime::clock::now_ms()
}

impl Node {
    pub fn group_shard(&self, group: &str) -> usize {
        self.owner(&(OFFSETS_TOPIC.to_string(), offsets_partition(group)))
    }

    /// Runs a group request on the coordinating shard.
    pub async fn group_request(self: &Rc<Self>, group: &str, req: GroupRequest) -> GroupResponse {
        // In a cluster, only the leader of the group's offsets partition coordinates it.
        let offsets_tp = (
            crate::internal_topics::OFFSETS_TOPIC.to_string(),
            crate::internal_topics::offsets_partition(group),
        );
        if !self.coordinates(&offsets_tp) {
            return GroupResponse::Error(ErrorCode::NotCoordinator);
        }
        let owner = self.group_shard(group);
        if owner == self.shard {
            return self.group_local(req).await;
        }
        let (reply, rx) = oneshot::channel();
        self.send_to(owner, ShardMsg::Group { req, reply });
        crate::runtime::wake::cross(rx)
            .await
            .unwrap_or(GroupResponse::Error(ErrorCode::NotCoordinator))
    }

    /// ListGroups across every shard.
    pub async fn list_groups(self: &Rc<Self>) -> Vec<(String, String, String, &'static str)> {
        let mut out = Vec::new();
        for shard in 0..self.shards() {
            let r = if shard == self.shard {
                self.group_local(GroupRequest::List).await
            } else {
                let (reply, rx) = oneshot::channel();
                self.send_to(
                    shard,
                    ShardMsg::Group {
                        req: GroupRequest::List,
                        reply,
                    },
                );
                crate::runtime::wake::cross(rx)
                    .await
                    .unwrap_or(GroupResponse::Listed(vec![]))
            };
            if let GroupResponse::Listed(v) = r {
                out.extend(v);
            }
        }
        out
    }

    fn deliver(&self, answers: Vec<(Ticket, Answer)>) {
        let mut g = self.groups.borrow_mut();
        for (t, a) in answers {
            if let Some((_, tx)) = g.waiters.remove(&t) {
                let _ = tx.send(a);
            }
        }
    }

    async fn park(
        &self,
        group: &str,
        ticket: Ticket,
        done: Vec<(Ticket, Answer)>,
    ) -> Option<Answer> {
        let (tx, rx) = oneshot::channel();
        self.groups
            .borrow_mut()
            .waiters
            .insert(ticket, (offsets_partition(group), tx));
        self.deliver(done);
        // Delivered by this shard (local wake).
        rx.await.ok()
    }

    pub async fn group_local(self: &Rc<Self>, req: GroupRequest) -> GroupResponse {
        // Its offsets partition not loaded (yet) on this shard (`coordinators`): answered as
        // Kafka's coordinator answers while it loads — a heartbeat passes (the member learns
        // it is unknown once loaded), a sync restarts the rebalance at JoinGroup (its state
        // is gone), everything else COORDINATOR_LOAD_IN_PROGRESS (retriable).
        if let Some(group) = req.group() {
            let tp = (OFFSETS_TOPIC.to_string(), offsets_partition(group));
            if !self.coordinator_loaded(&tp) {
                return match req {
                    GroupRequest::Heartbeat { .. } => GroupResponse::Error(ErrorCode::None),
                    GroupRequest::Sync { .. } => {
                        GroupResponse::Error(ErrorCode::RebalanceInProgress)
                    }
                    _ => GroupResponse::Error(ErrorCode::CoordinatorLoadInProgress),
                };
            }
        }
        let now = now_ms();
        match req {
            GroupRequest::Join(j) => {
                let (group, member) = (j.group.clone(), j.member_id.clone());
                let (outcome, done) = self.groups.borrow_mut().coordinator.join(j, now);
                match outcome {
                    Outcome::Now(r) => {
                        debug!(group, member, error = ?r.error, generation = r.generation, "join answered at once");
                        self.deliver(done);
                        GroupResponse::Join(r)
                    }
                    // Dropped unanswered: this node stopped coordinating the group.
                    Outcome::Parked(t) => match self.park(&group, t, done).await {
                        Some(Answer::Join(r)) => GroupResponse::Join(r),
                        _ => GroupResponse::Error(ErrorCode::NotCoordinator),
                    },
                }
            }
            GroupRequest::Sync {
                group,
                member,
                instance,
                generation,
                assignments,
            } => {
                let (outcome, done) = self.groups.borrow_mut().coordinator.sync(
                    &group,
                    (&member, instance.as_deref()),
                    generation,
                    assignments,
                    now,
                );
                match outcome {
                    Outcome::Now(r) => {
                        debug!(group, member, generation, error = ?r.error, "sync answered at once");
                        self.deliver(done);
                        GroupResponse::Sync(r)
                    }
                    Outcome::Parked(t) => match self.park(&group, t, done).await {
                        Some(Answer::Sync(r)) => GroupResponse::Sync(r),
                        _ => GroupResponse::Error(ErrorCode::NotCoordinator),
                    },
                }
            }
            GroupRequest::Heartbeat {
                group,
                member,
                instance,
                generation,
            } => {
                let code = self.groups.borrow_mut().coordinator.heartbeat(
                    &group,
                    (&member, instance.as_deref()),
                    generation,
                    now,
                );
                if !matches!(code, ErrorCode::None | ErrorCode::RebalanceInProgress) {
                    debug!(group, member, generation, error = ?code, "heartbeat refused");
                }
                GroupResponse::Error(code)
            }
            GroupRequest::Leave { group, members } => {
                let (errors, done) = self
                    .groups
                    .borrow_mut()
                    .coordinator
                    .leave(&group, &members, now);
                self.deliver(done);
                GroupResponse::Errors(errors)
            }
            GroupRequest::Commit {
                group,
                member,
                instance,
                generation,
                offsets,
            } => {
                let check = self.groups.borrow().coordinator.check_commit(
                    &group,
                    (&member, instance.as_deref()),
                    generation,
                );
                if check != ErrorCode::None {
                    debug!(group, member, generation, error = ?check, "offset commit refused");
                    return GroupResponse::Error(check);
                }
                if let Err(code) = self.persist_offsets(&group, &offsets).await {
                    return GroupResponse::Error(code);
                }
                let entries = offsets
                    .into_iter()
                    .map(|(tp, offset, leader_epoch, metadata)| {
                        (
                            tp,
                            Committed {
                                offset,
                                leader_epoch,
                                metadata,
                                commit_ms: now,
                            },
                        )
                    })
                    .collect();
                self.groups.borrow_mut().coordinator.commit(&group, entries);
                GroupResponse::Error(ErrorCode::None)
            }
            GroupRequest::Fetch {
                group,
                partitions,
                require_stable,
                member,
            } => {
                let g = self.groups.borrow();
                let consumer = g
                    .coordinator
                    .group(&group)
                    .and_then(|g| g.consumer.as_ref());
                if let (Some(c), Some((id, epoch))) = (consumer, &member) {
                    if let Err(code) = c.check_member_epoch(id, *epoch) {
                        return GroupResponse::Error(code);
                    }
                }
                if require_stable
                    && g.pending_txn.values().flatten().any(|p| {
                        p.group == group && partitions.as_ref().is_none_or(|w| w.contains(&p.tp))
                    })
                {
                    return GroupResponse::Error(ErrorCode::UnstableOffsetCommit);
                }
                let all: Vec<(String, i32)> = match partitions {
                    Some(p) => p,
                    None => g
                        .coordinator
                        .group(&group)
                        .map(|g| g.offsets.keys().cloned().collect())
                        .unwrap_or_default(),
                };
                GroupResponse::Offsets(
                    all.into_iter()
                        .map(|tp| match g.coordinator.committed(&group, &tp) {
                            Some(c) => (tp, c.offset, c.leader_epoch, c.metadata.clone()),
                            None => (tp, -1, -1, None),
                        })
                        .collect(),
                )
            }
            GroupRequest::TxnCommit {
                group,
                member,
                instance,
                generation,
                producer_id,
                epoch,
                offsets,
            } => {
                if generation >= 0 || !member.is_empty() {
                    let check = self.groups.borrow().coordinator.check_commit(
                        &group,
                        (&member, instance.as_deref()),
                        generation,
                    );
                    if check != ErrorCode::None {
                        debug!(group, member, generation, error = ?check, "transactional offset commit refused");
                        return GroupResponse::Error(check);
                    }
                }
                if let Err(code) = self
                    .persist_txn_offsets(&group, producer_id, epoch, &offsets)
                    .await
                {
                    return GroupResponse::Error(code);
                }
                let partition = offsets_partition(&group);
                let mut g = self.groups.borrow_mut();
                let pending = g.pending_txn.entry(producer_id).or_default();
                for (tp, offset, leader_epoch, metadata) in offsets {
                    pending.push(PendingOffset {
                        offsets_partition: partition,
                        group: group.clone(),
                        tp,
                        offset,
                        leader_epoch,
                        metadata,
                    });
                }
                GroupResponse::Error(ErrorCode::None)
            }
            GroupRequest::Describe { group } => {
                let g = self.groups.borrow();
                GroupResponse::Described(g.coordinator.group(&group).map(|g| {
                    GroupSummary {
                        state: g.state_name(),
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocol: g.protocol.clone().unwrap_or_default(),
                        members: g
                            .members
                            .values()
                            .map(|m| {
                                let md = m.metadata_for(g.protocol.as_deref());
                                (
                                    m.id.clone(),
                                    m.instance_id.clone(),
                                    m.client_id.clone(),
                                    m.client_host.clone(),
                                    md,
                                    m.assignment.clone(),
                                )
                            })
                            .collect(),
                    }
                }))
            }
            GroupRequest::DeleteGroup { group } => {
                let code = self.groups.borrow().coordinator.group(&group).map_or(
                    ErrorCode::GroupIdNotFound,
                    |g| {
                        if g.is_empty() {
                            ErrorCode::None
                        } else {
                            ErrorCode::NonEmptyGroup
                        }
                    },
                );
                if code != ErrorCode::None {
                    return GroupResponse::Error(code);
                }
                // A tombstone for the whole group: topic "*".
                if let Err(code) = self
                    .persist_offsets(&group, &[(("*".to_string(), -1), -1, -1, None)])
                    .await
                {
                    return GroupResponse::Error(code);
                }
                GroupResponse::Error(self.groups.borrow_mut().coordinator.delete_group(&group))
            }
            GroupRequest::DeleteOffsets { group, partitions } => {
                let check = match self.groups.borrow().coordinator.group(&group) {
                    None => Err(ErrorCode::GroupIdNotFound),
                    Some(g) if !g.is_empty() => Err(ErrorCode::GroupSubscribedToTopic),
                    Some(_) => Ok(()),
                };
                if let Err(code) = check {
                    return GroupResponse::Error(code);
                }
                let tombstones: Vec<_> = partitions
                    .iter()
                    .map(|tp| (tp.clone(), -1, -1, None))
                    .collect();
                if let Err(code) = self.persist_offsets(&group, &tombstones).await {
                    return GroupResponse::Error(code);
                }
                let result = self
                    .groups
                    .borrow_mut()
                    .coordinator
                    .delete_offsets(&group, &partitions);
                GroupResponse::Error(result.err().unwrap_or(ErrorCode::None))
            }
            r @ (GroupRequest::ConsumerHeartbeat { .. }
            | GroupRequest::ConsumerDescribe { .. }
            | GroupRequest::ShareHeartbeat { .. }
            | GroupRequest::ShareDescribe { .. }) => self.consumer_group_local(r, now),
            GroupRequest::List => {
                let g = self.groups.borrow();
                GroupResponse::Listed(
                    g.coordinator
                        .groups
                        .values()
                        .map(|g| {
                            (
                                g.id.clone(),
                                g.protocol_type.clone().unwrap_or_default(),
                                g.state_name().to_string(),
                                g.type_name(),
                            )
                        })
                        .collect(),
                )
            }
        }
    }

    /// Appends the commit to the group's `__consumer_offsets` partition and waits for the
    /// fdatasync. Record: key `group \0 topic \0 partition`, value
    /// `offset:leader epoch \0 metadata`.
    async fn persist_offsets(&self, group: &str, offsets: &[OffsetEntry]) -> Result<(), ErrorCode> {
        let tp = (OFFSETS_TOPIC.to_string(), offsets_partition(group));
        let mut b = BatchBuilder::new(now_ms());
        for ((topic, partition), offset, epoch, metadata) in offsets {
            let key = format!("{group}\0{topic}\0{partition}");
            // Offset -1 is a tombstone (empty value): the commit, or with topic "*" the whole
            // group, is deleted.
            let value = if *offset < 0 {
                String::new()
            } else {
                format!("{offset}:{epoch}\0{}", metadata.as_deref().unwrap_or(""))
            };
            b.push(Some(key.as_bytes()), value.as_bytes(), 0);
        }
        if b.is_empty() {
            return Ok(());
        }
        let batch = BytesMut::from(&b.finish()[..]);
        self.coordinator_append(&tp, batch, true)
            .await
            .map(|_| ())
            .map_err(|e| {
                warn!(group, error = ?e, "could not persist committed offsets");
                e.coordinator_code()
            })
    }

    /// Writes a TxnOffsetCommit to the group's `__consumer_offsets` partition as a
    /// transactional batch of `producer_id` (fdatasynced); its marker decides its fate.
    async fn persist_txn_offsets(
        &self,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: &[OffsetEntry],
    ) -> Result<(), ErrorCode> {
        let tp = (OFFSETS_TOPIC.to_string(), offsets_partition(group));
        let log: PartitionLog = self.led(&tp).map_err(|_| ErrorCode::NotCoordinator)?;
        let mut sequence = log.next_sequence(producer_id, epoch);
        for _attempt in 0..2 {
            let mut b = BatchBuilder::new(now_ms());
            for ((topic, partition), offset, epoch, metadata) in offsets {
                let key = format!("{group}\0{topic}\0{partition}");
                let value = format!("{offset}:{epoch}\0{}", metadata.as_deref().unwrap_or(""));
                b.push(Some(key.as_bytes()), value.as_bytes(), 0);
            }
            let b = b.producer(producer_id, epoch, sequence).transactional();
            let batch = BytesMut::from(&b.finish()[..]);
            match self.coordinator_append(&tp, batch, true).await {
                Ok(_) => return Ok(()),
                // Our own sequence numbers: after a restart the partition may remember more.
                Err(super::coordinators::CoordinatorWriteError::Append(
                    crate::storage::AppendError::OutOfOrderSequence { expected },
                )) => {
                    sequence = expected;
                }
                Err(e) => {
                    warn!(group, error = ?e, "could not persist transactional offsets");
                    return Err(e.coordinator_code());
                }
            }
        }
        Err(ErrorCode::OutOfOrderSequenceNumber)
    }

    /// A marker on `__consumer_offsets` partition `partition`: the producer's pending offsets
    /// there become committed offsets, or are dropped.
    pub fn end_txn_offsets(&self, producer_id: i64, partition: i32, commit: bool) {
        let mut g = self.groups.borrow_mut();
        let Some(pending) = g.pending_txn.remove(&producer_id) else {
            return;
        };
        let (here, elsewhere): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|p| p.offsets_partition == partition);
        if !elsewhere.is_empty() {
            g.pending_txn.insert(producer_id, elsewhere);
        }
        if !commit {
            return;
        }
        let now = now_ms();
        for p in here {
            g.coordinator.commit(
                &p.group,
                vec![(
                    p.tp,
                    Committed {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata,
                        commit_ms: now,
                    },
                )],
            );
        }
    }

    /// Expires group members and ends overdue join phases on this shard.
    pub fn spawn_group_ticker(self: &Rc<Self>) {
        self.groups
            .borrow_mut()
            .coordinator
            .initial_rebalance_delay_ms = self.config().group_initial_rebalance_delay_ms;
        self.groups.borrow_mut().coordinator.member_id_salt = uuid::Uuid::new_v4().as_u128();
        self.groups.borrow_mut().coordinator.max_members =
            usize::try_from(self.config().group_max_size).ok();
        self.groups.borrow_mut().coordinator.share_settings = {
            let c = self.config();
            crate::group::share::Settings {
                session_timeout_ms: c.group_share_session_timeout_ms,
                heartbeat_interval_ms: c.group_share_heartbeat_interval_ms,
                max_members: usize::try_from(c.group_share_max_size).unwrap_or(200),
            }
        };
        self.groups.borrow_mut().coordinator.consumer_settings = {
            let c = self.config();
            crate::group::consumer::Settings {
                session_timeout_ms: c.group_consumer_session_timeout_ms,
                heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
                assignors: c.group_consumer_assignors.clone(),
                max_members: usize::try_from(c.group_consumer_max_size).ok(),
            }
        };
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
                let now = now_ms();
                let retention_ms = me.config().offsets_retention_minutes * 60_000;
                let done = {
                    let mut g = me.groups.borrow_mut();
                    g.coordinator.expire_offsets(now, retention_ms);
                    g.coordinator.tick(now)
                };
                me.deliver(done);
            }
        })
        .detach();
    }
}
