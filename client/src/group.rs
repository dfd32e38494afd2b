//! Consumer-group membership with Kafka's classic protocol: JoinGroup (protocol type
//! `consumer`, the `range` assignor), the leader assigns and SyncGroup hands every member its
//! partitions, a heartbeat task keeps the membership and notices rebalances, LeaveGroup on
//! close. The subscription and assignment payloads are Kafka's `ConsumerProtocol*` messages
//! (version 0), so Java, librdkafka and this client can share a group.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use strand_wire::kafka::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
use strand_wire::kafka::messages::join_group_request::JoinGroupRequestProtocol;
use strand_wire::kafka::messages::leave_group_request::MemberIdentity;
use strand_wire::kafka::messages::sync_group_request::SyncGroupRequestAssignment;
use strand_wire::kafka::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, RequestKind, ResponseKind, SyncGroupRequest, TopicName,
};
use strand_wire::kafka::protocol::{Decodable, Encodable, StrBytes};

use crate::cluster::{Cluster, REQUEST_TIMEOUT};
use crate::conn::BrokerConn;
use crate::error::ClientError;

/// Topic -> partitions.
pub type Assignment = BTreeMap<String, Vec<i32>>;

const PROTOCOL_TYPE: &str = "consumer";
const ASSIGNOR: &str = "range";
const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 30_000;
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
const MEMBER_ID_REQUIRED: i16 = 79;
const REBALANCE_IN_PROGRESS: i16 = 27;

fn with_version<T: Encodable>(msg: &T) -> Result<Bytes, ClientError> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    msg.encode(&mut out, 0)
        .map_err(|e| ClientError::Protocol(format!("encoding a consumer protocol message: {e}")))?;
    Ok(out.freeze())
}

fn read_version<T: Decodable>(mut b: Bytes) -> Result<T, ClientError> {
    if b.len() < 2 {
        return Err(ClientError::Protocol(
            "consumer protocol message too short".into(),
        ));
    }
    let version = i16::from_be_bytes([b[0], b[1]]);
    let _ = bytes::Buf::get_i16(&mut b);
    T::decode(&mut b, version.clamp(0, 3))
        .map_err(|e| ClientError::Protocol(format!("consumer protocol message v{version}: {e}")))
}

pub fn encode_subscription(topics: &[String]) -> Result<Bytes, ClientError> {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics
        .iter()
        .map(|t| StrBytes::from_string(t.clone()))
        .collect();
    s.user_data = None;
    with_version(&s)
}

pub fn decode_subscription(b: Bytes) -> Result<Vec<String>, ClientError> {
    let s: ConsumerProtocolSubscription = read_version(b)?;
    Ok(s.topics.into_iter().map(|t| t.to_string()).collect())
}

pub fn encode_assignment(a: &Assignment) -> Result<Bytes, ClientError> {
    let mut m = ConsumerProtocolAssignment::default();
    m.assigned_partitions = a
        .iter()
        .map(|(t, ps)| {
            let mut tp = AssignedTp::default();
            tp.topic = TopicName(StrBytes::from_string(t.clone()));
            tp.partitions = ps.clone();
            tp
        })
        .collect();
    m.user_data = None;
    with_version(&m)
}

pub fn decode_assignment(b: Bytes) -> Result<Assignment, ClientError> {
    if b.is_empty() {
        return Ok(Assignment::new());
    }
    let m: ConsumerProtocolAssignment = read_version(b)?;
    Ok(m.assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.0.to_string(), tp.partitions))
        .collect())
}

/// Kafka's range assignor: per topic, members subscribed to it in member-id order each get a
/// contiguous range; the first `partitions % members` get one more.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|(m, _)| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &count) in partitions {
        let mut subscribed: Vec<&String> = members
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        subscribed.sort();
        let n = subscribed.len() as i32;
        if n == 0 {
            continue;
        }
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in subscribed.into_iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0 {
                out.entry(m.clone())
                    .or_default()
                    .insert(topic.clone(), (next..next + take).collect());
            }
            next += take;
        }
    }
    out
}

/// This consumer's membership of a group.
pub struct Membership {
    pub group: String,
    pub member_id: String,
    pub generation: i32,
    coordinator: BrokerConn,
    /// Set by the heartbeat task when the group rebalances (or the membership is lost).
    rejoin: Rc<Cell<bool>>,
    /// Stops the heartbeat task of this generation.
    stop: Rc<Cell<bool>>,
}

impl Membership {
    /// Joins `group` subscribed to `topics`; returns the membership and this member's
    /// partitions. `member_id`: from a previous generation, to rejoin as the same member.
    pub async fn join(
        cluster: &Cluster,
        group: &str,
        topics: &[String],
        member_id: Option<String>,
    ) -> Result<(Membership, Assignment), ClientError> {
        let coordinator = cluster.coordinator(group).await?;
        let mut member_id = member_id.unwrap_or_default();
        let metadata = encode_subscription(topics)?;
        let joined = loop {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = StrBytes::from_static_str(ASSIGNOR);
            p.metadata = metadata.clone();
            let mut req = JoinGroupRequest::default();
            req.group_id = GroupId(StrBytes::from_string(group.to_string()));
            req.session_timeout_ms = SESSION_TIMEOUT_MS;
            req.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
            req.member_id = StrBytes::from_string(member_id.clone());
            req.protocol_type = StrBytes::from_static_str(PROTOCOL_TYPE);
            req.protocols = vec![p];
            let timeout = Duration::from_millis(REBALANCE_TIMEOUT_MS as u64) + REQUEST_TIMEOUT;
            let ResponseKind::JoinGroup(r) = coordinator
                .request_within(RequestKind::JoinGroup(req), timeout)
                .await?
            else {
                return Err(ClientError::Protocol("unexpected JoinGroup answer".into()));
            };
            if r.error_code == MEMBER_ID_REQUIRED {
                member_id = r.member_id.to_string();
                continue;
            }
            ClientError::check(r.error_code, Some("JoinGroup"))?;
            break r;
        };
        member_id = joined.member_id.to_string();
        let generation = joined.generation_id;
        let mut assignments = Vec::new();
        if joined.leader.as_str() == member_id {
            let mut subs = Vec::new();
            let mut wanted: Vec<String> = Vec::new();
            for m in joined.members {
                let ts = decode_subscription(m.metadata)?;
                wanted.extend(ts.iter().cloned());
                subs.push((m.member_id.to_string(), ts));
            }
            wanted.sort();
            wanted.dedup();
            let mut counts = BTreeMap::new();
            for t in &wanted {
                if let Ok(info) = cluster.topic(t).await {
                    counts.insert(t.clone(), info.leaders.len() as i32);
                }
            }
            for (m, a) in range_assign(&subs, &counts) {
                let mut sa = SyncGroupRequestAssignment::default();
                sa.member_id = StrBytes::from_string(m);
                sa.assignment = encode_assignment(&a)?;
                assignments.push(sa);
            }
        }
        let mut req = SyncGroupRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.generation_id = generation;
        req.member_id = StrBytes::from_string(member_id.clone());
        req.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
        req.protocol_name = Some(StrBytes::from_static_str(ASSIGNOR));
        req.assignments = assignments;
        let ResponseKind::SyncGroup(r) = coordinator
            .request_within(RequestKind::SyncGroup(req), REQUEST_TIMEOUT)
            .await?
        else {
            return Err(ClientError::Protocol("unexpected SyncGroup answer".into()));
        };
        ClientError::check(r.error_code, Some("SyncGroup"))?;
        let assignment = decode_assignment(r.assignment)?;
        let membership = Membership {
            group: group.to_string(),
            member_id,
            generation,
            coordinator,
            rejoin: Rc::new(Cell::new(false)),
            stop: Rc::new(Cell::new(false)),
        };
        membership.spawn_heartbeats();
        Ok((membership, assignment))
    }

    /// Whether the group is rebalancing and this member must join again.
    pub fn needs_rejoin(&self) -> bool {
        self.rejoin.get()
    }

    fn spawn_heartbeats(&self) {
        let (conn, rejoin, stop) = (
            self.coordinator.clone(),
            Rc::clone(&self.rejoin),
            Rc::clone(&self.stop),
        );
        let (group, member, generation) =
            (self.group.clone(), self.member_id.clone(), self.generation);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(HEARTBEAT_INTERVAL).await;
                if stop.get() {
                    return;
                }
                let mut req = HeartbeatRequest::default();
                req.group_id = GroupId(StrBytes::from_string(group.clone()));
                req.generation_id = generation;
                req.member_id = StrBytes::from_string(member.clone());
                match conn
                    .request_within(RequestKind::Heartbeat(req), REQUEST_TIMEOUT)
                    .await
                {
                    Ok(ResponseKind::Heartbeat(r)) if r.error_code == 0 => {}
                    Ok(ResponseKind::Heartbeat(r)) if r.error_code == REBALANCE_IN_PROGRESS => {
                        rejoin.set(true);
                        return;
                    }
                    _ => {
                        rejoin.set(true);
                        return;
                    }
                }
            }
        })
        .detach();
    }

    /// Commits offsets as this member of this generation.
    pub async fn commit(
        &self,
        cluster: &Cluster,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), ClientError> {
        cluster
            .commit_as(&self.group, self.generation, &self.member_id, offsets)
            .await
    }

    /// Leaves the group (its partitions go to the others at once).
    pub async fn leave(self) -> Result<(), ClientError> {
        self.stop.set(true);
        let mut m = MemberIdentity::default();
        m.member_id = StrBytes::from_string(self.member_id.clone());
        let mut req = LeaveGroupRequest::default();
        req.group_id = GroupId(StrBytes::from_string(self.group.clone()));
        req.members = vec![m]; // v3+ (Kafka 4 has no v0-2): members, not member_id

        let ResponseKind::LeaveGroup(r) = self
            .coordinator
            .request_within(RequestKind::LeaveGroup(req), REQUEST_TIMEOUT)
            .await?
        else {
            return Err(ClientError::Protocol("unexpected LeaveGroup answer".into()));
        };
        ClientError::check(r.error_code, Some("LeaveGroup"))
    }

    /// Stops heartbeating (before a rejoin).
    pub fn retire(&self) {
        self.stop.set(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        let topics = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            decode_subscription(encode_subscription(&topics).expect("enc")).expect("dec"),
            topics
        );
        let a: Assignment = [("a".to_string(), vec![0, 2])].into();
        assert_eq!(
            decode_assignment(encode_assignment(&a).expect("enc")).expect("dec"),
            a
        );
        assert!(decode_assignment(Bytes::new()).expect("empty").is_empty());
        assert!(decode_subscription(Bytes::from_static(&[0])).is_err());
    }

    #[test]
    fn range_assignor_matches_kafkas() {
        let members = vec![
            ("m2".to_string(), vec!["t".to_string()]),
            ("m1".to_string(), vec!["t".to_string(), "u".to_string()]),
        ];
        let counts: BTreeMap<String, i32> = [("t".to_string(), 5), ("u".to_string(), 2)].into();
        let a = range_assign(&members, &counts);
        assert_eq!(a["m1"]["t"], vec![0, 1, 2]);
        assert_eq!(a["m2"]["t"], vec![3, 4]);
        assert_eq!(a["m1"]["u"], vec![0, 1]);
        assert!(!a["m2"].contains_key("u"));
    }
}
