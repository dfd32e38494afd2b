//! Consumer-group coordinator for the classic protocol (sans-IO).
//!
//! Plain state driven by requests and `now_ms`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit/OffsetFetch and a `tick` for timeouts. Requests that must wait (a join until
//! every member has rejoined, a follower's sync until the leader's) are parked under a
//! [`Ticket`]; the calls that complete them return `(Ticket, Answer)` pairs for the I/O layer
//! to deliver. Assignors run in the clients; their bytes pass through untouched.
//!
//! States follow Kafka's: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and
//! back to PreparingRebalance when a member joins, leaves or times out.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use strand_wire::ErrorCode;
use tracing::debug;

pub mod consumer;
mod membership;
mod offsets;
pub mod share;

/// Identifies a parked request.
pub type Ticket = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's names (ListGroups, DescribeGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i64,
    pub rebalance_timeout_ms: i64,
    pub last_seen_ms: i64,
    pub assignment: Bytes,
    /// A JoinGroup of this member waiting for the join phase to end.
    join_waiter: Option<Ticket>,
    /// A SyncGroup of this member waiting for the leader's assignments.
    sync_waiter: Option<Ticket>,
}

impl Member {
    /// This member's metadata for `protocol` (empty if it did not offer it).
    pub fn metadata_for(&self, protocol: Option<&str>) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| Some(n.as_str()) == protocol)
            .map(|(_, b)| b.clone())
            .unwrap_or_default()
    }
}

/// What a completed join tells one member.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only for the leader: every member's id, instance id and metadata for its protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Join(JoinResult),
    Sync(SyncResult),
}

/// A join or sync: answered now, or parked under a ticket.
#[derive(Debug, PartialEq)]
pub enum Outcome<T> {
    Now(T),
    Parked(Ticket),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    pub offset: i64,
    /// The leader epoch the consumer saw at `offset` (-1 unknown), returned by OffsetFetch.
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// When the current join phase must end even if some members have not rejoined.
    rebalance_deadline_ms: i64,
    /// While a group that was empty fills up: the join phase does not end before this, so
    /// members starting together land in one generation instead of a rebalance each
    /// (`group.initial.rebalance.delay.ms`, Kafka's `InitialDelayedJoin`).
    initial_join_until_ms: Option<i64>,
    pub offsets: BTreeMap<(String, i32), Committed>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with.
    pending_ids: std::collections::HashSet<String>,
    /// When a join phase last started or ended: an empty group without offsets is forgotten
    /// `limits::EMPTY_GROUP_KEEP_MS` after this.
    last_change_ms: i64,
    /// Set while the group speaks the KIP-848 consumer protocol (`members` is then empty).
    /// An empty group converts either way when a member of the other protocol joins.
    pub consumer: Option<consumer::ConsumerGroup>,
    /// Set while the group is a share group (KIP-932).
    pub share: Option<share::ShareGroup>,
}

impl Group {
    /// No members of either protocol.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
            && self.consumer.as_ref().is_none_or(|c| c.members.is_empty())
            && self.share.as_ref().is_none_or(|s| s.members.is_empty())
    }

    /// ListGroups' group type.
    pub fn type_name(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else if self.share.is_some() {
            "share"
        } else {
            "classic"
        }
    }

    /// Kafka's state name for either protocol.
    pub fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(c) => consumer::state_name(c),
            None if self.share.is_some() => self.share.as_ref().map_or("Empty", share::state_name),
            None if self.members.is_empty() => GroupState::Empty.name(),
            None => self.state.name(),
        }
    }
}

impl Group {
    fn new(id: &str) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            rebalance_deadline_ms: 0,
            initial_join_until_ms: None,
            offsets: BTreeMap::new(),
            pending_ids: Default::default(),
            last_change_ms: 0,
            consumer: None,
            share: None,
        }
    }
}

/// Parameters of a JoinGroup.
#[derive(Clone, Debug)]
pub struct Join {
    pub group: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i64,
    pub rebalance_timeout_ms: i64,
    /// v4+: a member without an id is given one and asked to rejoin with it.
    pub require_known_member_id: bool,
}

#[derive(Debug, Default)]
pub struct Coordinator {
    pub groups: HashMap<String, Group>,
    /// `group.initial.rebalance.delay.ms`: how long the first join of an empty group waits
    /// for more members (each new member extends it, up to the rebalance timeout). 0 = none.
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size`: members a group may have; `None` = no limit.
    pub max_members: Option<usize>,
    /// Random, drawn by the driver when it starts coordinating: member ids are this plus a
    /// counter, so they never repeat across coordinators. (With a bare counter, a new
    /// coordinator after a failover handed out the ids the old one had: one consumer's new
    /// id was another's old one, both were taken for the same member, and each owned every
    /// partition — found by the chaos harness, #19. Kafka uses a random UUID.)
    pub member_id_salt: u128,
    /// `group.consumer.*` settings of KIP-848 groups.
    pub consumer_settings: consumer::Settings,
    /// `group.share.*` settings of share groups.
    pub share_settings: share::Settings,
    next_ticket: Ticket,
    next_member: u64,
}

fn join_error(member_id: &str, error: ErrorCode) -> JoinResult {
    JoinResult {
        error,
        generation: -1,
        protocol_type: None,
        protocol: None,
        leader: String::new(),
        member_id: member_id.to_string(),
        members: Vec::new(),
    }
}

fn sync_error(error: ErrorCode) -> SyncResult {
    SyncResult {
        error,
        protocol_type: None,
        protocol: None,
        assignment: Bytes::new(),
    }
}

impl Coordinator {
    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        self.next_ticket
    }

    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.get(id)
    }

    /// Starts a join phase. Members parked in a SyncGroup of the old generation are answered
    /// REBALANCE_IN_PROGRESS now, so they rejoin (as Kafka does): a follower waits for its
    /// sync answer without heartbeating, and held until the join ended it would never rejoin
    /// — the group would sit until the rebalance timeout (5 minutes for librdkafka).
    fn prepare_rebalance(group: &mut Group, now_ms: i64, reason: &str) -> Vec<(Ticket, Answer)> {
        debug!(
            group = %group.id,
            generation = group.generation,
            members = group.members.len(),
            reason,
            "rebalance started"
        );
        group.state = GroupState::PreparingRebalance;
        group.last_change_ms = now_ms;
        let timeout = group
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        group.rebalance_deadline_ms = now_ms + timeout;
        group
            .members
            .values_mut()
            .filter_map(|m| m.sync_waiter.take())
            .map(|t| (t, Answer::Sync(sync_error(ErrorCode::RebalanceInProgress))))
            .collect()
    }

    /// Ends the join phase once every member has rejoined (or the deadline passed, dropping
    /// those that did not).
    fn maybe_complete_join(group: &mut Group, now_ms: i64) -> Vec<(Ticket, Answer)> {
        if group.state != GroupState::PreparingRebalance {
            return vec![];
        }
        if !group.members.is_empty()
            && group
                .initial_join_until_ms
                .is_some_and(|until| now_ms < until)
        {
            return vec![];
        }
        let all_in = group.members.values().all(|m| m.join_waiter.is_some());
        if !all_in && now_ms < group.rebalance_deadline_ms {
            return vec![];
        }
        group.initial_join_until_ms = None;
        group.last_change_ms = now_ms;
        group.members.retain(|_, m| m.join_waiter.is_some());
        let mut out = Vec::new();
        // Stale syncs of the previous generation.
        for m in group.members.values_mut() {
            if let Some(t) = m.sync_waiter.take() {
                out.push((t, Answer::Sync(sync_error(ErrorCode::RebalanceInProgress))));
            }
        }
        group.generation += 1;
        if group.members.is_empty() {
            group.state = GroupState::Empty;
            group.leader = None;
            group.protocol = None;
            return out;
        }
        let protocol = group.select_protocol();
        group.protocol = protocol.clone();
        if group
            .leader
            .as_ref()
            .is_none_or(|l| !group.members.contains_key(l))
        {
            group.leader = group.members.keys().next().cloned();
        }
        let leader = group.leader.clone().unwrap_or_default();
        debug!(
            group = %group.id,
            generation = group.generation,
            members = group.members.len(),
            leader = %leader,
            protocol = protocol.as_deref().unwrap_or("-"),
            "join phase complete"
        );
        let metadata: Vec<(String, Option<String>, Bytes)> = group
            .members
            .values()
            .map(|m| {
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.metadata_for(protocol.as_deref()),
                )
            })
            .collect();
        group.state = GroupState::CompletingRebalance;
        for m in group.members.values_mut() {
            m.last_seen_ms = now_ms;
            m.assignment = Bytes::new();
            if let Some(t) = m.join_waiter.take() {
                let error = if protocol.is_some() {
                    ErrorCode::None
                } else {
                    ErrorCode::InconsistentGroupProtocol
                };
                out.push((
                    t,
                    Answer::Join(JoinResult {
                        error,
                        generation: group.generation,
                        protocol_type: group.protocol_type.clone(),
                        protocol: protocol.clone(),
                        leader: leader.clone(),
                        member_id: m.id.clone(),
                        members: if m.id == leader {
                            metadata.clone()
                        } else {
                            Vec::new()
                        },
                    }),
                ));
            }
        }
        out
    }

    fn check_member(
        &self,
        group: &str,
        member: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        let g = self.groups.get(group).ok_or(ErrorCode::UnknownMemberId)?;
        g.validate_member(member, instance_id)?;
        if generation != g.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(())
    }

    pub fn sync(
        &mut self,
        group_id: &str,
        member: (&str, Option<&str>),
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> (Outcome<SyncResult>, Vec<(Ticket, Answer)>) {
        let (member_id, instance_id) = member;
        if let Err(e) = self.check_member(group_id, member_id, instance_id, generation) {
            return (Outcome::Now(sync_error(e)), vec![]);
        }
        let ticket = self.ticket();
        let Some(group) = self.groups.get_mut(group_id) else {
            return (Outcome::Now(sync_error(ErrorCode::UnknownMemberId)), vec![]);
        };
        let answer = |g: &Group, m: &Member| SyncResult {
            error: ErrorCode::None,
            protocol_type: g.protocol_type.clone(),
            protocol: g.protocol.clone(),
            assignment: m.assignment.clone(),
        };
        match group.state {
            GroupState::PreparingRebalance | GroupState::Empty => (
                Outcome::Now(sync_error(ErrorCode::RebalanceInProgress)),
                vec![],
            ),
            GroupState::Stable => {
                let m = &group.members[member_id];
                (Outcome::Now(answer(group, m)), vec![])
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = group.members.get_mut(member_id) {
                    m.last_seen_ms = now_ms;
                    m.sync_waiter = Some(ticket);
                }
                if group.leader.as_deref() != Some(member_id) {
                    return (Outcome::Parked(ticket), vec![]);
                }
                for (id, a) in assignments {
                    if let Some(m) = group.members.get_mut(&id) {
                        m.assignment = a;
                    }
                }
                group.state = GroupState::Stable;
                debug!(group = %group.id, generation = group.generation, "group stable");
                let mut out = Vec::new();
                let snapshot: Vec<(Ticket, SyncResult)> = group
                    .members
                    .values()
                    .filter_map(|m| m.sync_waiter.map(|t| (t, answer(group, m))))
                    .collect();
                for m in group.members.values_mut() {
                    m.sync_waiter = None;
                }
                for (t, r) in snapshot {
                    out.push((t, Answer::Sync(r)));
                }
                (Outcome::Parked(ticket), out)
            }
        }
    }

    /// Heartbeat, checked in Kafka's order: member (and static-member fencing), generation,
    /// then REBALANCE_IN_PROGRESS while a join phase runs.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member: (&str, Option<&str>),
        generation: i32,
        now_ms: i64,
    ) -> ErrorCode {
        let (member_id, instance_id) = member;
        let Some(g) = self.groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if let Err(e) = g.validate_member(member_id, instance_id) {
            return e;
        }
        if generation != g.generation {
            return ErrorCode::IllegalGeneration;
        }
        if let Some(m) = g.members.get_mut(member_id) {
            m.last_seen_ms = now_ms;
        }
        if g.state == GroupState::PreparingRebalance {
            return ErrorCode::RebalanceInProgress;
        }
        ErrorCode::None
    }

    /// The group a KIP-848 or KIP-932 heartbeat is for: created by a join (epoch 0); missing
    /// otherwise (a coordinator move forgot it) is UNKNOWN_MEMBER_ID, so the member rejoins.
    fn group_for_heartbeat<'a>(
        groups: &'a mut HashMap<String, Group>,
        group_id: &str,
        joining: bool,
        member_id: &str,
    ) -> Result<&'a mut Group, consumer::HeartbeatResult> {
        if !joining && !groups.contains_key(group_id) {
            return Err(consumer::HeartbeatResult::error(
                ErrorCode::UnknownMemberId,
                format!("group {group_id} has no member {member_id}"),
            ));
        }
        Ok(groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id)))
    }

    /// A ConsumerGroupHeartbeat (KIP-848). An empty classic group (or a new one) becomes a
    /// consumer group; a classic group with members refuses (GROUP_ID_NOT_FOUND, as Kafka
    /// with `group.consumer.migration.policy=disabled`).
    pub fn consumer_heartbeat(
        &mut self,
        group_id: &str,
        hb: consumer::Heartbeat,
        topics: &consumer::TopicsView,
        now_ms: i64,
    ) -> consumer::HeartbeatResult {
        use consumer::HeartbeatResult;
        let joining = hb.member_epoch == 0;
        let group =
            match Self::group_for_heartbeat(&mut self.groups, group_id, joining, &hb.member_id) {
                Ok(g) => g,
                Err(r) => return r,
            };
        if group.share.as_ref().is_some_and(|s| !s.members.is_empty()) {
            return HeartbeatResult::error(
                ErrorCode::GroupIdNotFound,
                format!("group {group_id} is a share group"),
            );
        }
        group.share = None;
        if group.consumer.is_none() {
            if !group.members.is_empty() {
                return HeartbeatResult::error(
                    ErrorCode::GroupIdNotFound,
                    format!(
                        "group {group_id} is a classic group with {} members; a consumer-protocol \
                         member may join once they have left (or use group.protocol=classic)",
                        group.members.len()
                    ),
                );
            }
            if !joining {
                return HeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("group {group_id} has no member {}", hb.member_id),
                );
            }
            debug!(group = group_id, "group now speaks the consumer protocol");
            group.consumer = Some(consumer::ConsumerGroup::default());
            group.protocol_type = Some("consumer".into());
            group.state = GroupState::Empty;
        }
        group.last_change_ms = now_ms;
        let settings = &self.consumer_settings;
        match group.consumer.as_mut() {
            Some(c) => c.heartbeat(hb, topics, settings, now_ms),
            None => HeartbeatResult::error(ErrorCode::UnknownServerError, "no consumer group"),
        }
    }

    /// A ShareGroupHeartbeat (KIP-932). An empty group (or a new one) becomes a share group;
    /// a group with classic or consumer members refuses (GROUP_ID_NOT_FOUND).
    pub fn share_heartbeat(
        &mut self,
        group_id: &str,
        hb: share::Heartbeat,
        topics: &consumer::TopicsView,
        now_ms: i64,
    ) -> consumer::HeartbeatResult {
        use consumer::HeartbeatResult;
        let group = match Self::group_for_heartbeat(
            &mut self.groups,
            group_id,
            hb.member_epoch == 0,
            &hb.member_id,
        ) {
            Ok(g) => g,
            Err(r) => return r,
        };
        if group.share.is_none() {
            if !group.is_empty() {
                return HeartbeatResult::error(
                    ErrorCode::GroupIdNotFound,
                    format!(
                        "group {group_id} is not a share group: it has {} members",
                        group.type_name()
                    ),
                );
            }
            if hb.member_epoch != 0 {
                return HeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("group {group_id} has no member {}", hb.member_id),
                );
            }
            group.consumer = None;
            group.share = Some(share::ShareGroup::default());
            group.protocol_type = Some("share".into());
            group.state = GroupState::Empty;
        }
        group.last_change_ms = now_ms;
        let settings = &self.share_settings;
        match group.share.as_mut() {
            Some(s) => s.heartbeat(hb, topics, settings, now_ms),
            None => HeartbeatResult::error(ErrorCode::UnknownServerError, "no share group"),
        }
    }

    /// Expires members whose session timed out and ends join phases past their deadline.
    pub fn tick(&mut self, now_ms: i64) -> Vec<(Ticket, Answer)> {
        let mut out = Vec::new();
        for g in self.groups.values_mut() {
            if let Some(s) = g.share.as_mut() {
                for member in s.tick(&self.share_settings, now_ms) {
                    debug!(group = %g.id, member, "share-group member removed: session timeout");
                    g.last_change_ms = now_ms;
                }
                continue;
            }
            if let Some(c) = g.consumer.as_mut() {
                for (member, why) in c.tick(&self.consumer_settings, now_ms) {
                    debug!(group = %g.id, member, why, "consumer-group member removed");
                    g.last_change_ms = now_ms;
                }
                continue;
            }
            // Members waiting in a join are alive by definition.
            let expired: Vec<String> = g
                .members
                .values()
                .filter(|m| {
                    m.join_waiter.is_none() && now_ms - m.last_seen_ms > m.session_timeout_ms
                })
                .map(|m| m.id.clone())
                .collect();
            if !expired.is_empty() {
                for id in &expired {
                    if let Some(m) = g.members.remove(id) {
                        if let Some(t) = m.sync_waiter {
                            out.push((t, Answer::Sync(sync_error(ErrorCode::UnknownMemberId))));
                        }
                    }
                }
                if g.state != GroupState::PreparingRebalance {
                    let reason = format!("session timeout of {}", expired.join(", "));
                    out.extend(Self::prepare_rebalance(g, now_ms, &reason));
                }
            }
            out.extend(Self::maybe_complete_join(g, now_ms));
        }
        out
    }
}

#[cfg(test)]
mod static_tests;
#[cfg(test)]
mod tests;
