//! ShareAcknowledge (key 79, KIP-932): a share-group member acknowledges (accept), releases
//! or rejects records it was given, outside a fetch (the client's commitSync/commitAsync and
//! close). Also the share-session bookkeeping ShareFetch uses.

use std::rc::Rc;

use strand_wire::kafka::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use strand_wire::kafka::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::share_service::{Session, ShareAnswer, ShareOp};
use crate::node::{Node, TopicPartition};

/// Share requests must name both.
pub const REQUIRED: &str = "GroupId and MemberId are required.";

/// The group and member a ShareFetch or ShareAcknowledge names.
pub fn group_and_member(
    group: &Option<strand_wire::kafka::messages::GroupId>,
    member: &Option<StrBytes>,
) -> Option<(String, String)> {
    Some((
        group.as_ref()?.0.as_str().to_string(),
        member.as_ref()?.as_str().to_string(),
    ))
}

/// Per partition: `(first, last, types)` batches.
pub type AckBatches = Vec<(TopicPartition, Vec<(i64, i64, Vec<i8>)>)>;

/// What a request did to its member's share session.
pub enum SessionStep {
    /// The session's partitions, to fetch from.
    Open(Vec<TopicPartition>),
    Closed,
}

/// Checks and moves the member's share session (kept by this shard) for a request with
/// `epoch`: 0 opens one (refused with acknowledgements), -1 closes it (what the member holds
/// goes back), anything else must be the session's next epoch.
pub async fn open_session(
    node: &Rc<Node>,
    group: &str,
    member: &str,
    epoch: i32,
    add: &[TopicPartition],
    forget: &[TopicPartition],
    acknowledges: bool,
) -> Result<SessionStep, ErrorCode> {
    let key = (group.to_string(), member.to_string());
    let released: Vec<TopicPartition>;
    let step;
    {
        let mut shares = node.share.borrow_mut();
        match epoch {
            0 => {
                if acknowledges {
                    return Err(ErrorCode::InvalidRequest);
                }
                let mut s = Session {
                    epoch: 1,
                    ..Session::default()
                };
                s.partitions.extend(add.iter().cloned());
                step = SessionStep::Open(s.partitions.iter().cloned().collect());
                shares.sessions.insert(key, s);
                released = vec![];
            }
            -1 => {
                let s = shares
                    .sessions
                    .remove(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                released = s.partitions.into_iter().collect();
                step = SessionStep::Closed;
            }
            n => {
                let s = shares
                    .sessions
                    .get_mut(&key)
                    .ok_or(ErrorCode::ShareSessionNotFound)?;
                if n != s.epoch {
                    return Err(ErrorCode::InvalidShareSessionEpoch);
                }
                s.epoch = if s.epoch == i32::MAX { 1 } else { s.epoch + 1 };
                s.partitions.extend(add.iter().cloned());
                let mut gone = Vec::new();
                for tp in forget {
                    if s.partitions.remove(tp) {
                        gone.push(tp.clone());
                    }
                }
                released = gone;
                step = SessionStep::Open(s.partitions.iter().cloned().collect());
            }
        }
    }
    if matches!(step, SessionStep::Closed) || !released.is_empty() {
        for tp in released {
            let op = ShareOp::Release {
                group: group.to_string(),
                member: member.to_string(),
                tp,
            };
            let _ = node.share_op(op).await;
        }
    }
    Ok(step)
}

/// Applies acknowledgements partition by partition: each partition's error.
pub async fn acknowledge_all(
    node: &Rc<Node>,
    group: &str,
    member: &str,
    acks: AckBatches,
) -> Vec<(TopicPartition, ErrorCode)> {
    let mut out = Vec::new();
    for (tp, batches) in acks {
        let op = ShareOp::Ack {
            group: group.to_string(),
            member: member.to_string(),
            tp: tp.clone(),
            batches,
        };
        let code = match node.share_op(op).await {
            ShareAnswer::Done(code) => code,
            ShareAnswer::Fetched(_) | ShareAnswer::Start(_) => ErrorCode::UnknownServerError,
        };
        out.push((tp, code));
    }
    out
}

pub async fn handle(node: &Rc<Node>, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse {
    let mut r = ShareAcknowledgeResponse::default();
    let Some((group, member)) = group_and_member(&req.group_id, &req.member_id) else {
        r.error_code = ErrorCode::InvalidRequest.code();
        r.error_message = Some(StrBytes::from_static_str(REQUIRED));
        return r;
    };
    if req.share_session_epoch == 0 {
        r.error_code = ErrorCode::InvalidShareSessionEpoch.code();
        return r;
    }
    let view = super::consumer_group_heartbeat::topics_view(node);
    let names = super::consumer_group_heartbeat::topic_names(node);
    let mut acks: AckBatches = Vec::new();
    let mut unknown = Vec::new();
    for t in &req.topics {
        let name = names.get(&t.topic_id).cloned();
        for p in &t.partitions {
            match &name {
                Some(n) => acks.push((
                    (n.clone(), p.partition_index),
                    p.acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                        .collect(),
                )),
                None => unknown.push((t.topic_id, p.partition_index)),
            }
        }
    }
    // Acknowledge first: closing the session (-1) gives back what is still held.
    let results = acknowledge_all(node, &group, &member, acks).await;
    if let Err(code) = open_session(
        node,
        &group,
        &member,
        req.share_session_epoch,
        &[],
        &[],
        false,
    )
    .await
    {
        r.error_code = code.code();
        return r;
    }
    let mut by_topic: std::collections::BTreeMap<uuid::Uuid, Vec<PartitionData>> =
        Default::default();
    let leader = |mut d: PartitionData| {
        d.current_leader.leader_id = -1;
        d.current_leader.leader_epoch = -1;
        d
    };
    for (tp, code) in results {
        let id = view
            .by_name
            .get(&tp.0)
            .map(|(id, _)| *id)
            .unwrap_or_default();
        let mut d = PartitionData::default();
        d.partition_index = tp.1;
        d.error_code = code.code();
        by_topic.entry(id).or_default().push(leader(d));
    }
    for (id, p) in unknown {
        let mut d = PartitionData::default();
        d.partition_index = p;
        d.error_code = ErrorCode::UnknownTopicId.code();
        by_topic.entry(id).or_default().push(leader(d));
    }
    r.responses = by_topic
        .into_iter()
        .map(|(id, partitions)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = id;
            t.partitions = partitions;
            t
        })
        .collect();
    r
}
