//! Joining and leaving a group (sans-IO), as Kafka's classic coordinator does it, static
//! membership (KIP-345) included.
//!
//! - A join without a member id is a new member: it is given an id (v4+: and asked to come
//!   back with it, MEMBER_ID_REQUIRED), unless it names a `group.instance.id` the group
//!   already has. Then it is that static member restarting: it takes the old member's place
//!   and assignment under a new id, the old id is fenced (FENCED_INSTANCE_ID), and a stable
//!   group does not rebalance as long as its protocol stays the same.
//! - A known member rejoining with unchanged protocols while the group is Stable (a
//!   follower) or CompletingRebalance gets the current generation back: no rebalance.
//! - LeaveGroup v3+ names members by member id or by `group.instance.id`.

use bytes::Bytes;
use strand_wire::ErrorCode;
use tracing::debug;

use super::{
    join_error, sync_error, Answer, Coordinator, Group, GroupState, Join, JoinResult, Member,
    Outcome, Ticket,
};

type Joined = (Outcome<JoinResult>, Vec<(Ticket, Answer)>);

impl Group {
    /// The member id a static member (`group.instance.id`) has now.
    pub fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.as_str())
    }

    /// Kafka's `validateMember`: a request naming an instance id must carry the member id
    /// that instance has now (FENCED_INSTANCE_ID otherwise: another process took its place);
    /// without one, the member id must be known.
    pub fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        match instance_id {
            Some(iid) => match self.static_member(iid) {
                None => Err(ErrorCode::UnknownMemberId),
                Some(id) if id != member_id => Err(ErrorCode::FencedInstanceId),
                Some(_) => Ok(()),
            },
            None if self.members.contains_key(member_id) => Ok(()),
            None => Err(ErrorCode::UnknownMemberId),
        }
    }

    /// The protocol the next generation would use: the first, in the first member's order,
    /// that every member supports.
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        first
            .protocols
            .iter()
            .map(|(name, _)| name.clone())
            .find(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// The current generation as a join answer (the member list only for the leader).
    fn current_join(&self, member_id: &str, leader: String, with_members: bool) -> JoinResult {
        JoinResult {
            error: ErrorCode::None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            member_id: member_id.to_string(),
            members: if with_members {
                self.members
                    .values()
                    .map(|m| {
                        (
                            m.id.clone(),
                            m.instance_id.clone(),
                            m.metadata_for(self.protocol.as_deref()),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

fn new_member(j: &Join, member_id: &str, now_ms: i64) -> Member {
    Member {
        id: member_id.to_string(),
        instance_id: j.instance_id.clone(),
        client_id: j.client_id.clone(),
        client_host: j.client_host.clone(),
        protocols: j.protocols.clone(),
        session_timeout_ms: j.session_timeout_ms,
        rebalance_timeout_ms: j.rebalance_timeout_ms,
        last_seen_ms: now_ms,
        assignment: Bytes::new(),
        join_waiter: None,
        sync_waiter: None,
    }
}

impl Coordinator {
    pub fn join(&mut self, j: Join, now_ms: i64) -> Joined {
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
        let metadata_bytes: usize = j.protocols.iter().map(|(n, m)| n.len() + m.len()).sum();
        if metadata_bytes > crate::limits::GROUP_MEMBER_METADATA_BYTES_MAX {
            debug!(group = %j.group, metadata_bytes, "join refused: protocol metadata too large");
            return (
                Outcome::Now(join_error(&j.member_id, ErrorCode::InvalidRequest)),
                vec![],
            );
        }
        if let Some(g) = self.groups.get_mut(&j.group) {
            if g.share.as_ref().is_some_and(|s| !s.members.is_empty()) {
                return (
                    Outcome::Now(join_error(
                        &j.member_id,
                        ErrorCode::InconsistentGroupProtocol,
                    )),
                    vec![],
                );
            }
            if g.share.take().is_some() {
                g.protocol_type = None;
            }
            if let Some(c) = &g.consumer {
                if !c.members.is_empty() {
                    debug!(group = %j.group, "classic join refused: the group has consumer-protocol members");
                    return (
                        Outcome::Now(join_error(
                            &j.member_id,
                            ErrorCode::InconsistentGroupProtocol,
                        )),
                        vec![],
                    );
                }
                // An empty consumer group becomes a classic one.
                g.consumer = None;
                g.protocol_type = None;
            }
        }
        if let Some(g) = self.groups.get(&j.group) {
            if let Some(pt) = &g.protocol_type {
                if !g.members.is_empty() && *pt != j.protocol_type {
                    return (
                        Outcome::Now(join_error(
                            &j.member_id,
                            ErrorCode::InconsistentGroupProtocol,
                        )),
                        vec![],
                    );
                }
            }
        }
        if j.member_id.is_empty() {
            self.join_unknown(j, now_ms)
        } else {
            self.join_known(j, now_ms)
        }
    }

    fn new_member_id(&mut self, j: &Join) -> String {
        self.next_member += 1;
        let prefix = match (&j.instance_id, j.client_id.is_empty()) {
            (Some(iid), _) => iid.as_str(),
            (None, false) => j.client_id.as_str(),
            (None, true) => "member",
        };
        let id = self
            .member_id_salt
            .wrapping_add(u128::from(self.next_member));
        format!("{prefix}-{}", uuid::Uuid::from_u128(id))
    }

    /// A ticket for a join that may park, the initial delay, and the group (created empty).
    fn join_slot(&mut self, group_id: &str) -> (Ticket, i64, Option<usize>, &mut Group) {
        let ticket = self.ticket();
        let delay_ms = self.initial_rebalance_delay_ms;
        let group = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::new(group_id));
        (ticket, delay_ms, self.max_members, group)
    }

    /// A join without a member id: a new member, or a static member coming back.
    fn join_unknown(&mut self, j: Join, now_ms: i64) -> Joined {
        let member_id = self.new_member_id(&j);
        let (ticket, delay_ms, max_members, group) = self.join_slot(&j.group);
        match j
            .instance_id
            .as_deref()
            .and_then(|i| group.static_member(i))
        {
            Some(old_id) => {
                let old_id = old_id.to_string();
                Self::static_rejoin(group, j, old_id, member_id, ticket, now_ms)
            }
            // Static members skip the MEMBER_ID_REQUIRED round trip (as in Kafka).
            None if j.require_known_member_id && j.instance_id.is_none() => {
                group.pending_ids.insert(member_id.clone());
                (
                    Outcome::Now(join_error(&member_id, ErrorCode::MemberIdRequired)),
                    vec![],
                )
            }
            None => {
                let slot = (ticket, delay_ms, max_members);
                Self::add_and_park(group, &j, &member_id, slot, now_ms)
            }
        }
    }

    /// A join with a member id: one we handed out (MEMBER_ID_REQUIRED) or a member's rejoin.
    fn join_known(&mut self, j: Join, now_ms: i64) -> Joined {
        let (ticket, delay_ms, max_members, group) = self.join_slot(&j.group);
        let member_id = j.member_id.clone();
        let was_pending = group.pending_ids.remove(&member_id);
        if let Some(existing) = j
            .instance_id
            .as_deref()
            .and_then(|i| group.static_member(i))
        {
            if existing != member_id {
                return (
                    Outcome::Now(join_error(&member_id, ErrorCode::FencedInstanceId)),
                    vec![],
                );
            }
        }
        if !group.members.contains_key(&member_id) {
            if !was_pending {
                // A member id we never gave out (or forgot after a restart).
                return (
                    Outcome::Now(join_error(&member_id, ErrorCode::UnknownMemberId)),
                    vec![],
                );
            }
            let slot = (ticket, delay_ms, max_members);
            return Self::add_and_park(group, &j, &member_id, slot, now_ms);
        }
        let leader = group.leader.clone().unwrap_or_default();
        let is_leader = leader == member_id;
        let mut done = Vec::new();
        let mut unchanged = false;
        if let Some(m) = group.members.get_mut(&member_id) {
            m.last_seen_ms = now_ms;
            m.session_timeout_ms = j.session_timeout_ms;
            m.rebalance_timeout_ms = j.rebalance_timeout_ms;
            unchanged = m.protocols == j.protocols;
        }
        match group.state {
            GroupState::Stable if unchanged && !is_leader => {
                let r = group.current_join(&member_id, leader, false);
                return (Outcome::Now(r), vec![]);
            }
            GroupState::CompletingRebalance if unchanged => {
                // It missed its join answer: the same generation again.
                let r = group.current_join(&member_id, leader, is_leader);
                return (Outcome::Now(r), vec![]);
            }
            _ => {}
        }
        if let Some(m) = group.members.get_mut(&member_id) {
            m.protocols = j.protocols.clone();
            if let Some(old) = m.join_waiter.replace(ticket) {
                done.push((
                    old,
                    Answer::Join(join_error(&member_id, ErrorCode::RebalanceInProgress)),
                ));
            }
        }
        if group.state != GroupState::PreparingRebalance {
            let reason = format!("member {member_id} rejoined");
            done.extend(Self::prepare_rebalance(group, now_ms, &reason));
        }
        done.extend(Self::maybe_complete_join(group, now_ms));
        (Outcome::Parked(ticket), done)
    }

    /// Adds a member and parks its join until the join phase ends (GROUP_MAX_SIZE_REACHED
    /// if the group is full). `slot`: the join's ticket, the initial delay, `group.max.size`.
    fn add_and_park(
        group: &mut Group,
        j: &Join,
        member_id: &str,
        slot: (Ticket, i64, Option<usize>),
        now_ms: i64,
    ) -> Joined {
        let (ticket, delay_ms, max_members) = slot;
        if max_members.is_some_and(|max| group.members.len() >= max) {
            debug!(group = %group.id, member_id, "join refused: group.max.size reached");
            return (
                Outcome::Now(join_error(member_id, ErrorCode::GroupMaxSizeReached)),
                vec![],
            );
        }
        let was_empty = group.state == GroupState::Empty && group.members.is_empty();
        let mut member = new_member(j, member_id, now_ms);
        member.join_waiter = Some(ticket);
        group.members.insert(member_id.to_string(), member);
        group.protocol_type = Some(j.protocol_type.clone());
        let mut done = Vec::new();
        if group.state != GroupState::PreparingRebalance {
            let reason = format!("member {member_id} joined");
            done = Self::prepare_rebalance(group, now_ms, &reason);
            if was_empty && delay_ms > 0 {
                group.initial_join_until_ms =
                    Some((now_ms + delay_ms).min(group.rebalance_deadline_ms));
            }
        } else if let Some(until) = group.initial_join_until_ms.as_mut() {
            *until = (now_ms + delay_ms)
                .min(group.rebalance_deadline_ms)
                .max(*until);
        }
        done.extend(Self::maybe_complete_join(group, now_ms));
        (Outcome::Parked(ticket), done)
    }

    /// A static member restarting (KIP-345): the new process takes the old member's place
    /// and assignment under `new_id`; the old id's parked requests get FENCED_INSTANCE_ID.
    /// A Stable group whose protocol does not change answers at once, naming the leader from
    /// before the replacement, so a restarted leader does not run an assignment that a
    /// stable group would never hand out.
    fn static_rejoin(
        group: &mut Group,
        j: Join,
        old_id: String,
        new_id: String,
        ticket: Ticket,
        now_ms: i64,
    ) -> Joined {
        let mut done = Vec::new();
        let mut member = new_member(&j, &new_id, now_ms);
        if let Some(old) = group.members.remove(&old_id) {
            if let Some(t) = old.join_waiter {
                done.push((
                    t,
                    Answer::Join(join_error(&old_id, ErrorCode::FencedInstanceId)),
                ));
            }
            if let Some(t) = old.sync_waiter {
                done.push((t, Answer::Sync(sync_error(ErrorCode::FencedInstanceId))));
            }
            member.assignment = old.assignment;
        }
        let old_leader = group.leader.clone().unwrap_or_default();
        if old_leader == old_id {
            group.leader = Some(new_id.clone());
        }
        debug!(
            group = %group.id,
            instance = j.instance_id.as_deref().unwrap_or(""),
            old = %old_id,
            new = %new_id,
            state = group.state.name(),
            "static member replaced"
        );
        group.members.insert(new_id.clone(), member);
        if group.state == GroupState::Stable && group.select_protocol() == group.protocol {
            let r = group.current_join(&new_id, old_leader, false);
            return (Outcome::Now(r), done);
        }
        if let Some(m) = group.members.get_mut(&new_id) {
            m.join_waiter = Some(ticket);
        }
        if group.state != GroupState::PreparingRebalance {
            let reason = format!("static member {new_id} rejoined (was {old_id})");
            done.extend(Self::prepare_rebalance(group, now_ms, &reason));
        }
        done.extend(Self::maybe_complete_join(group, now_ms));
        (Outcome::Parked(ticket), done)
    }

    /// Removes members (LeaveGroup): each named by member id, or (v3+) by instance id. One
    /// error per member; the rest of the group rebalances if anyone left.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now_ms: i64,
    ) -> (Vec<ErrorCode>, Vec<(Ticket, Answer)>) {
        let Some(g) = self.groups.get_mut(group_id) else {
            return (
                members.iter().map(|_| ErrorCode::UnknownMemberId).collect(),
                vec![],
            );
        };
        let mut out = Vec::new();
        let mut left = Vec::new();
        let errors = members
            .iter()
            .map(|(member_id, instance_id)| {
                let target = match instance_id.as_deref() {
                    Some(iid) => match g.static_member(iid) {
                        None => return ErrorCode::UnknownMemberId,
                        Some(id) if !member_id.is_empty() && id != member_id => {
                            return ErrorCode::FencedInstanceId
                        }
                        Some(id) => id.to_string(),
                    },
                    None => member_id.clone(),
                };
                let Some(m) = g.members.remove(&target) else {
                    return ErrorCode::UnknownMemberId;
                };
                if let Some(t) = m.join_waiter {
                    out.push((
                        t,
                        Answer::Join(join_error(&target, ErrorCode::UnknownMemberId)),
                    ));
                }
                if let Some(t) = m.sync_waiter {
                    out.push((t, Answer::Sync(sync_error(ErrorCode::UnknownMemberId))));
                }
                left.push(target);
                ErrorCode::None
            })
            .collect();
        if !left.is_empty() && g.state != GroupState::PreparingRebalance {
            let reason = format!("{} left", left.join(", "));
            out.extend(Self::prepare_rebalance(g, now_ms, &reason));
        }
        out.extend(Self::maybe_complete_join(g, now_ms));
        (errors, out)
    }
}
