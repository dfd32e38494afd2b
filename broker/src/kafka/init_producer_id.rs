//! InitProducerId (key 22): hands an idempotent producer its id (epoch 0). Transactional ids
//! come with the transaction coordinator (issue 5).

use strand_wire::kafka::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use strand_wire::ErrorCode;

use crate::node::Node;

pub fn handle(node: &Node, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut r = InitProducerIdResponse::default();
    if req.transactional_id.is_some() {
        // Not yet: without a coordinator we cannot fence or recover transactions.
        r.error_code = ErrorCode::CoordinatorNotAvailable.code();
        r.producer_id = ProducerId(-1);
        r.producer_epoch = -1;
        return r;
    }
    r.producer_id = ProducerId(node.next_producer_id());
    r.producer_epoch = 0;
    r
}
