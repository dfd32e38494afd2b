//! InitProducerId (key 22): hands an idempotent producer a fresh id (epoch 0); with a
//! `transactional.id`, asks the transaction coordinator, which bumps the epoch (fencing older
//! instances), aborts a transaction the previous instance left open, and (v3+, KIP-360) lets a
//! producer that still holds its id and epoch re-initialise with them.

use std::rc::Rc;

use strand_wire::kafka::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use strand_wire::ErrorCode;

use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;

pub async fn handle(node: &Rc<Node>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    let Some(id) = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.as_str().to_string())
    else {
        match node.next_producer_id() {
            Some(pid) => {
                r.producer_id = ProducerId(pid);
                r.producer_epoch = 0;
            }
            // A cluster node before its first producer-id block: clients retry.
            None => r.error_code = ErrorCode::CoordinatorLoadInProgress.code(),
        }
        return r;
    };
    let request = TxnRequest::Init {
        id: id.clone(),
        timeout_ms: req.transaction_timeout_ms,
        claim: (req.producer_id.0, req.producer_epoch),
    };
    let result = match node.txn_request(&id, request).await {
        TxnResponse::Init(r) => r,
        TxnResponse::Done(Err(code)) => Err(code),
        _ => Err(ErrorCode::UnknownServerError),
    };
    match result {
        Ok((pid, epoch)) => {
            r.producer_id = ProducerId(pid);
            r.producer_epoch = epoch;
        }
        Err(code) => {
            r.error_code = code.code();
            r.producer_id = ProducerId(-1);
            r.producer_epoch = -1;
        }
    }
    r
}
