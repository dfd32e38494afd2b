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

    pub fn join(&mut self, j: Join, now_ms: i64) -> (Outcome<JoinResult>, Vec<(Ticket, Answer)>) {
        if j.group.is_empty() {
            return (
                Outcome::Now(join_error(&j.member_id, ErrorCode::InvalidGroupId)),
                vec![],
            );
        }
        if j.session_timeout_ms < 1000 || j.session_timeout_ms > 1_800_000 {
            return (
                Outcome::Now(join_error(&j.member_id, ErrorCode::InvalidSessionTimeout)),
                vec![],
            );
        }
        let mut member_id = j.member_id.clone();
        if member_id.is_empty() {
            // Static members keep their slot across restarts.
            let existing = j.instance_id.as_ref().and_then(|iid| {
                self.groups.get(&j.group).and_then(|g| {
                    g.members
                        .values()
                        .find(|m| m.instance_id.as_ref() == Some(iid))
                        .map(|m| m.id.clone())
                })
            });
            member_id = match existing {
                Some(id) => id,
                None => {
                    self.next_member += 1;
                    format!(
                        "{}-{:016x}",
                        if j.client_id.is_empty() {
                            "member"
                        } else {
                            &j.client_id
                        },
                        self.next_member
                    )
                }
            };
            if j.require_known_member_id && j.instance_id.is_none() {
                let group = self
                    .groups
                    .entry(j.group.clone())
                    .or_insert_with(|| Group::new(&j.group));
                group.pending_ids.insert(member_id.clone());
                return (
                    Outcome::Now(join_error(&member_id, ErrorCode::MemberIdRequired)),
                    vec![],
                );
            }
        }
        let ticket = self.ticket();
        let group = self
            .groups
            .entry(j.group.clone())
            .or_insert_with(|| Group::new(&j.group));
        let was_pending = group.pending_ids.remove(&member_id);
        if let Some(pt) = &group.protocol_type {
            if !group.members.is_empty() && *pt != j.protocol_type {
                return (
                    Outcome::Now(join_error(&member_id, ErrorCode::InconsistentGroupProtocol)),
                    vec![],
                );
            }
        }
        let is_new = !group.members.contains_key(&member_id);
        let was_empty = group.state == GroupState::Empty && group.members.is_empty();
        if is_new && !was_pending && !j.member_id.is_empty() && j.instance_id.is_none() {
            // A member id we never gave out (or forgot after a restart).
            return (
                Outcome::Now(join_error(&j.member_id, ErrorCode::UnknownMemberId)),
                vec![],
            );
        }
        // A static member (group.instance.id) coming back with the same protocols while the
        // group is stable keeps its slot and its assignment: no rebalance (KIP-345). The
        // leader still goes through a rebalance, so that it gets the member list again.
        if let (false, Some(_), GroupState::Stable) = (is_new, &j.instance_id, group.state) {
            let leader = group.leader.clone().unwrap_or_default();
            if let Some(m) = group.members.get_mut(&member_id) {
                if m.id != leader && m.protocols == j.protocols {
                    m.last_seen_ms = now_ms;
                    m.session_timeout_ms = j.session_timeout_ms;
                    return (
                        Outcome::Now(JoinResult {
                            error: ErrorCode::None,
                            generation: group.generation,
                            protocol_type: group.protocol_type.clone(),
                            protocol: group.protocol.clone(),
                            leader,
                            member_id: member_id.clone(),
                            members: Vec::new(),
                        }),
                        vec![],
                    );
                }
            }
        }
        let member = group
            .members
            .entry(member_id.clone())
            .or_insert_with(|| Member {
                id: member_id.clone(),
                instance_id: j.instance_id.clone(),
                client_id: j.client_id.clone(),
                client_host: j.client_host.clone(),
                protocols: Vec::new(),
                session_timeout_ms: j.session_timeout_ms,
                rebalance_timeout_ms: j.rebalance_timeout_ms,
                last_seen_ms: now_ms,
                assignment: Bytes::new(),
                join_waiter: None,
                sync_waiter: None,
            });
        member.protocols = j.protocols;
        member.session_timeout_ms = j.session_timeout_ms;
        member.rebalance_timeout_ms = j.rebalance_timeout_ms;
        member.last_seen_ms = now_ms;
        member.join_waiter = Some(ticket);
        group.protocol_type = Some(j.protocol_type);
        let delay_ms = self.initial_rebalance_delay_ms;
        let mut done = Vec::new();
        if group.state != GroupState::PreparingRebalance {
            done = Self::prepare_rebalance(group, now_ms);
            if was_empty && delay_ms > 0 {
                group.initial_join_until_ms =
                    Some((now_ms + delay_ms).min(group.rebalance_deadline_ms));
            }
        } else if is_new {
            if let Some(until) = group.initial_join_until_ms.as_mut() {
                *until = (now_ms + delay_ms)
                    .min(group.rebalance_deadline_ms)
                    .max(*until);
            }
        }
        done.extend(Self::maybe_complete_join(group, now_ms));
        (Outcome::Parked(ticket), done)
    }

    /// Starts a join phase. Members parked in a SyncGroup of the old generation are answered
    /// REBALANCE_IN_PROGRESS now, so they rejoin (as Kafka does): a follower waits for its
    /// sync answer without heartbeating, and held until the join ended it would never rejoin
    /// — the group would sit until the rebalance timeout (5 minutes for librdkafka).
    fn prepare_rebalance(group: &mut Group, now_ms: i64) -> Vec<(Ticket, Answer)> {
        group.state = GroupState::PreparingRebalance;
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
        // The first protocol, in the first member's order, that every member supports.
        let first = group
            .members
            .values()
            .next()
            .map(|m| m.protocols.clone())
            .unwrap_or_default();
        let protocol = first.iter().map(|(name, _)| name.clone()).find(|name| {
            group
                .members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        });
        group.protocol = protocol.clone();
        if group
            .leader
            .as_ref()
            .is_none_or(|l| !group.members.contains_key(l))
        {
            group.leader = group.members.keys().next().cloned();
        }
        let leader = group.leader.clone().unwrap_or_default();
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

    fn check_member(&self, group: &str, member: &str, generation: i32) -> Result<(), ErrorCode> {
        let g = self.groups.get(group).ok_or(ErrorCode::UnknownMemberId)?;
        if !g.members.contains_key(member) {
            return Err(ErrorCode::UnknownMemberId);
        }
        if generation != g.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(())
    }

    pub fn sync(
        &mut self,
        group_id: &str,
        member_id: &str,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> (Outcome<SyncResult>, Vec<(Ticket, Answer)>) {
        if let Err(e) = self.check_member(group_id, member_id, generation) {
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

    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        generation: i32,
        now_ms: i64,
    ) -> ErrorCode {
        let Some(g) = self.groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        let Some(m) = g.members.get_mut(member_id) else {
            return ErrorCode::UnknownMemberId;
        };
        m.last_seen_ms = now_ms;
        if g.state == GroupState::PreparingRebalance {
            return ErrorCode::RebalanceInProgress;
        }
        if generation != g.generation {
            return ErrorCode::IllegalGeneration;
        }
        ErrorCode::None
    }

    /// Removes members (LeaveGroup); one error per member id.
    pub fn leave(
        &mut self,
        group_id: &str,
        member_ids: &[String],
        now_ms: i64,
    ) -> (Vec<ErrorCode>, Vec<(Ticket, Answer)>) {
        let Some(g) = self.groups.get_mut(group_id) else {
            return (
                member_ids
                    .iter()
                    .map(|_| ErrorCode::UnknownMemberId)
                    .collect(),
                vec![],
            );
        };
        let mut out = Vec::new();
        let errors = member_ids
            .iter()
            .map(|id| match g.members.remove(id) {
                Some(m) => {
                    if let Some(t) = m.join_waiter {
                        out.push((t, Answer::Join(join_error(id, ErrorCode::UnknownMemberId))));
                    }
                    if let Some(t) = m.sync_waiter {
                        out.push((t, Answer::Sync(sync_error(ErrorCode::UnknownMemberId))));
                    }
                    ErrorCode::None
                }
                None => ErrorCode::UnknownMemberId,
            })
            .collect();
        if g.state != GroupState::PreparingRebalance {
            out.extend(Self::prepare_rebalance(g, now_ms));
        }
        out.extend(Self::maybe_complete_join(g, now_ms));
        (errors, out)
    }

    /// Expires members whose session timed out and ends join phases past their deadline.
    pub fn tick(&mut self, now_ms: i64) -> Vec<(Ticket, Answer)> {
        let mut out = Vec::new();
        for g in self.groups.values_mut() {
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
                    out.extend(Self::prepare_rebalance(g, now_ms));
                }
            }
            out.extend(Self::maybe_complete_join(g, now_ms));
        }
        out
    }

    /// Validates an OffsetCommit. `generation < 0` with no member is a "simple" commit
    /// (consumers using assign), allowed while the group has no members.
    pub fn check_commit(&self, group_id: &str, member_id: &str, generation: i32) -> ErrorCode {
        match self.groups.get(group_id) {
            None => ErrorCode::None,
            Some(g) if generation < 0 && member_id.is_empty() => {
                if g.members.is_empty() {
                    ErrorCode::None
                } else {
                    ErrorCode::UnknownMemberId
                }
            }
            Some(g) => match g.members.get(member_id) {
                None => ErrorCode::UnknownMemberId,
                Some(_) if generation != g.generation => ErrorCode::IllegalGeneration,
                Some(_) if g.state == GroupState::PreparingRebalance => {
                    ErrorCode::RebalanceInProgress
                }
                Some(_) => ErrorCode::None,
            },
        }
    }

    /// Stores committed offsets (after `check_commit` and after they are durable).
    pub fn commit(&mut self, group_id: &str, offsets: Vec<((String, i32), Committed)>) {
        let g = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        for (tp, c) in offsets {
            g.offsets.insert(tp, c);
        }
    }

    /// DeleteGroups: only a group without members can go (NON_EMPTY_GROUP otherwise).
    pub fn delete_group(&mut self, group_id: &str) -> ErrorCode {
        match self.groups.get(group_id) {
            None => ErrorCode::GroupIdNotFound,
            Some(g) if !g.members.is_empty() => ErrorCode::NonEmptyGroup,
            Some(_) => {
                self.groups.remove(group_id);
                ErrorCode::None
            }
        }
    }

    /// OffsetDelete: drops committed offsets of a group that is not consuming.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        tps: &[(String, i32)],
    ) -> Result<(), ErrorCode> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(ErrorCode::GroupIdNotFound)?;
        if !g.members.is_empty() {
            return Err(ErrorCode::GroupSubscribedToTopic);
        }
        for tp in tps {
            g.offsets.remove(tp);
        }
        Ok(())
    }

    /// `offsets.retention.minutes`: committed offsets of groups without members expire this
    /// long after their last commit; a group with neither members nor offsets disappears.
    pub fn expire_offsets(&mut self, now_ms: i64, retention_ms: i64) {
        for g in self.groups.values_mut() {
            if g.members.is_empty() {
                g.offsets
                    .retain(|_, c| now_ms - c.commit_ms <= retention_ms);
            }
        }
        self.groups.retain(|_, g| {
            !g.members.is_empty() || !g.offsets.is_empty() || !g.pending_ids.is_empty()
        });
    }

    pub fn committed(&self, group_id: &str, tp: &(String, i32)) -> Option<&Committed> {
        self.groups.get(group_id).and_then(|g| g.offsets.get(tp))
    }
}

#[cfg(test)]
mod tests;
