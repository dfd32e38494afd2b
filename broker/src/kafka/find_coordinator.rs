//! FindCoordinator (key 10): this node coordinates every group and every transactional id
//! (one node); the batched form (v4+) answers each key.

use strand_wire::kafka::messages::find_coordinator_response::Coordinator;
use strand_wire::kafka::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use strand_wire::kafka::protocol::StrBytes;
use strand_wire::ErrorCode;

use super::{advertised, NODE_ID};
use crate::node::Node;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub fn handle(node: &Node, req: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let (host, port) = advertised(node);
    let error = if req.key_type == KEY_TYPE_GROUP || req.key_type == KEY_TYPE_TRANSACTION {
        ErrorCode::None
    } else {
        ErrorCode::CoordinatorNotAvailable
    };
    let mut r = FindCoordinatorResponse::default();
    if version >= 4 {
        r.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(NODE_ID);
                c.host = StrBytes::from_string(host.clone());
                c.port = port;
                c.error_code = error.code();
                c
            })
            .collect();
    } else {
        r.error_code = error.code();
        r.node_id = BrokerId(NODE_ID);
        r.host = StrBytes::from_string(host);
        r.port = port;
    }
    r
}
