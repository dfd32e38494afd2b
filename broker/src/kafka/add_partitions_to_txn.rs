//! AddPartitionsToTxn (key 24): partitions join a producer's ongoing transaction before it
//! writes to them (v0-3, one transaction, what clients send), or several transactions at once
//! (v4, the batched form, with `verify_only` to ask whether partitions are already in).

use std::rc::Rc;

use strand_wire::kafka::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use strand_wire::kafka::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use strand_wire::kafka::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use strand_wire::ErrorCode;

use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;
use crate::txn::{Claim, TxnState};

/// Kafka answers fencing with PRODUCER_FENCED from this version on (KIP-588).
const FENCED_FROM_VERSION: i16 = 2;

pub fn claim(producer_id: i64, epoch: i16, version: i16, fenced_from: i16) -> Claim {
    Claim {
        producer_id,
        epoch,
        fenced_code: if version >= fenced_from {
            ErrorCode::ProducerFenced
        } else {
            ErrorCode::InvalidProducerEpoch
        },
    }
}

pub async fn handle(
    node: &Rc<Node>,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut r = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        let t = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(req.v3_and_below_transactional_id)
            .with_producer_id(req.v3_and_below_producer_id)
            .with_producer_epoch(req.v3_and_below_producer_epoch)
            .with_topics(req.v3_and_below_topics);
        r.results_by_topic_v3_and_below = one(node, t, version).await.topic_results;
        return r;
    }
    for t in req.transactions {
        r.results_by_transaction.push(one(node, t, version).await);
    }
    r
}

async fn one(
    node: &Rc<Node>,
    t: AddPartitionsToTxnTransaction,
    version: i16,
) -> AddPartitionsToTxnResult {
    let id = t.transactional_id.0.as_str().to_string();
    let catalog = node.catalog();
    let known = |topic: &AddPartitionsToTxnTopic, p: i32| {
        catalog
            .topics
            .get(topic.name.0.as_str())
            .is_some_and(|m| p >= 0 && p < m.partitions)
    };
    let any_unknown = t
        .topics
        .iter()
        .any(|topic| topic.partitions.iter().any(|&p| !known(topic, p)));
    let partitions: Vec<(String, i32)> = t
        .topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.0.as_str().to_string();
            topic.partitions.iter().map(move |&p| (name.clone(), p))
        })
        .collect();
    let claim = claim(
        t.producer_id.0,
        t.producer_epoch,
        version,
        FENCED_FROM_VERSION,
    );
    let code = if any_unknown {
        None
    } else if t.verify_only {
        Some(verify(node, &id, claim, &partitions).await)
    } else {
        let request = TxnRequest::AddPartitions {
            id: id.clone(),
            claim,
            partitions,
        };
        Some(match node.txn_request(&id, request).await {
            TxnResponse::Done(Ok(())) => ErrorCode::None,
            TxnResponse::Done(Err(code)) => code,
            _ => ErrorCode::UnknownServerError,
        })
    };
    let mut result = AddPartitionsToTxnResult::default();
    result.transactional_id = t.transactional_id;
    for topic in &t.topics {
        let mut tr = AddPartitionsToTxnTopicResult::default();
        tr.name = topic.name.clone();
        for &p in &topic.partitions {
            let mut pr = AddPartitionsToTxnPartitionResult::default();
            pr.partition_index = p;
            // One unknown partition fails the request: the others are not attempted.
            let c = code.unwrap_or(if known(topic, p) {
                ErrorCode::OperationNotAttempted
            } else {
                ErrorCode::UnknownTopicOrPartition
            });
            pr.partition_error_code = c.code();
            tr.results_by_partition.push(pr);
        }
        result.topic_results.push(tr);
    }
    result
}

/// v4 `verify_only`: are these partitions in the producer's ongoing transaction?
async fn verify(
    node: &Rc<Node>,
    id: &str,
    claim: Claim,
    partitions: &[(String, i32)],
) -> ErrorCode {
    let described = node
        .txn_request(id, TxnRequest::Describe { id: id.to_string() })
        .await;
    match described {
        TxnResponse::Described(Some(m))
            if m.producer_id == claim.producer_id
                && m.epoch == claim.epoch
                && m.state == TxnState::Ongoing
                && partitions.iter().all(|p| m.partitions.contains(p)) =>
        {
            ErrorCode::None
        }
        _ => ErrorCode::InvalidTxnState,
    }
}
