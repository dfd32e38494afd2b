//! Produce (key 0): one record batch per partition, appended on the partition's shard.
//!
//! `acks=0` gets no response; `acks=1` is answered once the batch is in the log (on its way to
//! disk under the flush policy); `acks=-1` is answered after an fdatasync covering the batch,
//! unless the topic sets `write.caching=true` (Redpanda's name), in which case it behaves as
//! `acks=1` does — Kafka itself never fsyncs before acknowledging.

use std::rc::Rc;

use bytes::BytesMut;
use strand_wire::batch::peek_total_len;
use strand_wire::kafka::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use strand_wire::kafka::messages::{ProduceRequest, ProduceResponse};
use strand_wire::ErrorCode;

use crate::node::{Node, ProduceOutcome};

type LocalFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ProduceOutcome>>>;

pub async fn handle(node: &Rc<Node>, req: ProduceRequest) -> Option<ProduceResponse> {
    let acks = req.acks;
    let catalog = node.catalog();
    // Send every partition's batch first, then collect: partitions on other shards append in
    // parallel with ours.
    let mut pending = Vec::new();
    for topic in req.topic_data {
        let name = topic.name.0.as_str().to_string();
        let meta = catalog.topics.get(&name);
        let mut parts = Vec::new();
        for p in topic.partition_data {
            let outcome: LocalFuture = match (meta, p.records) {
                _ if !(-1..=1).contains(&acks) => ready(Err(ErrorCode::InvalidRequiredAcks)),
                (None, _) => ready(Err(ErrorCode::UnknownTopicOrPartition)),
                (Some(m), _) if p.index < 0 || p.index >= m.partitions => {
                    ready(Err(ErrorCode::UnknownTopicOrPartition))
                }
                (_, None) => ready(Err(ErrorCode::InvalidRecord)),
                (Some(m), Some(records)) => {
                    if records.len() > m.max_message_bytes() {
                        ready(Err(ErrorCode::MessageTooLarge))
                    } else if peek_total_len(&records) != Some(records.len()) {
                        // v3+ carries exactly one batch per partition.
                        ready(Err(ErrorCode::InvalidRecord))
                    } else {
                        let durable = acks == -1 && !m.write_caching();
                        // One copy out of the request frame: the log patches the base offset in
                        // place and keeps these bytes as its cache entry.
                        let batch = BytesMut::from(&records[..]);
                        let node = Rc::clone(node);
                        let tp = (name.clone(), p.index);
                        Box::pin(async move { node.produce(tp, batch, durable).await })
                    }
                }
            };
            parts.push((p.index, glommio::spawn_local(outcome)));
        }
        pending.push((topic.name, parts));
    }
    let mut response = ProduceResponse::default();
    for (name, parts) in pending {
        let mut t = TopicProduceResponse::default();
        t.name = name;
        for (index, task) in parts {
            let mut pr = PartitionProduceResponse::default();
            pr.index = index;
            match task.await {
                Ok((base, log_start)) => {
                    pr.base_offset = base.0;
                    pr.log_start_offset = log_start.0;
                }
                Err(code) => {
                    pr.error_code = code.code();
                    pr.base_offset = -1;
                }
            }
            pr.log_append_time_ms = -1;
            t.partition_responses.push(pr);
        }
        response.responses.push(t);
    }
    (acks != 0).then_some(response)
}

fn ready(o: ProduceOutcome) -> LocalFuture {
    Box::pin(async move { o })
}
