//! Produce (key 0): one record batch per partition, appended on the partition's shard.
//!
//! `acks=0` gets no response; `acks=1` is answered once the batch is in the log (on its way to
//! disk under the flush policy); `acks=-1` is answered after an fdatasync covering the batch,
//! unless the topic sets `write.caching=true` (Redpanda's name), in which case it behaves as
//! `acks=1` does — Kafka itself never fsyncs before acknowledging. Clients cannot write to the
//! internal topics (INVALID_TOPIC_EXCEPTION, as in Kafka).

use std::rc::Rc;

use bytes::BytesMut;
use strand_wire::batch::peek_total_len;
use strand_wire::kafka::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use strand_wire::kafka::messages::BrokerId;
use strand_wire::kafka::messages::{ProduceRequest, ProduceResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use std::future::Future;
use std::pin::Pin;

use tracing::debug;

use crate::limits;
use crate::node::{Completion, Node, ProduceOutcome};

/// The produce response, once every partition's batch is as durable as asked.
pub type Pending = Pin<Box<dyn Future<Output = ProduceResponse>>>;

/// Appends every partition's batch (returning only once all are in their logs, so the next
/// request on this connection appends after them), then hands back a future for the response,
/// which waits for durability. `None` for `acks=0`: nothing is sent back.
// The spawned tasks deliberately yield a future: the append is the task, durability is what
// it returns.
#[allow(clippy::async_yields_async)]
pub async fn handle(node: &Rc<Node>, req: ProduceRequest, version: i16) -> Option<Pending> {
    let acks = req.acks;
    let timeout_ms = req.timeout_ms;
    let catalog = node.catalog();
    // Start every partition's append, then wait for all: partitions on other shards append in
    // parallel with ours.
    let mut started = Vec::new();
    for topic in req.topic_data {
        let name = topic.name.0.as_str().to_string();
        let meta = catalog.topics.get(&name);
        let mut parts = Vec::new();
        for p in topic.partition_data {
            let refuse = |code: ErrorCode| -> glommio::Task<Appended> {
                glommio::spawn_local(async move { Appended::refused(code, Vec::new()) })
            };
            let task = match (meta, p.records) {
                _ if !(-1..=1).contains(&acks) => refuse(ErrorCode::InvalidRequiredAcks),
                // Stopping (SIGTERM): nothing new is acknowledged after the final flush.
                _ if crate::shutdown::requested() => refuse(ErrorCode::NotLeaderOrFollower),
                (None, _) => refuse(ErrorCode::UnknownTopicOrPartition),
                // Out of disk space: refused before anything is written (clients retry).
                _ if node.shared.disk.is_low() => refuse(ErrorCode::KafkaStorageError),
                // Kafka: "Cannot append to internal topic" — only the coordinators write there.
                (Some(_), _) if super::is_internal_topic(&name) => {
                    refuse(ErrorCode::InvalidTopicException)
                }
                (Some(m), _) if p.index < 0 || p.index >= m.partitions => {
                    refuse(ErrorCode::UnknownTopicOrPartition)
                }
                (_, None) => refuse(ErrorCode::InvalidRecord),
                (Some(m), Some(records)) => {
                    if records.len() > m.max_message_bytes() {
                        refuse(ErrorCode::MessageTooLarge)
                    } else if peek_total_len(&records) != Some(records.len()) {
                        // v3+ carries exactly one batch per partition.
                        refuse(ErrorCode::InvalidRecord)
                    } else if is_control_batch(&records) {
                        // Markers are the coordinator's to write, never a client's.
                        refuse(ErrorCode::InvalidRecord)
                    } else {
                        let compact = m.cleanup_policy(node.config().log.cleanup_policy).compact;
                        let durable = acks == -1 && !m.write_caching();
                        // Memory budget first (backpressure), then one copy out of the request
                        // frame: the log patches the base offset in place and keeps these bytes
                        // as its cache entry.
                        let budget = node.produce_memory.clone();
                        let kib = (records.len() as u64 >> 10)
                            .clamp(1, (limits::SHARD_PRODUCE_MEMORY_BYTES >> 10) as u64);
                        let permit = budget.acquire_static_permit(kib).await;
                        let mut batch = BytesMut::from(&records[..]);
                        let append_time_ms = m.log_append_time().then(|| {
                            let now = crate::runtime::clock::now_ms();
                            stamp_log_append_time(&mut batch, now);
                            now
                        });
                        let node = Rc::clone(node);
                        let tp = (name.clone(), p.index);
                        glommio::spawn_local(async move {
                            if let Err((code, record_errors)) =
                                check_records(&records, compact, &tp).await
                            {
                                drop(permit);
                                return Appended::refused(code, record_errors);
                            }
                            let completion = node.produce(tp, batch, durable, acks == -1).await;
                            drop(permit);
                            Appended {
                                completion,
                                record_errors: Vec::new(),
                                log_append_time_ms: append_time_ms.unwrap_or(-1),
                            }
                        })
                    }
                }
            };
            parts.push((p.index, task));
        }
        started.push((topic.name, parts));
    }
    let mut appended = Vec::new();
    for (name, parts) in started {
        let mut done = Vec::new();
        for (index, task) in parts {
            done.push((index, task.await));
        }
        appended.push((name, done));
    }
    if acks == 0 {
        return None;
    }
    // acks=all waits at most the request's `timeout_ms` for the ISR (and the fsync), as
    // Kafka's delayed produce: then REQUEST_TIMED_OUT, and the client retries (a retried
    // idempotent batch is a duplicate). A non-positive timeout waits without limit.
    let deadline = (acks == -1 && timeout_ms > 0)
        .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64));
    let node = Rc::clone(node);
    Some(Box::pin(async move {
        let mut response = ProduceResponse::default();
        let mut leaders = Vec::new();
        for (name, parts) in appended {
            let mut t = TopicProduceResponse::default();
            t.name = name;
            for (index, a) in parts {
                let mut pr = PartitionProduceResponse::default();
                pr.index = index;
                pr.log_append_time_ms = -1;
                let completion = match deadline {
                    Some(deadline) => {
                        futures_lite::future::or(a.completion, async move {
                            let left =
                                deadline.saturating_duration_since(std::time::Instant::now());
                            glommio::timer::sleep(left).await;
                            Err(ErrorCode::RequestTimedOut)
                        })
                        .await
                    }
                    None => a.completion.await,
                };
                match completion {
                    Ok((base, log_start)) => {
                        pr.base_offset = base.0;
                        pr.log_start_offset = log_start.0;
                        pr.log_append_time_ms = a.log_append_time_ms;
                    }
                    Err(code) => {
                        crate::metrics::with(|m| m.error(0, code.code()));
                        pr.error_code = code.code();
                        pr.base_offset = -1;
                        if code == ErrorCode::NotLeaderOrFollower && version >= 10 {
                            if let Some((id, epoch)) = node.current_leader(t.name.0.as_str(), index)
                            {
                                pr.current_leader = LeaderIdAndEpoch::default()
                                    .with_leader_id(BrokerId(id))
                                    .with_leader_epoch(epoch);
                                leaders.push(id);
                            }
                        }
                    }
                }
                if let Some((_, first)) = a.record_errors.first() {
                    pr.error_message = Some(StrBytes::from_string(format!(
                        "One or more records have been rejected due to {} record errors in total, \
                         and only showing the first 1 record errors in the response: {first}",
                        a.record_errors.len()
                    )));
                }
                pr.record_errors = a
                    .record_errors
                    .into_iter()
                    .map(|(i, message)| {
                        let mut e = BatchIndexAndErrorMessage::default();
                        e.batch_index = i;
                        e.batch_index_error_message = Some(StrBytes::from_string(message));
                        e
                    })
                    .collect();
                t.partition_responses.push(pr);
            }
            response.responses.push(t);
        }
        response.node_endpoints = endpoints(&node, &leaders);
        response
    }))
}

/// KIP-951 (v10+): how to reach the leaders named in `current_leader`, the live ones only.
fn endpoints(node: &Node, leaders: &[i32]) -> Vec<NodeEndpoint> {
    if leaders.is_empty() {
        return Vec::new();
    }
    super::brokers::brokers(node, &node.catalog())
        .into_iter()
        .filter(|b| leaders.contains(&b.id))
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect()
}

fn is_control_batch(batch: &[u8]) -> bool {
    strand_wire::BatchHeader::parse(batch).is_ok_and(|h| h.is_control())
}

/// A partition's append as the response needs it: the completion, the records refused by
/// index (KIP-467 `record_errors`), and the LogAppendTime stamped on the batch (-1: none).
struct Appended {
    completion: Completion,
    record_errors: Vec<(i32, String)>,
    log_append_time_ms: i64,
}

impl Appended {
    fn refused(code: ErrorCode, record_errors: Vec<(i32, String)>) -> Appended {
        Appended {
            completion: ready(Err(code)),
            record_errors,
            log_append_time_ms: -1,
        }
    }
}

/// `message.timestamp.type=LogAppendTime`: the batch gets the broker's clock as its
/// `maxTimestamp` and the LogAppendTime attribute bit (clients then read that time for every
/// record), and a new CRC — as Kafka stamps it.
fn stamp_log_append_time(batch: &mut [u8], now_ms: i64) {
    const LOG_APPEND_TIME: u16 = 0x08;
    if batch.len() < strand_wire::batch::HEADER_BYTES {
        return;
    }
    let attributes = u16::from_be_bytes([batch[21], batch[22]]) | LOG_APPEND_TIME;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = strand_wire::batch::compute_crc(batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Kafka's record validation of a produced batch (`strand_wire::validate`): counts, every
/// record decodable, decompression bounded by `limits::PRODUCE_DECOMPRESSED_BYTES_MAX`, and a
/// key on every record of a compacted topic (those refused by index, with Kafka's message).
/// Compressed batches are streamed through their decompressor (memory stays at one buffer)
/// on the shard, which yields every MiB of output so a large one does not hold up the
/// shard's other work. A batch whose CRC is wrong gets CORRUPT_MESSAGE,
/// whatever else is wrong with it.
async fn check_records(
    records: &bytes::Bytes,
    compact: bool,
    tp: &(String, i32),
) -> Result<(), (ErrorCode, Vec<(i32, String)>)> {
    use strand_wire::validate::{check_produced, check_produced_yielding};
    let limit = limits::PRODUCE_DECOMPRESSED_BYTES_MAX;
    let compressed =
        strand_wire::BatchHeader::parse(records).is_ok_and(|h| h.attributes & 0x7 != 0);
    let checked = if compressed {
        // On the shard, yielding its task queue every MiB of output: the shard's one
        // blocking-pool thread also runs every fdatasync (see `storage::dma`), which must not
        // queue behind a large decompression.
        check_produced_yielding(records, limit, || async {
            glommio::executor().yield_task_queue_now().await
        })
        .await
    } else {
        check_produced(records, limit)
    };
    let refusal = match checked {
        Ok(c) if compact && !c.keyless.is_empty() => {
            let message = format!(
                "Compacted topic cannot accept message without key in topic partition {}-{}.",
                tp.0, tp.1
            );
            let errors = c
                .keyless
                .into_iter()
                .map(|i| (i, message.clone()))
                .collect();
            return Err((ErrorCode::InvalidRecord, errors));
        }
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if let Err(e) = strand_wire::batch::validate(records) {
        return Err((e.error_code(), Vec::new()));
    }
    debug!(error = %refusal, "produced batch refused");
    Err((refusal.error_code(), Vec::new()))
}

fn ready(o: ProduceOutcome) -> Completion {
    Box::pin(std::future::ready(o))
}
