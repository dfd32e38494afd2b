//! ShareFetch (key 78, KIP-932): a share-group member's fetch. It carries the member's
//! acknowledgements of what it was given before, and acquires records for it on each
//! partition of its share session (`node::share_service`; the state machine is
//! `share::partition`). The response holds whole batches and, per partition, the offset
//! ranges acquired for this member — the client delivers only those.
//!
//! Share sessions: epoch 0 opens one (with the partitions named; no acknowledgements),
//! each later request carries the next epoch and may add partitions or forget some (their
//! records go back), -1 closes it (acknowledgements only; what the member still holds goes
//! back).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strand_wire::kafka::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use strand_wire::kafka::messages::{ShareFetchRequest, ShareFetchResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::share_acknowledge::{
    acknowledge_all, group_and_member, open_session, AckBatches, SessionStep, REQUIRED,
};
use crate::group::consumer::TopicId;
use crate::node::share_service::{ShareAnswer, ShareOp};
use crate::node::{Node, TopicPartition};

/// The longest a ShareFetch waits for records between checks for released ones.
const RECHECK_MS: u64 = 100;

fn partition_data(index: i32) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = index;
    p.current_leader.leader_id = -1;
    p.current_leader.leader_epoch = -1;
    p
}

pub async fn handle(node: &Rc<Node>, req: ShareFetchRequest) -> ShareFetchResponse {
    let mut r = ShareFetchResponse::default();
    let Some((group, member)) = group_and_member(&req.group_id, &req.member_id) else {
        r.error_code = ErrorCode::InvalidRequest.code();
        r.error_message = Some(StrBytes::from_static_str(REQUIRED));
        return r;
    };
    let view = super::consumer_group_heartbeat::topics_view(node);
    let names: BTreeMap<TopicId, String> = view
        .by_name
        .iter()
        .map(|(n, (id, _))| (*id, n.clone()))
        .collect();
    let mut out: BTreeMap<(TopicId, i32), PartitionData> = BTreeMap::new();
    let mut wanted = Vec::new();
    let mut acks: AckBatches = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let Some(name) = names.get(&t.topic_id) else {
                let mut d = partition_data(p.partition_index);
                d.error_code = ErrorCode::UnknownTopicId.code();
                out.insert((t.topic_id, p.partition_index), d);
                continue;
            };
            let tp: TopicPartition = (name.clone(), p.partition_index);
            wanted.push(tp.clone());
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                    .collect();
                acks.push((tp, batches));
            }
        }
    }
    let forgotten: Vec<TopicPartition> = req
        .forgotten_topics_data
        .iter()
        .filter_map(|t| names.get(&t.topic_id).map(|n| (n, &t.partitions)))
        .flat_map(|(n, ps)| ps.iter().map(move |p| (n.clone(), *p)))
        .collect();
    let step = match open_session(
        node,
        &group,
        &member,
        req.share_session_epoch,
        &wanted,
        &forgotten,
        !acks.is_empty(),
    )
    .await
    {
        Ok(step) => step,
        Err(code) => {
            r.error_code = code.code();
            return r;
        }
    };
    let id_of = |name: &str| {
        view.by_name
            .get(name)
            .map(|(id, _)| *id)
            .unwrap_or_default()
    };
    for (tp, code) in acknowledge_all(node, &group, &member, acks).await {
        let d = out
            .entry((id_of(&tp.0), tp.1))
            .or_insert_with(|| partition_data(tp.1));
        d.acknowledge_error_code = code.code();
    }
    let partitions = match step {
        SessionStep::Closed => vec![],
        SessionStep::Open(partitions) => partitions,
    };
    let lock_ms = node.share_limits(&group).0.lock_ms;
    r.acquisition_lock_timeout_ms = i32::try_from(lock_ms).unwrap_or(i32::MAX);
    if !partitions.is_empty() {
        fetch_into(node, &req, &group, &member, &partitions, &id_of, &mut out).await;
    }
    let mut by_topic: BTreeMap<TopicId, Vec<PartitionData>> = BTreeMap::new();
    for ((id, _), d) in out {
        by_topic.entry(id).or_default().push(d);
    }
    r.responses = by_topic
        .into_iter()
        .map(|(id, partitions)| {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = id;
            t.partitions = partitions;
            t
        })
        .collect();
    r
}

/// Acquires records on `partitions` until some are acquired or `max_wait_ms` passes.
async fn fetch_into(
    node: &Rc<Node>,
    req: &ShareFetchRequest,
    group: &str,
    member: &str,
    partitions: &[TopicPartition],
    id_of: &dyn Fn(&str) -> TopicId,
    out: &mut BTreeMap<(TopicId, i32), PartitionData>,
) {
    let started = Instant::now();
    let max_wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0));
    let bytes_max = usize::try_from(req.max_bytes.max(1))
        .unwrap_or(1 << 20)
        .min(crate::limits::FRAME_BYTES_MAX);
    let per_partition = (bytes_max / partitions.len().max(1)).max(64 << 10);
    let mut owners: Vec<usize> = partitions.iter().map(|tp| node.owner(tp)).collect();
    owners.sort_unstable();
    owners.dedup();
    loop {
        let listeners: Vec<_> = owners
            .iter()
            .map(|&s| crate::runtime::wake::cross(node.shared.appended[s].listen()))
            .collect();
        let mut records_left = usize::try_from(req.max_records.max(1)).unwrap_or(500);
        let mut any = false;
        for tp in partitions {
            if records_left == 0 {
                break;
            }
            let op = ShareOp::Fetch {
                group: group.to_string(),
                member: member.to_string(),
                tp: tp.clone(),
                bytes_max: per_partition,
                max_records: records_left,
            };
            let key = (id_of(&tp.0), tp.1);
            match node.share_op(op).await {
                ShareAnswer::Fetched(Ok((batches, acquired))) if !acquired.is_empty() => {
                    any = true;
                    let n: i64 = acquired.iter().map(|(f, l, _)| l - f + 1).sum();
                    records_left = records_left.saturating_sub(usize::try_from(n).unwrap_or(0));
                    let mut bytes = BytesMut::new();
                    for b in &batches {
                        bytes.extend_from_slice(b);
                    }
                    let d = out.entry(key).or_insert_with(|| partition_data(tp.1));
                    d.records = Some(bytes.freeze());
                    d.acquired_records = acquired
                        .into_iter()
                        .map(|(f, l, c)| {
                            let mut a = AcquiredRecords::default();
                            a.first_offset = f;
                            a.last_offset = l;
                            a.delivery_count = c;
                            a
                        })
                        .collect();
                }
                ShareAnswer::Fetched(Ok(_)) | ShareAnswer::Start(_) => {}
                ShareAnswer::Fetched(Err(e)) | ShareAnswer::Done(e) => {
                    any = true;
                    let d = out.entry(key).or_insert_with(|| partition_data(tp.1));
                    d.error_code = e.code();
                }
            }
        }
        let elapsed = started.elapsed();
        if any || elapsed >= max_wait {
            return;
        }
        let slice = (max_wait - elapsed).min(Duration::from_millis(RECHECK_MS));
        let mut wait: Pin<Box<dyn Future<Output = ()>>> = Box::pin(glommio::timer::sleep(slice));
        for l in listeners {
            wait = Box::pin(futures_lite::future::or(wait, l));
        }
        wait.await;
    }
}
