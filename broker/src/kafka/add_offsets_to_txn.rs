//! AddOffsetsToTxn (key 25): a group's offsets join the transaction (its `__consumer_offsets`
//! partition gets a marker when the transaction ends).

use std::rc::Rc;

use strand_wire::kafka::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use strand_wire::ErrorCode;

use super::add_partitions_to_txn::claim;
use crate::internal_topics::{offsets_partition, OFFSETS_TOPIC};
use crate::node::txn_service::{TxnRequest, TxnResponse};
use crate::node::Node;

pub async fn handle(
    node: &Rc<Node>,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.0.as_str().to_string();
    let group = req.group_id.0.as_str();
    let mut r = AddOffsetsToTxnResponse::default();
    if group.is_empty() {
        r.error_code = ErrorCode::InvalidGroupId.code();
        return r;
    }
    let request = TxnRequest::AddPartitions {
        id: id.clone(),
        claim: claim(req.producer_id.0, req.producer_epoch, version, 2),
        partitions: vec![(OFFSETS_TOPIC.to_string(), offsets_partition(group))],
    };
    r.error_code = match node.txn_request(&id, request).await {
        TxnResponse::Done(Ok(())) => ErrorCode::None,
        TxnResponse::Done(Err(code)) => code,
        _ => ErrorCode::UnknownServerError,
    }
    .code();
    r
}
