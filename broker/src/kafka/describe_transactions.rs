//! DescribeTransactions (key 65): state, producer, timeout, start time and partitions of
//! transactional ids (`kafka-transactions --describe`).

use std::collections::BTreeMap;
use std::rc::Rc;

use strand_wire::kafka::messages::describe_transactions_response::{TopicData, TransactionState};
use strand_wire::kafka::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut r = DescribeTransactionsResponse::default();
    for tid in req.transactional_ids {
        let id = tid.0.as_str().to_string();
        let mut s = TransactionState::default();
        s.transactional_id = tid;
        match node
            .txn_request(&id, TxnRequest::Describe { id: id.clone() })
            .await
        {
            TxnResponse::Described(Some(m)) => {
                s.transaction_state = StrBytes::from_static_str(m.state.name());
                s.transaction_timeout_ms = m.timeout_ms;
                s.transaction_start_time_ms = m.start_ms;
                s.producer_id = ProducerId(m.producer_id);
                s.producer_epoch = m.epoch;
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p) in m.partitions {
                    by_topic.entry(t).or_default().push(p);
                }
                for (t, ps) in by_topic {
                    let mut td = TopicData::default();
                    td.topic = TopicName(StrBytes::from_string(t));
                    td.partitions = ps;
                    s.topics.push(td);
                }
            }
            TxnResponse::Described(None) => {
                s.error_code = ErrorCode::TransactionalIdNotFound.code();
                s.producer_id = ProducerId(-1);
                s.producer_epoch = -1;
            }
            _ => s.error_code = ErrorCode::CoordinatorNotAvailable.code(),
        }
        r.transaction_states.push(s);
    }
    r
}
