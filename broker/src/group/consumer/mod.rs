//! Consumer groups of the KIP-848 protocol (sans-IO): the broker computes assignments.
//!
//! Members send ConsumerGroupHeartbeat every `group.consumer.heartbeat.interval.ms`, with
//! their subscription (topic names or a regex) and, when it changed, the partitions they own.
//! The coordinator keeps three epochs, as Kafka's does:
//! - the **group epoch**, bumped when a member joins or leaves, a subscription changes, or
//!   the subscribed topics change (created, deleted, partitions added);
//! - the **target assignment epoch**: the group epoch the target assignment (computed by a
//!   server-side assignor, [`assignor`]) was made for;
//! - each **member epoch**: the target epoch the member has reconciled to ([`reconcile`]).
//!
//! Reconciliation is incremental: a member first gives up (revokes) the partitions its
//! target no longer has, and is given a partition only once no other member owns it. No
//! member stops consuming the partitions it keeps: there is no group-wide barrier.
//!
//! Membership is kept in memory on the coordinating shard (offsets are durable in
//! `__consumer_offsets`, like the classic groups'). After a restart or a coordinator move,
//! members are answered UNKNOWN_MEMBER_ID and rejoin at epoch 0.

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::ErrorCode;
use uuid::Uuid;

pub mod assignor;
mod reconcile;
#[cfg(test)]
mod tests;

pub use reconcile::MemberState;

pub type TopicId = Uuid;
/// Partitions by topic id.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// A member leaving for good (member epoch -1).
pub const LEAVE_EPOCH: i32 = -1;
/// A static member leaving for a while (member epoch -2): its partitions wait for it until
/// its session times out.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// The topics the coordinator may assign, as the catalog has them when a request arrives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicsView {
    /// name -> (id, partition count); internal topics left out.
    pub by_name: BTreeMap<String, (TopicId, i32)>,
}

/// Broker settings, with Kafka's names.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<String>,
    /// `group.consumer.max.size`.
    pub max_members: Option<usize>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: vec!["uniform".into(), "range".into()],
            max_members: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ConsumerMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The target epoch this member reconciled to (or [`STATIC_LEAVE_EPOCH`]).
    pub epoch: i32,
    /// Its epoch before the last change: a heartbeat whose answer was lost may repeat it.
    pub previous_epoch: i32,
    pub state: MemberState,
    pub subscribed_names: BTreeSet<String>,
    pub subscribed_regex: Option<String>,
    /// `subscribed_regex`, compiled once.
    compiled_regex: Option<regex::Regex>,
    pub server_assignor: Option<String>,
    pub rebalance_timeout_ms: i64,
    /// Partitions the member owns and keeps.
    pub assigned: Assignment,
    /// Partitions it owns but must give up before its epoch advances.
    pub pending_revocation: Assignment,
    last_seen_ms: i64,
    /// While it has partitions to revoke: when it is removed if it has not.
    revoke_deadline_ms: Option<i64>,
}

impl ConsumerMember {
    fn new(id: &str, now_ms: i64) -> ConsumerMember {
        ConsumerMember {
            id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            subscribed_names: BTreeSet::new(),
            subscribed_regex: None,
            compiled_regex: None,
            server_assignor: None,
            rebalance_timeout_ms: 300_000,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            last_seen_ms: now_ms,
            revoke_deadline_ms: None,
        }
    }

    /// Whether it subscribes to `topic` (by name or regex).
    fn subscribes(&self, topic: &str) -> bool {
        self.subscribed_names.contains(topic)
            || self
                .compiled_regex
                .as_ref()
                .is_some_and(|re| re.is_match(topic))
    }

    fn owns(&self, topic: &TopicId, partition: i32) -> bool {
        let has = |a: &Assignment| a.get(topic).is_some_and(|p| p.contains(&partition));
        has(&self.assigned) || has(&self.pending_revocation)
    }
}

/// A subscription regex, matched against the whole topic name (Kafka's `matches()`).
pub fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(crate::limits::GROUP_REGEX_COMPILED_BYTES_MAX)
        .build()
}

/// A ConsumerGroupHeartbeat, decoded.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged.
    pub subscribed_names: Option<Vec<String>>,
    /// `None`: unchanged; empty: none.
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// `None`: unchanged since the last heartbeat.
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatResult {
    pub error: ErrorCode,
    pub message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when it changed, on a join, and when the member sent what it owns.
    pub assignment: Option<Assignment>,
}

impl HeartbeatResult {
    pub fn error(error: ErrorCode, message: impl Into<String>) -> HeartbeatResult {
        HeartbeatResult {
            error,
            message: Some(message.into()),
            member_id: String::new(),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// Kafka's consumer-group states (ListGroups, ConsumerGroupDescribe).
pub fn state_name(g: &ConsumerGroup) -> &'static str {
    if g.members.is_empty() {
        "Empty"
    } else if g.epoch > g.target_epoch {
        "Assigning"
    } else if g
        .members
        .values()
        .any(|m| m.epoch != g.target_epoch || m.state != MemberState::Stable)
    {
        "Reconciling"
    } else {
        "Stable"
    }
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerGroup {
    pub epoch: i32,
    pub target_epoch: i32,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Assignment>,
    pub members: BTreeMap<String, ConsumerMember>,
    /// The assignor that made the target.
    pub assignor: String,
    /// The subscribed topics (name -> id, partitions) the target was computed from.
    subscribed_topics: BTreeMap<String, (TopicId, i32)>,
}

impl ConsumerGroup {
    fn bump(&mut self) {
        self.epoch += 1;
    }

    fn remove_member(&mut self, id: &str) -> Option<ConsumerMember> {
        let m = self.members.remove(id)?;
        self.target.remove(id);
        self.bump();
        Some(m)
    }

    /// The subscribed topics that exist, by name.
    fn subscribed(&self, topics: &TopicsView) -> BTreeMap<String, (TopicId, i32)> {
        topics
            .by_name
            .iter()
            .filter(|(name, _)| self.members.values().any(|m| m.subscribes(name)))
            .map(|(n, v)| (n.clone(), *v))
            .collect()
    }

    /// The assignor for the next target: the one most members asked for, else the default.
    fn choose_assignor(&self, settings: &Settings) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(a, _)| a.to_string())
            .or_else(|| settings.assignors.first().cloned())
            .unwrap_or_else(|| "uniform".into())
    }

    fn compute_target(&mut self, settings: &Settings) {
        let assignor = self.choose_assignor(settings);
        let subscriptions: BTreeMap<String, BTreeSet<TopicId>> = self
            .members
            .values()
            .map(|m| {
                let ids = self
                    .subscribed_topics
                    .iter()
                    .filter(|(name, _)| m.subscribes(name))
                    .map(|(_, (id, _))| *id)
                    .collect();
                (m.id.clone(), ids)
            })
            .collect();
        let partitions: BTreeMap<TopicId, i32> = self.subscribed_topics.values().copied().collect();
        self.target = match assignor.as_str() {
            "range" => assignor::range(&subscriptions, &partitions, &self.target),
            _ => assignor::uniform(&subscriptions, &partitions, &self.target),
        };
        self.assignor = assignor;
        self.target_epoch = self.epoch;
    }

    /// Handles one heartbeat (validated by [`validate`]).
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &TopicsView,
        settings: &Settings,
        now_ms: i64,
    ) -> HeartbeatResult {
        let ok = |member_id: &str, epoch: i32, assignment| HeartbeatResult {
            error: ErrorCode::None,
            message: None,
            member_id: member_id.to_string(),
            member_epoch: epoch,
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            assignment,
        };
        // Leaving.
        if hb.member_epoch == LEAVE_EPOCH || hb.member_epoch == STATIC_LEAVE_EPOCH {
            let Some(m) = self.members.get_mut(&hb.member_id) else {
                return HeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("member {} is not in the group", hb.member_id),
                );
            };
            if hb.member_epoch == STATIC_LEAVE_EPOCH && m.instance_id.is_some() {
                // Its partitions wait for it (until its session times out).
                m.epoch = STATIC_LEAVE_EPOCH;
                m.pending_revocation.clear();
                m.revoke_deadline_ms = None;
                m.last_seen_ms = now_ms;
            } else {
                self.remove_member(&hb.member_id);
            }
            return ok(&hb.member_id, hb.member_epoch, None);
        }
        let joining = hb.member_epoch == 0;
        let mut changed = false;
        if joining {
            if let Err(r) = self.admit(&hb, settings, now_ms, &mut changed) {
                return r;
            }
        } else if let Err(r) = self.check_epoch(&hb) {
            return r;
        }
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return HeartbeatResult::error(ErrorCode::UnknownMemberId, "member vanished");
        };
        m.last_seen_ms = now_ms;
        m.client_id = hb.client_id.clone();
        m.client_host = hb.client_host.clone();
        if hb.rack_id.is_some() {
            m.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout_ms = i64::from(hb.rebalance_timeout_ms);
        }
        if let Some(names) = &hb.subscribed_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != m.subscribed_names {
                m.subscribed_names = names;
                changed = true;
            }
        }
        if let Some(regex) = &hb.subscribed_regex {
            let regex = (!regex.is_empty()).then(|| regex.clone());
            if regex != m.subscribed_regex {
                // Checked by `validate`: it compiles.
                m.compiled_regex = regex.as_deref().and_then(|r| compile(r).ok());
                m.subscribed_regex = regex;
                changed = true;
            }
        }
        if hb.server_assignor.is_some() && hb.server_assignor != m.server_assignor {
            m.server_assignor = hb.server_assignor.clone();
            changed = true;
        }
        if changed {
            self.bump();
        }
        let subscribed = self.subscribed(topics);
        if subscribed != self.subscribed_topics {
            self.subscribed_topics = subscribed;
            if !changed {
                self.bump();
            }
        }
        if self.epoch > self.target_epoch {
            self.compute_target(settings);
        }
        let before = self.members[&hb.member_id].assigned.clone();
        self.reconcile(&hb.member_id, hb.owned.as_ref(), now_ms);
        let m = &self.members[&hb.member_id];
        let send = joining || hb.owned.is_some() || m.assigned != before;
        ok(&m.id, m.epoch, send.then(|| m.assigned.clone()))
    }

    /// Epoch 0: a new member, a static member coming back, or a member starting over.
    fn admit(
        &mut self,
        hb: &Heartbeat,
        settings: &Settings,
        now_ms: i64,
        changed: &mut bool,
    ) -> Result<(), HeartbeatResult> {
        if let Some(iid) = &hb.instance_id {
            let holder = self
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(iid))
                .map(|m| (m.id.clone(), m.epoch));
            if let Some((old_id, old_epoch)) = holder {
                if old_epoch != STATIC_LEAVE_EPOCH && old_id != hb.member_id {
                    return Err(HeartbeatResult::error(
                        ErrorCode::UnreleasedInstanceId,
                        format!("static member {iid} is still held by member {old_id}"),
                    ));
                }
                // The instance comes back: the new member takes its place and partitions,
                // with no new group epoch.
                if let Some(mut m) = self.members.remove(&old_id) {
                    let target = self.target.remove(&old_id);
                    m.id = hb.member_id.clone();
                    m.epoch = 0;
                    m.previous_epoch = 0;
                    m.pending_revocation.clear();
                    m.revoke_deadline_ms = None;
                    m.last_seen_ms = now_ms;
                    if let Some(t) = target {
                        self.target.insert(m.id.clone(), t);
                    }
                    self.members.insert(m.id.clone(), m);
                    return Ok(());
                }
            }
        }
        if self.members.contains_key(&hb.member_id) {
            // Starting over (after FENCED_MEMBER_EPOCH, say): its partitions are freed.
            self.remove_member(&hb.member_id);
        }
        if settings
            .max_members
            .is_some_and(|max| self.members.len() >= max)
        {
            return Err(HeartbeatResult::error(
                ErrorCode::GroupMaxSizeReached,
                format!(
                    "the group has reached group.consumer.max.size ({} members)",
                    self.members.len()
                ),
            ));
        }
        let mut m = ConsumerMember::new(&hb.member_id, now_ms);
        m.instance_id = hb.instance_id.clone();
        self.members.insert(m.id.clone(), m);
        *changed = true;
        Ok(())
    }

    /// Kafka's `throwIfMemberEpochIsInvalid` and static-member fencing.
    fn check_epoch(&self, hb: &Heartbeat) -> Result<(), HeartbeatResult> {
        let Some(m) = self.members.get(&hb.member_id) else {
            return Err(HeartbeatResult::error(
                ErrorCode::UnknownMemberId,
                format!("member {} is not in the group", hb.member_id),
            ));
        };
        if hb.instance_id.is_some() && hb.instance_id != m.instance_id {
            return Err(HeartbeatResult::error(
                ErrorCode::FencedInstanceId,
                "the static member's instance id belongs to another member",
            ));
        }
        let fenced = || {
            HeartbeatResult::error(
                ErrorCode::FencedMemberEpoch,
                format!(
                    "member epoch {} is not the member's epoch {}",
                    hb.member_epoch, m.epoch
                ),
            )
        };
        if hb.member_epoch > m.epoch {
            return Err(fenced());
        }
        if hb.member_epoch < m.epoch {
            // The answer that moved it to its epoch may have been lost: the previous epoch
            // is accepted while what it owns is within what it has.
            let within = hb.owned.as_ref().is_some_and(|owned| {
                owned.iter().all(|(t, ps)| {
                    ps.iter()
                        .all(|p| m.assigned.get(t).is_some_and(|a| a.contains(p)))
                })
            });
            if hb.member_epoch != m.previous_epoch || !within {
                return Err(fenced());
            }
        }
        Ok(())
    }

    /// Moves one member towards its target.
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now_ms: i64) {
        let empty = Assignment::new();
        let target = self.target.get(member_id).unwrap_or(&empty).clone();
        let others: Vec<&ConsumerMember> = self
            .members
            .values()
            .filter(|o| o.id != member_id)
            .collect();
        let owned_elsewhere = |t: &TopicId, p: i32| others.iter().any(|o| o.owns(t, p));
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        let next = reconcile::next(m, self.target_epoch, &target, owned_elsewhere, owned);
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if next.epoch != m.epoch {
            m.previous_epoch = m.epoch;
        }
        m.epoch = next.epoch;
        m.state = next.state;
        m.assigned = next.assigned;
        m.pending_revocation = next.pending_revocation;
        m.revoke_deadline_ms = match (m.state, m.revoke_deadline_ms) {
            (MemberState::UnrevokedPartitions, Some(d)) => Some(d),
            (MemberState::UnrevokedPartitions, None) => Some(now_ms + m.rebalance_timeout_ms),
            _ => None,
        };
    }

    /// Removes members whose session timed out, or that kept partitions past their
    /// rebalance timeout. Returns their ids and why.
    pub fn tick(&mut self, settings: &Settings, now_ms: i64) -> Vec<(String, &'static str)> {
        let expired: Vec<(String, &'static str)> = self
            .members
            .values()
            .filter_map(|m| {
                if now_ms - m.last_seen_ms > settings.session_timeout_ms {
                    Some((m.id.clone(), "session timeout"))
                } else if m.revoke_deadline_ms.is_some_and(|d| now_ms > d) {
                    Some((m.id.clone(), "rebalance timeout (partitions not revoked)"))
                } else {
                    None
                }
            })
            .collect();
        for (id, _) in &expired {
            self.remove_member(id);
        }
        expired
    }

    /// Commits (OffsetCommit v9+, OffsetFetch v9+) carry the member epoch: a member of an
    /// older epoch may not commit (STALE_MEMBER_EPOCH) — its partitions may have moved.
    pub fn check_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), ErrorCode> {
        if epoch < 0 && member_id.is_empty() {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(ErrorCode::UnknownMemberId)
            };
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if epoch != m.epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }
}

/// Request checks Kafka makes before touching the group: INVALID_REQUEST (or
/// INVALID_REGULAR_EXPRESSION) with a reason.
pub fn validate(hb: &Heartbeat, version: i16) -> Result<(), (ErrorCode, String)> {
    if let Some(r) = hb.subscribed_regex.as_deref().filter(|r| !r.is_empty()) {
        if let Err(e) = compile(r) {
            return Err((
                ErrorCode::InvalidRegularExpression,
                format!("SubscribedTopicRegex {r:?} is not a valid regular expression: {e}"),
            ));
        }
    }
    validate_fields(hb, version).map_err(|m| (ErrorCode::InvalidRequest, m))
}

fn validate_fields(hb: &Heartbeat, version: i16) -> Result<(), String> {
    if hb.member_epoch == 0 {
        if version >= 1 && hb.member_id.is_empty() {
            return Err("MemberId can't be empty.".into());
        }
        if hb.rebalance_timeout_ms < 0 {
            return Err("RebalanceTimeoutMs must be provided in first request.".into());
        }
        if hb.subscribed_names.is_none() && hb.subscribed_regex.is_none() {
            return Err(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.".into(),
            );
        }
        if hb.owned.as_ref().is_some_and(|o| !o.is_empty()) {
            return Err("TopicPartitions must be empty when (re-)joining.".into());
        }
    } else if hb.member_id.is_empty() {
        return Err("MemberId can't be empty.".into());
    } else if hb.member_epoch < STATIC_LEAVE_EPOCH {
        return Err(format!("MemberEpoch {} is invalid.", hb.member_epoch));
    }
    if hb.member_epoch == STATIC_LEAVE_EPOCH && hb.instance_id.is_none() {
        return Err("InstanceId can't be null when leaving with epoch -2.".into());
    }
    Ok(())
}
