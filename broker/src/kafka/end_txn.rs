//! EndTxn (key 26): commit or abort. Answered once the decision is durable in
//! `__transaction_state`, the markers are in every partition of the transaction (fdatasynced)
//! and the transaction is complete — so a read_committed consumer can see the result as soon
//! as the producer's `commit_transaction()` returns.

use std::rc::Rc;

use strand_wire::kafka::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use strand_wire::ErrorCode;

use super::add_partitions_to_txn::claim;
use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let id = req.transactional_id.0.as_str().to_string();
    let request = TxnRequest::End {
        id: id.clone(),
        claim: claim(req.producer_id.0, req.producer_epoch, version, 2),
        commit: req.committed,
    };
    let mut r = EndTxnResponse::default();
    r.error_code = match node.txn_request(&id, request).await {
        TxnResponse::Done(Ok(())) => ErrorCode::None,
        TxnResponse::Done(Err(code)) => code,
        _ => ErrorCode::UnknownServerError,
    }
    .code();
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    r
}
