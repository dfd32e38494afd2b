//! Share groups (KIP-932) on the group coordinator, sans-IO: membership and assignment.
//!
//! A share group's members do not own partitions: several may be assigned the same one and
//! the partition's leader hands each record to one of them (`crate::share`). So there is no
//! revocation to wait for: a new assignment takes effect at once, with a new member epoch.
//! Per subscribed topic, partitions are spread over the members subscribed to it (each
//! partition to one member while there are at least as many partitions as members; with more
//! members than partitions, members share partitions: member i gets partition i mod P).

use std::collections::{BTreeMap, BTreeSet};

use strand_wire::ErrorCode;

use super::consumer::{Assignment, HeartbeatResult, TopicsView, LEAVE_EPOCH};

#[derive(Clone, Debug)]
pub struct ShareMember {
    pub id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub epoch: i32,
    pub subscribed: BTreeSet<String>,
    pub assigned: Assignment,
    last_seen_ms: i64,
}

/// `group.share.*` broker settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`.
    pub max_members: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_members: 200,
        }
    }
}

/// A ShareGroupHeartbeat, decoded.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// `None`: unchanged.
    pub subscribed: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, Default)]
pub struct ShareGroup {
    pub epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The subscribed topics the assignment was made from.
    topics: BTreeMap<String, (super::consumer::TopicId, i32)>,
    assigned_epoch: i32,
}

/// Kafka's share-group states.
pub fn state_name(g: &ShareGroup) -> &'static str {
    if g.members.is_empty() {
        "Empty"
    } else {
        "Stable"
    }
}

impl ShareGroup {
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &TopicsView,
        settings: &Settings,
        now_ms: i64,
    ) -> HeartbeatResult {
        if hb.member_id.is_empty() {
            return HeartbeatResult::error(ErrorCode::InvalidRequest, "MemberId can't be empty.");
        }
        if hb.member_epoch == LEAVE_EPOCH {
            if self.members.remove(&hb.member_id).is_none() {
                return HeartbeatResult::error(
                    ErrorCode::UnknownMemberId,
                    format!("member {} is not in the share group", hb.member_id),
                );
            }
            self.epoch += 1;
            return self.answer(&hb.member_id, LEAVE_EPOCH, None, settings);
        }
        if hb.member_epoch == 0 {
            if hb.subscribed.is_none() {
                return HeartbeatResult::error(
                    ErrorCode::InvalidRequest,
                    "SubscribedTopicNames must be set in first request.",
                );
            }
            if !self.members.contains_key(&hb.member_id) {
                if self.members.len() >= settings.max_members {
                    return HeartbeatResult::error(
                        ErrorCode::GroupMaxSizeReached,
                        format!(
                            "the share group has reached group.share.max.size ({})",
                            settings.max_members
                        ),
                    );
                }
                self.members.insert(
                    hb.member_id.clone(),
                    ShareMember {
                        id: hb.member_id.clone(),
                        rack_id: None,
                        client_id: String::new(),
                        client_host: String::new(),
                        epoch: 0,
                        subscribed: BTreeSet::new(),
                        assigned: Assignment::new(),
                        last_seen_ms: now_ms,
                    },
                );
                self.epoch += 1;
            }
        }
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return HeartbeatResult::error(
                ErrorCode::UnknownMemberId,
                format!("member {} is not in the share group", hb.member_id),
            );
        };
        if hb.member_epoch > 0 && hb.member_epoch != m.epoch {
            return HeartbeatResult::error(
                ErrorCode::FencedMemberEpoch,
                format!(
                    "member epoch {} is not the member's epoch {}",
                    hb.member_epoch, m.epoch
                ),
            );
        }
        m.last_seen_ms = now_ms;
        m.client_id = hb.client_id;
        m.client_host = hb.client_host;
        if hb.rack_id.is_some() {
            m.rack_id = hb.rack_id;
        }
        if let Some(names) = hb.subscribed {
            let names: BTreeSet<String> = names.into_iter().collect();
            if names != m.subscribed {
                m.subscribed = names;
                self.epoch += 1;
            }
        }
        let subscribed: BTreeMap<String, (super::consumer::TopicId, i32)> = topics
            .by_name
            .iter()
            .filter(|(n, _)| self.members.values().any(|m| m.subscribed.contains(*n)))
            .map(|(n, v)| (n.clone(), *v))
            .collect();
        if subscribed != self.topics {
            self.topics = subscribed;
            self.epoch += 1;
        }
        if self.assigned_epoch < self.epoch {
            self.assign();
        }
        let m = &self.members[&hb.member_id];
        let send = hb.member_epoch != m.epoch;
        let (epoch, assigned) = (m.epoch, m.assigned.clone());
        self.answer(&hb.member_id, epoch, send.then_some(assigned), settings)
    }

    fn answer(
        &self,
        member: &str,
        epoch: i32,
        assignment: Option<Assignment>,
        settings: &Settings,
    ) -> HeartbeatResult {
        HeartbeatResult {
            error: ErrorCode::None,
            message: None,
            member_id: member.to_string(),
            member_epoch: epoch,
            heartbeat_interval_ms: settings.heartbeat_interval_ms,
            assignment,
        }
    }

    /// Spreads each subscribed topic's partitions over its subscribers; members whose share
    /// changed move to the group epoch.
    fn assign(&mut self) {
        let mut next: BTreeMap<String, Assignment> = self
            .members
            .keys()
            .map(|m| (m.clone(), Assignment::new()))
            .collect();
        for (name, (id, partitions)) in &self.topics {
            let subs: Vec<&String> = self
                .members
                .values()
                .filter(|m| m.subscribed.contains(name))
                .map(|m| &m.id)
                .collect();
            if subs.is_empty() || *partitions <= 0 {
                continue;
            }
            let count = i32::try_from(subs.len()).unwrap_or(i32::MAX);
            let mut give = |m: &String, p: i32| {
                if let Some(a) = next.get_mut(m) {
                    a.entry(*id).or_default().insert(p);
                }
            };
            if count <= *partitions {
                for p in 0..*partitions {
                    give(subs[usize::try_from(p % count).unwrap_or(0)], p);
                }
            } else {
                for (i, m) in subs.iter().enumerate() {
                    give(m, i32::try_from(i).unwrap_or(0) % *partitions);
                }
            }
        }
        for m in self.members.values_mut() {
            let a = next.remove(&m.id).unwrap_or_default();
            if a != m.assigned || m.epoch == 0 {
                m.assigned = a;
                m.epoch = self.epoch;
            }
        }
        self.assigned_epoch = self.epoch;
    }

    /// Removes members whose session timed out.
    pub fn tick(&mut self, settings: &Settings, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| now_ms - m.last_seen_ms > settings.session_timeout_ms)
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
            self.epoch += 1;
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn view(partitions: i32) -> TopicsView {
        TopicsView {
            by_name: BTreeMap::from([("t".to_string(), (Uuid::from_u128(1), partitions))]),
        }
    }

    fn join(id: &str) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            subscribed: Some(vec!["t".into()]),
            ..Default::default()
        }
    }

    fn parts(a: &Option<Assignment>) -> Vec<i32> {
        a.as_ref()
            .and_then(|a| a.get(&Uuid::from_u128(1)))
            .map(|p| p.iter().copied().collect())
            .unwrap_or_default()
    }

    #[test]
    fn four_members_share_one_partition() {
        let mut g = ShareGroup::default();
        let s = Settings::default();
        for m in ["a", "b", "c", "d"] {
            let r = g.heartbeat(join(m), &view(1), &s, 0);
            assert_eq!(r.error, ErrorCode::None);
            assert_eq!(parts(&r.assignment), vec![0], "{m}");
        }
        // a catches up with the new epoch: same partition, nothing new to send... but its
        // epoch moved, so it is told.
        let epoch = g.members["a"].epoch;
        let r = g.heartbeat(
            Heartbeat {
                member_epoch: epoch,
                ..Heartbeat {
                    member_id: "a".into(),
                    ..Default::default()
                }
            },
            &view(1),
            &s,
            1,
        );
        assert_eq!(r.error, ErrorCode::None);
        assert!(r.assignment.is_none());
    }

    #[test]
    fn partitions_spread_and_members_expire() {
        let mut g = ShareGroup::default();
        let s = Settings {
            session_timeout_ms: 100,
            ..Settings::default()
        };
        g.heartbeat(join("a"), &view(4), &s, 0);
        let r = g.heartbeat(join("b"), &view(4), &s, 0);
        assert_eq!(parts(&r.assignment), vec![1, 3]);
        assert_eq!(g.tick(&s, 50), Vec::<String>::new());
        let hb = Heartbeat {
            member_id: "b".into(),
            member_epoch: g.members["b"].epoch,
            ..Default::default()
        };
        g.heartbeat(hb, &view(4), &s, 90);
        assert_eq!(g.tick(&s, 150), vec!["a".to_string()]);
        let hb = Heartbeat {
            member_id: "b".into(),
            member_epoch: g.members["b"].epoch,
            ..Default::default()
        };
        let r = g.heartbeat(hb, &view(4), &s, 160);
        assert_eq!(parts(&r.assignment), vec![0, 1, 2, 3]);
        assert_eq!(
            g.heartbeat(join("").clone(), &view(4), &s, 0).error,
            ErrorCode::InvalidRequest
        );
    }
}
