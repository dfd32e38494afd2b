//! ListTransactions (key 66): every transactional id this node coordinates, filtered by state,
//! producer id and (v1+) how long the transaction has been running
//! (`kafka-transactions --list`, `--find-hanging`).

use std::rc::Rc;

use strand_wire::kafka::messages::list_transactions_response::TransactionState;
use strand_wire::kafka::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use strand_wire::kafka::protocol::StrBytes;

use crate::node::Node;

const STATES: [&str; 6] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
];

pub async fn handle(node: &Rc<Node>, req: ListTransactionsRequest) -> ListTransactionsResponse {
    let mut r = ListTransactionsResponse::default();
    let states: Vec<&str> = req.state_filters.iter().map(|s| s.as_str()).collect();
    r.unknown_state_filters = req
        .state_filters
        .iter()
        .filter(|s| !STATES.contains(&s.as_str()))
        .cloned()
        .collect();
    let now = crate::runtime::clock::now_ms();
    let mut txns = node.list_txns().await;
    txns.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    for m in txns {
        if !states.is_empty() && !states.contains(&m.state.name()) {
            continue;
        }
        if !req.producer_id_filters.is_empty()
            && !req.producer_id_filters.contains(&ProducerId(m.producer_id))
        {
            continue;
        }
        // v1: only transactions running longer than this many ms.
        if req.duration_filter >= 0 && (m.start_ms < 0 || now - m.start_ms < req.duration_filter) {
            continue;
        }
        let mut s = TransactionState::default();
        s.transactional_id = TransactionalId(StrBytes::from_string(m.transactional_id));
        s.producer_id = ProducerId(m.producer_id);
        s.transaction_state = StrBytes::from_static_str(m.state.name());
        r.transaction_states.push(s);
    }
    r
}
